package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/txfence/txfence/ledger"
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

// Stats reads the ledger's stats in one round trip. The negative wallets
// are counted over every balance: one scan of the balance table (one row
// per account), which is why ledgerd's metrics cache the answer.
func (s *Store) Stats(ctx context.Context) (ledger.Stats, error) {
	st := ledger.Stats{Feeds: map[string]ledger.CursorStat{}, Scans: map[uint64]ledger.CursorStat{}, NegativeWallets: map[uint64]int{}, Reconciled: map[uint64]ledger.RunStat{},
		Backlogs: map[uint64]ledger.BacklogChain{}}
	b := &pgx.Batch{}
	var feed string
	var chain uint64
	var c ledger.CursorStat
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
	var r ledger.RunStat
	b.Queue(qLatestRuns.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &r.Block, &r.Complete, &r.Differences, &r.Deferred, &r.FinishedAt},
			func() error { st.Reconciled[chain] = r; return nil })
		return err
	})
	var backlog ledger.BacklogChain
	b.Queue(qBacklogs.SQL).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &backlog.Events, &backlog.OldestSeq, &backlog.OldestAt},
			func() error { st.Backlogs[chain] = backlog; return nil })
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return ledger.Stats{}, fmt.Errorf("read the ledger's stats: %w", err)
	}
	return st, nil
}
