-- Replacement attempts of broadcast transactions (replace.go): fee bumps
-- and cancels, each planned (its fees fixed) before signerd is asked and
-- stored before it is sent.

-- name: PlanAttempt
-- Plans the next attempt of BROADCASTED transaction $5, not mined: the
-- attempt after its highest, of kind $6, gas limit $7, fees $8 to $10,
-- for operator action $11 if any. No row: fenced, not followed, or a plan
-- exists already.
INSERT INTO attempt_plan (tx_id, attempt, kind, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, gas_price, action_id)
SELECT t.tx_id, (SELECT max(attempt) + 1 FROM attempt WHERE tx_id = t.tx_id), $6, $7, $8::numeric, $9::numeric, $10::numeric, $11
FROM tx t WHERE t.tx_id = $5 AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL
  AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
ON CONFLICT (tx_id) DO NOTHING
RETURNING attempt;

-- name: IsPlanned
-- Whether transaction $1 has a planned attempt.
SELECT EXISTS (SELECT 1 FROM attempt_plan WHERE tx_id = $1);

-- name: StoreAttempt
-- Stores the signed attempt (hash $7, raw $8) of plan $6 of BROADCASTED
-- transaction $5, not mined, claimed as sent now on the route of the
-- attempt it replaces, and forgets the plan. It returns what the
-- attempt's tx.attempt event tells: nonce, route, the hash it replaces,
-- sent-at, fees, gas limit, kind, and the operator action behind it.
WITH plan AS (
	DELETE FROM attempt_plan p USING tx t
	WHERE p.tx_id = $5 AND p.attempt = $6 AND t.tx_id = p.tx_id AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL
	  AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
	RETURNING p.*, t.nonce AS t_nonce, t.route AS t_route, t.current_attempt AS t_current
), stored AS (
	INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price, route, kind, gas_limit, sent_at)
	SELECT tx_id, attempt, t_nonce, $7, $8, max_fee_per_gas, max_priority_fee_per_gas, gas_price,
		(SELECT a.route FROM attempt a WHERE a.tx_id = plan.tx_id AND a.attempt = t_current), kind, gas_limit, now()
	FROM plan
	RETURNING sent_at, route
)
SELECT t_nonce, coalesce((SELECT route FROM stored), t_route),
	(SELECT a.hash FROM attempt a WHERE a.tx_id = plan.tx_id AND a.attempt = t_current), (SELECT sent_at FROM stored),
	max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, gas_limit, kind, action_id
FROM plan;

-- name: MakeAttemptCurrent
-- Makes the attempt StoreAttempt stored ($2) transaction $1's current
-- one. A stuck transaction stays stuck (its clock runs from its first
-- send); otherwise the older attempt is now replaced.
UPDATE tx SET current_attempt = $2, updated_at = now(),
	sub_state = CASE WHEN sub_state = 'stuck' THEN 'stuck' ELSE 'replaced' END WHERE tx_id = $1;

-- name: SetWaitingSince
-- Stores, with each attempt ($5 transactions, $6 attempts, $7 blocks, in
-- parallel), the block from which its bump_after_blocks counts. An
-- attempt that is no longer the current one of a BROADCASTED transaction
-- not mined is left as it is.
UPDATE attempt a SET waiting_since_block = w_since
FROM unnest($5::uuid[], $6::int[], $7::bigint[]) AS w (w_id, w_attempt, w_since), tx t
WHERE a.tx_id = w_id AND a.attempt = w_attempt AND t.tx_id = a.tx_id AND t.current_attempt = a.attempt
  AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: DropPlan
-- Forgets transaction $5's planned attempt $6 and returns the operator
-- action behind it, if any.
DELETE FROM attempt_plan p USING tx t
WHERE p.tx_id = $5 AND p.attempt = $6 AND t.tx_id = p.tx_id AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING p.action_id;
