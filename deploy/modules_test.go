package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// services are the modules that build a deployed service. Each may
// require shared, testinfra and openapi, never another service: services
// meet only over their APIs, and a test that runs two of them together
// lives here, in deploy/integration.
//
// signer-zonec/mpc is listed with them so that signer-zonec's module never
// requires it: the MPC library stays out of signerd's binary.
var services = []string{"gateway", "txmanager", "ledger", "signer-zonec", "signer-zonec/mpc", "mev-router"}

// TestNoServiceModuleRequiresAnother: `go list -m all` in each service's
// module alone (no workspace) names no other service's module, tests
// included, since a module's graph holds its tests' requirements too.
func TestNoServiceModuleRequiresAnother(t *testing.T) {
	t.Parallel()
	for _, svc := range services {
		cmd := exec.Command("go", "list", "-m", "all")
		cmd.Dir = filepath.Join("..", svc)
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -m all in %s: %v\n%s", svc, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			path, _, _ := strings.Cut(line, " ")
			for _, other := range services {
				if other != svc && path == "github.com/txfence/txfence/"+other {
					t.Errorf("%s's module requires %s's: %q", svc, other, line)
				}
			}
		}
	}
}
