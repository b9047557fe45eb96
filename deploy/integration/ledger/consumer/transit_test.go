package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
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
	"github.com/txfence/txfence/ledger/ledgertest/token"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/ledger/transit"
	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// The two chains of a transfer, with different ids.
const (
	chainA = 31337
	chainB = 4242
)

// side is one chain of a transfer: its node, the token deployed on it,
// and the wallet of ours that sends (on A) or receives (on B).
type side struct {
	node   *anvil.Node
	token  common.Address
	wallet anvil.Account
}

// asset is the side's token as the ledger names it.
func (s *side) asset() string { return strings.ToLower(s.token.Hex()) }

func (s *side) key(kind ledger.AccountKind, asset string, addr common.Address) ledger.AccountKey {
	return ledger.AccountKey{ChainID: s.node.ChainID(), Asset: asset, Kind: kind, Address: addr}
}

// transitRig is two anvil chains, one txmanager feed over mutual TLS, and
// the ledger's store and consumer reading both chains. Chain A's wallet
// holds tokens a minter gave it; chain B's wallet deployed chain B's
// token, so it mints there: what a bridge's release looks like.
type transitRig struct {
	a, b   side
	bridge common.Address
	txm    *txmanagertest.Server
	store  *postgres.Store
	pool   *pgxpool.Pool
	c      *consumer.Consumer
	logs   *logtest.Buffer
}

// alertsOf are the alerts logged that carry transit id.
func (r *transitRig) alertsOf(t *testing.T, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, rec := range r.logs.Alerts(t) {
		if rec["transit_id"] == id {
			out = append(out, rec)
		}
	}
	return out
}

func newTransitRig(t *testing.T) *transitRig {
	t.Helper()
	r := &transitRig{bridge: common.HexToAddress("0x00000000000000000000000000000000b81d9e00"), logs: &logtest.Buffer{}}
	r.a.node = chaintest.Anvil(t, anvil.Options{ChainID: chainA})
	r.b.node = chaintest.Anvil(t, anvil.Options{ChainID: chainB})
	if r.a.node.ChainID() == r.b.node.ChainID() {
		t.Fatal("the two chains have one id")
	}
	minter := r.a.node.Accounts()[9]
	r.a.wallet, r.b.wallet = r.a.node.Accounts()[0], r.b.node.Accounts()[1]
	r.a.token = token.Deploy(t, r.a.node, minter.Key)
	token.Mint(t, r.a.node, minter.Key, r.a.token, r.a.wallet.Address, big.NewInt(1_000_000))
	r.b.token = token.Deploy(t, r.b.node, r.b.wallet.Key)

	pki := servicetest.PKI(t)
	r.txm = txmanagertest.Serve(t, pki, txmanagertest.Options{})
	api := r.txm.API(t, "ledger")
	r.store, r.pool = ledgertest.Store(t)
	log := slog.New(slog.NewJSONHandler(r.logs, nil))
	r.c = &consumer.Consumer{Store: r.store, API: api, Log: log, Wait: time.Second, Readers: map[uint64]*chain.Reader{
		chainA: chain.NewReader(r.a.node.RPC(), chainA), chainB: chain.NewReader(r.b.node.RPC(), chainB)}}
	for _, s := range []*side{&r.a, &r.b} {
		r.open(t, s)
	}
	return r
}

