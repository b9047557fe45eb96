package devstack_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/deploy/devstack"
	"github.com/txfence/txfence/shared/devswitch"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/pgcluster"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStackStartsServesAndStopsTwice is make run, twice in a row, as the
// README has it: devstack's binary runs in a directory laid out as a
// checkout (.build/bin, the signer's development policy) with its state
// directory left at its relative default, .devstack, and Ctrl-C (SIGINT)
// stops it. The whole stack comes up from the real binaries, the gateway
// answers /healthz, every internal listener refuses a client without a
// certificate and answers one with, a transaction goes end to end through
// the gateway by the public and the private route with its webhooks
// verified, the ledger books and reconciles, and SIGINT stops every
// process devstack started. The second run keeps the first one's chain
// (its blocks, and the first transaction, still CONFIRMED), databases and
// admin key.
func TestStackStartsServesAndStopsTwice(t *testing.T) {
	work := t.TempDir()
	bin := filepath.Join(work, ".build", "bin")
	buildServices(t, bin)
	state := filepath.Join(work, ".devstack")
	prefix := fmt.Sprintf("t_devstack_%d_", time.Now().UnixNano()%1_000_000)
	admin := pgtest.ServerURL(t)
	t.Cleanup(func() { dropDatabases(t, admin, prefix) })
	policy, err := os.ReadFile("../../signer-zonec/testdata/policy/development.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(work, "signer-zonec", "testdata", "policy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "signer-zonec", "testdata", "policy", "development.json"), policy, 0o644); err != nil {
		t.Fatal(err)
	}
	// The directory is no checkout (no go.work above it), so anvil is
	// named rather than found under the repository's .tools.
	anvilBin, err := anvil.Find()
	if err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}

	var first struct {
		tx       confirmedTx
		head     *stackBlock
		adminKey string
	}
	for run := 1; run <= 2; run++ {
		gatewayPort, basePort := freePort(t), freeRange(t, 5)
		// Ports and the database are the test's own, so that it runs
		// beside other tests; every path is devstack's default.
		env := map[string]string{
			devstack.EnvPrefix + "DATABASE_URL":      admin,
			devstack.EnvPrefix + "DATABASE_PREFIX":   prefix,
			devstack.EnvPrefix + "GATEWAY_ADDR":      "127.0.0.1:" + strconv.Itoa(gatewayPort),
			devstack.EnvPrefix + "BASE_PORT":         strconv.Itoa(basePort),
			devstack.EnvPrefix + "ANVIL_PORT":        "0",
			devstack.EnvPrefix + "SECOND_ANVIL_PORT": "0",
			devstack.EnvPrefix + "OWN_REDIS_PORT":    strconv.Itoa(freePort(t)),
			devstack.EnvPrefix + "RELAY_ADDR":        "127.0.0.1:0",
			devstack.EnvPrefix + "BLOCK_TIME":        "100ms",
			"TXFENCE_ANVIL":                          anvilBin,
		}
		stack := startDevstack(t, work, env)
		stack.waitForLine(t, "txfence is running")

		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", gatewayPort))
		if err != nil {
			t.Fatalf("run %d: gateway /healthz: %v", run, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("run %d: gateway /healthz: %d", run, resp.StatusCode)
		}
		certs := filepath.Join(state, "certs")
		for i := range 5 {
			url := fmt.Sprintf("https://127.0.0.1:%d/healthz", basePort+i)
			if _, err := servicetest.PlainTLSClient(t, certs).Get(url); err == nil || !strings.Contains(err.Error(), "certificate required") {
				t.Errorf("run %d: %s without a certificate: %v", run, url, err)
			}
		}

		// signerd holds anvil's ten dev accounts in its keystore, and
		// answers txmanager.
		keys := signerKeys(t, servicetest.Client(t, certs, "txmanager", "signer"), fmt.Sprintf("https://127.0.0.1:%d/v1/keys", basePort))
		if len(keys) != 10 {
			t.Errorf("run %d: signerd holds %d keys, want anvil's 10: %v", run, len(keys), keys)
		}

		txmClient := servicetest.Client(t, certs, "gateway", "txmanager")
		txmanager := fmt.Sprintf("https://127.0.0.1:%d", basePort+2)
		chain := dialStackChain(t, state)
		adminKey, err := os.ReadFile(filepath.Join(state, "admin.key"))
		if err != nil {
			t.Fatalf("run %d: the admin key: %v", run, err)
		}
		if run == 2 {
			// The chain is the first run's: its blocks, up to the head
			// seen last, and its transaction, which txmanager still has
			// CONFIRMED. So are the databases and the admin key.
			if got := chain.block(uint64(first.head.Number)); got == nil || got.Hash != first.head.Hash {
				t.Fatalf("block %d is %+v in the second run, was %s in the first: anvil's chain was not kept", first.head.Number, got, first.head.Hash)
			}
			if r, ok := chain.receipt(first.tx.Hash); !ok || r.Status != types.ReceiptStatusSuccessful {
				t.Errorf("the first run's transaction %s in the second run: receipt %+v", first.tx.Hash, r)
			}
			if got := txState(t, txmClient, txmanager, first.tx.ID); got != "CONFIRMED" {
				t.Errorf("the first run's transaction %s is %s in the second run, want CONFIRMED", first.tx.ID, got)
			}
			if string(adminKey) != first.adminKey {
				t.Errorf("the admin key changed between runs")
			}
		}

		// A transaction goes all the way: accepted by txmanager (as the
		// gateway), simulated, allowed by signerd's policy, signed,
		// broadcast through mevrouterd, mined and confirmed.
		tx := requireConfirmed(t, txmClient, txmanager, fmt.Sprintf("run-%d", run))

		// Through the front door, with the admin key the first run made
		// (the second run reuses it): public and private routes, and
		// webhooks.
		hashes := requireEndToEnd(t, fmt.Sprintf("http://127.0.0.1:%d", gatewayPort), strings.TrimSpace(string(adminKey)))
		// The ledger books both from the feed, reading the chain itself.
		requireBooked(t, databaseURL(t, admin, prefix+"ledger"), hashes)
		// Deposits, a token, a revert and a reorg: the ledger ties out
		// with the chain, and finds what moved without a transaction.
		requireReconciled(t, fmt.Sprintf("http://127.0.0.1:%d", gatewayPort), strings.TrimSpace(string(adminKey)),
			fmt.Sprintf("https://127.0.0.1:%d", basePort+3), servicetest.Client(t, certs, "gateway", "ledger"), state)
		if run == 1 {
			first.tx, first.adminKey = tx, string(adminKey)
			// Blocks are built until devstack stops anvil: this one is
			// below the head anvil writes when it stops.
			first.head = chain.block(chain.head())
		}

		stack.interrupt(t)
		if out, err := exec.Command("pgrep", "-f", work).Output(); err == nil {
			t.Errorf("run %d: processes left behind:\n%s", run, out)
		}
		// signerd anchored its audit log (at start and at shutdown at
		// least), and the log reaches and matches every checkpoint.
		publicKey, err := os.ReadFile(filepath.Join(state, "signer-checkpoint.key.pub"))
		if err != nil {
			t.Fatalf("run %d: signerd's checkpoint public key: %v", run, err)
		}
		verify := exec.Command(filepath.Join(bin, "signerctl"), "audit", "verify",
			"--checkpoints", filepath.Join(state, "signer-audit-checkpoints.jsonl"), "--public-key", strings.TrimSpace(string(publicKey)))
		verify.Env = append(os.Environ(), "TXFENCE_SIGNER_DATABASE_URL="+databaseURL(t, admin, prefix+"signer"))
		if out, err := verify.CombinedOutput(); err != nil || !strings.Contains(string(out), "audit log intact") {
			t.Errorf("run %d: signerctl audit verify --checkpoints: %v\n%s", run, err, out)
		}
		for _, port := range append([]int{gatewayPort}, basePort, basePort+4) {
			if conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				conn.Close()
				t.Errorf("run %d: port %d still open after stop", run, port)
			}
		}
		if fi, err := os.Stat(filepath.Join(state, "anvil-state.json")); err != nil || fi.Size() == 0 {
			t.Errorf("run %d: anvil's chain was not written into the state directory: %v", run, err)
		}
	}
}

