// The tests in deps_test.go guard what the signer binary is built from.
// Zone C holds the keys: every package it links is attack surface that a
// security review must read, so the set is kept small on purpose and every
// change to it shows up as a diff of DEPENDENCIES.txt.
package signer_test

import (
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite DEPENDENCIES.txt from the current build")

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
	"github.com/txfence/txfence/shared/anvil",
	"github.com/txfence/txfence/shared/chaintest",
	"github.com/txfence/txfence/shared/pgcluster",
	"github.com/txfence/txfence/shared/devcert",
	"github.com/txfence/txfence/shared/servicetest",
	"github.com/txfence/txfence/signer-zonec/signertest",
	"net/rpc",
	"plugin",
}

// restrictedStd are standard packages signerd's own code must not use (it
// starts no processes), each with the third-party importers reviewed and
// tolerated. github.com/hashicorp/go-sockaddr, linked through vault/api's
// address parsing, shells out to read routing tables only in functions
// signerd never calls; there is no way to link vault/api without it. Any
// other importer fails the test.
var restrictedStd = map[string][]string{
	"os/exec": {"github.com/hashicorp/go-sockaddr"},
}

// goList lists the non-standard packages the signerd binary links, with the
// module each comes from.
func goList(t *testing.T) (packages, modules []string) {
	t.Helper()
	out := listDeps(t, `{{if not .Standard}}{{.ImportPath}}|{{with .Module}}{{.Path}} {{.Version}}{{end}}{{end}}`)
	mods := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		pkg, mod, _ := strings.Cut(line, "|")
		packages = append(packages, pkg)
		if mod = strings.TrimSpace(mod); mod != "" && !strings.HasPrefix(mod, "github.com/txfence/txfence/") {
			mods[mod] = true
		}
	}
	for m := range mods {
		modules = append(modules, m)
	}
	slices.Sort(modules)
	return packages, modules
}

func TestSignerImportsNothingBanned(t *testing.T) {
	t.Parallel()
	packages, _ := goList(t)
	std := strings.Fields(listDeps(t, `{{if .Standard}}{{.ImportPath}}{{end}}`))
	for _, pkg := range append(packages, std...) {
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") {
				t.Errorf("signerd links %s, which has no business in Zone C (banned: %s)", pkg, b)
			}
		}
	}
	for line := range strings.SplitSeq(strings.TrimSpace(listDeps(t, `{{.ImportPath}} {{join .Imports " "}}`)), "\n") {
		fields := strings.Fields(line)
		for _, imported := range fields[1:] {
			tolerated, restricted := restrictedStd[imported]
			if restricted && !slices.Contains(tolerated, fields[0]) {
				t.Errorf("%s imports %s, which Zone C code must not use (tolerated only from %v)", fields[0], imported, tolerated)
			}
		}
	}
}

// listDeps runs go list -deps on the signerd binary with format.
func listDeps(t *testing.T, format string) string {
	t.Helper()
	// go test puts its own toolchain first on PATH.
	out, err := exec.Command("go", "list", "-deps", "-f", format, "./cmd/signerd").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return string(out)
}

// TestDependencyListIsCurrent fails when the modules signerd links differ
// from DEPENDENCIES.txt. Run `go test -run DependencyList -update .` in
// signer-zonec and have the diff reviewed with the change that caused it.
func TestDependencyListIsCurrent(t *testing.T) {
	t.Parallel()
	_, modules := goList(t)
	want := "# Modules linked into signerd (module version), kept current by deps_test.go.\n" +
		"# A change here is a change to Zone C's attack surface: review it.\n" +
		strings.Join(modules, "\n") + "\n"
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
