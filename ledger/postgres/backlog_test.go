package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
)

// backlogged is event seq of chainID as the consumer moves it to the
// backlog.
func backlogged(seq, chainID uint64, reason string) ledger.BacklogEvent {
	raw, _ := json.Marshal(map[string]any{"seq": seq, "chain_id": chainID, "type": "tx.state_changed"})
	return ledger.BacklogEvent{Seq: seq, ChainID: chainID, TxID: fmt.Sprintf("tx-%d", seq), Event: raw,
		EventAt: time.Date(2025, 1, 15, 10, 0, int(seq), 0, time.UTC), Reason: reason}
}

func backlogSeqs(t *testing.T, s *postgres.Store, chainID uint64) []uint64 {
	t.Helper()
	b, err := s.Backlog(context.Background(), feed, chainID, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, e := range b {
		out = append(out, e.Seq)
	}
	return out
}

// Events moved to the backlog are there with the cursor's move, and leave
// it with the booking of what they book: each is, at every commit, booked
// or in the backlog, never both. A run moving an event there again (the
// feed read again from an earlier cursor) leaves it as it was; a run
// booking a backlog event that is no longer there (another consumer
// booked it) is refused whole; a run naming an event outside it is
// refused. A chain's reconciliation sees the feed booked only up to its
// backlog's oldest event; the stats count each chain's backlog.
func TestTheBacklogMovesWithTheCursor(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	const other = 10
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 0, To: 5, Journals: []*ledger.Journal{transfer("b-1", hot, bob, 1, 1)},
		Backlog: []ledger.BacklogEvent{backlogged(2, chain, ledger.BacklogEndpoint), backlogged(4, chain, ledger.BacklogQueued),
			backlogged(3, other, ledger.BacklogHalted)}}); err != nil {
		t.Fatal(err)
	}
	if got := backlogSeqs(t, s, chain); fmt.Sprint(got) != "[2 4]" {
		t.Errorf("chain %d's backlog %v, want [2 4]", chain, got)
	}
	chains, err := s.BacklogChains(ctx, feed)
	if err != nil || len(chains) != 2 || chains[chain].Events != 2 || chains[chain].OldestSeq != 2 || chains[other].Events != 1 {
		t.Errorf("backlog chains %+v %v", chains, err)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Backlogs[chain].Events != 2 || !st.Backlogs[chain].OldestAt.Equal(time.Date(2025, 1, 15, 10, 0, 2, 0, time.UTC)) {
		t.Errorf("stats' backlogs %+v %v", st.Backlogs, err)
	}
	inReconciliation(t, s, func(r ledger.ReconcileTx) error {
		if c, err := r.FeedCursor(ctx, feed); err != nil || c != 1 {
			t.Errorf("chain %d's reconciliation sees the feed booked up to %d (%v), want 1, before its backlog", chain, c, err)
		}
		return nil
	})

	for _, bad := range []ledger.FeedBooking{
		{Feed: feed, From: 5, To: 7, Backlog: []ledger.BacklogEvent{backlogged(5, chain, ledger.BacklogQueued)}},
		{Feed: feed, From: 5, To: 7, Backlog: []ledger.BacklogEvent{backlogged(8, chain, ledger.BacklogQueued)}},
		{Feed: feed, From: 5, To: 7, Backlog: []ledger.BacklogEvent{backlogged(6, chain, "bored")}},
	} {
		if _, err := s.BookFeed(ctx, &bad); !errs.Is(err, errs.Invalid) {
			t.Errorf("backlog %+v of a run from 5 to 7: %v, want it refused", bad.Backlog, err)
		}
	}

	// The backlog's first event books; the run moves on to 6 and puts
	// 6 behind 4.
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 5, To: 6, Journals: []*ledger.Journal{transfer("b-2", hot, bob, 2, 1)},
		Drained: []uint64{2}, Backlog: []ledger.BacklogEvent{backlogged(6, chain, ledger.BacklogQueued)}}); err != nil {
		t.Fatal(err)
	}
	if got := backlogSeqs(t, s, chain); fmt.Sprint(got) != "[4 6]" {
		t.Errorf("chain %d's backlog %v, want [4 6]", chain, got)
	}
	// Two consumers book the same backlog event: one wins, the other's
	// run is refused, its journal unbooked.
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range results {
		wg.Go(func() {
			_, results[i] = s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 6, To: 6,
				Journals: []*ledger.Journal{transfer(fmt.Sprintf("b-4-%d", i), hot, bob, 4, 1)}, Drained: []uint64{4}})
		})
	}
	wg.Wait()
	if (results[0] == nil) == (results[1] == nil) || (!errs.Is(results[0], errs.Conflict) && !errs.Is(results[1], errs.Conflict)) {
		t.Errorf("two consumers booking backlog event 4: %v, %v; want one to win, the other refused", results[0], results[1])
	}
	if n := journalCount(t, s, "b-4-0", "b-4-1"); n != 1 {
		t.Errorf("%d journals of backlog event 4, want 1", n)
	}
	// The feed read again from 5: an event in the backlog stays as it
	// is.
	if _, err := pool.Exec(ctx, `UPDATE feed_cursor SET seq = 5 WHERE feed = $1`, feed); err != nil {
		t.Fatal(err)
	}
	again := backlogged(6, chain, ledger.BacklogEndpoint)
	again.Error = "read again"
	if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: 5, To: 7, Backlog: []ledger.BacklogEvent{again}}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Backlog(ctx, feed, chain, 10); err != nil || len(b) != 1 || b[0].Seq != 6 || b[0].Reason != ledger.BacklogQueued || b[0].Error != "" {
		t.Errorf("chain %d's backlog %+v %v, want event 6 as first moved", chain, b, err)
	}
}
