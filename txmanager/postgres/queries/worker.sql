-- The signer worker's reads (worker.go): its queue, the state of its
-- signer, and what its open transactions may still cost.

-- name: OpenTxs
-- Up to $4 of a signer's transactions in the states $3 that are not
-- final, in acceptance order, after the transaction $5 when it is given:
-- the worker's queue, or a page of it.
SELECT tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at
FROM tx
WHERE chain_id = $1 AND signer = $2 AND state = ANY($3)
  AND state NOT IN ('CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED')
  AND ($5::uuid IS NULL OR accept_seq > (SELECT after.accept_seq FROM tx after WHERE after.tx_id = $5))
ORDER BY accept_seq LIMIT $4;

-- name: ParentStates
-- The states of the transactions $1, each once: the parents of every
-- transaction the worker is about to take on, read in one statement
-- however many there are. An id with no transaction has no row.
SELECT tx_id, state FROM tx WHERE tx_id = ANY($1::uuid[]);

-- name: CountOpenTxs
-- How many of a signer's transactions are in the states $3 and not final.
SELECT count(*) FROM tx
WHERE chain_id = $1 AND signer = $2 AND state = ANY($3)
  AND state NOT IN ('CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED');

-- name: LockSubState
-- Locks a transaction and reads its sub-state ('' for none).
SELECT coalesce(sub_state, '') FROM tx WHERE tx_id = $1 FOR UPDATE;

-- name: RawAttempts
-- The raw signed transactions of the current attempts of transactions $1.
SELECT a.tx_id, a.raw FROM attempt a JOIN tx t ON t.tx_id = a.tx_id AND a.attempt = t.current_attempt
WHERE a.tx_id = ANY($1);

-- name: SignerStatus
-- A signer's status in one statement: owner and lease expiry while held,
-- fencing token, next nonce, transactions by state, and since when the
-- oldest open one waits.
SELECT
	(SELECT owner_node FROM signer_lease WHERE chain_id = $1 AND signer = $2 AND expires_at > now()),
	(SELECT fencing_token FROM signer_lease WHERE chain_id = $1 AND signer = $2),
	(SELECT expires_at FROM signer_lease WHERE chain_id = $1 AND signer = $2 AND expires_at > now()),
	(SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2),
	coalesce((SELECT jsonb_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM tx
		WHERE chain_id = $1 AND signer = $2 GROUP BY state) c), '{}'),
	(SELECT min(created_at) FROM tx WHERE chain_id = $1 AND signer = $2
		AND state NOT IN ('CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED'));

-- name: PendingCost
-- The most a signer's open transactions may still take from its balance:
-- value + fee cap x gas limit of every transaction that passed simulation
-- and is not mined, judged by its nonce against the chain's mined nonce
-- $3 (below it, the balance paid already). A transaction not yet signed
-- is priced at its own fee cap, else at $4, the market's cap now.
SELECT coalesce(sum(t.value + coalesce(a.max_fee_per_gas, a.gas_price, t.max_fee_per_gas, $4::numeric) * coalesce(t.gas_limit, 0)), 0)::text
FROM tx t LEFT JOIN attempt a ON a.tx_id = t.tx_id AND a.attempt = t.current_attempt
WHERE t.chain_id = $1 AND t.signer = $2
  AND t.state IN ('SIMULATED', 'PENDING_APPROVAL', 'ALLOCATED', 'SIGNED', 'BROADCASTED')
  AND (t.nonce IS NULL OR t.nonce >= $3);
