-- Transactions as the API reads them (tx.go). A statement that returns
-- transactions ends its row with the columns scanTx reads, in its order,
-- as GetTx does; TestQueries holds every copy of that list to GetTx's.

-- name: GetTx
-- One transaction.
SELECT tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at
FROM tx WHERE tx_id = $1;

-- name: GetTxByRequest
-- The transaction a signer's request id names, with the hash of the
-- request that created it: a repeated create compares it with its own.
SELECT request_hash, tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at
FROM tx WHERE chain_id = $1 AND signer = $2 AND request_id = $3;

-- name: ListTxs
-- A page of transactions, newest first. Each filter applies unless its
-- parameter is NULL: $1 chain, $2 signer, $3 and $4 (chain ids and
-- signers in parallel) a set of signers, $5 state, $6 sub-state, $7 and
-- $8 created at or after, and before; $9 and $10 the cursor, the last
-- row of the previous page (created_at, tx_id). $11 rows at most.
-- Store.List runs it planned for its arguments at every call (tx.go says
-- why).
SELECT tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at
FROM tx
WHERE ($1::bigint IS NULL OR chain_id = $1)
  AND ($2::bytea IS NULL OR signer = $2)
  AND ($3::bigint[] IS NULL OR (chain_id, signer) IN (SELECT * FROM unnest($3::bigint[], $4::bytea[])))
  AND ($5::text IS NULL OR state = $5)
  AND ($6::text IS NULL OR sub_state = $6)
  AND ($7::timestamptz IS NULL OR created_at >= $7)
  AND ($8::timestamptz IS NULL OR created_at < $8)
  AND ($9::timestamptz IS NULL OR (created_at, tx_id) < ($9, $10::uuid))
ORDER BY created_at DESC, tx_id DESC LIMIT $11;

-- name: LockTxState
-- Locks a transaction's row and reads its state: a state change reads the
-- state it replaces.
SELECT state FROM tx WHERE tx_id = $1 FOR UPDATE;

-- name: CancelTx
-- Cancels a transaction that has no nonce (the caller holds its row lock
-- and checked its state), with reason $2.
UPDATE tx SET state = 'CANCELLED', sub_state = NULL, reason = $2, updated_at = now()
WHERE tx_id = $1
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;
