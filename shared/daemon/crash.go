package daemon

import (
	"fmt"
	"slices"

	"github.com/txfence/txfence/shared/devswitch"
)

// CrashSwitch is the fault injection of a service whose crash tests kill
// it right after a named step of its pipeline, as `kill -9` would.
// Services with such steps embed it beside Base, so the variable takes
// their prefix (TXFENCE_LEDGER_TEST_CRASH_AFTER). It is a development
// switch (package devswitch): a release build refuses it at load, and
// Hook never arms there.
type CrashSwitch struct {
	TestCrashAfter string `env:"TEST_CRASH_AFTER" devswitch:"true"`
}

// Hook returns what a pipeline calls after each of its steps: it kills
// the process (devswitch.Crash) after the configured step. It is nil when
// the switch is unset, and an error when the setting names none of steps,
// so a typo fails the start instead of a crash test that never crashes.
func (c CrashSwitch) Hook(steps ...string) (func(step string), error) {
	if c.TestCrashAfter == "" || !devswitch.Enabled {
		return nil, nil // a release build refused the setting at load
	}
	if !slices.Contains(steps, c.TestCrashAfter) {
		return nil, fmt.Errorf("TEST_CRASH_AFTER=%q is not one of %v", c.TestCrashAfter, steps)
	}
	return func(step string) {
		if step == c.TestCrashAfter {
			devswitch.Crash()
		}
	}, nil
}
