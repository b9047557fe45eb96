package mevrouter_test

import (
	"os/exec"
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
