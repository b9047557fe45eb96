-- The ledger's stats for ledgerd's metrics (stats.go), read in one batch:
-- one round trip.

-- name: FeedCursors
-- Every feed's cursor and when it last moved.
SELECT feed, seq, updated_at FROM feed_cursor;

-- name: ScanCursors
-- Every chain's scan cursor and when it last moved.
SELECT chain_id, block_number, updated_at FROM scan_cursor;

-- name: NegativeWallets
-- Counts, by chain, the wallet accounts whose balance is below zero: one
-- scan of the balance table (one row per account), which is why ledgerd's
-- metrics cache the stats.
SELECT a.chain_id, count(*) FROM balance b JOIN account a USING (account_id)
WHERE a.kind = 'wallet' AND b.amount < 0 GROUP BY a.chain_id;

-- name: OpenTransits
-- How many transits are open, and when the longest open one opened.
SELECT count(*), min(opened_at) FROM transit WHERE status = 'open';

-- name: LatestRuns
-- Each scanned chain's latest reconciliation run (a chain is reconciled
-- only once its scanner runs).
SELECT c.chain_id, r.block_number, r.status = 'complete', r.differences, r.deferred, r.finished_at
FROM scan_cursor c, LATERAL (
	SELECT * FROM reconciliation_run WHERE chain_id = c.chain_id ORDER BY run_id DESC LIMIT 1) r;

-- name: Backlogs
-- Sums up the backlogs of every feed by chain, as BacklogChains does one
-- feed's.
SELECT chain_id, count(*), min(seq), min(event_at) FROM feed_backlog GROUP BY chain_id;
