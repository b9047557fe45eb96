-- The block scanner's bookings (scan.go): its cursor, the recent blocks it
-- keeps to find a reorg's fork point, wallet openings and the
-- transactions wallets sent.

-- name: ScanCursor
-- The last block the scanner booked on chain $1; no row before its first
-- start.
SELECT block_number, block_hash FROM scan_cursor WHERE chain_id = $1;

-- name: StartScanCursor
-- Sets chain $1's scan cursor at block $2 (hash $3) unless one is set: a
-- row affected says this start set it.
INSERT INTO scan_cursor (chain_id, block_number, block_hash) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING;

-- name: InsertScannedBlocks
-- Keeps blocks of chain $1 as scanned: parallel arrays $2 to $4 (number,
-- hash, parent hash).
INSERT INTO scanned_block (chain_id, block_number, block_hash, parent_hash)
SELECT $1, * FROM unnest($2::bigint[], $3::bytea[], $4::bytea[]);

-- name: ScannedBlocks
-- The blocks of chain $1 the scanner keeps, newest first.
SELECT block_number, block_hash, parent_hash FROM scanned_block WHERE chain_id = $1 ORDER BY block_number DESC;

-- name: UnopenedWallets
-- The wallets of chain $1 the scanner has not opened, by address.
SELECT address FROM wallet WHERE chain_id = $1 AND opened_block IS NULL ORDER BY address;

-- name: ForgetScannedBlocksUpTo
-- Forgets chain $1's scanned blocks up to block $2: those that left the
-- scanner's window.
DELETE FROM scanned_block WHERE chain_id = $1 AND block_number <= $2;

-- name: MoveScanCursor
-- Moves chain $1's scan cursor from block $2 (hash $3) to block $4 (hash
-- $5); no row when it is not at $2 (another scanner moved it).
UPDATE scan_cursor SET block_number = $4, block_hash = $5, updated_at = now()
WHERE chain_id = $1 AND block_number = $2 AND block_hash = $3;

-- name: OpenWallets
-- Opens wallets $2 of chain $1 at block $3 (hash $4); the caller counts
-- the rows to learn whether each was registered and not opened yet.
UPDATE wallet SET opened_block = $3, opened_hash = $4
WHERE chain_id = $1 AND address = ANY($2) AND opened_block IS NULL;

-- name: InsertWalletTxs
-- Records the transactions of parallel arrays $2 (hash) and $5 (sender)
-- that wallets of chain $1 sent in block $4 (hash $3); one seen before
-- stays as it is.
INSERT INTO wallet_tx (chain_id, tx_hash, block_hash, block_number, sender)
SELECT $1, h, $3, $4, s FROM unnest($2::bytea[], $5::bytea[]) AS t(h, s)
ON CONFLICT DO NOTHING;

-- name: IsScannedBlock
-- Whether the scanner keeps block $2 (hash $3) of chain $1: a rewind's
-- fork point must be one.
SELECT EXISTS (SELECT 1 FROM scanned_block WHERE chain_id = $1 AND block_number = $2 AND block_hash = $3);

-- name: UnopenWalletsAfter
-- Unopens the wallets of chain $1 opened after block $2, and returns them:
-- the scanner opens them again at the fork point.
UPDATE wallet SET opened_block = NULL, opened_hash = NULL
WHERE chain_id = $1 AND opened_block > $2 RETURNING address;

-- name: ForgetWalletTxsAfter
-- Forgets the wallet transactions of chain $1 seen in blocks after $2,
-- which a rewind undid.
DELETE FROM wallet_tx WHERE chain_id = $1 AND block_number > $2;

-- name: ForgetScannedBlocksAfter
-- Forgets chain $1's scanned blocks after block $2, which a rewind undid.
DELETE FROM scanned_block WHERE chain_id = $1 AND block_number > $2;

-- name: UnreversedAfter
-- Chain $1's deposits and openings booked in blocks after $2 and not
-- reversed, with their legs: one row per entry, by journal then entry.
SELECT j.journal_id, j.kind, j.idem_key, j.tx_hash, j.block_number, j.block_hash, coalesce(j.status, ''),
	a.chain_id, a.asset, a.kind, a.address, e.amount::text
FROM journal j
JOIN entry e USING (journal_id)
JOIN account a USING (account_id)
WHERE j.chain_id = $1 AND j.block_number > $2 AND j.kind IN ('deposit', 'opening')
	AND NOT EXISTS (SELECT 1 FROM journal r WHERE r.reverses = j.journal_id)
ORDER BY j.journal_id, e.entry_id;