// open opens s's wallet at its chain's head, as the scanner does: its
// native and token balances there are its opening.
func (r *transitRig) open(t *testing.T, s *side) {
	t.Helper()
	ctx := context.Background()
	head, err := s.node.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', $3, $4)`,
		int64(s.node.ChainID()), s.wallet.Address.Bytes(), head.Number.Int64(), head.Hash().Bytes()); err != nil {
		t.Fatal(err)
	}
	native, err := s.node.Client().BalanceAt(ctx, s.wallet.Address, head.Number)
	if err != nil {
		t.Fatal(err)
	}
	var legs []ledger.Leg
	for asset, held := range map[string]*big.Int{ledger.Native: native, s.asset(): token.BalanceOf(t, s.node, s.token, s.wallet.Address, head.Hash())} {
		if held.Sign() != 0 {
			legs = append(legs, ledger.Leg{Account: s.key(ledger.Wallet, asset, s.wallet.Address), Amount: held},
				ledger.Leg{Account: s.key(ledger.OpeningBalance, asset, s.wallet.Address), Amount: new(big.Int).Neg(held)})
		}
	}
	hash := head.Hash()
	if _, err := r.store.Post(ctx, &ledger.Journal{Kind: ledger.Opening, Key: fmt.Sprintf("opening:%d:%s:%s", s.node.ChainID(), s.wallet.Address.Hex(), hash.Hex()),
		ChainID: s.node.ChainID(), Block: &ledger.Block{Number: head.Number.Uint64(), Hash: hash}, Legs: legs}); err != nil {
		t.Fatal(err)
	}
}

// intent makes a transaction of s's wallet in txmanager, as the gateway
// would, calling s's token with data, marked with transit id when not "".
func (r *transitRig) intent(t *testing.T, s *side, requestID, transitID string, dependsOn dependson.List, data []byte) uuid.UUID {
	t.Helper()
	meta := json.RawMessage(`{"desk": "treasury"}`)
	if transitID != "" {
		meta = json.RawMessage(fmt.Sprintf(`{"desk": "treasury", "transit_id": %q}`, transitID))
	}
	tx, _, err := r.txm.Store.Create(context.Background(), &txmanager.Intent{ChainID: s.node.ChainID(), From: s.wallet.Address, RequestID: requestID,
		To: &s.token, Value: new(big.Int), Data: data, Route: txmanager.RoutePublic, DependsOn: dependsOn, Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	return tx.ID
}

// settled writes the event ending id CONFIRMED, or REVERTED, in receipt's
// block.
func (r *transitRig) settled(t *testing.T, id uuid.UUID, receipt *types.Receipt) {
	t.Helper()
	to := "CONFIRMED"
	if receipt.Status == types.ReceiptStatusFailed {
		to = "REVERTED"
	}
	r.txm.WriteEvents(t, txmanagertest.Event{TxID: id, Type: txmanager.EventStateChanged, Payload: map[string]any{"from_state": "BROADCASTED",
		"to_state": to, "hash": receipt.TxHash, "block_number": receipt.BlockNumber.Uint64(), "block_hash": receipt.BlockHash}})
}

// reorged writes the event re-opening id, whose receipt's block left its
// chain.
func (r *transitRig) reorged(t *testing.T, id uuid.UUID, receipt *types.Receipt) {
	t.Helper()
	r.txm.WriteEvents(t, txmanagertest.Event{TxID: id, Type: txmanager.EventReorged, Payload: map[string]any{"hash": receipt.TxHash,
		"block_number": receipt.BlockNumber.Uint64(), "block_hash": receipt.BlockHash, "from_state": "CONFIRMED", "to_state": "BROADCASTED"}})
}

func (r *transitRig) drain(t *testing.T) {
	t.Helper()
	stepUntilIdle(t, r.c)
}

// stepUntilIdle steps c until it has read the whole feed and books
// nothing more at once.
func stepUntilIdle(t *testing.T, c *consumer.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		n, err := c.Step(ctx)
		if err != nil {
			t.Fatalf("step: %v", err)
		}
		if n == 0 {
			return
		}
	}
}

// balance is an account's balance in the books, 0 for an account never
// booked.
func (r *transitRig) balance(t *testing.T, k ledger.AccountKey) *big.Int {
	t.Helper()
	b, err := r.store.Balance(context.Background(), k)
	if errs.Is(err, errs.NotFound) {
		return new(big.Int)
	}
	if err != nil {
		t.Fatalf("balance of %s: %v", k, err)
	}
	return b
}

// requireTiesOut fails t unless each wallet's books equal its chain
// balances, native and token, at its chain's head.
func (r *transitRig) requireTiesOut(t *testing.T, what string) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []*side{&r.a, &r.b} {
		head, err := s.node.Client().HeaderByNumber(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		native, err := s.node.Client().BalanceAt(ctx, s.wallet.Address, head.Number)
		if err != nil {
			t.Fatal(err)
		}
		for asset, held := range map[string]*big.Int{ledger.Native: native, s.asset(): token.BalanceOf(t, s.node, s.token, s.wallet.Address, head.Hash())} {
			if booked := r.balance(t, s.key(ledger.Wallet, asset, s.wallet.Address)); booked.Cmp(held) != 0 {
				t.Errorf("%s: wallet %s of chain %d, %s: the chain holds %s, the books %s", what, s.wallet.Address, s.node.ChainID(), asset, held, booked)
			}
		}
	}
}

// inTransit is what the transfer's in_transit accounts hold on A and B.
func (r *transitRig) inTransit(t *testing.T) (onA, onB *big.Int) {
	t.Helper()
	return r.balance(t, r.a.key(ledger.InTransit, r.a.asset(), r.a.wallet.Address)), r.balance(t, r.b.key(ledger.InTransit, r.b.asset(), r.b.wallet.Address))
}

// transfer is a transfer's two transactions in txmanager: the source
// sends sent of A's token to the bridge; the destination, depending on
// it, mints received of B's token to B's wallet.
type transfer struct {
	id                  string
	source, destination uuid.UUID
	sent, received      *big.Int
}

func (r *transitRig) transfer(t *testing.T, id string, sent, received int64) *transfer {
	t.Helper()
	tr := &transfer{id: id, sent: big.NewInt(sent), received: big.NewInt(received)}
	tr.source = r.intent(t, &r.a, id+"-out", id, nil, token.TransferCalldata(r.bridge, tr.sent))
	tr.destination = r.intent(t, &r.b, id+"-in", id, dependson.List{tr.source}, token.MintCalldata(r.b.wallet.Address, tr.received))
	return tr
}

// send sends the source on chain A, signed at the wallet's next nonce, and
// returns it with its receipt.
func (r *transitRig) send(t *testing.T, tr *transfer) (*types.Transaction, *types.Receipt) {
	t.Helper()
	ctx := context.Background()
	nonce, err := r.a.node.Client().PendingNonceAt(ctx, r.a.wallet.Address)
	if err != nil {
		t.Fatal(err)
	}
	signed := chaintest.SignCall(t, r.a.node, r.a.wallet.Key, chaintest.Call{To: &r.a.token, Data: token.TransferCalldata(r.bridge, tr.sent), Gas: token.CallGas}, nonce)
	if err := r.a.node.Client().SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
	receipt := chaintest.WaitReceipt(t, r.a.node, signed.Hash())
	if receipt.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("the source reverted in block %d", receipt.BlockNumber)
	}
	return signed, receipt
}

