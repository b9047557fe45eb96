package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// chainsRig is two anvil chains, A (31337) and B (31338), one txmanager
// feed over mutual TLS, and the ledger's store and consumer; the consumer
// reads A through an endpoint the test takes down and brings back. The
// first two dev accounts of each chain are wallets opened at genesis.
type chainsRig struct {
	a, b  *anvil.Node
	endA  *ledgertest.Endpoint
	txm   *txmanagertest.Server
	store *postgres.Store
	pool  *pgxpool.Pool
	c     *consumer.Consumer
	logs  *logtest.Buffer
	// opened are the wallets' balances at genesis, by chain.
	opened map[uint64]map[common.Address]*big.Int
}

func newChainsRig(t *testing.T) *chainsRig {
	t.Helper()
	r := &chainsRig{a: chaintest.Anvil(t, anvil.Options{}), b: chaintest.Anvil(t, anvil.Options{ChainID: 31338}), logs: &logtest.Buffer{},
		opened: map[uint64]map[common.Address]*big.Int{}}
	r.endA = ledgertest.NewEndpoint(t, r.a.URL())
	endA, err := rpc.Dial(r.endA.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(endA.Close)
	pki := servicetest.PKI(t)
	r.txm = txmanagertest.Serve(t, pki, txmanagertest.Options{})
	api := r.txm.API(t, "ledger")
	r.store, r.pool = ledgertest.Store(t)
	r.c = &consumer.Consumer{Store: r.store, API: api, Log: slog.New(slog.NewJSONHandler(r.logs, nil)), Wait: 200 * time.Millisecond,
		Readers: map[uint64]*chain.Reader{r.a.ChainID(): chain.NewReader(endA, r.a.ChainID()), r.b.ChainID(): chain.NewReader(r.b.RPC(), r.b.ChainID())}}
	ctx := context.Background()
	for _, node := range []*anvil.Node{r.a, r.b} {
		genesis, err := node.Client().HeaderByNumber(ctx, big.NewInt(0))
		if err != nil {
			t.Fatal(err)
		}
		r.opened[node.ChainID()] = map[common.Address]*big.Int{}
		for _, a := range node.Accounts()[:2] {
			held, err := node.Client().BalanceAt(ctx, a.Address, big.NewInt(0))
			if err != nil {
				t.Fatal(err)
			}
			r.opened[node.ChainID()][a.Address] = held
			if _, err := r.pool.Exec(ctx, `INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', 0, $3)`,
				int64(node.ChainID()), a.Address.Bytes(), genesis.Hash().Bytes()); err != nil {
				t.Fatal(err)
			}
			k := ledger.AccountKey{ChainID: node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: a.Address}
			equity := k
			equity.Kind = ledger.OpeningBalance
			if _, err := r.store.Post(ctx, &ledger.Journal{Kind: ledger.Opening, Key: fmt.Sprintf("opening:%d:%s", node.ChainID(), a.Address.Hex()),
				ChainID: node.ChainID(), Block: &ledger.Block{Number: 0, Hash: genesis.Hash()},
				Legs: []ledger.Leg{{Account: k, Amount: held}, {Account: equity, Amount: new(big.Int).Neg(held)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// settled is a settlement of the feed: the transaction and its receipt.
type settled struct {
	id      uuid.UUID
	receipt *types.Receipt
}

// settle sends wei from dev account from of node to to, makes it a
// transaction of txmanager's, and writes the event ending it CONFIRMED in
// its block.
func (r *chainsRig) settle(t *testing.T, node *anvil.Node, from int, to common.Address, wei int64) settled {
	t.Helper()
	acct := node.Accounts()[from]
	tx, _, err := r.txm.Store.Create(context.Background(), &txmanager.Intent{ChainID: node.ChainID(), From: acct.Address,
		RequestID: uuid.NewString(), To: &to, Value: big.NewInt(wei), Data: []byte{}, Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	s := settled{id: tx.ID, receipt: chaintest.Transfer(t, node, acct.Key, to, big.NewInt(wei))}
	r.confirmed(t, s)
	return s
}

func (r *chainsRig) confirmed(t *testing.T, s settled) {
	t.Helper()
	r.txm.WriteEvents(t, txmanagertest.Event{TxID: s.id, Type: txmanager.EventStateChanged, Payload: map[string]any{"from_state": "BROADCASTED",
		"to_state": "CONFIRMED", "hash": s.receipt.TxHash, "block_number": s.receipt.BlockNumber.Uint64(), "block_hash": s.receipt.BlockHash}})
}

func (r *chainsRig) reorged(t *testing.T, s settled) {
	t.Helper()
	r.txm.WriteEvents(t, txmanagertest.Event{TxID: s.id, Type: txmanager.EventReorged, Payload: map[string]any{"hash": s.receipt.TxHash,
		"block_number": s.receipt.BlockNumber.Uint64(), "block_hash": s.receipt.BlockHash, "from_state": "CONFIRMED", "to_state": "BROADCASTED"}})
}

// step steps the consumer until it has read the whole feed and books
// nothing more at once.
func (r *chainsRig) step(t *testing.T) {
	t.Helper()
	stepUntilIdle(t, r.c)
}

// stepUntil steps the consumer until cond holds, for at most a minute.
func (r *chainsRig) stepUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !cond() {
		if _, err := r.c.Step(ctx); err != nil {
			t.Fatalf("waiting for %s: step: %v\nlogs:\n%s", what, err, r.logs)
		}
	}
}

// head is the feed's last seq.
func (r *chainsRig) head(t *testing.T) uint64 {
	t.Helper()
	var last uint64
	if err := r.txm.Pool.QueryRow(context.Background(), `SELECT last_seq FROM event_sequence`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return last
}

// backlog is the seqs of node's events in the backlog, in order.
func (r *chainsRig) backlog(t *testing.T, node *anvil.Node) []uint64 {
	t.Helper()
	return seqs(t, r.pool, `SELECT seq FROM feed_backlog WHERE feed = $1 AND chain_id = $2 ORDER BY seq`, consumer.Feed, int64(node.ChainID()))
}

// seqsOf are the seqs of the feed's events of transactions ids of types.
func (r *chainsRig) seqsOf(t *testing.T, ids []uuid.UUID) []uint64 {
	t.Helper()
	return seqs(t, r.txm.Pool, `SELECT seq FROM event WHERE tx_id = ANY($1)
		AND (type = $2 OR payload->>'to_state' = 'CONFIRMED') ORDER BY seq`, ids, txmanager.EventReorged)
}

// seqs are the sequence numbers query reads from pool, in its order.
func seqs(t *testing.T, pool *pgxpool.Pool, query string, args ...any) []uint64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	var seq uint64
	if _, err := pgx.ForEachRow(rows, []any{&seq}, func() error { out = append(out, seq); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// requireTiesOut fails t unless node's wallets' books equal their
// balances on node; unmoved, unless they equal their openings.
func (r *chainsRig) requireTiesOut(t *testing.T, node *anvil.Node, moved bool, what string) {
	t.Helper()
	ctx := context.Background()
	for w, opened := range r.opened[node.ChainID()] {
		want := opened
		if moved {
			var err error
			if want, err = node.Client().BalanceAt(ctx, w, nil); err != nil {
				t.Fatal(err)
			}
		}
		booked, err := r.store.Balance(ctx, ledger.AccountKey{ChainID: node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: w})
		if err != nil {
			t.Fatalf("%s: wallet %s of chain %d: %v", what, w, node.ChainID(), err)
		}
		if booked.Cmp(want) != 0 {
			t.Errorf("%s: wallet %s of chain %d: the books hold %s, want %s", what, w, node.ChainID(), booked, want)
		}
	}
}

// journalsOf counts the journals booked of transaction hash.
func (r *chainsRig) journalsOf(t *testing.T, hash common.Hash) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM journal WHERE tx_hash = $1`, hash.Bytes()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// While chain A's endpoint is down, the feed goes on for chain B: B's
// settlements, interleaved with A's in the feed, are booked at once, and
// A's wait in the backlog, in the feed's order, the cursor past them.
// Once A's endpoint is back, A's backlog is booked in that order: A's
// transaction whose block left the chain and came back (confirmed,
// reorged, confirmed again) is booked, reversed and booked again, as it
// would have been with no trouble. Both chains' books tie out with them.
func TestAChainsTroubleHoldsOnlyItsOwnEvents(t *testing.T) {
	t.Parallel()
	r := newChainsRig(t)
	ctx := context.Background()
	stranger := common.HexToAddress("0x0000000000000000000000000000000000005707")
	r.endA.Down()

	var onA, onB []settled
	onA = append(onA, r.settle(t, r.a, 0, stranger, 1_000))
	onB = append(onB, r.settle(t, r.b, 0, stranger, 2_000))
	flipping := r.settle(t, r.a, 1, r.a.Accounts()[0].Address, 3_000) // between A's wallets
	onA = append(onA, flipping)
	onB = append(onB, r.settle(t, r.b, 1, r.b.Accounts()[0].Address, 4_000))
	r.reorged(t, flipping) // the feed alone says the block left, and came back
	onB = append(onB, r.settle(t, r.b, 0, stranger, 5_000))
	r.confirmed(t, flipping)
	onA = append(onA, r.settle(t, r.a, 0, stranger, 6_000))

	r.step(t)
	if c, err := r.store.Cursor(ctx, consumer.Feed); err != nil || c != r.head(t) {
		t.Fatalf("the cursor is at %d (%v), want the feed's head %d: chain A's trouble held it", c, err, r.head(t))
	}
	for _, s := range onB {
		if n := r.journalsOf(t, s.receipt.TxHash); n != 1 {
			t.Errorf("chain B's %s: %d journals, want 1", s.receipt.TxHash, n)
		}
	}
	r.requireTiesOut(t, r.b, true, "chain B, A's endpoint down")
	r.requireTiesOut(t, r.a, false, "chain A, its endpoint down")
	ids := make([]uuid.UUID, len(onA))
	for i, s := range onA {
		ids[i] = s.id
	}
	want := r.seqsOf(t, ids)
	if got := r.backlog(t, r.a); !slices.Equal(got, want) {
		t.Errorf("chain A's backlog holds events %v, want its settlements and reorg %v", got, want)
	}
	if got := r.backlog(t, r.b); len(got) != 0 {
		t.Errorf("chain B's events %v are in the backlog", got)
	}
	// An endpoint down for less than BacklogAlertAfter is a warning.
	if alerts := r.logs.Alerts(t); len(alerts) != 0 {
		t.Errorf("alerts %v, want none yet", alerts)
	}
	if !strings.Contains(r.logs.String(), `"msg":"ledger: a chain's events wait in the feed backlog; the feed goes on for the other chains","chain_id":31337,"reason":"endpoint"`) {
		t.Errorf("no warning that chain A's events wait for its endpoint:\n%s", r.logs)
	}

	r.endA.Up()
	r.stepUntil(t, "chain A's backlog booked", func() bool { return len(r.backlog(t, r.a)) == 0 })
	r.step(t)
	r.requireTiesOut(t, r.a, true, "chain A, its endpoint back")
	r.requireTiesOut(t, r.b, true, "chain B, A's endpoint back")
	if n := r.journalsOf(t, flipping.receipt.TxHash); n != 3 {
		t.Errorf("A's transaction whose block left and came back: %d journals, want its booking, reversal and booking again", n)
	}
	for _, s := range []settled{onA[0], onA[2]} {
		if n := r.journalsOf(t, s.receipt.TxHash); n != 1 {
			t.Errorf("chain A's %s: %d journals, want 1", s.receipt.TxHash, n)
		}
	}
}

// A chain ledgerd has halted is not read at all: its settlements go to
// the backlog unread, with one alert, while the other chain's are booked;
// once a consumer that has not halted it runs (ledgerd restarted), the
// backlog is booked and the chain follows the feed again.
func TestAHaltedChainsEventsWaitUnread(t *testing.T) {
	t.Parallel()
	r := newChainsRig(t)
	var halted atomic.Bool
	halted.Store(true)
	r.c.Halted = func(id uint64) bool { return id == r.a.ChainID() && halted.Load() }
	stranger := common.HexToAddress("0x0000000000000000000000000000000000005707")
	var onA []settled
	for i := range 3 {
		onA = append(onA, r.settle(t, r.a, i%2, stranger, int64(1_000+i)))
		r.settle(t, r.b, i%2, stranger, int64(2_000+i))
	}
	before := r.endA.Requests()
	r.step(t)
	r.step(t) // again: a halted chain's backlog is not tried either
	if n := r.endA.Requests() - before; n != 0 {
		t.Errorf("%d requests to the halted chain's endpoint", n)
	}
	r.requireTiesOut(t, r.b, true, "chain B, A halted")
	r.requireTiesOut(t, r.a, false, "chain A, halted")
	if got := r.backlog(t, r.a); len(got) != len(onA) {
		t.Errorf("chain A's backlog holds %v, want its %d settlements", got, len(onA))
	}
	var alerts []map[string]any
	for _, rec := range r.logs.Alerts(t) {
		if strings.Contains(fmt.Sprint(rec["msg"]), "feed backlog") {
			alerts = append(alerts, rec)
		}
	}
	if len(alerts) != 1 || alerts[0]["chain_id"] != float64(r.a.ChainID()) || alerts[0]["reason"] != ledger.BacklogHalted {
		t.Errorf("backlog alerts %v, want one, of chain A, halted", alerts)
	}

	halted.Store(false)
	r.stepUntil(t, "chain A's backlog booked", func() bool { return len(r.backlog(t, r.a)) == 0 })
	r.requireTiesOut(t, r.a, true, "chain A, no longer halted")
	for _, s := range onA {
		if n := r.journalsOf(t, s.receipt.TxHash); n != 1 {
			t.Errorf("chain A's %s: %d journals, want 1", s.receipt.TxHash, n)
		}
	}
	if !strings.Contains(r.logs.String(), "the chain follows the feed again") {
		t.Errorf("no line saying chain A follows the feed again:\n%s", r.logs)
	}
}