// A state directory without anvil's chain, under databases an earlier
// run left, is a new chain under books of the old one: devstack refuses
// to start, and says how to start over, before it starts anything.
func TestANewChainUnderOldDatabasesIsRefused(t *testing.T) {
	t.Parallel()
	bin, state := t.TempDir(), t.TempDir()
	for _, name := range []string{"signerd-dev", "signerctl", "mevrouterd", "txmanagerd", "ledgerd", "gatewayd"} {
		if err := os.WriteFile(filepath.Join(bin, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prefix := fmt.Sprintf("t_devstack_refused_%d_", time.Now().UnixNano()%1_000_000)
	admin := pgtest.ServerURL(t)
	t.Cleanup(func() { dropDatabases(t, admin, prefix) })
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{prefix + "txmanager"}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		devstack.EnvPrefix + "BIN_DIR":         bin,
		devstack.EnvPrefix + "STATE_DIR":       state,
		devstack.EnvPrefix + "DATABASE_URL":    admin,
		devstack.EnvPrefix + "DATABASE_PREFIX": prefix,
	}
	err = devstack.Run(ctx, nil, func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "anvil-state.json") || !strings.Contains(err.Error(), "DROP DATABASE \""+prefix+"txmanager\"") {
		t.Fatalf("Run = %v, want a refusal naming the state file and how to drop %stxmanager", err, prefix)
	}
}

// devstackProcess is devstack's binary running as make run runs it.
type devstackProcess struct {
	cmd  *exec.Cmd
	out  io.Reader // its output, which waitForLine reads
	done chan error
	// tail keeps the end of the output after waitForLine, for a failing
	// test's log.
	tail tailBuffer
}

// tailBuffer keeps the last 64 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 64<<10; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// startDevstack runs work/.build/bin/devstack in work with env (and no
// other TXFENCE_DEVSTACK_ setting of this process), killed should the
// test binary die, and stopped at the test's end if the test has not.
func startDevstack(t *testing.T, work string, env map[string]string) *devstackProcess {
	t.Helper()
	cmd := exec.Command(filepath.Join(work, ".build", "bin", "devstack"))
	cmd.Dir = work
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, devstack.EnvPrefix) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devstackProcess{cmd: cmd, out: pr, done: make(chan error, 1)}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		pw.Close()
		p.done <- err
		close(exited)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the end of devstack's output:\n%s", p.tail.String())
		}
		select {
		case <-exited:
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
		}
	})
	return p
}

