package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/servicetest"
)

// TestSignerctlRunsWithoutCoreDumps: signerctl handles key material (keys
// it creates or imports, an approver's key), so the binary gives up core
// dumps before it reads anything. Seen from outside, while `approver sign`
// waits for its request on stdin with the approver's key loaded: its core
// limit is 0, soft and hard.
func TestSignerctlRunsWithoutCoreDumps(t *testing.T) {
	t.Parallel()
	bin := servicetest.Build(t, "github.com/txfence/txfence/signer-zonec/cmd/signerctl")
	key := filepath.Join(t.TempDir(), "alice.key")
	if out, err := exec.Command(bin, "approver", "new", "--out", key, "--id", "alice").CombinedOutput(); err != nil {
		t.Fatalf("approver new: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "approver", "sign", "--key", key, "--request", "-")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait() // it refuses the empty request
	})
	limits := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/limits"
	// It waits on stdin until the test closes it; the limit is set first
	// thing in main, so it shows once the process has started at all.
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(limits)
		if err != nil {
			t.Fatalf("read %s: %v (stderr: %s)", limits, err, stderr.String())
		}
		for line := range strings.Lines(string(b)) {
			if strings.HasPrefix(line, "Max core file size") {
				last = line
				if f := strings.Fields(line); len(f) >= 6 && f[4] == "0" && f[5] == "0" {
					return
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("signerctl's core limit never became 0 and 0: %q", last)
}
