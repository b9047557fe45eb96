package postgres_test

import (
	"context"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
)

const chainB = 10

var (
	walletB  = common.HexToAddress("0x00000000000000000000000000000000000000bb")
	bridgeOf = common.HexToAddress("0x00000000000000000000000000000000b81d9e00")
	tokenB   = "0x00000000000000000000000000000000000070b0"
)

// crossing is an end's journal: amount of asset between a wallet and its
// in_transit account, out of the wallet at the source, into it at the
// destination.
func crossing(kind ledger.JournalKind, chainID uint64, asset string, wallet common.Address, tx, block common.Hash, amount int64) *ledger.Journal {
	w := ledger.AccountKey{ChainID: chainID, Asset: asset, Kind: ledger.Wallet, Address: wallet}
	it := w
	it.Kind = ledger.InTransit
	sign := int64(1)
	if kind == ledger.TransitOut {
		sign = -1
	}
	return &ledger.Journal{Kind: kind, Key: ledger.TxKey(chainID, tx, block), ChainID: chainID, TxHash: &tx,
		Block: &ledger.Block{Number: 5, Hash: block}, Status: "success",
		Legs: []ledger.Leg{{Account: w, Amount: big.NewInt(sign * amount)}, {Account: it, Amount: big.NewInt(-sign * amount)}}}
}

// feedRun books a run of the feed from the stored cursor to the next seq.
func feedRun(t *testing.T, s *postgres.Store, journals []*ledger.Journal, transits ...ledger.TransitWrite) {
	t.Helper()
	ctx := context.Background()
	from, err := s.Cursor(ctx, feed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: from, To: from + 1, Journals: journals, Transits: transits}); err != nil {
		t.Fatalf("book run %d: %v", from+1, err)
	}
}

