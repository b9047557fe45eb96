package daemon

import (
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the garbage collector's target for txfence's
// services unless GOGC says otherwise. Their live heap is small (tens of
// megabytes) and they allocate fast (every request decodes and encodes
// JSON), so with Go's default of 100 a collection runs every few megabytes
// allocated: at thousands of requests a second, measured, that costs about
// a sixth of the CPU (BenchmarkAcceptThroughGateway: 4,300/s at 100,
// 5,000/s at 400). At 400 the heap may grow to five times the live heap
// between collections; GOMEMLIMIT, when the operator sets it, still caps
// it.
const DefaultGCPercent = 400

// TuneGC sets the collector's target to DefaultGCPercent unless the
// environment sets GOGC (which the Go runtime has applied already), and
// returns the target in effect, for the configuration log. -1 means off.
func TuneGC(getenv func(string) string) int {
	if v := getenv("GOGC"); v != "" {
		if v == "off" {
			return -1
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 100 // the runtime ignores a GOGC it cannot read
		}
		return n
	}
	debug.SetGCPercent(DefaultGCPercent)
	return DefaultGCPercent
}