// arrive mints the destination's tokens on chain B.
func (r *transitRig) arrive(t *testing.T, tr *transfer) *types.Receipt {
	t.Helper()
	return token.Mint(t, r.b.node, r.b.wallet.Key, r.b.token, r.b.wallet.Address, tr.received)
}

func (r *transitRig) transit(t *testing.T, id string) ledger.Transit {
	t.Helper()
	tr, err := r.store.Transit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// requireCompleted fails t unless tr is completed with in_transit netting
// to zero over the two chains and the difference in the bridge's fee
// expense.
func (r *transitRig) requireCompleted(t *testing.T, tr *transfer, what string) {
	t.Helper()
	fee := new(big.Int).Sub(tr.sent, tr.received)
	got := r.transit(t, tr.id)
	if got.Status != ledger.TransitCompleted || got.BridgeFee == nil || got.BridgeFee.Cmp(fee) != 0 || got.Source.Amount.Cmp(tr.sent) != 0 ||
		got.Destination.Amount.Cmp(tr.received) != 0 || got.Source.Asset != r.a.asset() || got.Destination.Asset != r.b.asset() ||
		got.Source.ChainID != chainA || got.Destination.ChainID != chainB || *got.Bridge != r.bridge {
		t.Errorf("%s: transit %+v, want completed with a bridge fee of %s", what, got, fee)
	}
	onA, onB := r.inTransit(t)
	if new(big.Int).Add(onA, onB).Sign() != 0 || onA.Cmp(tr.received) != 0 {
		t.Errorf("%s: in_transit holds %s on chain A and %s on chain B: want +%s and -%s", what, onA, onB, tr.received, tr.received)
	}
	if got := r.balance(t, r.a.key(ledger.FeeExpense, r.a.asset(), r.bridge)); got.Cmp(fee) != 0 {
		t.Errorf("%s: the bridge's fee expense holds %s, want %s", what, got, fee)
	}
	r.requireTiesOut(t, what)
}

// journals counts the journals of the books.
func (r *transitRig) journals(t *testing.T) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM journal`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A transfer between two chains: the source books wallet A into
// in_transit on A, the destination books in_transit on B into wallet B,
// and the bridge fee moves the difference out of in_transit on A, so that
// in_transit nets to zero over the chains; every wallet ties out with its
// chain, and each chain's books balance per asset (ledgertest checks at
// the end). Replaying the whole feed books nothing twice.
func TestATransferBetweenChainsNetsToZero(t *testing.T) {
	t.Parallel()
	r := newTransitRig(t)
	tr := r.transfer(t, "rebalance:2025-01-15.7", 1000, 990)
	_, sent := r.send(t, tr)
	r.settled(t, tr.source, sent)
	r.settled(t, tr.destination, r.arrive(t, tr))
	r.drain(t)
	r.requireCompleted(t, tr, "after both ends")
	got := r.transit(t, tr.id)
	if got.Source.TxID != tr.source || got.Destination.TxID != tr.destination || got.Source.Wallet != r.a.wallet.Address ||
		got.Destination.Wallet != r.b.wallet.Address || got.CompletedAt == nil || got.FeeJournalID == 0 {
		t.Errorf("transit %+v", got)
	}
	fee, err := r.store.JournalByID(context.Background(), got.FeeJournalID)
	if err != nil || fee.Kind != ledger.TransitOut || fee.ChainID != chainA {
		t.Errorf("the bridge fee's journal: %+v %v", fee, err)
	}
	for id, kind := range map[int64]ledger.JournalKind{got.Source.JournalID: ledger.TransitOut, got.Destination.JournalID: ledger.TransitIn} {
		if j, err := r.store.JournalByID(context.Background(), id); err != nil || j.Kind != kind {
			t.Errorf("journal %d: %+v %v, want %s", id, j, err, kind)
		}
	}

	// The feed read again from its start: every event is booked again,
	// and nothing changes.
	before := r.journals(t)
	if _, err := r.pool.Exec(context.Background(), `UPDATE feed_cursor SET seq = 0 WHERE feed = $1`, consumer.Feed); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	if after := r.journals(t); after != before {
		t.Errorf("replaying the feed booked %d journals more", after-before)
	}
	r.requireCompleted(t, tr, "after replaying the feed")
	if again := r.transit(t, tr.id); !again.CompletedAt.Equal(*got.CompletedAt) || again.FeeJournalID != got.FeeJournalID {
		t.Errorf("the replay changed the transit: %+v, was %+v", again, got)
	}
}

// A transfer whose destination has not arrived is open and listed, holds
// what was sent in in_transit on A, and raises its age alert once; the
// arrival completes it, even at more than was sent (a negative bridge
// fee, booked and flagged).
func TestAnOpenTransferIsListedAndAlertedOnce(t *testing.T) {
	t.Parallel()
	r := newTransitRig(t)
	tr := r.transfer(t, "rb-open", 500, 520)
	_, sent := r.send(t, tr)
	r.settled(t, tr.source, sent)
	r.drain(t)
	r.requireTiesOut(t, "in transit")
	ctx := context.Background()
	open, err := r.store.Transits(ctx, ledger.TransitFilter{Status: ledger.TransitOpen, ChainID: chainB, Limit: 10})
	if err != nil || len(open) != 1 || open[0].ID != tr.id || !open[0].Source.Booked() || open[0].Destination.Booked() {
		t.Fatalf("open transits: %+v %v", open, err)
	}
	if onA, onB := r.inTransit(t); onA.Cmp(tr.sent) != 0 || onB.Sign() != 0 {
		t.Errorf("in_transit holds %s on A and %s on B, want what was sent on A", onA, onB)
	}

	clock := time.Now()
	w := &transit.Watch{Store: r.store, Log: r.c.Log, Now: func() time.Time { return clock }}
	if n, err := w.Check(ctx); err != nil || n != 0 {
		t.Fatalf("a young transit alerted: %d %v", n, err)
	}
	clock = clock.Add(transit.DefaultAge + time.Minute)
	for i, want := range []int{1, 0, 0} {
		if n, err := w.Check(ctx); err != nil || n != want {
			t.Errorf("check %d past the age: %d alerts (%v), want %d", i, n, err, want)
		}
	}
	if alerts := r.alertsOf(t, tr.id); len(alerts) != 1 || alerts[0]["source_tx_id"] != tr.source.String() {
		t.Errorf("alerts %v, want one naming the source", alerts)
	}

	r.settled(t, tr.destination, r.arrive(t, tr))
	r.drain(t)
	r.requireCompleted(t, tr, "arrived with more than was sent")
	var negative bool
	if err := r.pool.QueryRow(ctx, `SELECT fee_negative FROM transit WHERE transit_id = $1`, tr.id).Scan(&negative); err != nil || !negative {
		t.Errorf("a negative bridge fee not flagged: %v %v", negative, err)
	}
	if n, err := w.Check(ctx); err != nil || n != 0 {
		t.Errorf("a completed transit alerted: %d %v", n, err)
	}
}

// A reorg that takes the source's block away reverses its booking and
// the bridge fee, and re-opens the transfer, which holds on B what
// arrived; the source included again completes it anew; a reorg of the
// destination's block then re-opens it from the other end. The books tie
// out with both chains after each.
func TestAReorgOfTheSourceReopensTheTransfer(t *testing.T) {
	t.Parallel()
	r := newTransitRig(t)
	tr := r.transfer(t, "rb-reorg", 1000, 975)
	signed, first := r.send(t, tr)
	r.settled(t, tr.source, first)
	arrived := r.arrive(t, tr)
	r.settled(t, tr.destination, arrived)
	r.drain(t)
	r.requireCompleted(t, tr, "before the reorg")
	completed := r.transit(t, tr.id)

	ctx := context.Background()
	if err := r.a.node.Reorg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.reorged(t, tr.source, first)
	r.drain(t)
	r.requireTiesOut(t, "after the reorg")
	got := r.transit(t, tr.id)
	if got.Status != ledger.TransitOpen || got.Source.Booked() || !got.Destination.Booked() || got.BridgeFee != nil || got.CompletedAt != nil {
		t.Errorf("after the reorg: %+v, want open with the destination alone", got)
	}
	for _, id := range []int64{completed.Source.JournalID, completed.FeeJournalID} {
		if j, err := r.store.JournalByID(ctx, id); err != nil || j.ReversedBy == 0 {
			t.Errorf("journal %d not reversed: %+v %v", id, j, err)
		}
	}
	onA, onB := r.inTransit(t)
	if onA.Sign() != 0 || onB.Cmp(new(big.Int).Neg(tr.received)) != 0 {
		t.Errorf("in_transit holds %s on A and %s on B: want nothing on A and -%s on B", onA, onB, tr.received)
	}
	if fee := r.balance(t, r.a.key(ledger.FeeExpense, r.a.asset(), r.bridge)); fee.Sign() != 0 {
		t.Errorf("the bridge fee stands at %s after the reorg", fee)
	}
	if open, err := r.store.Transits(ctx, ledger.TransitFilter{Status: ledger.TransitOpen, Limit: 10}); err != nil || len(open) != 1 {
		t.Errorf("open transits after the reorg: %+v %v", open, err)
	}

	// The same signed source, included again in another block.
	if err := r.a.node.Client().SendTransaction(ctx, signed); err != nil {
		t.Fatal(err)
	}
	again := chaintest.WaitReceipt(t, r.a.node, signed.Hash())
	if again.BlockHash == first.BlockHash || again.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("re-included in %s with status %d", again.BlockHash, again.Status)
	}
	r.settled(t, tr.source, again)
	r.drain(t)
	r.requireCompleted(t, tr, "after the re-inclusion")
	if got := r.transit(t, tr.id); got.FeeJournalID == completed.FeeJournalID || got.Source.JournalID == completed.Source.JournalID {
		t.Errorf("the re-inclusion booked nothing anew: %+v", got)
	}

	// Then the destination's block leaves chain B: open again, what was
	// sent back in transit on A.
	if err := r.b.node.Reorg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.reorged(t, tr.destination, arrived)
	r.drain(t)
	r.requireTiesOut(t, "after the destination's reorg")
	if got := r.transit(t, tr.id); got.Status != ledger.TransitOpen || !got.Source.Booked() || got.Destination.Booked() || got.BridgeFee != nil {
		t.Errorf("after the destination's reorg: %+v, want open with the source alone", got)
	}
	if onA, onB := r.inTransit(t); onA.Cmp(tr.sent) != 0 || onB.Sign() != 0 {
		t.Errorf("in_transit holds %s on A and %s on B: want what was sent on A", onA, onB)
	}
	if fee := r.balance(t, r.a.key(ledger.FeeExpense, r.a.asset(), r.bridge)); fee.Sign() != 0 {
		t.Errorf("the bridge fee stands at %s after the destination's reorg", fee)
	}
}

// A source that reverts books its fee alone: nothing goes in transit and
// the transfer stays pending. Transactions that name a transfer they
// cannot be an end of are booked plainly, with an alert.
func TestARevertedSourceBooksItsFeeOnly(t *testing.T) {
	t.Parallel()
	r := newTransitRig(t)
	tr := r.transfer(t, "rb-reverted", 5_000_000, 1) // more than the wallet holds
	receipt := token.Transfer(t, r.a.node, r.a.wallet.Key, r.a.token, r.bridge, tr.sent)
	if receipt.Status != types.ReceiptStatusFailed {
		t.Fatal("a transfer beyond the balance succeeded")
	}
	r.settled(t, tr.source, receipt)
	stray := r.intent(t, &r.a, "stray", tr.id, nil, token.TransferCalldata(r.bridge, big.NewInt(1)))
	r.drain(t)
	r.requireTiesOut(t, "after the revert")
	got := r.transit(t, tr.id)
	if got.Status != ledger.TransitPending || got.Source.Booked() || got.Destination.TxID != tr.destination {
		t.Errorf("transit %+v, want pending", got)
	}
	_, j, err := r.store.Journal(context.Background(), ledger.TxKey(chainA, receipt.TxHash, receipt.BlockHash))
	if err != nil || j.Kind != ledger.Reverted || len(j.Legs) != 2 {
		t.Errorf("the reverted source booked %+v (%v), want its fee alone", j, err)
	}
	if onA, onB := r.inTransit(t); onA.Sign() != 0 || onB.Sign() != 0 {
		t.Errorf("in_transit holds %s and %s after a revert", onA, onB)
	}
	alerts := r.alertsOf(t, tr.id)
	if len(alerts) != 1 || alerts[0]["tx_id"] != stray.String() {
		t.Errorf("alerts %v, want one for the stray transaction", alerts)
	}
}

// Transit ids are per namespace (the gateway's tenant): two tenants using
// one id have two transits, a transaction of another namespace naming an
// id neither joins that transfer nor takes the id, and an INIT event
// without a namespace links as it did before namespaces, apart from both.
// A destination is the transaction whose parents include the source,
// among others maybe; an INIT event naming its parent as a bare id, as
// txmanager wrote them before, links too.
func TestTransitIDsArePerNamespace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pki := servicetest.PKI(t)
	txm := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	api := txm.API(t, "ledger")
	store, _ := ledgertest.Store(t)
	logs := &logtest.Buffer{}
	c := &consumer.Consumer{Store: store, API: api, Log: slog.New(slog.NewJSONHandler(logs, nil)), Wait: 50 * time.Millisecond}
	a, b := common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"), common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	create := func(from common.Address, requestID, ns string, dependsOn ...uuid.UUID) uuid.UUID {
		t.Helper()
		tx, _, err := txm.Store.Create(ctx, &txmanager.Intent{ChainID: 31337, From: from, RequestID: requestID, To: &from, Value: big.NewInt(1),
			Data: []byte{}, Route: txmanager.RoutePublic, DependsOn: dependsOn, Metadata: json.RawMessage(`{"transit_id": "move-1"}`), TransitNamespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		return tx.ID
	}
	// Tenant B names the id first; then tenant A's source and destination.
	squat := create(b, "b-source", "tenant-b")
	source := create(a, "a-source", "tenant-a")
	destination := create(a, "a-destination", "tenant-a", source)
	// A transaction of B's depending on A's source (which the gateway
	// would refuse) still cannot join A's transfer.
	intruder := create(b, "b-intruder", "tenant-b", source)
	legacy := create(a, "a-legacy", "")
	// plain is a transaction that names no transit.
	plain := func(requestID string) uuid.UUID {
		t.Helper()
		tx, _, err := txm.Store.Create(ctx, &txmanager.Intent{ChainID: 31337, From: a, RequestID: requestID, To: &a, Value: big.NewInt(1),
			Data: []byte{}, Route: txmanager.RoutePublic})
		if err != nil {
			t.Fatal(err)
		}
		return tx.ID
	}
	// A destination may wait for more than its source: its parents
	// include the source, after another transaction.
	cSource := create(a, "c-source", "tenant-c")
	cDestination := create(a, "c-destination", "tenant-c", plain("c-other"), cSource)
	// An INIT event written before a transaction could have several
	// parents names its one parent as a bare id: it links all the same.
	dSource, dDestination := create(a, "d-source", "tenant-d"), plain("d-destination")
	txm.WriteEvents(t, txmanagertest.Event{TxID: dDestination, Type: txmanager.EventStateChanged, Payload: json.RawMessage(
		`{"to_state": "INIT", "depends_on": "` + dSource.String() + `", "transit_id": "move-1", "transit_namespace": "tenant-d"}`)})
	stepUntilIdle(t, c)

	for key, want := range map[string][2]uuid.UUID{
		"tenant-a~move-1": {source, destination}, "tenant-b~move-1": {squat, uuid.Nil}, "move-1": {legacy, uuid.Nil},
		"tenant-c~move-1": {cSource, cDestination}, "tenant-d~move-1": {dSource, dDestination},
	} {
		got, err := store.Transit(ctx, key)
		if err != nil || got.Source.TxID != want[0] || got.Destination.TxID != want[1] {
			t.Errorf("transit %q: source %s, destination %s (%v); want %s, %s", key, got.Source.TxID, got.Destination.TxID, err, want[0], want[1])
		}
	}
	alerted := false
	for _, rec := range logs.Alerts(t) {
		alerted = alerted || (rec["tx_id"] == intruder.String() && rec["transit_id"] == "tenant-b~move-1")
	}
	if !alerted {
		t.Errorf("no alert for the transaction naming a transfer it cannot join: %v", logs.Alerts(t))
	}
}
