package consumer_test

import (
	"context"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// rig is a real txmanager feed over mutual TLS, a real anvil, and the
// ledger's store and consumer.
type rig struct {
	node  *anvil.Node
	txm   *txmanagertest.Server
	store *postgres.Store
	pool  *pgxpool.Pool
	c     *consumer.Consumer
	start map[common.Address]*big.Int
}

func newRig(t testing.TB) *rig { return newRigOn(t, anvil.Options{}) }

func newRigOn(t testing.TB, opts anvil.Options) *rig {
	t.Helper()
	node := chaintest.Anvil(t, opts)
	pki := servicetest.PKI(t)
	txm := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	api := txm.API(t, "ledger")
	store, pool := ledgertest.Store(t)
	r := &rig{node: node, txm: txm, store: store, pool: pool, start: map[common.Address]*big.Int{},
		c: &consumer.Consumer{Store: store, API: api, Readers: map[uint64]*chain.Reader{node.ChainID(): chain.NewReader(node.RPC(), node.ChainID())},
			Log: slog.New(slog.DiscardHandler), Wait: time.Second}}
	for _, a := range node.Accounts()[:2] {
		b, err := node.Client().BalanceAt(context.Background(), a.Address, big.NewInt(0))
		if err != nil {
			t.Fatal(err)
		}
		r.start[a.Address] = b
		r.open(t, a.Address, 0)
	}
	return r
}

// open opens wallet at block number, as the scanner does: its balance
// there is booked as its opening, and its movements after it are the
// ledger's to book.
func (r *rig) open(t testing.TB, wallet common.Address, number uint64) {
	t.Helper()
	ctx := context.Background()
	block, err := r.node.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(number))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `
		INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', $3, $4)
		ON CONFLICT (chain_id, address) DO UPDATE SET opened_block = $3, opened_hash = $4`,
		int64(r.node.ChainID()), wallet.Bytes(), int64(number), block.Hash().Bytes()); err != nil {
		t.Fatal(err)
	}
	held, err := r.node.Client().BalanceAt(ctx, wallet, block.Number)
	if err != nil {
		t.Fatal(err)
	}
	if held.Sign() == 0 {
		return
	}
	k := ledger.AccountKey{ChainID: r.node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: wallet}
	equity := k
	equity.Kind = ledger.OpeningBalance
	hash := block.Hash()
	if _, err := r.store.Post(ctx, &ledger.Journal{Kind: ledger.Opening, Key: "opening:" + wallet.Hex() + ":" + hash.Hex(), ChainID: r.node.ChainID(),
		Block: &ledger.Block{Number: number, Hash: hash}, Legs: []ledger.Leg{{Account: k, Amount: held}, {Account: equity, Amount: new(big.Int).Neg(held)}}}); err != nil {
		t.Fatal(err)
	}
}

