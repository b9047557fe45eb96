package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
)

const feed = "txmanager"

func journalCount(t *testing.T, s *postgres.Store, keys ...string) int {
	t.Helper()
	n := 0
	for _, k := range keys {
		if _, _, err := s.Journal(context.Background(), k); err == nil {
			n++
		} else if !errs.Is(err, errs.NotFound) {
			t.Fatal(err)
		}
	}
	return n
}

// A run of events books its journals and moves the cursor together; the
// same run again, from where the cursor was, is refused whole, and nothing
// is booked twice.
func TestBookFeedMovesTheCursorWithItsJournals(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	if c, err := s.Cursor(ctx, feed); err != nil || c != 0 {
		t.Fatalf("a new feed's cursor: %d %v", c, err)
	}
	signers := []ledger.WalletKey{{ChainID: chain, Address: hot}}
	run := []*ledger.Journal{transfer("f-1", hot, bob, 10, 1), transfer("f-2", hot, bob, 20, 1), transfer("f-1", hot, bob, 10, 1)}
	posted, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 0, To: 17, Signers: signers, Journals: run})
	if err != nil {
		t.Fatal(err)
	}
	if !posted[0].Created || !posted[1].Created || posted[2].Created || posted[2].JournalID != posted[0].JournalID {
		t.Errorf("posted %+v: want two journals, the repeat a replay of the first", posted)
	}
	if c, err := s.Cursor(ctx, feed); err != nil || c != 17 {
		t.Errorf("cursor %d %v, want 17", c, err)
	}
	if w, err := s.Wallets(ctx); err != nil || len(w) != 1 || w[0].WalletKey != signers[0] || w[0].Opened != nil {
		t.Errorf("wallets %v %v, want the signer", w, err)
	}
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 0, To: 17, Signers: signers, Journals: run}); !errs.Is(err, errs.Conflict) {
		t.Errorf("the same run from the old cursor: %v, want a conflict", err)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != -32 {
		t.Errorf("hot wallet %s, want -32: nothing booked twice", got)
	}
}

// A journal whose key holds another fact fails the whole run: nothing of
// it is booked and the cursor stays, as if the run never happened (the
// same holds for a process killed before its commit). Without the bad
// journal the run books.
func TestAContradictionStopsTheFeed(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	if _, err := s.Post(ctx, transfer("taken", hot, bob, 5, 1)); err != nil {
		t.Fatal(err)
	}
	good := transfer("good", hot, bob, 10, 1)
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 0, To: 9, Journals: []*ledger.Journal{good, transfer("taken", hot, bob, 6, 1)}}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("a run with a contradiction: %v, want a conflict", err)
	}
	if c, _ := s.Cursor(ctx, feed); c != 0 {
		t.Errorf("cursor moved to %d by a failed run", c)
	}
	if n := journalCount(t, s, "good"); n != 0 {
		t.Errorf("the failed run's good journal was booked")
	}
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 0, To: 9, Journals: []*ledger.Journal{good}}); err != nil {
		t.Fatal(err)
	}
	if n := journalCount(t, s, "good"); n != 1 {
		t.Errorf("the good journal is not booked")
	}
}

// Two consumers booking the same run from the same cursor: exactly one
// succeeds, and the books hold the run once.
func TestTwoConsumersBookARunOnce(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	other := postgres.New(pool, nil)
	ctx := context.Background()
	var run []*ledger.Journal
	for i := range 20 {
		run = append(run, transfer(fmt.Sprintf("race-%d", i), hot, bob, int64(i+1), 1))
	}
	var wg sync.WaitGroup
	errors := make([]error, 2)
	for i, st := range []*postgres.Store{s, other} {
		wg.Go(func() {
			_, errors[i] = st.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 0, To: 40, Journals: run})
		})
	}
	wg.Wait()
	if (errors[0] == nil) == (errors[1] == nil) {
		t.Fatalf("both or neither consumer booked: %v, %v", errors[0], errors[1])
	}
	for _, err := range errors {
		if err != nil && !errs.Is(err, errs.Conflict) {
			t.Errorf("the losing consumer: %v, want a conflict", err)
		}
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != -(210 + 20) {
		t.Errorf("hot wallet %s, want -230: the run booked once", got)
	}
}

// A booked journal reads back with its legs, and its reversal, booked,
// leaves the books as they were before it.
func TestAJournalReadsBackForItsReversal(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	tx, block := common.HexToHash("0x0a"), common.HexToHash("0x0b")
	j := transfer(ledger.TxKey(chain, tx, block), hot, bob, 1000, 21)
	j.TxHash, j.Block = &tx, &ledger.Block{Number: 9, Hash: block}
	posted, err := s.Post(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	id, back, err := s.Journal(ctx, j.Key)
	if err != nil || id != posted.JournalID {
		t.Fatalf("read back: %d %v", id, err)
	}
	if back.PayloadHash() != j.PayloadHash() {
		t.Errorf("read back %+v, booked %+v", back, j)
	}
	if _, err := s.Post(ctx, booking.Reverse(id, back)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Post(ctx, booking.Reverse(id, back)); err != nil {
		t.Errorf("the reversal again: %v, want a replay", err)
	}
	for _, k := range []ledger.AccountKey{acct(ledger.Wallet, ledger.Native, hot), acct(ledger.Counterparty, ledger.Native, bob), acct(ledger.FeeExpense, ledger.Native, hot)} {
		if got := balance(t, s, k); got.Sign() != 0 {
			t.Errorf("%s: %s after the reversal, want 0", k, got)
		}
	}
	if _, _, err := s.Journal(ctx, "no such key"); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown key: %v, want not found", err)
	}
}

// Configured wallets join the registry unopened, beside the signers; a
// signer named again as configured stays a signer.
func TestConfiguredWalletsJoinTheRegistry(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: "txmanager", From: 0, To: 1, Signers: []ledger.WalletKey{{ChainID: chain, Address: hot}}}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // registering again changes nothing
		if err := s.AddWallets(ctx, []ledger.WalletKey{{ChainID: chain, Address: hot}, {ChainID: chain, Address: bob}}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := pool.Query(ctx, `SELECT address, source FROM wallet ORDER BY address`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[common.Address]string{}
	for rows.Next() {
		var addr []byte
		var source string
		if err := rows.Scan(&addr, &source); err != nil {
			t.Fatal(err)
		}
		got[common.BytesToAddress(addr)] = source
	}
	if len(got) != 2 || got[hot] != "signer" || got[bob] != "configured" {
		t.Errorf("registry %v: want the signer kept and bob configured", got)
	}
}
