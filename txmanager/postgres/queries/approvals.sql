-- Approvals of transactions waiting for them (approvals.go). Approving and
-- rejecting are requests any node takes; the signer's owner moves the
-- transaction on when the approvals suffice (MoveApproved).

-- name: CountOtherApprovals
-- How many approvers other than $2 approved transaction $1. The caller
-- holds the transaction's row lock, which serializes approvals of one
-- transaction, so the count cannot race.
SELECT count(*) FROM approval WHERE tx_id = $1 AND approver <> $2 AND decision = 'approve';

-- name: UpsertApproval
-- Stores approver $2's approval of transaction $1 (expiry $3, signature
-- $4, fee ceiling $5), replacing that approver's earlier approval. No row
-- changed: the approver rejected the transaction.
INSERT INTO approval (tx_id, approver, decision, expiry, signature, max_fee_per_gas) VALUES ($1, $2, 'approve', $3, $4, $5)
ON CONFLICT (tx_id, approver) DO UPDATE SET expiry = EXCLUDED.expiry, signature = EXCLUDED.signature,
	max_fee_per_gas = EXCLUDED.max_fee_per_gas, created_at = now()
	WHERE approval.decision = 'approve';

-- name: HasRejected
-- Whether approver $2 rejected transaction $1 already.
SELECT EXISTS (SELECT 1 FROM approval WHERE tx_id = $1 AND approver = $2 AND decision = 'reject');

-- name: UpsertRejection
-- Stores approver $2's signed rejection of transaction $1 (expiry $3,
-- signature $4), in place of its approval if any: the evidence of who
-- failed the transaction.
INSERT INTO approval (tx_id, approver, decision, expiry, signature) VALUES ($1, $2, 'reject', $3, $4)
ON CONFLICT (tx_id, approver) DO UPDATE SET decision = 'reject', expiry = EXCLUDED.expiry, signature = EXCLUDED.signature,
	max_fee_per_gas = NULL, created_at = now();

-- name: FailRejected
-- Fails a rejected transaction (the caller holds its row lock) with
-- reason $2.
UPDATE tx SET state = 'FAILED', sub_state = NULL, reason = $2, approval_expires_at = NULL, updated_at = now()
WHERE tx_id = $1
RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at;

-- name: LockAwaitingApproval
-- Locks a transaction an approver decides on and reads it, with when it
-- stops waiting for approvals and whether that has passed.
SELECT approval_expires_at, coalesce(approval_expires_at <= now(), false), tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at
FROM tx WHERE tx_id = $1 FOR UPDATE;

-- name: Approvals
-- The stored approvals of transactions $1, by transaction, in approver
-- order.
SELECT tx_id, approver, max_fee_per_gas::text, expiry, signature FROM approval
WHERE tx_id = ANY($1) AND decision = 'approve' ORDER BY tx_id, approver;

-- name: AwaitingApproval
-- Up to $3 of a signer's transactions waiting for approvals, oldest
-- first, each with when it stops waiting, whether that has passed, and its
-- decisions so far (approver@time, by approver).
SELECT approval_expires_at, approval_expires_at <= now(), coalesce((SELECT string_agg(a.approver || '@' || a.created_at::text, ',' ORDER BY a.approver)
		FROM approval a WHERE a.tx_id = tx.tx_id), ''), tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
	max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
	gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
	CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
	signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at
FROM tx WHERE chain_id = $1 AND signer = $2 AND state = 'PENDING_APPROVAL' ORDER BY accept_seq LIMIT $3;
