package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
	st := Stats{Feeds: map[string]CursorStat{}, Scans: map[uint64]CursorStat{}, NegativeWallets: map[uint64]int{}, Reconciled: map[uint64]RunStat{}}
	b := &pgx.Batch{}
	b.Queue(`SELECT feed, seq, updated_at FROM feed_cursor`).Query(func(rows pgx.Rows) error {
		return eachRow(rows, func() error {
			var feed string
			var c CursorStat
			if err := rows.Scan(&feed, &c.Position, &c.UpdatedAt); err != nil {
				return err
			}
			st.Feeds[feed] = c
			return nil
		})
	})
	b.Queue(`SELECT chain_id, block_number, updated_at FROM scan_cursor`).Query(func(rows pgx.Rows) error {
		return eachRow(rows, func() error {
			var chain uint64
			var c CursorStat
			if err := rows.Scan(&chain, &c.Position, &c.UpdatedAt); err != nil {
				return err
			}
			st.Scans[chain] = c
			return nil
		})
	})
	b.Queue(`
		SELECT a.chain_id, count(*) FROM balance b JOIN account a USING (account_id)
		WHERE a.kind = 'wallet' AND b.amount < 0 GROUP BY a.chain_id`).Query(func(rows pgx.Rows) error {
		return eachRow(rows, func() error {
			var chain uint64
			var n int
			if err := rows.Scan(&chain, &n); err != nil {
				return err
			}
			st.NegativeWallets[chain] = n
			return nil
		})
	})
	b.Queue(`SELECT count(*), min(opened_at) FROM transit WHERE status = 'open'`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.OpenTransits, &st.OldestOpenTransit)
	})
	b.Queue(`
		SELECT c.chain_id, r.block_number, r.status = 'complete', r.differences, r.deferred, r.finished_at
		FROM scan_cursor c, LATERAL (
			SELECT * FROM reconciliation_run WHERE chain_id = c.chain_id ORDER BY run_id DESC LIMIT 1) r`).Query(func(rows pgx.Rows) error {
		return eachRow(rows, func() error {
			var chain uint64
			var r RunStat
			if err := rows.Scan(&chain, &r.Block, &r.Complete, &r.Differences, &r.Deferred, &r.FinishedAt); err != nil {
				return err
			}
			st.Reconciled[chain] = r
			return nil
		})
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return Stats{}, fmt.Errorf("read the ledger's stats: %w", err)
	}
	return st, nil
}

// eachRow calls fn for each of rows, which it closes.
func eachRow(rows pgx.Rows, fn func() error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(); err != nil {
			return err
		}
	}
	return rows.Err()
}
