package wait_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"
)

func TestForReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	wait.For(t, time.Minute, "the third call", func() bool { return calls.Add(1) == 3 })
	if calls.Load() != 3 {
		t.Errorf("polled %d times, want 3", calls.Load())
	}
}

// recorder catches what a failing wait reports.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	for _, a := range args {
		r.failed += " " + strings.TrimSpace(strings.ReplaceAll(toString(a), "\n", " "))
	}
}

func toString(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case time.Duration:
		return v.String()
	}
	return ""
}

func TestForFailsSayingWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	wait.For(r, 30*time.Millisecond, "the moon", func() bool { return false })
	if !strings.Contains(r.failed, "the moon") {
		t.Errorf("the failure says %q, want the awaited thing named", r.failed)
	}
}
