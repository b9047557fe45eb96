package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/ledgertest/token"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/ledger/reconcile"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// rig is a chain and the ledger's books of it, with the scanner's and the
// feed's work done by hand: openings, journals, the scan cursor and the
// transactions wallets sent.
type rig struct {
	node  *anvil.Node
	store *postgres.Store
	pool  *pgxpool.Pool
	chain uint64
	logs  *logtest.Buffer
	rec   *reconcile.Reconciler
	// wallet is a dev account the ledger books, sending with its key;
	// outsider is a dev account it does not.
	wallet, outsider anvil.Account
}

func newRig(t *testing.T) *rig {
	t.Helper()
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	store, pool := ledgertest.Store(t)
	logs := &logtest.Buffer{}
	r := &rig{node: node, store: store, pool: pool, chain: node.ChainID(), logs: logs,
		wallet: node.Accounts()[1], outsider: node.Accounts()[2]}
	r.rec = r.reconciler(store)
	return r
}

// reconciler reconciles the rig's chain in store, one block below the head.
func (r *rig) reconciler(store *postgres.Store) *reconcile.Reconciler {
	// Wait: the shortest, so that a refusal comes at once.
	return &reconcile.Reconciler{Store: store, Chains: map[uint64]*rpc.Client{r.chain: r.node.RPC()}, Depth: 1, Wait: time.Nanosecond,
		Log: slog.New(slog.NewJSONHandler(r.logs, nil))}
}

// feedBookedTo sets the feed consumer's cursor, as if it had booked the
// feed up to seq.
func (r *rig) feedBookedTo(t *testing.T, feed string, seq uint64) {
	t.Helper()
	if _, err := r.pool.Exec(context.Background(), `INSERT INTO feed_cursor (feed, seq) VALUES ($1, $2)
		ON CONFLICT (feed) DO UPDATE SET seq = $2`, feed, int64(seq)); err != nil {
		t.Error(err)
	}
}

