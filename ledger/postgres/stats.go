package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/txfence/txfence/ledger"
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
	b.Queue(`SELECT feed, seq, updated_at FROM feed_cursor`).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&feed, &c.Position, &c.UpdatedAt}, func() error { st.Feeds[feed] = c; return nil })
		return err
	})
	b.Queue(`SELECT chain_id, block_number, updated_at FROM scan_cursor`).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &c.Position, &c.UpdatedAt}, func() error { st.Scans[chain] = c; return nil })
		return err
	})
	var negative int
	b.Queue(`
		SELECT a.chain_id, count(*) FROM balance b JOIN account a USING (account_id)
		WHERE a.kind = 'wallet' AND b.amount < 0 GROUP BY a.chain_id`).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &negative}, func() error { st.NegativeWallets[chain] = negative; return nil })
		return err
	})
	b.Queue(`SELECT count(*), min(opened_at) FROM transit WHERE status = 'open'`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.OpenTransits, &st.OldestOpenTransit)
	})
	var r ledger.RunStat
	b.Queue(`
		SELECT c.chain_id, r.block_number, r.status = 'complete', r.differences, r.deferred, r.finished_at
		FROM scan_cursor c, LATERAL (
			SELECT * FROM reconciliation_run WHERE chain_id = c.chain_id ORDER BY run_id DESC LIMIT 1) r`).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &r.Block, &r.Complete, &r.Differences, &r.Deferred, &r.FinishedAt},
			func() error { st.Reconciled[chain] = r; return nil })
		return err
	})
	var backlog ledger.BacklogChain
	b.Queue(`SELECT chain_id, count(*), min(seq), min(event_at) FROM feed_backlog GROUP BY chain_id`).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&chain, &backlog.Events, &backlog.OldestSeq, &backlog.OldestAt},
			func() error { st.Backlogs[chain] = backlog; return nil })
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return ledger.Stats{}, fmt.Errorf("read the ledger's stats: %w", err)
	}
	return st, nil
}
