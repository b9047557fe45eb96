// Package hardening keeps a Zone C process's memory, where unwrapped keys
// live, out of core files, swap and the reach of other processes. signerd
// and signerctl (which creates and imports keys, and signs approvals with
// an approver's key) call it first thing.
package hardening

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// PreventCoreDumps sets RLIMIT_CORE to 0, soft and hard, so that nothing
// in the process can raise it again, which stops core files; and
// PR_SET_DUMPABLE to 0, which stops every core dump, a core_pattern pipe
// to a crash collector included, and also keeps processes of the same
// user from attaching (ptrace) or reading /proc/PID/mem. Neither needs a
// privilege, so a failure is an error the caller does not start on.
func PreventCoreDumps() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("disable core dumps: set RLIMIT_CORE to 0: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("disable core dumps: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// LockMemory keeps the process's memory out of swap: mlockall of current
// and future pages. It needs CAP_IPC_LOCK or a large enough
// RLIMIT_MEMLOCK; the caller decides whether to run on without it (the
// threat model, SECURITY.md, counts swap as a host-compromise risk).
func LockMemory() error {
	return unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE)
}