// tx makes a transaction of signer in txmanager, as the gateway would.
func (r *rig) tx(t *testing.T, signer common.Address, requestID string) uuid.UUID {
	t.Helper()
	to := common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	tx, _, err := r.txm.Store.Create(context.Background(), &txmanager.Intent{ChainID: r.node.ChainID(), From: signer, RequestID: requestID,
		To: &to, Value: big.NewInt(1), Data: []byte{}, Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	return tx.ID
}

// event writes an event of tx into txmanager's feed and numbers it.
func (r *rig) event(t *testing.T, id uuid.UUID, typ string, data any) {
	t.Helper()
	r.txm.WriteEvents(t, txmanagertest.Event{TxID: id, Type: typ, Payload: data})
}

// confirmed writes the event of id ending CONFIRMED (or REVERTED) in the
// block of receipt.
func (r *rig) confirmed(t *testing.T, id uuid.UUID, receipt *types.Receipt) {
	t.Helper()
	to := "CONFIRMED"
	if receipt.Status == types.ReceiptStatusFailed {
		to = "REVERTED"
	}
	r.event(t, id, txmanager.EventStateChanged, map[string]any{"from_state": "BROADCASTED", "to_state": to,
		"hash": receipt.TxHash, "block_number": receipt.BlockNumber.Uint64(), "block_hash": receipt.BlockHash})
}

// reorged writes the event re-opening id, whose receipt's block left the
// chain after it was CONFIRMED.
func (r *rig) reorged(t *testing.T, id uuid.UUID, receipt *types.Receipt) {
	t.Helper()
	r.event(t, id, txmanager.EventReorged, map[string]any{"hash": receipt.TxHash, "block_number": receipt.BlockNumber.Uint64(),
		"block_hash": receipt.BlockHash, "from_state": "CONFIRMED", "to_state": "BROADCASTED"})
}

// requireReversed fails t unless the journal booked from receipt has its
// reversal.
func (r *rig) requireReversed(t *testing.T, receipt *types.Receipt) {
	t.Helper()
	id, _, err := r.store.Journal(context.Background(), ledger.TxKey(r.node.ChainID(), receipt.TxHash, receipt.BlockHash))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.store.Journal(context.Background(), ledger.ReversalKey(id)); err != nil {
		t.Errorf("the reversal of journal %d: %v", id, err)
	}
}

// drain steps the consumer until it has booked the whole feed.
func (r *rig) drain(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := r.c.Step(ctx)
		if err != nil {
			t.Fatalf("step: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

// backlog is the backlog of the rig's chain, oldest first.
func (r *rig) backlog(t testing.TB) []ledger.BacklogEvent {
	t.Helper()
	b, err := r.store.Backlog(context.Background(), consumer.Feed, r.node.ChainID(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stepUntil steps the consumer until cond holds, for at most a minute.
func (r *rig) stepUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !cond() {
		if _, err := r.c.Step(ctx); err != nil {
			t.Fatalf("waiting for %s: step: %v", what, err)
		}
	}
}

// requireTiesOut fails t unless each dev wallet's books, opened at
// genesis, equal its balance on chain.
func (r *rig) requireTiesOut(t *testing.T, what string) {
	t.Helper()
	ctx := context.Background()
	for w := range r.start {
		now, err := r.node.Client().BalanceAt(ctx, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		booked, err := r.store.Balance(ctx, ledger.AccountKey{ChainID: r.node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: w})
		if err != nil {
			t.Fatalf("%s: wallet %s: %v", what, w, err)
		}
		if booked.Cmp(now) != 0 {
			t.Errorf("%s: wallet %s: the chain holds %s, the books %s", what, w, now, booked)
		}
	}
}

// The feed's settled transactions are booked from the chain, each once
// however often the feed is read, and a reorg of a booked block books its
// reversal: the books tie out to the chain after each.
func TestTheFeedIsBookedFromTheChain(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, b, stranger := r.node.Accounts()[0], r.node.Accounts()[1], r.node.Accounts()[5]
	out := r.tx(t, a.Address, "out")
	internal := r.tx(t, b.Address, "internal")
	r.confirmed(t, out, chaintest.Transfer(t, r.node, a.Key, stranger.Address, chaintest.Ether))
	internalReceipt := chaintest.Transfer(t, r.node, b.Key, a.Address, big.NewInt(12345))
	r.confirmed(t, internal, internalReceipt)
	r.drain(t)
	r.requireTiesOut(t, "after two transfers")
	if c, err := r.store.Cursor(context.Background(), consumer.Feed); err != nil || c < 4 {
		t.Errorf("cursor %d %v: want past the 2 INIT and 2 CONFIRMED events", c, err)
	}

	// A second consumer, and the first again: nothing more is booked.
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := r.c.Step(context.Background()); err != nil {
				t.Errorf("step at the head: %v", err)
			}
		})
	}
	wg.Wait()
	r.requireTiesOut(t, "after reading the head again")

	// The internal transfer's block leaves the chain.
	if err := r.node.Reorg(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	r.reorged(t, internal, internalReceipt)
	r.drain(t)
	r.requireTiesOut(t, "after the reorg")
	r.requireReversed(t, internalReceipt)
}

// A reorg event in the same page as the confirmation it undoes: the page
// is booked up to the confirmation, and the next step books the reversal.
// (The node keeps the block here: the feed alone says it left.)
func TestAReorgInTheSamePageAsItsConfirmation(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, stranger := r.node.Accounts()[0], r.node.Accounts()[5]
	id := r.tx(t, a.Address, "flapping")
	receipt := chaintest.Transfer(t, r.node, a.Key, stranger.Address, big.NewInt(777))
	r.confirmed(t, id, receipt)
	r.reorged(t, id, receipt)
	ctx := context.Background()
	if n, err := r.c.Step(ctx); err != nil || n != 2 {
		t.Fatalf("first step: %d events, %v; want the INIT and the confirmation", n, err)
	}
	if n, err := r.c.Step(ctx); err != nil || n != 1 {
		t.Fatalf("second step: %d events, %v; want the reorg", n, err)
	}
	r.requireReversed(t, receipt)
	booked, err := r.store.Balance(ctx, ledger.AccountKey{ChainID: r.node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: a.Address})
	if err != nil || booked.Cmp(r.start[a.Address]) != 0 {
		t.Errorf("the wallet after the confirmation and its reversal: %v %v, want its opening, %v", booked, err, r.start[a.Address])
	}
}

// A confirmation the ledger's node cannot read in the block named (here
// the block left the chain before the ledger got to it) is not booked: it
// waits in the chain's backlog, the cursor past it. The feed never skips
// it: once the feed says the block left the chain, the settlement is known
// to be undone, and leaves the backlog with nothing booked.
func TestAnUnreadableConfirmationWaitsInTheBacklog(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, stranger := r.node.Accounts()[0], r.node.Accounts()[5]
	id := r.tx(t, a.Address, "gone")
	receipt := chaintest.Transfer(t, r.node, a.Key, stranger.Address, big.NewInt(777))
	if err := r.node.Reorg(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	r.confirmed(t, id, receipt)
	ctx := context.Background()
	if n, err := r.c.Step(ctx); err != nil || n != 2 {
		t.Fatalf("step: %d events, %v; want the INIT booked and the confirmation moved to the backlog", n, err)
	}
	if c, err := r.store.Cursor(ctx, consumer.Feed); err != nil || c != 2 {
		t.Errorf("the cursor is at %d (%v), want 2", c, err)
	}
	if got := r.backlog(t); len(got) != 1 || got[0].Seq != 2 || got[0].Reason != ledger.BacklogEndpoint {
		t.Errorf("the backlog holds %+v, want the confirmation (2), for its endpoint", got)
	}
	r.requireTiesOut(t, "nothing booked")

	r.reorged(t, id, receipt)
	r.stepUntil(t, "the backlog booked", func() bool { return len(r.backlog(t)) == 0 })
	if c, err := r.store.Cursor(ctx, consumer.Feed); err != nil || c != 3 {
		t.Errorf("the cursor is at %d (%v), want past the INIT, the confirmation and the reorg", c, err)
	}
	if _, _, err := r.store.Journal(ctx, ledger.TxKey(r.node.ChainID(), receipt.TxHash, receipt.BlockHash)); !errs.Is(err, errs.NotFound) {
		t.Errorf("a journal from the undone settlement: %v", err)
	}
	r.requireTiesOut(t, "after the reorg event")
}

// A settlement moving a wallet the scanner has not opened waits for the
// opening in the chain's backlog; once the wallet is opened at or after
// the settlement's block, the opening holds the settlement and the feed
// books nothing more of it for that wallet.
func TestASettlementWaitsForItsWalletsOpening(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	fresh, stranger := r.node.Accounts()[2], r.node.Accounts()[5]
	id := r.tx(t, fresh.Address, "early")
	receipt := chaintest.Transfer(t, r.node, fresh.Key, stranger.Address, big.NewInt(5))
	r.confirmed(t, id, receipt)
	ctx := context.Background()
	if n, err := r.c.Step(ctx); err != nil || n != 2 {
		t.Fatalf("first step: %d events, %v; want the INIT booked and the settlement moved to the backlog", n, err)
	}
	if got := r.backlog(t); len(got) != 1 || got[0].Seq != 2 || got[0].Reason != ledger.BacklogWalletNotOpened {
		t.Fatalf("the backlog holds %+v, want the settlement (2), waiting for its wallet", got)
	}
	if n, err := r.c.Step(ctx); err != nil || n != 0 {
		t.Fatalf("step with the wallet still not opened: %d events, %v; want nothing", n, err)
	}
	r.open(t, fresh.Address, receipt.BlockNumber.Uint64())
	r.stepUntil(t, "the backlog booked", func() bool { return len(r.backlog(t)) == 0 })
	if _, _, err := r.store.Journal(ctx, ledger.TxKey(r.node.ChainID(), receipt.TxHash, receipt.BlockHash)); !errs.Is(err, errs.NotFound) {
		t.Errorf("a journal for a settlement the opening holds: %v", err)
	}
	held, err := r.node.Client().BalanceAt(ctx, fresh.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	if booked := balanceOf(t, r, fresh.Address); booked.Cmp(held) != 0 {
		t.Errorf("the wallet opened after its settlement: books %s, chain %s", booked, held)
	}
}

func balanceOf(t *testing.T, r *rig, wallet common.Address) *big.Int {
	t.Helper()
	b, err := r.store.Balance(context.Background(), ledger.AccountKey{ChainID: r.node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: wallet})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A block that leaves the chain and comes back (a fork flipping back and
// forth): each return books the settlement again, each departure reverses
// the booking that stands, and the books end equal to the chain, which
// holds the transaction. (The node keeps the block: the feed alone says
// it left and came back.)
func TestABlockThatLeavesAndComesBackIsBookedOnceAtATime(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, stranger := r.node.Accounts()[0], r.node.Accounts()[5]
	id := r.tx(t, a.Address, "flipping")
	receipt := chaintest.Transfer(t, r.node, a.Key, stranger.Address, big.NewInt(31))
	for range 3 {
		r.confirmed(t, id, receipt)
		r.drain(t)
		r.requireTiesOut(t, "while the block is in the chain")
		r.reorged(t, id, receipt)
		r.drain(t)
		if booked := balanceOf(t, r, a.Address); booked.Cmp(r.start[a.Address]) != 0 {
			t.Fatalf("after the block left: the books hold %s, want the opening %s", booked, r.start[a.Address])
		}
	}
	r.confirmed(t, id, receipt)
	r.drain(t)
	r.requireTiesOut(t, "after the block came back for good")
	var journals int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM journal WHERE tx_hash = $1`, receipt.TxHash.Bytes()).Scan(&journals); err != nil || journals != 7 {
		t.Errorf("%d journals of the transaction (%v), want 4 bookings and 3 reversals", journals, err)
	}
}

// toggle is a contract whose call with no data succeeds until someone
// calls it with data, after which it reverts:
//
//	if calldatasize { sstore(0, 1); stop }; if sload(0) { revert }; stop
const toggle = "0x3615600b576001600055005b60005415601757600080fd5b00"

// A transaction confirmed with status 1 whose block leaves the chain and
// which is included again, where it now reverts: the first booking is
// reversed and the re-inclusion books the fee alone, from its own receipt;
// the books equal the chain after each.
func TestAReinclusionThatRevertsBooksItsFeeOnly(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	a, flipper := r.node.Accounts()[0], r.node.Accounts()[5]
	target := common.HexToAddress("0x00000000000000000000000000000000000c0de1")
	if err := r.node.RPC().CallContext(ctx, nil, "anvil_setCode", target, toggle); err != nil {
		t.Fatal(err)
	}
	id := r.tx(t, a.Address, "flip")
	nonce, err := r.node.Client().PendingNonceAt(ctx, a.Address)
	if err != nil {
		t.Fatal(err)
	}
	signed := chaintest.SignCall(t, r.node, a.Key, chaintest.Call{To: &target, Value: big.NewInt(777), Gas: 60_000}, nonce)
	if err := r.node.Client().SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
	first := chaintest.WaitReceipt(t, r.node, signed.Hash())
	if first.Status != types.ReceiptStatusSuccessful {
		t.Fatal("the call reverted before the flip")
	}
	r.confirmed(t, id, first)
	r.drain(t)
	r.requireTiesOut(t, "confirmed with status 1")

	// The block leaves the chain; the flag flips; the same signed
	// transaction is included again, and reverts.
	if err := r.node.Reorg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	chaintest.SendCall(t, r.node, flipper.Key, chaintest.Call{To: &target, Data: []byte{1}, Gas: 60_000})
	if err := r.node.Client().SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
	again := chaintest.WaitReceipt(t, r.node, signed.Hash())
	if again.Status != types.ReceiptStatusFailed || again.BlockHash == first.BlockHash {
		t.Fatalf("re-included with status %d in block %s (first %s): want a revert in another block", again.Status, again.BlockHash, first.BlockHash)
	}
	r.reorged(t, id, first)
	r.confirmed(t, id, again) // REVERTED, from the receipt's status
	r.drain(t)
	r.requireTiesOut(t, "re-included with status 0")
	r.requireReversed(t, first)
	_, j, err := r.store.Journal(ctx, ledger.TxKey(r.node.ChainID(), again.TxHash, again.BlockHash))
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != ledger.Reverted || j.Status != "reverted" || len(j.Legs) != 2 {
		t.Errorf("the re-inclusion booked %s (%s) with %d legs, want its fee alone as reverted", j.Kind, j.Status, len(j.Legs))
	}
}

// A transaction re-included after a reorg at a higher base fee: the
// reversal undoes the first fee, the new receipt's fee is booked, and the
// books equal the chain.
func TestAReinclusionAtAnotherFeeBooksTheNewFee(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ctx := context.Background()
	a, stranger := r.node.Accounts()[0], r.node.Accounts()[5]
	id := r.tx(t, a.Address, "refee")
	nonce, err := r.node.Client().PendingNonceAt(ctx, a.Address)
	if err != nil {
		t.Fatal(err)
	}
	signed := chaintest.SignTransfer(t, r.node, a.Key, stranger.Address, big.NewInt(1000), nonce)
	if err := r.node.Client().SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
	first := chaintest.WaitReceipt(t, r.node, signed.Hash())
	r.confirmed(t, id, first)
	r.drain(t)
	r.requireTiesOut(t, "confirmed")

	if err := r.node.Reorg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// The fee cap is twice the base fee it was signed at: a higher base
	// fee, within it, changes the price paid.
	higher := new(big.Int).Add(first.EffectiveGasPrice, big.NewInt(1_000_000))
	if err := r.node.SetNextBlockBaseFee(ctx, higher); err != nil {
		t.Fatal(err)
	}
	if err := r.node.Client().SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
	again := chaintest.WaitReceipt(t, r.node, signed.Hash())
	if again.EffectiveGasPrice.Cmp(first.EffectiveGasPrice) == 0 || again.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("re-included at price %s (first %s), status %d: want another price", again.EffectiveGasPrice, first.EffectiveGasPrice, again.Status)
	}
	r.reorged(t, id, first)
	r.confirmed(t, id, again)
	r.drain(t)
	r.requireTiesOut(t, "re-included at another fee")
	r.requireReversed(t, first)
}
