package anvil

// Process lifecycle tests. They live inside the package to shorten the stop
// grace period; chain behaviour is tested through chaintest in
// shared/chaintest, which this package cannot import.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func startNode(t *testing.T, opts Options) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := Start(ctx, opts)
	if err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}
	t.Cleanup(func() { _ = n.Stop() })
	return n
}

// gone reports whether pid no longer runs. A zombie counts as gone: an
// orphan reparented to a PID 1 that does not reap leaves one behind, and
// it holds no port and runs no code.
func gone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) S ...": the state follows the last ')'.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !gone(pid) {
		select {
		case <-deadline:
			t.Fatalf("anvil pid %d still runs 30 s after its parent died", pid)
		case <-tick.C:
		}
	}
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	n := startNode(t, Options{})
	pid := n.PID()
	if gone(pid) {
		t.Fatalf("anvil pid %d is not running after Start", pid)
	}
	if !strings.HasPrefix(n.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q, want http://127.0.0.1:<port>", n.URL())
	}
	if n.ChainID() != DefaultChainID {
		t.Errorf("chain id %d, want %d", n.ChainID(), DefaultChainID)
	}
	if got := len(n.Accounts()); got != 10 {
		t.Errorf("%d accounts, want 10", got)
	}
	addr := strings.TrimPrefix(n.URL(), "http://")

	if err := n.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-n.Done():
	default:
		t.Fatal("Done not closed after Stop returned")
	}
	if !gone(pid) {
		t.Errorf("anvil pid %d still runs after Stop", pid)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Stop", addr)
	}
	if _, err := os.Stat(n.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s left behind: %v", n.dir, err)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("second Stop: %v, want the first result (nil)", err)
	}
}

// A stopped process holds SIGTERM pending, as a wedged one ignores it:
// Stop must fall back to SIGKILL and still leave nothing behind.
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	n := startNode(t, Options{})
	n.grace = 200 * time.Millisecond
	if err := syscall.Kill(n.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	err := n.Stop()
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Stop: %v, want an error saying anvil was killed", err)
	}
	if !gone(n.PID()) {
		t.Errorf("anvil pid %d still runs after Stop", n.PID())
	}
}

func TestStopReportsEarlyExit(t *testing.T) {
	t.Parallel()
	n := startNode(t, Options{})
	if err := syscall.Kill(n.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.Done()
	if err := n.Stop(); err == nil || !strings.Contains(err.Error(), "exited before Stop") {
		t.Errorf("Stop: %v, want an error saying anvil exited before Stop", err)
	}
}

// TestNoOrphanWhenParentDies kills, with SIGKILL, a process that started a
// node, as go test's timeout or a crashed launcher would: no Stop runs,
// and the node must die with it rather than keep its port.
func TestNoOrphanWhenParentDies(t *testing.T) {
	t.Parallel()
	if _, err := Find(); err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TXFENCE_ANVIL_HELPER=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	pid, dir := 0, ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "anvil-helper pid=%d dir=%s", &pid, &dir); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("helper printed no anvil pid: %v", sc.Err())
	}
	t.Cleanup(func() {
		if !gone(pid) { // the test failed: do not leave the orphan running
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = os.RemoveAll(dir) // Stop never ran
	})

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitGone(t, pid)
}

// TestMain doubles as the process TestNoOrphanWhenParentDies kills: with
// TXFENCE_ANVIL_HELPER=1 the test binary starts anvil, reports it and hangs
// instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv("TXFENCE_ANVIL_HELPER") == "1" {
		n, err := Start(context.Background(), Options{})
		if err != nil {
			fmt.Println("anvil-helper error:", err)
			os.Exit(1)
		}
		fmt.Printf("anvil-helper pid=%d dir=%s\n", n.PID(), n.dir)
		select {} // until killed
	}
	os.Exit(m.Run())
}

