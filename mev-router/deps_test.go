package mevrouter_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// licenceBound are packages mevrouterd must never link. The MEV-Share
// reference node is AGPL-3.0: linking it would put mevrouterd under the
// AGPL, so it is a test-only reference for the bundle schema. The
// development relay and the chain test helpers are for make run and tests.
var licenceBound = []string{
	"github.com/flashbots/mev-share-node",
	"github.com/txfence/txfence/mev-router/devrelay",
	"github.com/txfence/txfence/mev-router/mevroutertest",
	"github.com/txfence/txfence/testinfra/anvil",
	"github.com/txfence/txfence/testinfra/chaintest",
	"github.com/txfence/txfence/testinfra/servicetest",
}

func TestMevrouterdLinksNoAGPLOrDevelopmentCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./cmd/mevrouterd").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range licenceBound {
			if pkg == banned || strings.HasPrefix(pkg, banned+"/") {
				t.Errorf("mevrouterd links %s", pkg)
			}
		}
	}
}

// rootMayImport is all the root package, the routing domain, may import
// beside the standard library: go-ethereum's types (no RPC client), the
// error categories and the error kinds. Adapters (the public fan-out, the
// relays, Prometheus, HTTP) live in their own packages and import the
// root, never the other way round.
var rootMayImport = []string{
	"github.com/ethereum/go-ethereum/common",
	"github.com/ethereum/go-ethereum/core/types",
	"github.com/ethereum/go-ethereum/crypto",
	"github.com/txfence/txfence/mev-router/nodeerr",
	"github.com/txfence/txfence/shared/errs",
}

// rootMustNotImport are standard packages that mean an adapter.
var rootMustNotImport = []string{"net", "net/http", "database/sql", "os/exec"}

func TestRootImportsNoAdapter(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{range .Imports}}{{.}} {{end}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		std := !strings.Contains(strings.SplitN(pkg, "/", 2)[0], ".")
		switch {
		case std && !slices.Contains(rootMustNotImport, pkg):
		case slices.Contains(rootMayImport, pkg):
		default:
			t.Errorf("the root package imports %s: move what needs it to an adapter package (public, relay, metrics, httpapi)", pkg)
		}
	}
}