func (r *rig) head(t *testing.T) ledger.Block {
	t.Helper()
	h, err := r.node.Client().HeaderByNumber(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Block{Number: h.Number.Uint64(), Hash: h.Hash()}
}

func (r *rig) block(t *testing.T, number uint64) ledger.Block {
	t.Helper()
	h, err := r.node.Client().HeaderByNumber(context.Background(), new(big.Int).SetUint64(number))
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Block{Number: number, Hash: h.Hash()}
}

func (r *rig) account(kind ledger.AccountKind, asset string, addr common.Address) ledger.AccountKey {
	return ledger.AccountKey{ChainID: r.chain, Asset: asset, Kind: kind, Address: addr}
}

// open opens wallet at the head block, as the scanner does: its balances
// there (native, and each token) are its opening journal.
func (r *rig) open(t *testing.T, wallet common.Address, tokens ...common.Address) ledger.Block {
	t.Helper()
	ctx := context.Background()
	at := r.head(t)
	if _, err := r.pool.Exec(ctx, `
		INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', $3, $4)`,
		int64(r.chain), wallet.Bytes(), int64(at.Number), at.Hash.Bytes()); err != nil {
		t.Fatal(err)
	}
	var legs []ledger.Leg
	held, err := r.node.Client().BalanceAt(ctx, wallet, new(big.Int).SetUint64(at.Number))
	if err != nil {
		t.Fatal(err)
	}
	add := func(asset string, amount *big.Int) {
		if amount.Sign() != 0 {
			legs = append(legs, ledger.Leg{Account: r.account(ledger.Wallet, asset, wallet), Amount: amount},
				ledger.Leg{Account: r.account(ledger.OpeningBalance, asset, wallet), Amount: new(big.Int).Neg(amount)})
		}
	}
	add(ledger.Native, held)
	for _, tok := range tokens {
		add(asset(tok), token.BalanceOf(t, r.node, tok, wallet, at.Hash))
	}
	if len(legs) > 0 {
		r.post(t, &ledger.Journal{Kind: ledger.Opening, Key: fmt.Sprintf("opening:%d:%s:%s", r.chain, wallet.Hex(), at.Hash.Hex()),
			ChainID: r.chain, Block: &at, Legs: legs})
	}
	return at
}

func (r *rig) post(t *testing.T, j *ledger.Journal) int64 {
	t.Helper()
	p, err := r.store.Post(context.Background(), j)
	if err != nil {
		t.Fatalf("post %s: %v", j.Key, err)
	}
	return p.JournalID
}

// book books a settled transaction of the rig's wallet, as the feed
// consumer would: the value to the counterparty, the fee to fee expense.
func (r *rig) book(t *testing.T, rc *types.Receipt, to common.Address, value *big.Int) {
	t.Helper()
	fee := new(big.Int).Mul(new(big.Int).SetUint64(rc.GasUsed), rc.EffectiveGasPrice)
	from := r.wallet.Address
	legs := []ledger.Leg{
		{Account: r.account(ledger.Wallet, ledger.Native, from), Amount: new(big.Int).Neg(fee)},
		{Account: r.account(ledger.FeeExpense, ledger.Native, from), Amount: fee},
	}
	if value.Sign() != 0 {
		legs = append(legs, ledger.Leg{Account: r.account(ledger.Wallet, ledger.Native, from), Amount: new(big.Int).Neg(value)},
			ledger.Leg{Account: r.account(ledger.Counterparty, ledger.Native, to), Amount: value})
	}
	r.post(t, &ledger.Journal{Kind: ledger.Confirmed, Key: ledger.TxKey(r.chain, rc.TxHash, rc.BlockHash), ChainID: r.chain,
		TxHash: &rc.TxHash, Block: &ledger.Block{Number: rc.BlockNumber.Uint64(), Hash: rc.BlockHash}, Status: "success",
		Legs: legs})
}

// sent records that the scanner saw the wallet send rc's transaction.
func (r *rig) sent(t *testing.T, rc *types.Receipt) {
	t.Helper()
	if _, err := r.pool.Exec(context.Background(), `
		INSERT INTO wallet_tx (chain_id, tx_hash, block_hash, block_number, sender) VALUES ($1, $2, $3, $4, $5)`,
		int64(r.chain), rc.TxHash.Bytes(), rc.BlockHash.Bytes(), rc.BlockNumber.Int64(), r.wallet.Address.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// scanned moves the scan cursor to block.
func (r *rig) scanned(t *testing.T, b ledger.Block) {
	t.Helper()
	if _, err := r.pool.Exec(context.Background(), `
		INSERT INTO scan_cursor (chain_id, block_number, block_hash) VALUES ($1, $2, $3)
		ON CONFLICT (chain_id) DO UPDATE SET block_number = $2, block_hash = $3, updated_at = now()`,
		int64(r.chain), int64(b.Number), b.Hash.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// settle mines a block, so that what was sent so far is one block below
// the head (where the rig's reconciler pins), and has the scanner book up
// to the head. It returns the block a run will pin.
func (r *rig) settle(t *testing.T) ledger.Block {
	t.Helper()
	if err := r.node.Mine(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	head := r.head(t)
	r.scanned(t, head)
	return r.block(t, head.Number-1)
}

func (r *rig) reconcile(t *testing.T, rec *reconcile.Reconciler) *ledger.ReconciliationRun {
	t.Helper()
	run, err := rec.Reconcile(context.Background(), r.chain, ledger.TriggerRequest)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return run
}

func (r *rig) balance(t *testing.T, k ledger.AccountKey) *big.Int {
	t.Helper()
	b, err := r.store.Balance(context.Background(), k)
	if errs.Is(err, errs.NotFound) {
		return new(big.Int)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r *rig) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// item finds the item of addr and asset.
func item(t *testing.T, run *ledger.ReconciliationRun, addr common.Address, asset string) ledger.ReconciliationItem {
	t.Helper()
	for _, it := range run.Items {
		if it.Address == addr && it.Asset == asset {
			return it
		}
	}
	t.Fatalf("run %d has no item for %s %s: %+v", run.ID, addr, asset, run.Items)
	return ledger.ReconciliationItem{}
}

// requireStored fails t unless the store serves run as it was returned.
func (r *rig) requireStored(t *testing.T, run *ledger.ReconciliationRun) {
	t.Helper()
	got, err := r.store.ReconciliationRun(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(normal(run))
	have, _ := json.Marshal(normal(got))
	if !bytes.Equal(want, have) {
		t.Errorf("stored run differs from the returned one:\nreturned %s\nstored   %s", want, have)
	}
}

// normal is run with its times to the microsecond the database keeps.
func normal(run *ledger.ReconciliationRun) ledger.ReconciliationRun {
	n := *run
	n.StartedAt, n.FinishedAt = n.StartedAt.UTC().Truncate(time.Microsecond), n.FinishedAt.UTC().Truncate(time.Microsecond)
	return n
}

func eth(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), chaintest.Ether) }

var bob = common.HexToAddress("0x0000000000000000000000000000000000000b0b")

// When the books hold every movement, at the node's finalized block,
// every wallet ties out and nothing is booked.
func TestEverythingBookedTiesOut(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.open(t, r.wallet.Address)
	rc := chaintest.Transfer(t, r.node, r.wallet.Key, bob, eth(2))
	r.sent(t, rc)
	r.book(t, rc, bob, eth(2))
	// Anvil's finalized block is the head less 64.
	if err := r.node.Mine(ctx, 64); err != nil {
		t.Fatal(err)
	}
	r.scanned(t, r.head(t))
	rec := r.reconciler(r.store)
	rec.Depth = 0

	run := r.reconcile(t, rec)
	if run.Block != r.block(t, rc.BlockNumber.Uint64()) {
		t.Errorf("pinned %+v, want the finalized block %d", run.Block, rc.BlockNumber)
	}
	if run.Status != ledger.RunComplete || run.Problem != "" || run.Differences != 0 || run.Deferred != 0 || run.Trigger != ledger.TriggerRequest {
		t.Errorf("run %+v: want complete, no differences", run)
	}
	if len(run.Items) != 1 {
		t.Fatalf("items %+v: want the wallet's native only", run.Items)
	}
	it := run.Items[0]
	onChain, err := r.node.Client().BalanceAt(ctx, r.wallet.Address, rc.BlockNumber)
	if err != nil {
		t.Fatal(err)
	}
	if it.Address != r.wallet.Address || it.Asset != ledger.Native || it.Ledger.Cmp(onChain) != 0 || it.Chain.Cmp(onChain) != 0 ||
		it.Difference.Sign() != 0 || it.Cause != "" || it.JournalID != 0 || it.Negative || len(it.Pending) != 0 {
		t.Errorf("item %+v: want ledger = chain = %s, no difference", it, onChain)
	}
	if n := r.count(t, `SELECT count(*) FROM journal WHERE kind = 'reconciliation'`); n != 0 {
		t.Errorf("%d reconciliation journals, want none", n)
	}
	if s := r.balance(t, r.account(ledger.Suspense, ledger.Native, r.wallet.Address)); s.Sign() != 0 {
		t.Errorf("suspense %s, want nothing", s)
	}
	r.requireStored(t, run)
	if strings.Contains(r.logs.String(), `"alert":true`) {
		t.Errorf("alerts raised: %s", r.logs)
	}
}

// A transfer the ledger never booked is found at the pinned block, booked
// to the wallet's suspense account once, with its cause and an alert;
// runs after it find the wallet tied out.
func TestAnUnbookedMovementGoesToSuspenseOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.open(t, r.wallet.Address)
	gift := big.NewInt(123_456_789)
	chaintest.Transfer(t, r.node, r.outsider.Key, r.wallet.Address, gift)
	pinned := r.settle(t)

	run := r.reconcile(t, r.rec)
	if run.Block != pinned || run.Status != ledger.RunComplete || run.Differences != 1 {
		t.Fatalf("run %+v: want a complete run at %+v with one difference", run, pinned)
	}
	it := item(t, run, r.wallet.Address, ledger.Native)
	if it.Difference.Cmp(gift) != 0 || new(big.Int).Sub(it.Chain, it.Ledger).Cmp(gift) != 0 {
		t.Errorf("item %+v: want a difference of %s", it, gift)
	}
	if !strings.HasPrefix(it.Cause, "inbound movement the ledger did not see") || it.JournalID == 0 {
		t.Errorf("item %+v: want the inbound cause and a journal", it)
	}
	if s := r.balance(t, r.account(ledger.Suspense, ledger.Native, r.wallet.Address)); s.Cmp(new(big.Int).Neg(gift)) != 0 {
		t.Errorf("suspense %s, want -%s", s, gift)
	}
	_, j, err := r.store.Journal(ctx, reconcile.Key(r.chain, pinned.Hash, r.wallet.Address, ledger.Native))
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != ledger.Reconciliation || *j.Block != pinned {
		t.Errorf("journal %+v: want a reconciliation at %+v", j, pinned)
	}
	var memo map[string]any
	if err := r.pool.QueryRow(ctx, `SELECT memo FROM journal WHERE journal_id = $1`, it.JournalID).Scan(&memo); err != nil {
		t.Fatal(err)
	}
	if memo["cause"] != it.Cause || memo["run_id"] != float64(run.ID) || memo["ledger_balance"] != it.Ledger.String() || memo["chain_balance"] != it.Chain.String() {
		t.Errorf("memo %v: want the item's cause, run and balances", memo)
	}
	logs := r.logs.String()
	if !strings.Contains(logs, `"alert":true`) || !strings.Contains(logs, `"amount":"`+gift.String()+`"`) || !strings.Contains(logs, `"cause":"inbound`) {
		t.Errorf("no alert naming the difference: %s", logs)
	}
	r.requireStored(t, run)

	again := r.reconcile(t, r.rec)
	if again.Block != pinned || again.Differences != 0 || again.ID == run.ID {
		t.Errorf("second run at the same block %+v: want no difference", again)
	}
	if it := item(t, again, r.wallet.Address, ledger.Native); it.Difference.Sign() != 0 || it.JournalID != 0 {
		t.Errorf("second run's item %+v: want tied out", it)
	}
	later := r.settle(t)
	after := r.reconcile(t, r.rec)
	if after.Block != later || after.Differences != 0 || after.Status != ledger.RunComplete {
		t.Errorf("run at a later block %+v: want tied out at %+v", after, later)
	}
	if n := r.count(t, `SELECT count(*) FROM journal WHERE kind = 'reconciliation'`); n != 1 {
		t.Errorf("%d reconciliation journals, want 1", n)
	}
}

// A wallet's transaction the feed has not booked defers the wallet while
// it is young; without grace it is compared, and the cause names it.
func TestAPendingTransactionDefersTheWallet(t *testing.T) {
	r := newRig(t)
	r.open(t, r.wallet.Address)
	rc := chaintest.Transfer(t, r.node, r.wallet.Key, bob, big.NewInt(1000))
	r.sent(t, rc)
	pinned := r.settle(t)

	run := r.reconcile(t, r.rec)
	it := item(t, run, r.wallet.Address, ledger.Native)
	if run.Status != ledger.RunIncomplete || run.Deferred != 1 || !strings.Contains(run.Problem, "deferred") {
		t.Errorf("run %+v: want incomplete, one deferred", run)
	}
	if it.Difference != nil || it.JournalID != 0 || len(it.Pending) != 1 || it.Pending[0] != rc.TxHash || !strings.Contains(it.Cause, rc.TxHash.Hex()) {
		t.Errorf("item %+v: want deferred on %s", it, rc.TxHash)
	}
	if n := r.count(t, `SELECT count(*) FROM journal WHERE kind = 'reconciliation'`); n != 0 {
		t.Errorf("%d reconciliation journals, want none while deferred", n)
	}
	r.requireStored(t, run)

	rec := r.reconciler(r.store)
	rec.Grace = reconcile.NoGrace
	run = r.reconcile(t, rec)
	it = item(t, run, r.wallet.Address, ledger.Native)
	fee := new(big.Int).Mul(new(big.Int).SetUint64(rc.GasUsed), rc.EffectiveGasPrice)
	spent := new(big.Int).Add(fee, big.NewInt(1000))
	if run.Block != pinned || run.Status != ledger.RunComplete || it.Difference.Cmp(new(big.Int).Neg(spent)) != 0 || it.JournalID == 0 {
		t.Errorf("run %+v item %+v: want -%s booked", run, it, spent)
	}
	if !strings.Contains(it.Cause, rc.TxHash.Hex()) || !strings.Contains(it.Cause, "sent outside txfence, or never settled by txmanager") {
		t.Errorf("cause %q: want it to name %s", it.Cause, rc.TxHash)
	}
	if s := r.balance(t, r.account(ledger.Suspense, ledger.Native, r.wallet.Address)); s.Cmp(spent) != 0 {
		t.Errorf("suspense %s, want %s", s, spent)
	}

	// The feed books it late, in the block reconciled: the next run finds
	// the opposite difference, which nets suspense back.
	r.book(t, rc, bob, big.NewInt(1000))
	r.settle(t)
	run = r.reconcile(t, rec)
	it = item(t, run, r.wallet.Address, ledger.Native)
	if it.Difference.Cmp(spent) != 0 || len(it.Pending) != 0 || !strings.Contains(it.Cause, "offsets "+spent.String()) {
		t.Errorf("item %+v: want +%s offsetting suspense", it, spent)
	}
	if s := r.balance(t, r.account(ledger.Suspense, ledger.Native, r.wallet.Address)); s.Sign() != 0 {
		t.Errorf("suspense %s, want netted to zero", s)
	}
}

// A run whose books are not complete up to the pinned block is refused
// and stores nothing: no scan cursor, one behind, a feed not caught up.
func TestIncompleteBooksAreRefused(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.open(t, r.wallet.Address)
	chaintest.Transfer(t, r.node, r.outsider.Key, r.wallet.Address, big.NewInt(5))
	if err := r.node.Mine(ctx, 1); err != nil {
		t.Fatal(err)
	}
	pinned := r.block(t, r.head(t).Number-1)
	refused := func(rec *reconcile.Reconciler, want string) {
		t.Helper()
		_, err := rec.Reconcile(ctx, r.chain, ledger.TriggerSchedule)
		if !errs.Is(err, errs.Unavailable) || !errors.Is(err, reconcile.ErrIncomplete) || !strings.Contains(err.Error(), want) {
			t.Errorf("reconcile: %v; want unavailable, incomplete, saying %q", err, want)
		}
		if n := r.count(t, `SELECT (SELECT count(*) FROM reconciliation_run) + (SELECT count(*) FROM journal WHERE kind = 'reconciliation')`); n != 0 {
			t.Errorf("%d runs and journals stored by a refused run", n)
		}
	}
	refused(r.rec, "has booked no block yet")
	r.scanned(t, r.block(t, pinned.Number-1))
	refused(r.rec, fmt.Sprintf("booked up to block %d, behind the pinned block %d", pinned.Number-1, pinned.Number))
	r.scanned(t, ledger.Block{Number: pinned.Number, Hash: common.HexToHash("0xdead")})
	refused(r.rec, "has not followed a reorganisation")
	r.scanned(t, r.head(t))

	rec := r.reconciler(r.store)
	// The feed's head as txmanager would answer it: 12 events numbered.
	rec.Feed, rec.FeedHead = "txmanager", func(context.Context) (uint64, error) { return 12, nil }
	refused(rec, "booked up to event 0, behind its head 12 when block "+fmt.Sprint(pinned.Number)+" was pinned")
	r.feedBookedTo(t, rec.Feed, 11)
	refused(rec, "booked up to event 11, behind its head 12")
	// The consumer books the rest while the run waits at its block.
	rec.Wait = time.Minute
	go r.feedBookedTo(t, rec.Feed, 12)
	if run := r.reconcile(t, rec); run.Block != pinned || run.Differences != 1 {
		t.Errorf("run %+v: want the difference found once the books are complete", run)
	}
}

// A run at a block before the newest run's is refused: the later run has
// booked what it would find.
func TestAnEarlierBlockThanTheNewestRunIsRefused(t *testing.T) {
	r := newRig(t)
	r.open(t, r.wallet.Address)
	chaintest.Transfer(t, r.node, r.outsider.Key, r.wallet.Address, big.NewInt(5))
	r.settle(t)
	r.reconcile(t, r.rec)
	rec := r.reconciler(r.store)
	rec.Depth = 3
	_, err := rec.Reconcile(context.Background(), r.chain, ledger.TriggerRequest)
	if !errs.Is(err, errs.Conflict) || !errors.Is(err, reconcile.ErrSuperseded) {
		t.Errorf("reconcile below the newest run: %v, want a conflict", err)
	}
	if n := r.count(t, `SELECT count(*) FROM reconciliation_run`); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// Books that spent more than the wallet held are flagged, with an alert.
func TestANegativeLedgerBalanceIsFlagged(t *testing.T) {
	r := newRig(t)
	empty := common.HexToAddress("0x00000000000000000000000000000000000e0e0e")
	at := r.open(t, empty)
	r.post(t, &ledger.Journal{Kind: ledger.Confirmed, Key: "tx:overspent", ChainID: r.chain, Block: &at, Legs: []ledger.Leg{
		{Account: r.account(ledger.Wallet, ledger.Native, empty), Amount: big.NewInt(-5)},
		{Account: r.account(ledger.Counterparty, ledger.Native, bob), Amount: big.NewInt(5)},
	}})
	r.settle(t)
	run := r.reconcile(t, r.rec)
	it := item(t, run, empty, ledger.Native)
	if !it.Negative || it.Ledger.Cmp(big.NewInt(-5)) != 0 || it.Chain.Sign() != 0 || it.Difference.Cmp(big.NewInt(5)) != 0 {
		t.Errorf("item %+v: want ledger -5 flagged negative, chain 0, difference 5", it)
	}
	if !strings.Contains(r.logs.String(), "ledger balance is negative") {
		t.Errorf("no alert for the negative balance: %s", r.logs)
	}
	r.requireStored(t, run)
}

// Two nodes reconciling one chain at once book each difference once.
func TestConcurrentRunsBookOnce(t *testing.T) {
	r := newRig(t)
	r.open(t, r.wallet.Address)
	r.open(t, r.outsider.Address)
	chaintest.Transfer(t, r.node, r.node.Accounts()[3].Key, r.wallet.Address, big.NewInt(77))
	chaintest.Transfer(t, r.node, r.node.Accounts()[3].Key, r.outsider.Address, big.NewInt(88))
	r.settle(t)
	nodes := []*reconcile.Reconciler{r.rec, r.reconciler(postgres.New(r.pool, nil))}
	runs := make([]*ledger.ReconciliationRun, 4)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			run, err := nodes[i%2].Reconcile(context.Background(), r.chain, ledger.TriggerSchedule)
			if err != nil {
				t.Errorf("reconcile %d: %v", i, err)
			}
			runs[i] = run
		})
	}
	wg.Wait()
	booked := 0
	for _, run := range runs {
		if run != nil {
			for _, it := range run.Items {
				if it.JournalID != 0 {
					booked++
				}
			}
		}
	}
	if booked != 2 {
		t.Errorf("%d differences booked over the runs, want 2", booked)
	}
	if n := r.count(t, `SELECT count(*) FROM journal WHERE kind = 'reconciliation'`); n != 2 {
		t.Errorf("%d reconciliation journals, want 2", n)
	}
	for addr, want := range map[common.Address]int64{r.wallet.Address: -77, r.outsider.Address: -88} {
		if s := r.balance(t, r.account(ledger.Suspense, ledger.Native, addr)); s.Cmp(big.NewInt(want)) != 0 {
			t.Errorf("suspense of %s: %s, want %d", addr, s, want)
		}
	}
}

// Runs are listed newest first, a page at a time, per chain or all.
func TestRunsArePaged(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.open(t, r.wallet.Address)
	r.settle(t)
	var ids []int64
	for range 3 {
		ids = append(ids, r.reconcile(t, r.rec).ID)
	}
	page, err := r.store.ReconciliationRuns(ctx, r.chain, 0, 2)
	if err != nil || len(page) != 2 || page[0].ID != ids[2] || page[1].ID != ids[1] || page[0].Items != nil {
		t.Fatalf("first page %+v %v: want runs %d, %d without items", page, err, ids[2], ids[1])
	}
	if page[0].Differences != 0 || page[0].Status != ledger.RunComplete || page[0].ChainID != r.chain {
		t.Errorf("listed run %+v", page[0])
	}
	next, err := r.store.ReconciliationRuns(ctx, 0, page[1].ID, 2)
	if err != nil || len(next) != 1 || next[0].ID != ids[0] {
		t.Errorf("next page %+v %v: want run %d", next, err, ids[0])
	}
	if other, err := r.store.ReconciliationRuns(ctx, r.chain+1, 0, 10); err != nil || len(other) != 0 {
		t.Errorf("another chain's runs: %+v %v, want none", other, err)
	}
	if _, err := r.store.ReconciliationRuns(ctx, r.chain, 0, 0); !errs.Is(err, errs.Invalid) {
		t.Errorf("limit 0: %v, want invalid", err)
	}
	if _, err := r.store.ReconciliationRun(ctx, ids[2]+1000); !errs.Is(err, errs.NotFound) {
		t.Errorf("no such run: %v, want not found", err)
	}
	if _, err := r.rec.Reconcile(ctx, r.chain+1, ledger.TriggerRequest); !errs.Is(err, errs.NotFound) {
		t.Errorf("a chain without an endpoint: %v, want not found", err)
	}
	if _, err := r.rec.Reconcile(ctx, r.chain, "cron"); !errs.Is(err, errs.Invalid) {
		t.Errorf("trigger cron: %v, want invalid", err)
	}
}

// Run reconciles on its schedule, logs a refusal without storing it, and
// returns only when its context ends.
func TestRunReconcilesOnSchedule(t *testing.T) {
	r := newRig(t)
	r.open(t, r.wallet.Address)
	r.settle(t)
	rec := r.reconciler(r.store)
	// A run may not outlast its interval: one short enough for the test
	// but below what a run takes on a loaded machine cut every run short
	// (20 ms did), so the interval leaves a run room.
	rec.Interval = time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	deadline := time.After(30 * time.Second)
	for r.count(t, `SELECT count(*) FROM reconciliation_run WHERE trigger = 'schedule'`) < 2 {
		select {
		case err := <-done:
			t.Fatalf("Run returned before its context ended: %v", err)
		case <-deadline:
			t.Fatal("no two scheduled runs within 30s")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Behind: the head moves past the scan cursor, and runs are refused.
	if err := r.node.Mine(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(r.logs.String(), "reconciliation postponed") {
		select {
		case <-deadline:
			t.Fatalf("no refusal logged within 30s: %s", r.logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// asset is a token's asset name.
func asset(token common.Address) string { return strings.ToLower(token.Hex()) }

// Token holdings are reconciled with balanceOf at the pinned block: the
// configured tokens and any the wallet has an account for. A configured
// token with no contract is not compared, and says so.
func TestTokenDifferencesAreFoundWithBalanceOf(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	minter, spender := r.node.Accounts()[3], r.outsider
	configured, held := token.Deploy(t, r.node, minter.Key), token.Deploy(t, r.node, minter.Key)
	nothing := common.HexToAddress("0x000000000000000000000000000000000000c0de")
	token.Mint(t, r.node, minter.Key, configured, r.wallet.Address, big.NewInt(1000))
	token.Mint(t, r.node, minter.Key, held, r.wallet.Address, big.NewInt(2000))
	r.open(t, r.wallet.Address, configured, held)
	rec := r.reconciler(r.store)
	rec.Tokens = map[uint64][]common.Address{r.chain: {configured, nothing}}

	// Booked: the wallet lets a spender move its tokens (a fee, no value).
	approve := append(common.FromHex("0x095ea7b3"), append(common.LeftPadBytes(spender.Address.Bytes(), 32), common.LeftPadBytes(big.NewInt(500).Bytes(), 32)...)...)
	rc := chaintest.SendCall(t, r.node, r.wallet.Key, chaintest.Call{To: &held, Data: approve, Gas: 100_000})
	r.sent(t, rc)
	r.book(t, rc, held, new(big.Int))
	// Not booked: a mint to the wallet, and the spender's transferFrom.
	token.Mint(t, r.node, minter.Key, configured, r.wallet.Address, big.NewInt(300))
	transferFrom := append(common.FromHex("0x23b872dd"), append(append(common.LeftPadBytes(r.wallet.Address.Bytes(), 32),
		common.LeftPadBytes(bob.Bytes(), 32)...), common.LeftPadBytes(big.NewInt(500).Bytes(), 32)...)...)
	if moved := chaintest.SendCall(t, r.node, spender.Key, chaintest.Call{To: &held, Data: transferFrom, Gas: 100_000}); moved.Status != types.ReceiptStatusSuccessful {
		t.Fatal("transferFrom reverted")
	}
	pinned := r.settle(t)

	run := r.reconcile(t, rec)
	if len(run.Items) != 4 {
		t.Fatalf("items %+v: want native and three tokens", run.Items)
	}
	for tok, want := range map[common.Address]int64{configured: 300, held: -500} {
		it := item(t, run, r.wallet.Address, asset(tok))
		onChain := token.BalanceOf(t, r.node, tok, r.wallet.Address, pinned.Hash)
		if it.Chain.Cmp(onChain) != 0 || it.Difference.Cmp(big.NewInt(want)) != 0 || it.JournalID == 0 {
			t.Errorf("token %s: item %+v, want chain %s and a difference of %d booked", tok, it, onChain, want)
		}
		if s := r.balance(t, r.account(ledger.Suspense, asset(tok), r.wallet.Address)); s.Cmp(big.NewInt(-want)) != 0 {
			t.Errorf("token %s: suspense %s, want %d", tok, s, -want)
		}
	}
	if c := item(t, run, r.wallet.Address, asset(held)).Cause; !strings.HasPrefix(c, "outbound movement the ledger did not see (a token transferFrom") {
		t.Errorf("transferFrom's cause %q", c)
	}
	if c := item(t, run, r.wallet.Address, asset(configured)).Cause; !strings.HasPrefix(c, "inbound movement") {
		t.Errorf("mint's cause %q", c)
	}
	if it := item(t, run, r.wallet.Address, ledger.Native); it.Difference.Sign() != 0 {
		t.Errorf("native %+v: want tied out", it)
	}
	none := item(t, run, r.wallet.Address, asset(nothing))
	if none.Difference != nil || none.Chain != nil || !strings.Contains(none.Cause, "has no contract") {
		t.Errorf("a token without a contract: %+v, want not compared", none)
	}
	if run.Status != ledger.RunIncomplete || run.Differences != 2 || run.Deferred != 1 || !strings.Contains(run.Problem, "not compared") {
		t.Errorf("run %+v: want incomplete with two differences and one not compared", run)
	}
	r.requireStored(t, run)
	if _, err := r.store.Balance(ctx, r.account(ledger.Suspense, ledger.Native, r.wallet.Address)); !errs.Is(err, errs.NotFound) {
		t.Errorf("a native suspense account: %v, want none", err)
	}
}

// A deposit booked after a run put it in suspense explains the
// difference: a run at the same block cannot book again under the
// block's key and says so; the next block's run books the opposite
// difference, and suspense nets back to zero.
func TestALateBookingNetsSuspenseBack(t *testing.T) {
	r := newRig(t)
	r.open(t, r.wallet.Address)
	gift := big.NewInt(4242)
	rc := chaintest.Transfer(t, r.node, r.outsider.Key, r.wallet.Address, gift)
	pinned := r.settle(t)
	first := r.reconcile(t, r.rec)
	if it := item(t, first, r.wallet.Address, ledger.Native); it.Difference.Cmp(gift) != 0 || it.JournalID == 0 {
		t.Fatalf("first run's item %+v: want %s booked", it, gift)
	}
	// The scanner books the deposit late, in the block it was settled in.
	r.post(t, &ledger.Journal{Kind: ledger.Deposit, Key: ledger.TxKey(r.chain, rc.TxHash, rc.BlockHash), ChainID: r.chain, TxHash: &rc.TxHash,
		Block: &ledger.Block{Number: rc.BlockNumber.Uint64(), Hash: rc.BlockHash}, Status: "success", Legs: []ledger.Leg{
			{Account: r.account(ledger.Wallet, ledger.Native, r.wallet.Address), Amount: gift},
			{Account: r.account(ledger.DepositSource, ledger.Native, r.outsider.Address), Amount: new(big.Int).Neg(gift)},
		}})

	same := r.reconcile(t, r.rec)
	it := item(t, same, r.wallet.Address, ledger.Native)
	if same.Block != pinned || it.Difference.Cmp(new(big.Int).Neg(gift)) != 0 || it.JournalID != 0 || !strings.Contains(it.Cause, "not booked") {
		t.Errorf("run at the same block %+v, item %+v: want -%s found, not booked", same, it, gift)
	}
	if same.Status != ledger.RunIncomplete || !strings.Contains(same.Problem, "not booked") {
		t.Errorf("run %+v: want incomplete, a difference not booked", same)
	}

	r.settle(t)
	next := r.reconcile(t, r.rec)
	it = item(t, next, r.wallet.Address, ledger.Native)
	if it.Difference.Cmp(new(big.Int).Neg(gift)) != 0 || it.JournalID == 0 || !strings.Contains(it.Cause, "offsets -"+gift.String()) {
		t.Errorf("next block's item %+v: want -%s booked, offsetting suspense", it, gift)
	}
	if s := r.balance(t, r.account(ledger.Suspense, ledger.Native, r.wallet.Address)); s.Sign() != 0 {
		t.Errorf("suspense %s, want netted to zero", s)
	}
	if after := r.reconcile(t, r.rec); after.Differences != 0 || after.Status != ledger.RunComplete {
		t.Errorf("run after %+v: want tied out", after)
	}
}
