-- Posting journals (books.go): accounts made as legs need them, journals
-- and their entries written in one statement, and balances read.

-- name: InsertAccounts
-- Makes the accounts of parallel arrays $1 to $4 (chain, asset, kind,
-- address) that do not exist, in key order, so that concurrent postings
-- lock the account keys in one order and never deadlock.
INSERT INTO account (chain_id, asset, kind, address)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[])
ORDER BY 1, 2, 3, 4
ON CONFLICT DO NOTHING;

-- name: AccountsByKey
-- The ids of the accounts of parallel arrays $1 to $4 (chain, asset, kind,
-- address), with their keys. InsertAccounts runs first: a concurrent
-- insert of the same account commits first or waits, and either way it
-- is read.
SELECT a.account_id, a.chain_id, a.asset, a.kind, a.address
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[]) AS k(chain_id, asset, kind, address)
JOIN account a USING (chain_id, asset, kind, address);

-- name: WriteJournals
-- Writes the journals of parallel arrays $1 to $10 whose keys are free,
-- the first of each key in arrival order, and the entries of $11 to $13
-- (journal key, account, amount) of those written; returns the journals
-- written. One statement, so a flush is one round trip and holds its
-- balance rows only while the server works; journals go in key order, so
-- concurrent flushes lock them in one order.
WITH written AS (
	INSERT INTO journal (kind, idem_key, payload_hash, chain_id, tx_hash, block_number, block_hash, status, reverses, memo)
	SELECT kind, idem_key, payload_hash, chain_id, tx_hash, block_number, block_hash, status, reverses, memo
	FROM unnest($1::text[], $2::text[], $3::bytea[], $4::bigint[], $5::bytea[], $6::bigint[], $7::bytea[], $8::text[], $9::bigint[], $10::jsonb[])
		WITH ORDINALITY AS i(kind, idem_key, payload_hash, chain_id, tx_hash, block_number, block_hash, status, reverses, memo, arrival)
	ORDER BY idem_key, arrival
	ON CONFLICT (idem_key) DO NOTHING
	RETURNING idem_key, journal_id, payload_hash
), entries AS (
	INSERT INTO entry (journal_id, account_id, amount)
	SELECT w.journal_id, l.account_id, l.amount
	FROM unnest($11::text[], $12::bigint[], $13::numeric[]) AS l(idem_key, account_id, amount)
	JOIN written w USING (idem_key)
)
SELECT idem_key, journal_id, payload_hash FROM written;

-- name: BookedUnderKey
-- The journal booked under key $1 and its payload hash: a replay when the
-- hash is the posting's, a conflict otherwise.
SELECT journal_id, payload_hash FROM journal WHERE idem_key = $1;

-- name: Balance
-- The current balance of the account with key $1 to $4 (chain, asset,
-- kind, address): no row when there is no such account, a NULL amount
-- when it has no balance row yet.
SELECT b.amount::text FROM account a LEFT JOIN balance b USING (account_id)
WHERE a.chain_id = $1 AND a.asset = $2 AND a.kind = $3 AND a.address = $4;
