-- Operator actions on transactions that do not move (actions.go): any
-- node records the request; the signer's owner carries it out under its
-- lease and records the outcome. A statement that returns actions ends its
-- row with the columns scanAction reads, in its order, as ActionByID does.

-- name: LockTxForAction
-- Locks the transaction an operator acts on and reads its state and
-- whether a receipt is recorded.
SELECT state, mined_attempt FROM tx WHERE tx_id = $1 FOR UPDATE;

-- name: ActionByID
-- One action.
SELECT action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt,
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, filler_tx_id
FROM tx_action WHERE action_id = $1;

-- name: WaitingAction
-- The oldest action $2 by operator $3 on transaction $1 that is not done:
-- the same request again, without an action id, is that one.
SELECT action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt,
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, filler_tx_id
FROM tx_action
WHERE tx_id = $1 AND action = $2 AND operator = $3 AND done_at IS NULL ORDER BY requested_at, action_id LIMIT 1;

-- name: InsertAction
-- Records action $3 by operator $4 on transaction $2, under id $1.
INSERT INTO tx_action (action_id, tx_id, chain_id, signer, action, operator)
SELECT $1, tx_id, chain_id, signer, $3, $4 FROM tx WHERE tx_id = $2
RETURNING action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt,
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, filler_tx_id;

-- name: ActionsOfTx
-- A transaction's actions, oldest first.
SELECT action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt,
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, filler_tx_id
FROM tx_action WHERE tx_id = $1 ORDER BY requested_at, action_id;

-- name: FollowerActions
-- The actions on a signer's transactions that wait for its chain
-- follower, oldest first: those on transactions broadcast (or past it),
-- abandons excepted. One per transaction and action (the oldest): the
-- same action repeated is carried out once (ActionDone finishes the
-- others with it).
SELECT action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt,
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, filler_tx_id FROM (
	SELECT DISTINCT ON (a.tx_id, a.action) a.* FROM tx_action a JOIN tx t ON t.tx_id = a.tx_id
	WHERE a.chain_id = $1 AND a.signer = $2 AND a.done_at IS NULL
	  AND t.state NOT IN ('ALLOCATED', 'SIGNED') AND a.action <> 'abandon'
	ORDER BY a.tx_id, a.action, a.requested_at, a.action_id
) AS tx_action ORDER BY requested_at, action_id;

-- name: WorkerActions
-- The actions on a signer's transactions that wait for its worker, oldest
-- first: those on ALLOCATED and SIGNED transactions, and every abandon.
-- One per transaction and action, as FollowerActions.
SELECT action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt,
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, filler_tx_id FROM (
	SELECT DISTINCT ON (a.tx_id, a.action) a.* FROM tx_action a JOIN tx t ON t.tx_id = a.tx_id
	WHERE a.chain_id = $1 AND a.signer = $2 AND a.done_at IS NULL
	  AND (t.state IN ('ALLOCATED', 'SIGNED') OR a.action = 'abandon')
	ORDER BY a.tx_id, a.action, a.requested_at, a.action_id
) AS tx_action ORDER BY requested_at, action_id;

-- name: ActionHeld
-- Whether action $5 is one of the fence's signer, and the fence holds.
SELECT EXISTS (SELECT 1 FROM tx_action WHERE action_id = $5 AND chain_id = $1 AND signer = $2) AND (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: ActionDone
-- Records action $1's outcome $2 (detail $3, none when empty; the attempt
-- $4 it sent; the filler $5 an abandon made), unless it is done already.
-- The same action on the same transaction that waits as well (asked
-- again, by another operator or under another action id, before this one
-- was carried out) is finished with it, with the same outcome: repeated,
-- an action is carried out once.
WITH done AS (
	UPDATE tx_action SET done_at = now(), outcome = $2, detail = nullif($3, ''), attempt = $4, filler_tx_id = $5
	WHERE action_id = $1 AND done_at IS NULL
	RETURNING tx_id, action
)
UPDATE tx_action a SET done_at = now(), outcome = $2, attempt = $4, filler_tx_id = $5,
	detail = 'carried out as action ' || $1::text || CASE WHEN $3 = '' THEN '' ELSE ': ' || $3 END
FROM done WHERE a.tx_id = done.tx_id AND a.action = done.action AND a.done_at IS NULL AND a.action_id <> $1;

-- name: PlanActionFees
-- Fixes the fees ($6 to $8) of the attempt action $5 has signerd sign,
-- unless some are fixed already, and returns those that stand: asked
-- again after a crash, signerd gets the very same request. No row: fenced,
-- not the signer's, or done.
UPDATE tx_action SET
	max_fee_per_gas = CASE WHEN max_fee_per_gas IS NULL AND gas_price IS NULL THEN $6::numeric ELSE max_fee_per_gas END,
	max_priority_fee_per_gas = CASE WHEN max_fee_per_gas IS NULL AND gas_price IS NULL THEN $7::numeric ELSE max_priority_fee_per_gas END,
	gas_price = CASE WHEN max_fee_per_gas IS NULL AND gas_price IS NULL THEN $8::numeric ELSE gas_price END
WHERE action_id = $5 AND chain_id = $1 AND signer = $2 AND done_at IS NULL AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text;

-- name: RefixSigningFees
-- Sets the fees ($6 to $8) ALLOCATED transaction $5 is to be signed with
-- (a bump before signerd signed it).
UPDATE tx SET signing_max_fee_per_gas = $6::numeric, signing_max_priority_fee_per_gas = $7::numeric, signing_gas_price = $8::numeric,
	updated_at = now()
WHERE tx_id = $5 AND state = 'ALLOCATED' AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: CurrentAttempt
-- A transaction's current attempt: its number and fees.
SELECT a.attempt, a.max_fee_per_gas::text, a.max_priority_fee_per_gas::text, a.gas_price::text
FROM tx t JOIN attempt a ON a.tx_id = t.tx_id AND a.attempt = t.current_attempt WHERE t.tx_id = $1;

-- name: InsertActionAttempt
-- Stores the attempt an action produced (hash $6, raw $7, kind $8, gas
-- limit $9, fees $10 to $12) as the next of ALLOCATED or SIGNED
-- transaction $5, and returns its number.
INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price, kind, gas_limit)
SELECT t.tx_id, coalesce((SELECT max(attempt) FROM attempt WHERE tx_id = t.tx_id), 0) + 1, t.nonce, $6, $7,
	$10::numeric, $11::numeric, $12::numeric, $8, $9
FROM tx t WHERE t.tx_id = $5 AND t.state IN ('ALLOCATED', 'SIGNED') AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING attempt;

-- name: MakeActionAttemptCurrent
-- Makes attempt $2 transaction $1's current one, SIGNED, its sub-state
-- cleared so that the worker sends it, reason $3. The fenced
-- InsertActionAttempt before it, in the same transaction, checked the
-- lease and the state.
UPDATE tx SET state = 'SIGNED', current_attempt = $2, sub_state = NULL, reason = $3, updated_at = now()
WHERE tx_id = $1
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;
