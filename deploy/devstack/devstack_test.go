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
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/deploy/devstack"
	"github.com/txfence/txfence/shared/pgcluster"
	"github.com/txfence/txfence/shared/pgtest"
	"github.com/txfence/txfence/shared/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestStackStartsServesAndStopsTwice is make run, twice in a row: the whole
// stack comes up from the real binaries, the gateway answers /healthz, every
// internal listener refuses a client without a certificate and answers one
// with, a transaction goes end to end through the gateway by the public
// and the private route with its webhooks verified, and cancelling stops
// every process devstack started.
func TestStackStartsServesAndStopsTwice(t *testing.T) {
	bin := buildServices(t)
	state := t.TempDir()
	prefix := fmt.Sprintf("t_devstack_%d_", time.Now().UnixNano()%1_000_000)
	admin := pgtest.ServerURL(t)
	t.Cleanup(func() { dropDatabases(t, admin, prefix) })

	policyFile, err := filepath.Abs("../../signer-zonec/testdata/policy/development.json")
	if err != nil {
		t.Fatal(err)
	}

	for run := 1; run <= 2; run++ {
		gatewayPort, basePort := freePort(t), freeRange(t, 5)
		env := map[string]string{
			devstack.EnvPrefix + "BIN_DIR":            bin,
			devstack.EnvPrefix + "STATE_DIR":          state,
			devstack.EnvPrefix + "DATABASE_URL":       admin,
			devstack.EnvPrefix + "DATABASE_PREFIX":    prefix,
			devstack.EnvPrefix + "GATEWAY_ADDR":       "127.0.0.1:" + strconv.Itoa(gatewayPort),
			devstack.EnvPrefix + "BASE_PORT":          strconv.Itoa(basePort),
			devstack.EnvPrefix + "ANVIL_PORT":         "0",
			devstack.EnvPrefix + "OWN_REDIS_PORT":     strconv.Itoa(freePort(t)),
			devstack.EnvPrefix + "SIGNER_POLICY_FILE": policyFile,
			devstack.EnvPrefix + "RELAY_ADDR":         "127.0.0.1:0",
			devstack.EnvPrefix + "BLOCK_TIME":         "100ms",
		}
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- devstack.Run(ctx, nil, func(k string) string { return env[k] }, pw)
			pw.Close()
		}()
		waitForLine(t, pr, "txfence is running", done)
		go func() { _, _ = io.Copy(io.Discard, pr) }()

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

		// A transaction goes all the way: accepted by txmanager (as the
		// gateway), simulated, allowed by signerd's policy, signed,
		// broadcast through mevrouterd, mined and confirmed.
		txmanager := fmt.Sprintf("https://127.0.0.1:%d", basePort+2)
		requireConfirmed(t, servicetest.Client(t, certs, "gateway", "txmanager"), txmanager, fmt.Sprintf("run-%d", run))

		// Through the front door, with the admin key the first run made
		// (the second run reuses it): public and private routes, and
		// webhooks.
		adminKey, err := os.ReadFile(filepath.Join(state, "admin.key"))
		if err != nil {
			t.Fatalf("run %d: the admin key: %v", run, err)
		}
		hashes := requireEndToEnd(t, fmt.Sprintf("http://127.0.0.1:%d", gatewayPort), strings.TrimSpace(string(adminKey)))
		// The ledger books both from the feed, reading the chain itself.
		requireBooked(t, databaseURL(t, admin, prefix+"ledger"), hashes)
		// Deposits, a token, a revert and a reorg: the ledger ties out
		// with the chain, and finds what moved without a transaction.
		requireReconciled(t, fmt.Sprintf("http://127.0.0.1:%d", gatewayPort), strings.TrimSpace(string(adminKey)),
			fmt.Sprintf("https://127.0.0.1:%d", basePort+3), servicetest.Client(t, certs, "gateway", "ledger"), state)

		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: devstack: %v", run, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("run %d: devstack did not stop within a minute", run)
		}
		if out, err := exec.Command("pgrep", "-f", bin).Output(); err == nil {
			t.Errorf("run %d: processes left behind:\n%s", run, out)
		}
		for _, port := range append([]int{gatewayPort}, basePort, basePort+4) {
			if conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
				conn.Close()
				t.Errorf("run %d: port %d still open after stop", run, port)
			}
		}
	}
}

// requireConfirmed creates a transfer from anvil's first account through
// txmanager's API and waits until txmanager has it CONFIRMED, with its
// hash: simulated, allowed, signed, accepted by mevrouterd, mined, and
// found 3 blocks deep by the chain follower.
func requireConfirmed(t *testing.T, client *http.Client, txmanager, requestID string) {
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
		t.Errorf("confirmed without a hash: %+v", tx)
	}
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

// buildServices builds the five service binaries into a temp dir.
func buildServices(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/",
		"github.com/txfence/txfence/gateway/cmd/gatewayd",
		"github.com/txfence/txfence/txmanager/cmd/txmanagerd",
		"github.com/txfence/txfence/signer-zonec/cmd/signerd",
		"github.com/txfence/txfence/mev-router/cmd/mevrouterd",
		"github.com/txfence/txfence/ledger/cmd/ledgerd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build services: %v\n%s", err, out)
	}
	return dir
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
