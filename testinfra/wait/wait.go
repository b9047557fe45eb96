// Package wait polls a condition in tests until it holds: the one way
// txfence's tests wait for something to happen, with a deadline long
// enough for a loaded two-core machine and a failure that says what was
// awaited, never a bare sleep.
package wait

import (
	"testing"
	"time"
)

// Tick is how often a condition is polled.
const Tick = 10 * time.Millisecond

// For polls cond every Tick until it holds, and fails t when timeout
// passes first, saying it gave up waiting for what.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ForDescribed(t, timeout, cond, func() string { return what })
}

// ForDescribed is For with the failure's text made when it fails: the
// state that was reached instead, or a service's logs.
func ForDescribed(t testing.TB, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(Tick)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("gave up after %v waiting for %s", timeout, describe())
			return // t.Fatalf has ended the test's goroutine; a fake may not
		case <-tick.C:
		}
	}
}