func readTransit(t *testing.T, s *postgres.Store, id string) ledger.Transit {
	t.Helper()
	tr, err := s.Transit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A transit goes through the store as the feed moves it: linked
// (pending), its source booked (open, listed, alerted once for its age),
// its destination booked with the bridge fee (completed), its source's
// booking undone by a reorg (open again, with its own alert), and each
// write stands on the journals booked with it.
func TestATransitsLifeInTheStore(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	srcTx, dstTx := uuid.New(), uuid.New()
	w := ledger.TransitWrite{Transit: ledger.Transit{ID: "rb-1", Status: ledger.TransitPending,
		Source: ledger.TransitEnd{TxID: srcTx, ChainID: chain, Wallet: hot}}}
	feedRun(t, s, nil, w)
	got := readTransit(t, s, "rb-1")
	if got.Status != ledger.TransitPending || got.OpenedAt != nil || got.Source.TxID != srcTx || got.Source.Booked() || got.Destination.TxID != uuid.Nil {
		t.Fatalf("linked: %+v", got)
	}

	// The destination links and the source is booked, in one run.
	sent := crossing(ledger.TransitOut, chain, token, hot, common.HexToHash("0x5a"), common.HexToHash("0x5b"), 1000)
	w.Destination = ledger.TransitEnd{TxID: dstTx, ChainID: chainB, Wallet: walletB}
	w.Source.TxHash, w.Source.BlockHash, w.Source.Asset, w.Source.Amount = sent.TxHash, &sent.Block.Hash, token, big.NewInt(1000)
	w.Bridge, w.SourceJournal, w.Status = &bridgeOf, sent, ledger.TransitOpen
	before := time.Now()
	feedRun(t, s, []*ledger.Journal{transfer("unrelated", hot, bob, 1, 1), sent}, w)
	sentID, _, err := s.Journal(ctx, sent.Key)
	if err != nil {
		t.Fatal(err)
	}
	got = readTransit(t, s, "rb-1")
	if got.Status != ledger.TransitOpen || got.Source.JournalID != sentID || got.Source.Amount.Int64() != 1000 || got.Source.Asset != token ||
		*got.Source.TxHash != *sent.TxHash || *got.Bridge != bridgeOf || got.Destination.TxID != dstTx || got.Destination.ChainID != chainB ||
		got.Destination.Wallet != walletB || got.OpenedAt == nil || got.CompletedAt != nil {
		t.Fatalf("source booked: %+v", got)
	}
	opened := *got.OpenedAt

	// Listed by status and by either chain, newest first, a page at a time.
	other := ledger.TransitWrite{Transit: ledger.Transit{ID: "rb-2", Status: ledger.TransitPending,
		Source: ledger.TransitEnd{TxID: uuid.New(), ChainID: 99, Wallet: hot}}}
	feedRun(t, s, nil, other)
	list := func(f ledger.TransitFilter) []string {
		t.Helper()
		f.Limit = max(f.Limit, 1)
		ts, err := s.Transits(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tr := range ts {
			ids = append(ids, tr.ID)
		}
		return ids
	}
	all, err := s.Transits(ctx, ledger.TransitFilter{Limit: 10})
	if err != nil || len(all) != 2 || all[0].ID != "rb-2" {
		t.Fatalf("all transits: %+v %v", all, err)
	}
	for name, c := range map[string]struct {
		f    ledger.TransitFilter
		want []string
	}{
		"open":                {ledger.TransitFilter{Status: ledger.TransitOpen, Limit: 10}, []string{"rb-1"}},
		"pending":             {ledger.TransitFilter{Status: ledger.TransitPending, Limit: 10}, []string{"rb-2"}},
		"the source chain":    {ledger.TransitFilter{ChainID: chain, Limit: 10}, []string{"rb-1"}},
		"the destination's":   {ledger.TransitFilter{ChainID: chainB, Limit: 10}, []string{"rb-1"}},
		"the first page":      {ledger.TransitFilter{Limit: 1}, []string{"rb-2"}},
		"the next page":       {ledger.TransitFilter{Before: all[0].Seq, Limit: 1}, []string{"rb-1"}},
		"past the last":       {ledger.TransitFilter{Before: all[1].Seq, Limit: 1}, nil},
		"completed: none yet": {ledger.TransitFilter{Status: ledger.TransitCompleted, Limit: 10}, nil},
		"a source wallet":     {ledger.TransitFilter{Wallet: &hot, Limit: 10}, []string{"rb-2", "rb-1"}},
		"on its chain":        {ledger.TransitFilter{Wallet: &hot, ChainID: chain, Limit: 10}, []string{"rb-1"}},
		"a destination's":     {ledger.TransitFilter{Wallet: &walletB, ChainID: chainB, Limit: 10}, []string{"rb-1"}},
		"not on that chain":   {ledger.TransitFilter{Wallet: &walletB, ChainID: chain, Limit: 10}, nil},
		"a wallet's open one": {ledger.TransitFilter{Wallet: &hot, Status: ledger.TransitOpen, Limit: 10}, []string{"rb-1"}},
		"a stranger's":        {ledger.TransitFilter{Wallet: &bob, Limit: 10}, nil},
	} {
		if got := list(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
	for _, f := range []ledger.TransitFilter{{Limit: 0}, {Limit: ledger.MaxPage + 1}, {Status: "lost", Limit: 1}, {Before: -1, Limit: 1}, {ChainID: 1 << 63, Limit: 1}} {
		if _, err := s.Transits(ctx, f); !errs.Is(err, errs.Invalid) {
			t.Errorf("filter %+v: %v, want invalid", f, err)
		}
	}

	// The age alert: nothing before the age, then once.
	if due, err := s.AlertTransits(ctx, before.Add(-time.Minute), time.Now()); err != nil || len(due) != 0 {
		t.Errorf("alerts before the age: %+v %v", due, err)
	}
	later := time.Now().Add(2 * time.Hour)
	for i, want := range []int{1, 0} {
		due, err := s.AlertTransits(ctx, later.Add(-time.Hour), later)
		if err != nil || len(due) != want {
			t.Fatalf("alert pass %d: %d transits (%v), want %d", i, len(due), err, want)
		}
		if want == 1 && (due[0].ID != "rb-1" || due[0].AlertedAt == nil) {
			t.Errorf("alerted %+v", due[0])
		}
	}

	// The destination is booked, with a bridge fee: completed.
	received := crossing(ledger.TransitIn, chainB, tokenB, walletB, common.HexToHash("0xda"), common.HexToHash("0xdb"), 990)
	fee := booking.TransitFee("rb-1", acct(ledger.InTransit, token, hot), bridgeOf, sent.Key, received.Key, big.NewInt(10))
	done := w
	done.SourceJournal, done.Source.JournalID = nil, sentID
	done.Destination.TxHash, done.Destination.BlockHash, done.Destination.Asset, done.Destination.Amount = received.TxHash, &received.Block.Hash, tokenB, big.NewInt(990)
	done.DestinationJournal, done.FeeJournal, done.BridgeFee, done.Status = received, fee, big.NewInt(10), ledger.TransitCompleted
	feedRun(t, s, []*ledger.Journal{received, fee}, done)
	got = readTransit(t, s, "rb-1")
	feeID, _, err := s.Journal(ctx, fee.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.TransitCompleted || got.BridgeFee.Int64() != 10 || got.FeeJournalID != feeID || got.Destination.Amount.Int64() != 990 ||
		got.Destination.Asset != tokenB || got.CompletedAt == nil || !got.OpenedAt.Equal(opened) || got.AlertedAt != nil {
		t.Fatalf("completed: %+v", got)
	}
	onA := balance(t, s, acct(ledger.InTransit, token, hot))
	onB := balance(t, s, ledger.AccountKey{ChainID: chainB, Asset: tokenB, Kind: ledger.InTransit, Address: walletB})
	if new(big.Int).Add(onA, onB).Sign() != 0 || onA.Int64() != 990 {
		t.Errorf("in_transit holds %s on the source chain and %s on the destination's: want +990 and -990", onA, onB)
	}
	if got := balance(t, s, acct(ledger.FeeExpense, token, bridgeOf)); got.Int64() != 10 {
		t.Errorf("the bridge's fee expense: %s, want 10", got)
	}

	// A reorg undoes the source's booking: open again, from then on, and
	// alerted again once it is old.
	reopened := done
	reopened.DestinationJournal, reopened.Destination.JournalID = nil, readTransit(t, s, "rb-1").Destination.JournalID
	reopened.FeeJournal, reopened.BridgeFee, reopened.Bridge = nil, nil, nil
	reopened.Source = ledger.TransitEnd{TxID: srcTx, ChainID: chain, Wallet: hot}
	reopened.Status = ledger.TransitOpen
	feedRun(t, s, nil, reopened)
	got = readTransit(t, s, "rb-1")
	if got.Status != ledger.TransitOpen || got.Source.Booked() || got.BridgeFee != nil || got.FeeJournalID != 0 || got.CompletedAt != nil ||
		got.OpenedAt == nil || !got.OpenedAt.After(opened) || !got.Destination.Booked() {
		t.Fatalf("re-opened: %+v", got)
	}
	if due, err := s.AlertTransits(ctx, later.Add(-time.Hour), later); err != nil || len(due) != 1 {
		t.Errorf("the re-opening's alert: %d transits, %v; want 1", len(due), err)
	}

	// A negative bridge fee is flagged.
	var negative bool
	flip := done
	flip.Destination.Amount, flip.BridgeFee = big.NewInt(1010), big.NewInt(-10)
	flip.Source.JournalID, flip.SourceJournal = 0, sent
	flip.DestinationJournal, flip.FeeJournal = received, booking.TransitFee("rb-1", acct(ledger.InTransit, token, hot), bridgeOf, sent.Key+"x", received.Key, big.NewInt(-10))
	feedRun(t, s, []*ledger.Journal{flip.FeeJournal, sent, received}, flip)
	if err := pool.QueryRow(ctx, `SELECT fee_negative FROM transit WHERE transit_id = 'rb-1'`).Scan(&negative); err != nil || !negative {
		t.Errorf("fee_negative %v (%v) with a bridge fee of -10", negative, err)
	}
}

// A transit written inconsistently is refused whole, before anything of
// the run is booked; one claiming another transit's id with another source
// is a conflict.
func TestInconsistentTransitsAreRefused(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	base := ledger.TransitWrite{Transit: ledger.Transit{ID: "rb-1", Status: ledger.TransitPending,
		Source: ledger.TransitEnd{TxID: uuid.New(), ChainID: chain, Wallet: hot}}}
	sent := crossing(ledger.TransitOut, chain, token, hot, common.HexToHash("0x5a"), common.HexToHash("0x5b"), 1000)
	for name, bad := range map[string]func(w *ledger.TransitWrite){
		"a malformed id":              func(w *ledger.TransitWrite) { w.ID = "no spaces" },
		"open with nothing booked":    func(w *ledger.TransitWrite) { w.Status = ledger.TransitOpen },
		"a journal not of the run":    func(w *ledger.TransitWrite) { w.FeeJournal = sent },
		"booked without its journal":  func(w *ledger.TransitWrite) { w.Source.Amount, w.Status = big.NewInt(1), ledger.TransitOpen },
		"a fee before the completion": func(w *ledger.TransitWrite) { w.BridgeFee = big.NewInt(1) },
	} {
		w := base
		bad(&w)
		if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, To: 1, Journals: []*ledger.Journal{transfer("t", hot, bob, 1, 1)},
			Transits: []ledger.TransitWrite{w}}); !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if c, err := s.Cursor(ctx, feed); err != nil || c != 0 || journalCount(t, s, "t") != 0 {
		t.Fatalf("refused runs moved the cursor to %d (%v) or booked", c, err)
	}
	feedRun(t, s, nil, base)
	other := base
	other.Source.TxID = uuid.New()
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 1, To: 2, Transits: []ledger.TransitWrite{other}}); !errs.Is(err, errs.Conflict) {
		t.Errorf("another source for the transit: %v, want a conflict", err)
	}
	if _, err := s.Transit(ctx, "rb-9"); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown transit: %v, want not found", err)
	}
}
