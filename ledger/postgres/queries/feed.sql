-- The feed consumer's bookings (feed.go): its cursor, the wallet registry,
-- and journals read back by key for reversals.

-- name: FeedCursor
-- The seq up to which feed $1's events are booked; no row before any.
SELECT seq FROM feed_cursor WHERE feed = $1;

-- name: Wallets
-- The wallet registry, with the block at which the scanner opened each
-- wallet (NULL until it does).
SELECT chain_id, address, opened_block, opened_hash FROM wallet ORDER BY chain_id, address;

-- name: InsertFeedCursor
-- Makes feed $1's cursor at 0 unless it exists, so that MoveFeedCursor
-- finds a row to compare with.
INSERT INTO feed_cursor (feed, seq) VALUES ($1, 0) ON CONFLICT DO NOTHING;

-- name: MoveFeedCursor
-- Moves feed $1's cursor from $2 to $3; no row when it is not at $2 (another
-- consumer moved it).
UPDATE feed_cursor SET seq = $3, updated_at = now() WHERE feed = $1 AND seq = $2;

-- name: RegisterWallets
-- Adds the wallets of parallel arrays $1 (chain) and $2 (address) from
-- source $3 ('signer' or 'configured'), in key order so that concurrent
-- registrations never deadlock; a wallet registered already stays as it is.
INSERT INTO wallet (chain_id, address, source)
SELECT c, a, $3 FROM unnest($1::bigint[], $2::bytea[]) AS w(c, a) ORDER BY 1, 2
ON CONFLICT DO NOTHING;

-- name: ReversalOf
-- The journal that reverses journal $1; no row when none does.
SELECT journal_id FROM journal WHERE reverses = $1;

-- name: JournalByKey
-- The journal booked under key $1, without its legs (JournalLegs).
SELECT journal_id, kind, chain_id, tx_hash, block_number, block_hash, coalesce(status, ''), reverses
FROM journal WHERE idem_key = $1;

-- name: JournalLegs
-- Journal $1's entries with their accounts' keys, in booking order: the
-- legs a reversal negates.
SELECT a.chain_id, a.asset, a.kind, a.address, e.amount::text
FROM entry e JOIN account a USING (account_id) WHERE e.journal_id = $1 ORDER BY e.entry_id;
