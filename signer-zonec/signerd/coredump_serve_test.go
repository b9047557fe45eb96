package signerd_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/testinfra/servicetest"
)

// TestServeDisablesCoreDumps runs a real signerd binary (tests running
// signerd in-process leave the test binary as it is), signerd-dev for its
// keystore, and checks it disabled core dumps before it served.
func TestServeDisablesCoreDumps(t *testing.T) {
	t.Parallel()
	_, env := baseEnv(t)
	env = servicetest.Merge(env, keystoreEnv(t))
	bin := servicetest.Build(t, "github.com/txfence/txfence/signer-zonec/cmd/signerd-dev")
	p := servicetest.StartProcess(t, bin, nil, env, "internal")
	if !strings.Contains(p.Logs(), "core dumps disabled") {
		t.Errorf("signerd served without saying it disabled core dumps:\n%s", p.Logs())
	}
}