func TestStartFailsCleanly(t *testing.T) {
	t.Parallel()
	if _, err := Find(); err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}
	ctx := context.Background()
	for name, opts := range map[string]Options{
		"mining modes": {NoMining: true, BlockTime: time.Second},
		"quiet":        {ExtraArgs: []string{"--quiet"}},
		"unknown flag": {ExtraArgs: []string{"--no-such-flag"}},
		// It would land in anvil's temporary directory, removed at Stop.
		"relative state":  {ExtraArgs: []string{"--state", "chain.json"}},
		"relative state=": {ExtraArgs: []string{"--dump-state=chain.json"}},
	} {
		n, err := Start(ctx, opts)
		if err == nil {
			_ = n.Stop()
			t.Errorf("%s: Start succeeded, want an error", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}

// A fixed port that is taken must fail the start, not talk to whatever
// holds it.
func TestStartOnTakenPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Find(); err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	n, err := Start(context.Background(), Options{Port: port})
	if err == nil {
		_ = n.Stop()
		t.Fatalf("Start on taken port %d succeeded", port)
	}
	if !strings.Contains(err.Error(), "exited") {
		t.Errorf("Start on taken port: %v, want anvil's exit reported", err)
	}
}

func TestFixedPort(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	n := startNode(t, Options{Port: port})
	if want := "http://127.0.0.1:" + strconv.Itoa(port); n.URL() != want {
		t.Errorf("URL %q, want %q", n.URL(), want)
	}
}

// Not parallel: it sets the environment.
func TestFindHonoursEnv(t *testing.T) {
	t.Setenv("TXFENCE_ANVIL", "/nonexistent/anvil")
	if _, err := Find(); err == nil || !strings.Contains(err.Error(), "TXFENCE_ANVIL") {
		t.Errorf("Find with a missing TXFENCE_ANVIL: %v, want an error naming it", err)
	}
	t.Setenv("TXFENCE_ANVIL", "")
	p, err := Find()
	if err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}
	t.Setenv("TXFENCE_ANVIL", p)
	if got, err := Find(); err != nil || got != p {
		t.Errorf("Find with TXFENCE_ANVIL=%s: %q, %v", p, got, err)
	}
}

func TestOutput(t *testing.T) {
	t.Parallel()
	var buf logtest.Buffer
	n := startNode(t, Options{Output: &buf})
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "Listening on "+strings.TrimPrefix(n.URL(), "http://")) {
		t.Errorf("Output lacks the listening line; got:\n%s", buf.String())
	}
}

// A chain kept in a StateFile outlives its node: the next node on the same
// file has the same blocks and the transaction's receipt. The path is
// relative, as the local stack's is, to this process's working directory:
// anvil's own is a temporary directory removed at Stop.
func TestStateFileKeepsTheChain(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "anvil-state.json")
	rel, err := filepath.Rel(wd, abs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := startNode(t, Options{StateFile: rel, NoMining: true})
	if err := n.Mine(ctx, 5); err != nil {
		t.Fatal(err)
	}
	var tx common.Hash
	if err := n.RPC().CallContext(ctx, &tx, "eth_sendTransaction", map[string]any{
		"from": n.Accounts()[0].Address, "to": common.HexToAddress("0xb0b"), "value": hexutil.Uint64(1000)}); err != nil {
		t.Fatal(err)
	}
	if err := n.Mine(ctx, 2); err != nil {
		t.Fatal(err)
	}
	head, err := n.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
		t.Fatalf("the state file after Stop: %v", err)
	}

	again := startNode(t, Options{StateFile: rel, NoMining: true})
	same, err := again.Client().HeaderByNumber(ctx, head.Number)
	if err != nil {
		t.Fatalf("block %d after the restart: %v", head.Number, err)
	}
	if same.Hash() != head.Hash() {
		t.Errorf("block %d is %s after the restart, was %s", head.Number, same.Hash(), head.Hash())
	}
	receipt, err := again.Client().TransactionReceipt(ctx, tx)
	if err != nil || receipt.Status != 1 {
		t.Fatalf("the transaction's receipt after the restart: %+v, %v", receipt, err)
	}
	if err := again.Mine(ctx, 1); err != nil {
		t.Fatal(err)
	}
	next, err := again.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if next.ParentHash != head.Hash() {
		t.Errorf("the first block after the restart has parent %s, want the old head %s", next.ParentHash, head.Hash())
	}
}
