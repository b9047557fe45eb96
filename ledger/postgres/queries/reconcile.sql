-- Reconciliation (reconcile.go): one chain's run, in a transaction that
-- holds the chain's reconciliation lock, and the stored reports.
--
-- A statement that returns runs has the columns scanRun reads, in its
-- order, as ReconciliationRun does; TestQueries holds every copy of that
-- list to ReconciliationRun's.

-- name: LockReconciliation
-- Takes chain $1's reconciliation lock until the transaction ends: two
-- runs of one chain (two ledgerd nodes) go one after the other. An
-- advisory lock: a node that dies mid-run releases it with its connection.
SELECT pg_advisory_xact_lock(hashtextextended('txfence/ledger/reconcile', $1));

-- name: ScannedHash
-- The hash of block $2 of chain $1, when the scanner still keeps it in
-- its window of recent blocks.
SELECT block_hash FROM scanned_block WHERE chain_id = $1 AND block_number = $2;

-- name: FeedCursorBeforeBacklog
-- Feed $1's cursor, or, when chain $2 has events in the feed's backlog,
-- the seq before the oldest: a run that compared the chain's wallets past
-- it would book the backlogged settlements to suspense, and the backlog
-- then book them again. No row before the feed's first booking.
SELECT least(c.seq, (SELECT min(seq) - 1 FROM feed_backlog WHERE feed = $1 AND chain_id = $2))
FROM feed_cursor c WHERE c.feed = $1;

-- name: NewestRun
-- Chain $1's newest stored run, without its items.
SELECT run_id, chain_id, block_number, block_hash, trigger, status, problem, differences, deferred, started_at, finished_at
FROM reconciliation_run WHERE chain_id = $1 ORDER BY run_id DESC LIMIT 1;

-- name: NewestCompleteRun
-- Chain $1's newest complete run, without its items.
SELECT run_id, chain_id, block_number, block_hash, trigger, status, problem, differences, deferred, started_at, finished_at
FROM reconciliation_run WHERE chain_id = $1 AND status = 'complete' ORDER BY run_id DESC LIMIT 1;

-- name: WalletsOpenedBy
-- Chain $1's wallets opened at or before block $2, by address.
SELECT address FROM wallet WHERE chain_id = $1 AND opened_block <= $2 ORDER BY address;

-- name: Holdings
-- What the books hold as of block $2, per asset, for each wallet of chain
-- $1 opened by then: in its wallet account and in its suspense account.
-- The balance less the entries of the chain's journals after the block
-- and of those without a block is the sum of the entries up to it (the
-- database keeps every balance the sum of its entries), at a cost that
-- grows with the journals after the block, not with the whole history.
WITH later AS (
	SELECT e.account_id, sum(e.amount) AS amount
	FROM journal j JOIN entry e USING (journal_id)
	WHERE j.chain_id = $1 AND (j.block_number > $2 OR j.block_number IS NULL)
	GROUP BY e.account_id
)
SELECT a.address, a.asset,
	coalesce(sum(coalesce(b.amount, 0) - coalesce(l.amount, 0)) FILTER (WHERE a.kind = 'wallet'), 0)::text,
	coalesce(sum(coalesce(b.amount, 0) - coalesce(l.amount, 0)) FILTER (WHERE a.kind = 'suspense'), 0)::text
FROM account a
JOIN wallet w ON w.chain_id = a.chain_id AND w.address = a.address AND w.opened_block <= $2
LEFT JOIN balance b USING (account_id)
LEFT JOIN later l USING (account_id)
WHERE a.chain_id = $1 AND a.kind IN ('wallet', 'suspense')
GROUP BY a.address, a.asset
ORDER BY a.address, a.asset;

-- name: Unbooked
-- The transactions chain $1's wallets sent in blocks $2 to $3, after each
-- wallet's opening, that no journal books (none under its ledger.TxKey),
-- by sender, block and hash; each says whether the scanner saw it less
-- than $4 seconds ago, by the database's clock.
SELECT t.sender, t.tx_hash, t.block_number, t.seen_at > now() - make_interval(secs => $4)
FROM wallet_tx t
JOIN wallet w ON w.chain_id = t.chain_id AND w.address = t.sender
WHERE t.chain_id = $1 AND t.block_number BETWEEN $2 AND $3 AND t.block_number > w.opened_block
	AND NOT EXISTS (SELECT 1 FROM journal j
		WHERE j.idem_key = 'tx:' || t.chain_id || ':0x' || encode(t.tx_hash, 'hex') || ':0x' || encode(t.block_hash, 'hex'))
ORDER BY t.sender, t.block_number, t.tx_hash;

-- name: BookedKeys
-- The journals booked under any of keys $1.
SELECT idem_key, journal_id FROM journal WHERE idem_key = ANY($1);

-- name: NewRunID
-- Reserves the id of the run being made, for the memos of its journals.
SELECT nextval(pg_get_serial_sequence('reconciliation_run', 'run_id'));

-- name: InsertRun
-- Stores a run under the id NewRunID reserved ($1); its items follow by
-- COPY.
INSERT INTO reconciliation_run (run_id, chain_id, block_number, block_hash, trigger, status, problem, differences, deferred, started_at, finished_at)
OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: ReconciliationRuns
-- A page of every chain's runs, newest first, without their items: those
-- before run $1, $2 at most. (ChainReconciliationRuns reads one chain's
-- through its index.)
SELECT run_id, chain_id, block_number, block_hash, trigger, status, problem, differences, deferred, started_at, finished_at
FROM reconciliation_run WHERE run_id < $1 ORDER BY run_id DESC LIMIT $2;

-- name: ChainReconciliationRuns
-- A page of chain $1's runs, newest first, without their items: those
-- before run $2, $3 at most.
SELECT run_id, chain_id, block_number, block_hash, trigger, status, problem, differences, deferred, started_at, finished_at
FROM reconciliation_run WHERE chain_id = $1 AND run_id < $2 ORDER BY run_id DESC LIMIT $3;

-- name: ReconciliationRun
-- Run $1, without its items (ReconciliationItems).
SELECT run_id, chain_id, block_number, block_hash, trigger, status, problem, differences, deferred, started_at, finished_at
FROM reconciliation_run WHERE run_id = $1;

-- name: ReconciliationItems
-- Run $1's items, by address and asset, the asset in byte order whatever
-- the database's collation.
SELECT address, asset, ledger_balance::text, chain_balance::text, difference::text, cause, journal_id, pending, negative
FROM reconciliation_item WHERE run_id = $1 ORDER BY address, asset COLLATE "C";
