package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of queries/stats.sql.
var (
	qFeedCursors     = Queries.Use("FeedCursors")
	qScanCursors     = Queries.Use("ScanCursors")
	qNegativeWallets = Queries.Use("NegativeWallets")
	qOpenTransits    = Queries.Use("OpenTransits")
	qLatestRuns      = Queries.Use("LatestRuns")
	qBacklogs        = Queries.Use("Backlogs")
)

// Stats is how far the ledger's loops have got and what needs an
// operator, read from the books for ledgerd's metrics: the same answer
// from every node, since it is the database's.
type Stats struct {
	// Feeds are the feed cursors, by feed.
	Feeds map[string]CursorStat
	// Scans are the scanners' cursors, by chain.
	Scans map[uint64]CursorStat
	// NegativeWallets counts, by chain, the wallet accounts whose balance
	// is below zero now.
	NegativeWallets map[uint64]int
	// OpenTransits counts the transits with one end booked;
	// OldestOpenTransit is when the longest open one opened (nil if none).
	OpenTransits      int
	OldestOpenTransit *time.Time
	// Reconciled is each scanned chain's latest reconciliation run (a
	// chain is reconciled only once its scanner runs).
	Reconciled map[uint64]RunStat
	// Backlogs are the feed consumer's backlogs (of every feed), by
	// chain; a chain without one is absent.
	Backlogs map[uint64]BacklogChain
}

// CursorStat is a cursor: where it is, and when it last moved.
type CursorStat struct {
	Position  uint64
	UpdatedAt time.Time
}

// RunStat sums up a reconciliation run.
type RunStat struct {
	Block                 uint64
	Complete              bool
	Differences, Deferred int
	FinishedAt            time.Time
}

// Stats reads the ledger's stats in one round trip. The negative wallets
// are counted over every balance: one scan of the balance table (one row
// per account), which is why ledgerd's metrics cache the answer.
func (s *Store) Stats(ctx context.Context) (Stats, error) {
	st := Stats{Feeds: map[string]CursorStat{}, Scans: map[uint64]CursorStat{}, NegativeWallets: map[uint64]int{}, Reconciled: map[uint64]RunStat{},
		Backlogs: map[uint64]BacklogChain{}}
	b := &pgx.Batch{}
	var feed string
	var chain uint64
	var c CursorStat
	b.Queue(qFeedCursors.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&feed, &c.Position, &c.UpdatedAt}, func() error { st.Feeds[feed] = c; return nil })
		return err
	})
	b.Queue(qScanCursors.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &c.Position, &c.UpdatedAt}, func() error { st.Scans[chain] = c; return nil })
		return err
	})
	var negative int
	b.Queue(qNegativeWallets.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &negative}, func() error { st.NegativeWallets[chain] = negative; return nil })
		return err
	})
	b.Queue(qOpenTransits.SQL).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.OpenTransits, &st.OldestOpenTransit)
	})
	var r RunStat
	b.Queue(qLatestRuns.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &r.Block, &r.Complete, &r.Differences, &r.Deferred, &r.FinishedAt},
			func() error { st.Reconciled[chain] = r; return nil })
		return err
	})
	var backlog BacklogChain
	b.Queue(qBacklogs.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &backlog.Events, &backlog.OldestSeq, &backlog.OldestAt},
			func() error { st.Backlogs[chain] = backlog; return nil })
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Stats{}, fmt.Errorf("read the ledger's stats: %w", err)
	}
	return st, nil
}
