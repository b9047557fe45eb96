package signerd

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"
)

// keepCoreDumps leaves the process as it is. Only this package's tests set
// it: they run signerd inside the test binary, which must stay debuggable
// with its core limit untouched (TestPreventCoreDumps checks the real
// thing in a child process, TestServeDisablesCoreDumps in the binary).
var keepCoreDumps bool

// preventCoreDumps keeps signerd's memory, where unwrapped keys live, out
// of core files: RLIMIT_CORE 0 (soft and hard, so nothing in the process
// can raise it again) stops core files, and PR_SET_DUMPABLE 0 stops every
// core dump, a core_pattern pipe to a crash collector included, and also
// keeps processes of the same user from attaching to signerd (ptrace) or
// reading /proc/PID/mem. Neither needs a privilege, so a failure is an
// error: signerd does not start.
func preventCoreDumps(log *slog.Logger) error {
	if keepCoreDumps {
		return nil
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: 0, Max: 0}); err != nil {
		return fmt.Errorf("disable core dumps: set RLIMIT_CORE to 0: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("disable core dumps: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	log.Info("core dumps disabled (RLIMIT_CORE 0, PR_SET_DUMPABLE 0): keys stay out of core files, and other processes of signerd's user cannot attach to it")
	return nil
}
