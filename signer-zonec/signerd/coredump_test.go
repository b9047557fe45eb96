package signerd

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// coreDumpChildEnv makes this test binary, re-executed, call
// preventCoreDumps and report the result instead of running tests.
const coreDumpChildEnv = "TXFENCE_SIGNERD_TEST_CORE_DUMP_CHILD"

func init() {
	// Tests run signerd inside this test binary, which must stay as it
	// was (debuggable, its core limit untouched): TestPreventCoreDumps
	// checks the real thing in a child process.
	keepCoreDumps = os.Getenv(coreDumpChildEnv) != "1"
	if !keepCoreDumps {
		os.Exit(coreDumpChild())
	}
}

// coreDumpReport is what the child process saw around preventCoreDumps.
type coreDumpReport struct {
	DumpableBefore, DumpableAfter int
	CoreBefore, CoreAfter         unix.Rlimit
	Err                           string
	Log                           string
}

func coreDumpChild() int {
	var r coreDumpReport
	// Give the child a core limit to lose where the hard limit allows one,
	// so the report shows a change even on hosts whose soft limit is 0.
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_CORE, &lim) == nil && lim.Cur == 0 && lim.Max > 0 {
		lim.Cur = min(lim.Max, 1<<20)
		_ = unix.Setrlimit(unix.RLIMIT_CORE, &lim)
	}
	r.DumpableBefore, _ = unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	_ = unix.Getrlimit(unix.RLIMIT_CORE, &r.CoreBefore)
	var logs bytes.Buffer
	if err := preventCoreDumps(slog.New(slog.NewJSONHandler(&logs, nil))); err != nil {
		r.Err = err.Error()
	}
	r.Log = logs.String()
	r.DumpableAfter, _ = unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	_ = unix.Getrlimit(unix.RLIMIT_CORE, &r.CoreAfter)
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 2
	}
	return 0
}

// TestPreventCoreDumps re-executes the test binary, whose child calls
// preventCoreDumps as signerd does at start: afterwards the process is not
// dumpable (no core file, whatever the host's core_pattern, and no ptrace
// or /proc/PID/mem by processes of the same user) and its core limit is 0,
// soft and hard, so it cannot be raised again.
func TestPreventCoreDumps(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), coreDumpChildEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, stderr.String())
	}
	var r coreDumpReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("child's report %q: %v", out, err)
	}
	if r.Err != "" {
		t.Fatalf("preventCoreDumps: %s", r.Err)
	}
	if r.DumpableBefore != 1 {
		t.Fatalf("the child started with dumpable %d, want 1: the test cannot see a change", r.DumpableBefore)
	}
	if r.DumpableAfter != 0 {
		t.Errorf("dumpable after preventCoreDumps: %d, want 0", r.DumpableAfter)
	}
	if r.CoreAfter.Cur != 0 || r.CoreAfter.Max != 0 {
		t.Errorf("RLIMIT_CORE after preventCoreDumps: %+v, want 0 and 0 (before: %+v)", r.CoreAfter, r.CoreBefore)
	}
	if r.CoreBefore.Cur == 0 && r.CoreBefore.Max == 0 {
		t.Log("this host already had RLIMIT_CORE 0 and 0; only dumpable showed a change")
	}
	if !strings.Contains(r.Log, "core dumps disabled") {
		t.Errorf("preventCoreDumps logged %q, want it to say core dumps are disabled", r.Log)
	}
}
