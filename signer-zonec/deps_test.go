// The tests in deps_test.go guard what the signer's binaries are built
// from. Zone C holds the keys: every package signerd links is attack
// surface that a security review must read, so the set is kept small on
// purpose, capped by a budget that only goes down, and every change to it
// shows up as a diff of DEPENDENCIES.txt.
//
// What counts as a third-party package: every package in the binary's
// import graph (go list -deps) that is neither in Go's standard library
// nor in a module of this repository (github.com/txfence/txfence/...).
// The graph is listed for linux/amd64 with cgo, whatever the machine, so
// the list reads the same everywhere (other targets differ by a package or
// two: without cgo, go-ethereum swaps its secp256k1 for decred's).
package signer_test

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite DEPENDENCIES.txt from the current build")

// The binaries of the signer module whose dependencies are guarded.
const (
	// signerd is the serving binary, the one that holds keys.
	signerd = "./cmd/signerd"
	// signerctl is the operator's command: keys (it creates and imports
	// them) and the audit log.
	signerctl = "./cmd/signerctl"
)

// budgets cap the third-party packages each binary links.
//
// signerd's is the count it links: 192 at first; 149 when the tracing
// stack (33 packages) and the development keystore (10) left it; 75 when
// the Prometheus client with protobuf (45) and go-ethereum's transaction
// types with their KZG crypto (29) did. What remains is its store driver
// (pgx, with x/text), the Vault client, go-ethereum's crypto, rlp and
// common, and chi. It only goes down: TestDependencyBudget fails when the
// count is below it too, so that the change that drops packages lowers it.
//
// signerctl's is looser: a ceiling at its count (it links the keystore and
// no server, tracing or metrics), with no committed list and no floor. It
// runs on an operator's machine with the Vault token that creates keys.
var budgets = map[string]struct {
	max     int
	ratchet bool
}{
	signerd:   {max: 75, ratchet: true},
	signerctl: {max: 113},
}

// banned are import path prefixes that have no business in Zone C: nothing
// that talks to a chain (the signer never does), no cache or queue
// clients, no code generators, and none of the other services.
var banned = []string{
	"github.com/ethereum/go-ethereum/ethclient",
	"github.com/ethereum/go-ethereum/rpc",
	"github.com/ethereum/go-ethereum/p2p",
	"github.com/ethereum/go-ethereum/eth",
	"github.com/ethereum/go-ethereum/node",
	"github.com/ethereum/go-ethereum/accounts/abi/bind",
	"github.com/redis/go-redis",
	"github.com/oapi-codegen/oapi-codegen",
	"github.com/getkin/kin-openapi",
	"github.com/txfence/txfence/gateway",
	"github.com/txfence/txfence/txmanager",
	"github.com/txfence/txfence/mev-router",
	"github.com/txfence/txfence/ledger",
	"github.com/txfence/txfence/testinfra/anvil",
	"github.com/txfence/txfence/testinfra/chaintest",
	"github.com/txfence/txfence/testinfra/pgcluster",
	"github.com/txfence/txfence/testinfra/devcert",
	"github.com/txfence/txfence/testinfra/servicetest",
	"github.com/txfence/txfence/signer-zonec/signertest",
	"net/rpc",
	"plugin",
}

// bannedFromSignerd are banned from the serving binary on top: the
// development keystore (signerd-dev's), the operator's commands
// (signerctl's), the tracing stack and service client of services that
// call others (signerd calls none), the Prometheus client (signerd writes
// its exposition itself, package textmetrics), and go-ethereum's
// transaction types with the KZG and BLS crypto they pull in (package
// ethtx builds, signs and decodes the two types signerd signs).
var bannedFromSignerd = []string{
	"github.com/txfence/txfence/signer-zonec/keystore",
	"github.com/ethereum/go-ethereum/accounts/keystore",
	"github.com/txfence/txfence/signer-zonec/signerd/devsignerd",
	"github.com/txfence/txfence/signer-zonec/signerctl",
	"github.com/txfence/txfence/shared/tracing",
	"github.com/txfence/txfence/shared/httpclient",
	"go.opentelemetry.io",
	"github.com/prometheus",
	"google.golang.org/protobuf",
	"github.com/ethereum/go-ethereum/core",
	"github.com/ethereum/go-ethereum/crypto/kzg4844",
}

