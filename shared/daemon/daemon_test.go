package daemon_test

import (
	"context"
	"io"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/devswitch"
)

type noBase struct {
	Name string `env:"NAME"`
}

type serveOnly struct {
	daemon.Base
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSetupRefusesBadInvocations(t *testing.T) {
	t.Parallel()
	spec := daemon.Spec{Binary: "testd", Identity: "test", EnvPrefix: "T_"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		cfg  any
		want string
	}{
		{"config without Base", nil, nil, &noBase{}, "does not embed daemon.Base"},
		{"migrate without a database", []string{"migrate"}, nil, &serveOnly{}, `unknown command "migrate"; commands: serve`},
		{"extra arguments", []string{"serve", "now"}, nil, &serveOnly{}, `unexpected arguments after "serve": now`},
		{"missing TLS files", nil, nil, &serveOnly{}, "T_TLS_CA_FILE is required"},
		{"bad log format and timeout", nil, map[string]string{
			"T_TLS_CA_FILE": "a", "T_TLS_CERT_FILE": "b", "T_TLS_KEY_FILE": "c",
			"T_LOG_FORMAT": "xml", "T_SHUTDOWN_TIMEOUT": "-1s",
		}, &serveOnly{}, "LOG_FORMAT=\"xml\": must be json or text\nSHUTDOWN_TIMEOUT must be positive"},
		{"unreadable certificates", nil, map[string]string{
			"T_TLS_CA_FILE": "/nonexistent/ca.pem", "T_TLS_CERT_FILE": "/nonexistent/c.pem", "T_TLS_KEY_FILE": "/nonexistent/k.pem",
		}, &serveOnly{}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			svc, err := daemon.Setup(context.Background(), spec, nil, tt.args, env(tt.env), io.Discard, tt.cfg)
			if svc != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Setup = %v, %v; want an error saying %q", svc, err, tt.want)
			}
		})
	}
}

func TestBaseValidationIsReportedOnce(t *testing.T) {
	t.Parallel()
	_, err := daemon.Setup(context.Background(), daemon.Spec{Binary: "testd", EnvPrefix: "T_"}, nil, nil, env(map[string]string{
		"T_TLS_CA_FILE": "a", "T_TLS_CERT_FILE": "b", "T_TLS_KEY_FILE": "c", "T_LOG_FORMAT": "xml",
	}), io.Discard, &serveOnly{})
	if n := strings.Count(err.Error(), "must be json or text"); n != 1 {
		t.Errorf("the problem is reported %d times:\n%v", n, err)
	}
}

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for gogc, want := range map[string]int{"": daemon.DefaultGCPercent, "50": 50, "off": -1, "nonsense": 100} {
		debug.SetGCPercent(100)
		if got := daemon.TuneGC(env(map[string]string{"GOGC": gogc})); got != want {
			t.Errorf("GOGC=%q: TuneGC reports %d, want %d", gogc, got, want)
		}
		// Only an unset GOGC changes the runtime's target.
		if now := debug.SetGCPercent(100); gogc == "" && now != daemon.DefaultGCPercent || gogc != "" && now != 100 {
			t.Errorf("GOGC=%q: the runtime's target is %d after TuneGC", gogc, now)
		}
	}
}

// TestCrashSwitchHook: an unset switch arms nothing, and a step the
// pipeline does not have fails the start rather than a crash test that
// never crashes. A release build refused the setting at load, so there it
// arms nothing either.
func TestCrashSwitchHook(t *testing.T) {
	t.Parallel()
	if hook, err := (daemon.CrashSwitch{}).Hook("booked"); hook != nil || err != nil {
		t.Errorf("unset: hook set %t, error %v; want neither", hook != nil, err)
	}
	hook, err := daemon.CrashSwitch{TestCrashAfter: "boked"}.Hook("booked")
	if !devswitch.Enabled {
		if hook != nil || err != nil {
			t.Errorf("release build: hook set %t, error %v; want neither", hook != nil, err)
		}
		return
	}
	if want := `TEST_CRASH_AFTER="boked" is not one of [booked]`; err == nil || err.Error() != want {
		t.Errorf("unknown step: error %v, want %s", err, want)
	}
	if hook, err := (daemon.CrashSwitch{TestCrashAfter: "booked"}).Hook("booked"); hook == nil || err != nil {
		t.Errorf("known step: hook set %t, error %v; want a hook", hook != nil, err)
	}
}
