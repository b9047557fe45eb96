-- The state changes of the owner's worker (transitions.go), and the move
-- statements every part of the store changes one transaction's state with.
-- Every write is fenced (see queries/lease.sql for the convention).
--
-- A move statement moves transaction $5 from one of the states $6 to the
-- state $7 under the fence, setting what its name says, and returns the
-- transaction as changed; its own columns start at $8. No row: fenced, or
-- the transaction was in none of the states (HoldsLease tells which).
-- There is one per kind of change rather than one that takes its SET list
-- as an argument.

-- name: MoveToSimulated
-- A passed simulation: the gas limit $8 fixed, the sub-state cleared.
UPDATE tx SET state = $7, updated_at = now(), gas_limit = $8, sub_state = NULL
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveToPendingApproval
-- Parked until approvals arrive: the gas limit $8 fixed, stops waiting at
-- $9, reason $10 (none when empty).
UPDATE tx SET state = $7, updated_at = now(), gas_limit = $8, approval_expires_at = $9, sub_state = NULL, reason = nullif($10, '')
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveApproved
-- The approvals suffice: sub-state and reason cleared.
UPDATE tx SET state = $7, updated_at = now(), sub_state = NULL, reason = NULL
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveWithReason
-- A change that says why (a failure, a mined cancel): reason $8, the
-- sub-state cleared.
UPDATE tx SET state = $7, updated_at = now(), sub_state = NULL, reason = $8
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveKeepingReason
-- A change that keeps the reason (a transaction mined at the configured
-- depth): the sub-state cleared.
UPDATE tx SET state = $7, updated_at = now(), sub_state = NULL
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveSubState
-- A new sub-state $8 (NULL: none) within the state, with reason $9 (none
-- when empty).
UPDATE tx SET state = $7, updated_at = now(), sub_state = $8, reason = nullif($9, '')
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveGivingUpNonce
-- Gives up the transaction's nonce (a refusal by signerd, a gap filled, an
-- abandon): nonce and the fees it was to be signed with cleared, reason
-- $8; $9, when not NULL, is when a transaction sent back to
-- PENDING_APPROVAL stops waiting.
UPDATE tx SET state = $7, updated_at = now(), nonce = NULL, sub_state = NULL, reason = $8,
	signing_max_fee_per_gas = NULL, signing_max_priority_fee_per_gas = NULL, signing_gas_price = NULL,
	approval_expires_at = coalesce($9::timestamptz, approval_expires_at)
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: MoveFoundMined
-- A transaction found mined at a nonce the database had not assigned
-- (restore.go): nonce $8, gas limit $9, the fees $10 to $12 it was signed
-- with, attempt 1 current, reason $13.
UPDATE tx SET state = $7, updated_at = now(), nonce = $8, gas_limit = $9, signing_max_fee_per_gas = $10, signing_max_priority_fee_per_gas = $11,
	signing_gas_price = $12, current_attempt = 1, approval_expires_at = NULL, sub_state = NULL, reason = $13
WHERE tx_id = $5 AND state = ANY($6) AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: TxState
-- A transaction's state, to say why a move touched nothing.
SELECT state FROM tx WHERE tx_id = $1;

-- name: Allocate
-- Gives consecutive nonces from $6 to the transactions $5 that are still
-- SIMULATED, in the order given, with the fees each will be signed with
-- ($7 to $9, parallel to $5), and moves them to ALLOCATED. Driven from the
-- ids, so each row is found by its primary key whatever the planner knows
-- of the table; locked before it is numbered, so a cancel in between
-- leaves no hole in the nonces.
WITH wanted AS (
	SELECT w.tx_id, w.ord FROM unnest($5::uuid[]) WITH ORDINALITY AS w (tx_id, ord)
), ready AS (
	SELECT t.tx_id, w.ord FROM wanted w JOIN tx t ON t.tx_id = w.tx_id
	WHERE t.state = 'SIMULATED' AND t.chain_id = $1 AND t.signer = $2
	FOR UPDATE OF t
), numbered AS (
	-- Names of their own: tx's are the ones RETURNING means.
	SELECT tx_id AS n_id, ord AS n_ord, $6::bigint + row_number() OVER (ORDER BY ord) - 1 AS n_nonce FROM ready
)
UPDATE tx SET state = 'ALLOCATED', nonce = n_nonce, updated_at = now(),
	signing_max_fee_per_gas = ($7::text[])[n_ord]::numeric,
	signing_max_priority_fee_per_gas = ($8::text[])[n_ord]::numeric,
	signing_gas_price = ($9::text[])[n_ord]::numeric
FROM numbered WHERE tx.tx_id = n_id AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: AdvanceNonceCursor
-- Moves the signer's nonce cursor up to $5, never back.
INSERT INTO nonce_cursor AS c (chain_id, signer, next_nonce)
SELECT $1::bigint, $2::bytea, $5::bigint WHERE (SELECT txfence_holds_lease($1, $2, $3, $4))
ON CONFLICT (chain_id, signer) DO UPDATE SET next_nonce = GREATEST(c.next_nonce, EXCLUDED.next_nonce);

