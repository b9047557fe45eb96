-- Allocated transactions signerd refused to sign (gaps.go): their nonces
-- given back, or the gap filled.

-- name: CheckRelease
-- For a release of the ALLOCATED transactions among $3: the lowest nonce
-- they hold (NULL: none is ALLOCATED), and whether a later nonce of the
-- signer is held by a transaction that is not one of them. Locks the
-- signer's nonce cursor first: a concurrent allocation (there is none
-- under the fence, but a stale owner's would) waits and then fails.
WITH cursor AS (SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2 FOR UPDATE),
     released AS (SELECT min(nonce) AS lowest FROM tx WHERE tx_id = ANY($3) AND state = 'ALLOCATED')
SELECT (SELECT lowest FROM released),
	EXISTS (SELECT 1 FROM tx, released WHERE chain_id = $1 AND signer = $2 AND nonce > released.lowest
		AND NOT (tx_id = ANY($3) AND state = 'ALLOCATED'))
FROM (SELECT count(*) FROM cursor) AS locked;

-- name: RewindNonceCursor
-- Moves the signer's nonce cursor back to $5, the lowest nonce released,
-- when no transaction of the signer holds that nonce or a later one.
UPDATE nonce_cursor SET next_nonce = $5
WHERE chain_id = $1 AND signer = $2 AND next_nonce > $5
  AND NOT EXISTS (SELECT 1 FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce >= $5)
  AND (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: LockGap
-- Locks transaction $1, which must be in one of the states $2, and reads
-- the nonce it gives up and its route.
SELECT nonce, route FROM tx WHERE tx_id = $1 AND state = ANY($2) FOR UPDATE;

-- name: InsertGapFiller
-- Inserts the transaction that fills a gap, id $5: a 0-value transfer
-- from the signer to itself ($8) with 21,000 gas, ALLOCATED at nonce $11
-- with the fees $12 to $14, as request $6 (hash $7) with route $9 and
-- metadata $10.
INSERT INTO tx (tx_id, chain_id, signer, request_id, request_hash, to_address, value, data, gas, gas_limit, route, metadata, state, nonce, reason,
	signing_max_fee_per_gas, signing_max_priority_fee_per_gas, signing_gas_price)
SELECT $5, $1, $2, $6, $7, $8, 0, '', 21000, 21000, $9, $10, 'ALLOCATED', $11, 'gap_fill', $12, $13, $14
WHERE (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;
