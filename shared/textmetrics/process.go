package textmetrics

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processStart is when this package was initialised, within moments of
// the process's start.
var processStart = time.Now()

// RegisterProcess adds the Go runtime's and the process's basic gauges,
// under the names the Prometheus client's Go and process collectors use,
// so that the same dashboards and alerts read signerd: goroutines, heap,
// memory from the OS, allocations, GOMAXPROCS, CPU time, resident memory, file
// descriptors and start time.
func (r *Registry) RegisterProcess() {
	r.Gauge("go_goroutines", "Number of goroutines that currently exist.", func() float64 {
		return float64(runtime.NumGoroutine())
	})
	r.Gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use.",
		runtimeMetric("/memory/classes/heap/objects:bytes"))
	r.Gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.",
		runtimeMetric("/memory/classes/total:bytes"))
	r.CounterFunc("go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already.",
		runtimeMetric("/gc/heap/allocs:bytes"))
	r.Gauge("go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting.",
		runtimeMetric("/sched/gomaxprocs:threads"))

	r.CounterFunc("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", func() float64 {
		var u syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
			return 0
		}
		return seconds(u.Utime) + seconds(u.Stime)
	})
	r.Gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", func() float64 {
		return float64(processStart.UnixNano()) / 1e9
	})
	r.Gauge("process_max_fds", "Maximum number of open file descriptors.", func() float64 {
		var l syscall.Rlimit
		if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
			return 0
		}
		return float64(l.Cur)
	})
	if _, err := os.Stat("/proc/self"); err != nil {
		return // the rest is read from Linux's /proc
	}
	r.Gauge("process_open_fds", "Number of open file descriptors.", func() float64 {
		fds, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return 0
		}
		return float64(len(fds) - 1) // less the one ReadDir held open
	})
	r.Gauge("process_resident_memory_bytes", "Resident memory size in bytes.", func() float64 {
		// statm: size resident shared text lib data dt, in pages.
		b, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			return 0
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			return 0
		}
		pages, _ := strconv.ParseFloat(fields[1], 64)
		return pages * float64(os.Getpagesize())
	})
}

func seconds(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// runtimeMetric reads one metric of package runtime/metrics.
func runtimeMetric(name string) func() float64 {
	return func() float64 {
		s := []metrics.Sample{{Name: name}}
		metrics.Read(s)
		switch s[0].Value.Kind() {
		case metrics.KindUint64:
			return float64(s[0].Value.Uint64())
		case metrics.KindFloat64:
			return s[0].Value.Float64()
		}
		return 0
	}
}