-- name: StoreSigned
-- Stores a batch's first signed attempts (transactions $5, hashes $6, raw
-- transactions $7, fees $8 to $10, in parallel) and moves their
-- transactions ALLOCATED → SIGNED. The attempt rows it writes are not
-- visible to its own RETURNING: the caller knows the hashes.
WITH signed AS (
	SELECT * FROM unnest($5::uuid[], $6::bytea[], $7::bytea[], $8::text[], $9::text[], $10::text[])
		AS a (a_id, a_hash, a_raw, a_max_fee, a_tip, a_price)
), stored AS (
	INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price)
	SELECT t.tx_id, 1, t.nonce, a_hash, a_raw, a_max_fee::numeric, a_tip::numeric, a_price::numeric
	FROM signed JOIN tx t ON t.tx_id = a_id
	WHERE t.state = 'ALLOCATED' AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
	RETURNING tx_id AS s_id
)
UPDATE tx SET state = 'SIGNED', current_attempt = 1, sub_state = NULL, reason = NULL, updated_at = now()
FROM stored WHERE tx.tx_id = s_id AND tx.state = 'ALLOCATED'
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: LockTxStates
-- Locks transactions' rows, in one order (the follower's writes lock a
-- transaction before its attempts too), and reads their states.
SELECT tx_id, state FROM tx WHERE tx_id = ANY($1) ORDER BY tx_id FOR UPDATE;

-- name: Broadcasted
-- Records accepted broadcasts of SIGNED transactions ($5, routes $6 in
-- parallel, at $7) on their current attempts and moves them to
-- BROADCASTED. Each row is the attempt as its tx.attempt event tells it
-- (the columns AcceptedLate returns too), then the transaction.
WITH accepted AS (
	SELECT * FROM unnest($5::uuid[], $6::text[]) AS b (b_id, b_route)
), sent AS (
	UPDATE attempt a SET route = b_route, sent_at = $7
	FROM accepted JOIN tx t ON t.tx_id = b_id
	WHERE a.tx_id = t.tx_id AND a.attempt = t.current_attempt
	  AND t.state = 'SIGNED' AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
	RETURNING a.tx_id AS e_id, a.attempt AS e_attempt, a.nonce AS e_nonce, a.hash AS e_hash, a.route AS e_route,
		a.sent_at AS e_sent_at, coalesce(a.gas_limit, t.gas_limit) AS e_gas_limit, coalesce(a.max_fee_per_gas::text, '') AS e_max_fee,
		coalesce(a.max_priority_fee_per_gas::text, '') AS e_tip, coalesce(a.gas_price::text, '') AS e_price, a.kind AS e_kind,
		(SELECT p.hash FROM attempt p WHERE p.tx_id = a.tx_id AND p.attempt = a.attempt - 1) AS e_replaces
)
UPDATE tx SET state = 'BROADCASTED', sub_state = NULL, reason = NULL, updated_at = now()
FROM sent WHERE tx.tx_id = e_id AND tx.state = 'SIGNED'
RETURNING e_id, e_attempt, e_nonce, e_hash, e_route, e_sent_at, e_gas_limit, e_max_fee, e_tip, e_price, e_kind, e_replaces,
	tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: AcceptedLate
-- Records a route's acceptance ($5, routes $6 in parallel, at $7) of the
-- current attempt of transactions the chain follower found mined first,
-- unless an acceptance was recorded before, and returns those attempts as
-- their tx.attempt events tell them, in the order given.
WITH accepted AS (
	SELECT * FROM unnest($5::uuid[], $6::text[]) WITH ORDINALITY AS b (b_id, b_route, b_ord)
), sent AS (
	UPDATE attempt a SET route = b_route, sent_at = $7
	FROM accepted JOIN tx t ON t.tx_id = b_id
	WHERE a.tx_id = t.tx_id AND a.attempt = t.current_attempt AND a.sent_at IS NULL
	  AND t.state IN ('BROADCASTED', 'CONFIRMED', 'REVERTED') AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
	RETURNING a.tx_id AS e_id, a.attempt AS e_attempt, a.nonce AS e_nonce, a.hash AS e_hash, a.route AS e_route,
		a.sent_at AS e_sent_at, coalesce(a.gas_limit, t.gas_limit) AS e_gas_limit, coalesce(a.max_fee_per_gas::text, '') AS e_max_fee,
		coalesce(a.max_priority_fee_per_gas::text, '') AS e_tip, coalesce(a.gas_price::text, '') AS e_price, a.kind AS e_kind,
		(SELECT p.hash FROM attempt p WHERE p.tx_id = a.tx_id AND p.attempt = a.attempt - 1) AS e_replaces, b_ord
)
SELECT e_id, e_attempt, e_nonce, e_hash, e_route, e_sent_at, e_gas_limit, e_max_fee, e_tip, e_price, e_kind, e_replaces
FROM sent ORDER BY b_ord;
