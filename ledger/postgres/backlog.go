package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// The statements of queries/backlog.sql.
var (
	qBacklogChains = Queries.Use("BacklogChains")
	qBacklog       = Queries.Use("Backlog")
	qDrainBacklog  = Queries.Use("DrainBacklog")
	qAddBacklog    = Queries.Use("AddBacklog")
)

// BacklogChains sums up feed's backlog, by chain; chains without one are
// absent.
func (s *Store) BacklogChains(ctx context.Context, feed string) (map[uint64]ledger.BacklogChain, error) {
	rows, err := s.pool.Query(ctx, qBacklogChains.SQL, feed)
	if err != nil {
		return nil, fmt.Errorf("read feed %s's backlog: %w", feed, err)
	}
	out := map[uint64]ledger.BacklogChain{}
	var chain uint64
	var b ledger.BacklogChain
	_, err = pgx.ForEachRow(rows, []any{&chain, &b.Events, &b.OldestSeq, &b.OldestAt}, func() error { out[chain] = b; return nil })
	if err != nil {
		return nil, fmt.Errorf("read feed %s's backlog: %w", feed, err)
	}
	return out, nil
}

// Backlog reads the oldest limit events of chain's backlog of feed, in
// seq order: what is to be booked of the chain before anything else.
func (s *Store) Backlog(ctx context.Context, feed string, chainID uint64, limit int) ([]ledger.BacklogEvent, error) {
	rows, err := s.pool.Query(ctx, qBacklog.SQL, feed, int64(chainID), limit)
	if err != nil {
		return nil, fmt.Errorf("read chain %d's backlog of feed %s: %w", chainID, feed, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.BacklogEvent, error) {
		var e ledger.BacklogEvent
		err := row.Scan(&e.Seq, &e.ChainID, &e.TxID, &e.Event, &e.EventAt, &e.Reason, &e.Error)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read chain %d's backlog of feed %s: %w", chainID, feed, err)
	}
	return out, nil
}

// validBacklog checks what a run moves to the backlog: events of the run.
func validBacklog(b *ledger.FeedBooking) error {
	for _, e := range b.Backlog {
		switch {
		case e.Seq <= b.From || e.Seq > b.To:
			return errs.Errorf(errs.Invalid, "feed %s: backlog event %d is not one of the run's, %d to %d", b.Feed, e.Seq, b.From+1, b.To)
		case e.ChainID == 0 || len(e.Event) == 0 || e.EventAt.IsZero():
			return errs.Errorf(errs.Invalid, "feed %s: backlog event %d without its chain, event or time", b.Feed, e.Seq)
		}
		switch e.Reason {
		case ledger.BacklogHalted, ledger.BacklogEndpoint, ledger.BacklogNoEndpoint, ledger.BacklogWalletNotOpened, ledger.BacklogQueued:
		default:
			return errs.Errorf(errs.Invalid, "feed %s: backlog event %d: reason %q", b.Feed, e.Seq, e.Reason)
		}
	}
	return nil
}

// drainBacklog deletes the backlog events a run books, in tx, or fails
// with errs.Conflict when one is not there: another consumer booked it.
func drainBacklog(ctx context.Context, tx pgx.Tx, feed string, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	ints := make([]int64, len(seqs))
	for i, s := range seqs {
		ints[i] = int64(s)
	}
	tag, err := tx.Exec(ctx, qDrainBacklog.SQL, feed, ints)
	if err != nil {
		return fmt.Errorf("book feed %s's backlog: %w", feed, err)
	}
	if int(tag.RowsAffected()) != len(seqs) {
		return errs.Errorf(errs.Conflict, "feed %s: %d of the %d backlog events to book are no longer there: another consumer booked them",
			feed, len(seqs)-int(tag.RowsAffected()), len(seqs))
	}
	return nil
}

// addBacklog moves a run's events to the backlog, in tx. An event there
// already (the feed read again from an earlier cursor) stays as it is.
func addBacklog(ctx context.Context, tx pgx.Tx, feed string, events []ledger.BacklogEvent) error {
	if len(events) == 0 {
		return nil
	}
	n := len(events)
	seqs, chains, txs, payloads, at, reasons, errors := make([]int64, n), make([]int64, n), make([]string, n), make([]string, n),
		make([]time.Time, n), make([]string, n), make([]*string, n)
	for i, e := range events {
		seqs[i], chains[i], txs[i], payloads[i], at[i], reasons[i] = int64(e.Seq), int64(e.ChainID), e.TxID, string(e.Event), e.EventAt, e.Reason
		if e.Error != "" {
			errors[i] = &e.Error
		}
	}
	_, err := tx.Exec(ctx, qAddBacklog.SQL, feed, seqs, chains, txs, payloads, at, reasons, errors)
	if err != nil {
		return fmt.Errorf("move events of feed %s to its backlog: %w", feed, err)
	}
	return nil
}
