//go:build txfence_devswitches

package devswitch

import (
	"os"
	"syscall"
)

// Enabled: this binary was built for tests or the local stack.
const Enabled = true

// Crash kills the process as kill -9 would: no deferred function runs, no
// lease is released, nothing is flushed.
func Crash() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is asynchronous; nothing may run on
}
