package txmanagerd_test

import (
	"context"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/txmanagerd"
)

// TestRestoreFromABackupNeverSendsTwice restores txmanager's database from
// a pg_dump taken before the signer's last transactions were sent, as an
// operator recovering from a lost database would, then goes on taking
// transactions. The dump holds 20 transactions broadcast and not yet mined,
// and 30 accepted but given no nonce yet; after it, those 30 and 50 more
// are sent and mined. After the restore:
//   - no intent is sent twice: each value (request r-i pays i+1 wei) is
//     mined exactly once, and the chain's every transaction of the signer
//     is one of the 200;
//   - the 50 the backup knew end CONFIRMED at the nonces the chain holds
//     them (20 found by hash, 30 found in their blocks and recorded as sent);
//   - the 50 it never knew are reported (the unknown mined nonces metric);
//   - 100 new transactions take nonces 100 to 199, none the chain used.
func TestRestoreFromABackupNeverSendsTwice(t *testing.T) {
	t.Parallel()
	c := newCluster(t, map[string]string{txmanagerd.Spec.EnvPrefix + "OPS_ADDR": "127.0.0.1:0"})
	ctx := context.Background()
	client := servicetest.Client(t, c.pki, "gateway", "txmanager")
	create := func(url string, from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			resp, err := client.Post(url+"/internal/v1/tx", "application/json", strings.NewReader(intentBody(c, i)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create r-%d: %d", i, resp.StatusCode)
			}
		}
	}
	pool, err := pgxpool.New(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { pool.Close() }()
	count := func(where string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM tx WHERE `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil := func(what string, mine bool, done func() bool, nodes ...*servicetest.Process) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		tick := time.NewTicker(100 * time.Millisecond) // the pace of blocks
		defer tick.Stop()
		for !done() {
			if time.Now().After(deadline) {
				for _, n := range nodes {
					t.Logf("node logs:\n%s", n.Logs())
				}
				t.Fatalf("%s: not within three minutes", what)
			}
			if mine {
				if err := c.stack.Node.Mine(ctx, 1); err != nil {
					t.Fatal(err)
				}
			}
			<-tick.C
		}
	}
	stop := func(p *servicetest.Process) {
		t.Helper()
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(30 * time.Second); err != nil && !strings.Contains(err.Error(), "exit status") {
			t.Fatal(err)
		}
	}

	// Before the backup: 20 broadcast (no block is mined yet), then, with
	// no node running, 30 accepted that get no nonce before it.
	a := c.node(t, "node-a")
	create(a.URL("internal"), 0, 20)
	waitUntil("20 broadcast", false, func() bool { return count(`state = 'BROADCASTED'`) == 20 }, a)
	stop(a)
	store := postgres.New(pool)
	for i := 20; i < 50; i++ {
		if _, _, err := store.Create(ctx, intent(c, i)); err != nil {
			t.Fatal(err)
		}
	}
	restore := pgtest.Backup(t, c.db)

	// After it: everything is sent and mined, 50 more included.
	b := c.node(t, "node-b")
	create(b.URL("internal"), 50, 100)
	waitUntil("100 confirmed before the restore", true, func() bool { return count(`state = 'CONFIRMED'`) == 100 }, b)
	stop(b)

	// The database is lost and restored from the backup.
	pool.Close()
	restore()
	if pool, err = pgxpool.New(ctx, c.db); err != nil {
		t.Fatal(err)
	}
	if n := count(`state = 'INIT'`); n != 30 {
		t.Fatalf("the restored database holds %d transactions waiting for a nonce, want 30", n)
	}
	node := servicetest.StartProcess(t, c.bin, nil, c.env("node-c"), "internal", "ops")
	create(node.URL("internal"), 100, 200)
	waitUntil("every transaction confirmed after the restore", true, func() bool { return count(`state = 'CONFIRMED'`) == 150 }, node)

	// The chain: 200 transactions of the signer, each intent once.
	mined, err := c.stack.Node.Client().NonceAt(ctx, c.from, nil)
	if err != nil || mined != 200 {
		t.Errorf("the signer's mined nonce is %d (%v), want 200", mined, err)
	}
	head, err := c.stack.Node.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(c.stack.Node.ChainID()))
	paid := map[uint64]int{}
	nonceOf := map[uint64]uint64{} // value → nonce
	for n := uint64(1); n <= head; n++ {
		block, err := c.stack.Node.Client().BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range block.Transactions() {
			if from, _ := types.Sender(signer, tx); from != c.from {
				continue
			}
			paid[tx.Value().Uint64()]++
			nonceOf[tx.Value().Uint64()] = tx.Nonce()
		}
	}
	for i := range 200 {
		if paid[uint64(i+1)] != 1 {
			t.Errorf("r-%d was mined %d times", i, paid[uint64(i+1)])
		}
	}
	// The database: every transaction it knows, at the nonce the chain
	// holds it.
	rows, err := pool.Query(ctx, `SELECT request_id, nonce, state FROM tx ORDER BY nonce`)
	if err != nil {
		t.Fatal(err)
	}
	var id, state string
	var nonce int64
	known := 0
	_, err = pgx.ForEachRow(rows, []any{&id, &nonce, &state}, func() error {
		known++
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "r-"))
		if state != "CONFIRMED" || uint64(nonce) != nonceOf[uint64(i+1)] {
			t.Errorf("%s: %s at nonce %d, the chain holds it at %d", id, state, nonce, nonceOf[uint64(i+1)])
		}
		return nil
	})
	if err != nil || known != 150 {
		t.Errorf("%d transactions in the restored database (%v), want 150", known, err)
	}
	var found int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM event WHERE type = 'tx.state_changed' AND payload->>'reason' LIKE $1`,
		txmanager.ReasonFoundMined+"%").Scan(&found); err != nil || found != 30 {
		t.Errorf("%d transactions recorded as found mined (%v), want 30", found, err)
	}
	if got := metric(t, node.URL("ops"), "txfence_txmanager_unknown_mined_nonces_total"); got != 50 {
		t.Errorf("unknown mined nonces reported: %v, want 50 (r-50 to r-99, sent after the backup)", got)
	}
}

// intent is request r-i of the restore test: i+1 wei to one address, so
// that the chain tells every intent apart.
func intent(c *cluster, i int) *txmanager.Intent {
	to := common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	return &txmanager.Intent{ChainID: c.stack.Node.ChainID(), From: c.from, RequestID: fmt.Sprintf("r-%d", i), To: &to,
		Value: big.NewInt(int64(i + 1)), Route: txmanager.RoutePublic}
}

func intentBody(c *cluster, i int) string {
	return fmt.Sprintf(`{"chain_id": %d, "from": %q, "request_id": "r-%d", "to": "0x0000000000000000000000000000000000000b0b",
		"value": "%d", "route": "public"}`, c.stack.Node.ChainID(), c.from.Hex(), i, i+1)
}

// metric is the sum of a counter's series on a process's ops listener.
func metric(t *testing.T, opsURL, name string) float64 {
	t.Helper()
	resp, err := http.Get(opsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`(?:\{[^}]*\})? (\S+)$`).FindAllStringSubmatch(string(body), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}
