package devswitch_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/txfence/txfence/testinfra/servicetest"
)

// TestReleaseBuildsRefuseDevSwitches builds each daemon with a switch as
// a release is built (no txfence_devswitches tag) and starts it with that
// switch set: it exits at once, naming the switch and the tag, before it
// opens anything. The tests' own builds (servicetest.Build) carry the
// switches, which the crash tests use.
func TestReleaseBuildsRefuseDevSwitches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pkg, setting, value string }{
		{"github.com/txfence/txfence/txmanager/cmd/txmanagerd", "TXFENCE_TXMANAGER_TEST_CRASH_AFTER", "signed"},
		{"github.com/txfence/txfence/ledger/cmd/ledgerd", "TXFENCE_LEDGER_TEST_CRASH_AFTER", "booked"},
		{"github.com/txfence/txfence/gateway/cmd/gatewayd", "TXFENCE_GATEWAY_WEBHOOK_ALLOW_INSECURE_URLS", "true"},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(servicetest.BuildRelease(t, tc.pkg))
			cmd.Env = []string{tc.setting + "=" + tc.value}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("a release build with %s=%s: %v, want exit code 1\n%s", tc.setting, tc.value, err, out)
			}
			want := tc.setting + " is a development and test switch, and this binary was built without them (go build -tags txfence_devswitches)"
			if !strings.Contains(string(out), want) {
				t.Errorf("a release build with %s set said:\n%s\nwant %q", tc.setting, out, want)
			}
		})
	}
}