// waitForLine waits for a line of devstack's output holding want; the
// output after it goes to the tail.
func (p *devstackProcess) waitForLine(t *testing.T, want string) {
	t.Helper()
	waitForLine(t, p.out, want, p.done)
	go func() { _, _ = io.Copy(&p.tail, p.out) }()
}

// interrupt is Ctrl-C at make run's terminal: SIGINT to devstack alone
// (its children lead process groups of their own), which must then stop
// everything it started and exit 0 within two minutes.
func (p *devstackProcess) interrupt(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("devstack: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("devstack did not stop within two minutes of SIGINT")
	}
}

// confirmedTx is a transaction txmanager has CONFIRMED.
type confirmedTx struct {
	ID   string
	Hash common.Hash
}

// txState is the state txmanager has transaction id in.
func txState(t *testing.T, client *http.Client, txmanager, id string) string {
	t.Helper()
	resp, err := client.Get(txmanager + "/internal/v1/tx/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tx struct{ State string }
	if err := json.NewDecoder(resp.Body).Decode(&tx); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET tx %s: %d %v", id, resp.StatusCode, err)
	}
	return tx.State
}

// requireConfirmed creates a transfer from anvil's first account through
// txmanager's API and waits until txmanager has it CONFIRMED, with its
// hash: simulated, allowed, signed, accepted by mevrouterd, mined, and
// found 3 blocks deep by the chain follower.
func requireConfirmed(t *testing.T, client *http.Client, txmanager, requestID string) confirmedTx {
	t.Helper()
	body := fmt.Sprintf(`{"chain_id": 31337, "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "request_id": %q,
		"to": "0x0000000000000000000000000000000000000b0b", "value": "1000", "route": "public"}`, requestID)
	resp, err := client.Post(txmanager+"/internal/v1/tx", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var tx struct {
		TxID  string `json:"tx_id"`
		State string `json:"state"`
		Hash  string `json:"hash"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tx)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %v", resp.StatusCode, err)
	}
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for tx.State != "CONFIRMED" {
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s still %s after a minute", tx.TxID, tx.State)
		}
		<-tick.C
		resp, err := client.Get(txmanager + "/internal/v1/tx/" + tx.TxID)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&tx)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if tx.State == "FAILED" || tx.State == "REVERTED" {
			t.Fatalf("transaction %s %s", tx.TxID, tx.State)
		}
	}
	if len(tx.Hash) != 66 {
		t.Fatalf("confirmed without a hash: %+v", tx)
	}
	return confirmedTx{ID: tx.TxID, Hash: common.HexToHash(tx.Hash)}
}

// signerKeys lists the keys signerd holds, as "address backend".
func signerKeys(t *testing.T, client *http.Client, url string) []string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var body struct {
		Keys []struct{ Address, Backend string }
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	var keys []string
	for _, k := range body.Keys {
		keys = append(keys, k.Address+" "+k.Backend)
	}
	return keys
}

// buildServices builds the five service binaries (signerd as signerd-dev),
// signerctl and devstack into dir, as make build does into .build/bin.
func buildServices(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-tags", devswitch.Tag, "-o", dir+"/",
		"github.com/txfence/txfence/gateway/cmd/gatewayd",
		"github.com/txfence/txfence/txmanager/cmd/txmanagerd",
		"github.com/txfence/txfence/signer-zonec/cmd/signerd-dev",
		"github.com/txfence/txfence/signer-zonec/cmd/signerctl",
		"github.com/txfence/txfence/mev-router/cmd/mevrouterd",
		"github.com/txfence/txfence/ledger/cmd/ledgerd",
		"github.com/txfence/txfence/deploy/cmd/devstack")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build services: %v\n%s", err, out)
	}
}

func waitForLine(t *testing.T, r io.Reader, want string, done <-chan error) {
	t.Helper()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
			if strings.Contains(sc.Text(), want) {
				return
			}
		}
		close(lines)
	}()
	var seen []string
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %q:\n%s", want, strings.Join(seen, "\n"))
			}
			if strings.Contains(line, want) {
				return
			}
			seen = append(seen, line)
		case err := <-done:
			t.Fatalf("devstack ended before %q: %v\n%s", want, err, strings.Join(seen, "\n"))
		case <-timeout:
			t.Fatalf("no %q within two minutes:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

func freePort(t *testing.T) int { return freeRange(t, 1) }

// freeRange finds n consecutive free ports (pgcluster.FreePorts: below
// the ephemeral range, where no parallel test's connection lands on them).
func freeRange(t *testing.T, n int) int {
	t.Helper()
	p, err := pgcluster.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dropDatabases drops the databases and roles a devstack run made under
// prefix.
func dropDatabases(t *testing.T, admin, prefix string) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1)`, prefix)
	if err != nil {
		t.Error(err)
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Error(err)
		return
	}
	for _, name := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	}
	// The roles devstack made (signerd's serving role) held privileges in
	// those databases only, so they can go now.
	rows, err = conn.Query(ctx, `SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)`, prefix)
	if err != nil {
		t.Error(err)
		return
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Error(err)
		return
	}
	for _, role := range roles {
		if _, err := conn.Exec(ctx, "DROP ROLE "+pgx.Identifier{role}.Sanitize()); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	}
}

// databaseURL is admin's server URL naming database name instead.
func databaseURL(t *testing.T, admin, name string) string {
	t.Helper()
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
