package signerd

import (
	"log/slog"

	"golang.org/x/sys/unix"
)

// lockMemory keeps signerd's memory, where unwrapped keys live, out of
// swap: mlockall of current and future pages. It needs CAP_IPC_LOCK or a
// large enough RLIMIT_MEMLOCK; without them signerd still runs, says so,
// and the threat model (SECURITY.md) counts swap as a host-compromise risk.
func lockMemory(log *slog.Logger) {
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
		log.Warn("memory not locked: keys may reach swap; grant CAP_IPC_LOCK or raise RLIMIT_MEMLOCK", "err", err)
		return
	}
	log.Info("memory locked (mlockall): keys stay out of swap")
}