// restrictedStd are standard packages the signer's own code must not use
// (it starts no processes), each with the third-party importers reviewed
// and tolerated. github.com/hashicorp/go-sockaddr, linked through
// vault/api's address parsing, shells out to read routing tables only in
// functions neither binary calls; there is no way to link vault/api
// without it. Any other importer fails the test.
var restrictedStd = map[string][]string{
	"os/exec": {"github.com/hashicorp/go-sockaddr"},
}

// pkg is one package of a binary's import graph.
type pkg struct {
	path     string
	standard bool
	module   string // "" for the standard library
	version  string
	imports  []string
}

// thirdParty reports whether p counts against a budget.
func (p pkg) thirdParty() bool {
	return !p.standard && !strings.HasPrefix(p.module, "github.com/txfence/txfence/")
}

var (
	graphMu sync.Mutex
	graphs  = map[string][]pkg{}
)

// graph lists the packages binary links, for linux/amd64 with cgo, once
// per test binary.
func graph(t *testing.T, binary string) []pkg {
	t.Helper()
	graphMu.Lock()
	defer graphMu.Unlock()
	if g, ok := graphs[binary]; ok {
		return g
	}
	// go test puts its own toolchain first on PATH.
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{.ImportPath}}|{{.Standard}}|{{with .Module}}{{.Path}} {{.Version}}{{end}}|{{join .Imports " "}}`, binary)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", binary, err, stderr.String())
	}
	var g []pkg
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		p := pkg{path: f[0], standard: f[1] == "true", imports: strings.Fields(f[3])}
		p.module, p.version, _ = strings.Cut(f[2], " ")
		g = append(g, p)
	}
	graphs[binary] = g
	return g
}

func TestSignerImportsNothingBanned(t *testing.T) {
	t.Parallel()
	for _, binary := range []string{signerd, signerctl} {
		prefixes := banned
		if binary == signerd {
			prefixes = append(slices.Clone(banned), bannedFromSignerd...)
		}
		for _, p := range graph(t, binary) {
			for _, b := range prefixes {
				if p.path == b || strings.HasPrefix(p.path, b+"/") {
					t.Errorf("%s links %s, which has no business there (banned: %s)", binary, p.path, b)
				}
			}
			for _, imported := range p.imports {
				tolerated, restricted := restrictedStd[imported]
				if restricted && !slices.Contains(tolerated, p.path) {
					t.Errorf("%s: %s imports %s, which Zone C code must not use (tolerated only from %v)", binary, p.path, imported, tolerated)
				}
			}
		}
	}
}

// TestDependencyBudget fails when a binary links more third-party
// packages than its budget, naming what brings the most in; and, for
// signerd, when it links fewer, so that the budget follows it down.
func TestDependencyBudget(t *testing.T) {
	t.Parallel()
	for binary, budget := range budgets {
		g := graph(t, binary)
		n := countThirdParty(g)
		switch {
		case n > budget.max:
			t.Errorf("%s links %d third-party packages, over its budget of %d (deps_test.go). What brings them in:\n%s",
				binary, n, budget.max, contributors(g, binary))
		case budget.ratchet && n < budget.max:
			t.Errorf("%s links %d third-party packages, fewer than its budget of %d: lower the budget in deps_test.go to %d so that it stays there",
				binary, n, budget.max, n)
		}
	}
}

func countThirdParty(g []pkg) int {
	n := 0
	for _, p := range g {
		if p.thirdParty() {
			n++
		}
	}
	return n
}

// contributors names, for each third-party module this repository's code
// imports directly, the repository's packages that import it and how many
// third-party packages the binary would shed without those imports; the
// biggest first. Packages reached through several modules count for none.
func contributors(g []pkg, binary string) string {
	byPath := map[string]pkg{}
	for _, p := range g {
		byPath[p.path] = p
	}
	ours := func(p pkg) bool { return !p.standard && !p.thirdParty() }
	// reachable counts the third-party packages reachable from the
	// binary's main package without the repository's imports of module
	// skip.
	reachable := func(skip string) int {
		seen := map[string]bool{}
		stack := []string{"github.com/txfence/txfence/signer-zonec" + strings.TrimPrefix(binary, ".")}
		for len(stack) > 0 {
			path := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[path] {
				continue
			}
			seen[path] = true
			from := byPath[path]
			for _, to := range from.imports {
				if ours(from) && byPath[to].thirdParty() && byPath[to].module == skip {
					continue
				}
				stack = append(stack, to)
			}
		}
		n := 0
		for path := range seen {
			if byPath[path].thirdParty() {
				n++
			}
		}
		return n
	}
	importers := map[string][]string{}
	for _, from := range g {
		if !ours(from) {
			continue
		}
		for _, to := range from.imports {
			short := strings.TrimPrefix(from.path, "github.com/txfence/txfence/")
			if m := byPath[to]; m.thirdParty() && !slices.Contains(importers[m.module], short) {
				importers[m.module] = append(importers[m.module], short)
			}
		}
	}
	type contribution struct {
		module    string
		importers []string
		shed      int
	}
	all := reachable("")
	var cs []contribution
	for module, from := range importers {
		slices.Sort(from)
		cs = append(cs, contribution{module, from, all - reachable(module)})
	}
	slices.SortFunc(cs, func(a, b contribution) int { return cmp.Or(b.shed-a.shed, strings.Compare(a.module, b.module)) })
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %3d packages only through %s, imported by %s\n", c.shed, c.module, strings.Join(c.importers, ", "))
	}
	return b.String()
}

// TestDependencyListIsCurrent fails when the modules and packages signerd
// links differ from DEPENDENCIES.txt. Run `go test -run DependencyList
// -update .` in signer-zonec and have the diff reviewed with the change
// that caused it.
func TestDependencyListIsCurrent(t *testing.T) {
	t.Parallel()
	want := dependencyList(graph(t, signerd))
	if *update {
		if err := os.WriteFile("DEPENDENCIES.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("DEPENDENCIES.txt")
	if err != nil {
		t.Fatalf("%v (create it with: go test -run DependencyList -update .)", err)
	}
	if string(got) != want {
		t.Errorf("signerd's dependencies changed; review and run `go test -run DependencyList -update .` in signer-zonec.\nwant:\n%s\ngot:\n%s", want, got)
	}
}

// dependencyList is DEPENDENCIES.txt: the count, each third-party module
// with its version and how many of its packages signerd links, and the
// packages.
func dependencyList(g []pkg) string {
	perModule := map[string]int{}
	var packages []string
	for _, p := range g {
		if p.thirdParty() {
			perModule[p.module+" "+p.version]++
			packages = append(packages, p.path)
		}
	}
	modules := make([]string, 0, len(perModule))
	for m := range perModule {
		modules = append(modules, m)
	}
	slices.Sort(modules)
	slices.Sort(packages)
	var b strings.Builder
	b.WriteString("# What signerd (cmd/signerd, the binary that holds keys) links from outside this repository,\n" +
		"# kept current by deps_test.go: `go test -run DependencyList -update .` in signer-zonec rewrites it.\n" +
		"# A change here is a change to Zone C's attack surface: review it.\n" +
		"#\n" +
		"# Counted: every package of signerd's import graph (go list -deps, for linux/amd64 with cgo) that\n" +
		"# is neither in Go's standard library nor in a module of this repository. deps_test.go holds\n" +
		"# the budget, which the count may not exceed and which only goes down.\n")
	fmt.Fprintf(&b, "\n%d third-party packages from %d modules.\n", len(packages), len(modules))
	b.WriteString("\n# Modules (module version: packages linked)\n")
	for _, m := range modules {
		fmt.Fprintf(&b, "%s: %d\n", m, perModule[m])
	}
	b.WriteString("\n# Packages\n")
	for _, p := range packages {
		b.WriteString(p + "\n")
	}
	return b.String()
}
