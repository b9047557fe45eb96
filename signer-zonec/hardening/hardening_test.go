package hardening_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/txfence/txfence/signer-zonec/hardening"
)

// coreDumpChildEnv makes this test binary, re-executed, call
// PreventCoreDumps and report the result instead of running tests: the
// test binary itself must stay as it was (debuggable, its core limit
// untouched).
const coreDumpChildEnv = "TXFENCE_HARDENING_TEST_CORE_DUMP_CHILD"

func init() {
	if os.Getenv(coreDumpChildEnv) == "1" {
		os.Exit(coreDumpChild())
	}
}

// coreDumpReport is what the child process saw around PreventCoreDumps.
type coreDumpReport struct {
	DumpableBefore, DumpableAfter int
	CoreBefore, CoreAfter         unix.Rlimit
	Err                           string
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
	if err := hardening.PreventCoreDumps(); err != nil {
		r.Err = err.Error()
	}
	r.DumpableAfter, _ = unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	_ = unix.Getrlimit(unix.RLIMIT_CORE, &r.CoreAfter)
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		return 2
	}
	return 0
}

// TestPreventCoreDumps re-executes the test binary, whose child calls
// PreventCoreDumps as signerd does at start: afterwards the process is not
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
		t.Fatalf("PreventCoreDumps: %s", r.Err)
	}
	if r.DumpableBefore != 1 {
		t.Fatalf("the child started with dumpable %d, want 1: the test cannot see a change", r.DumpableBefore)
	}
	if r.DumpableAfter != 0 {
		t.Errorf("dumpable after PreventCoreDumps: %d, want 0", r.DumpableAfter)
	}
	if r.CoreAfter.Cur != 0 || r.CoreAfter.Max != 0 {
		t.Errorf("RLIMIT_CORE after PreventCoreDumps: %+v, want 0 and 0 (before: %+v)", r.CoreAfter, r.CoreBefore)
	}
	if r.CoreBefore.Cur == 0 && r.CoreBefore.Max == 0 {
		t.Log("this host already had RLIMIT_CORE 0 and 0; only dumpable showed a change")
	}
}
