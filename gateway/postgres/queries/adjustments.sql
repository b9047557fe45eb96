-- Operators' ledger adjustments (adjustments.go): proposals, the second
-- key's approval or rejection, and what the ledger answered. A statement
-- that returns adjustments ends its row with the columns scanAdjustment
-- reads, as GetAdjustment does; TestQueries holds every copy of that list
-- to GetAdjustment's. An adjustment's status is read, not only stored: a
-- pending one past its expiry reads 'expired'.

-- name: LockAdjustmentWallet
-- Takes, until the transaction ends, the lock of the wallet and asset $1
-- ("chain:wallet:asset"): proposals of one wallet and asset are decided one
-- at a time, so that concurrent ones cannot each stay below the threshold
-- that together they pass.
SELECT pg_advisory_xact_lock(hashtextextended('ledger_adjustment:' || $1::text, 0));

-- name: GetAdjustment
-- Tenant $1's adjustment $2.
SELECT tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at
FROM ledger_adjustment
WHERE tenant_id = $1 AND adjustment_id = $2;

-- name: BookedAlone
-- The sum of the absolute amounts that wallet ($1, $2) booked, or may
-- book, in asset $3 without a second key over the window $4 up to now:
-- what one key books alone is bounded over time, not only per adjustment.
SELECT coalesce(sum(abs(amount)), 0)::text FROM ledger_adjustment
WHERE chain_id = $1 AND wallet = $2 AND asset = $3 AND NOT needs_approval
	AND status IN ('approved', 'booked') AND proposed_at > now() - $4::interval;

-- name: ProposeAdjustment
-- Stores a proposal, in status $10; one that needs a second key ($11)
-- expires $15 from now, one that does not has no expiry ($15 NULL).
INSERT INTO ledger_adjustment (tenant_id, adjustment_id, chain_id, wallet, asset, amount, counter_kind, counter_address, reason,
	status, needs_approval, threshold, proposed_by_key_id, proposed_by_key_name, expires_at)
VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8, $9, $10, $11, $12::numeric, $13, $14, now() + $15::interval)
RETURNING tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at;

-- name: Adjustments
-- A page of tenant $1's adjustments of the wallets ($5, $6 in parallel),
-- newest first, at most $7. Each filter applies unless its parameter is
-- NULL: $2 below that seq, $3 in that stored status, $4 past its expiry
-- or not (set with $3 'pending_approval' only). Store.Adjustments runs it
-- planned for its arguments at every call (adjustments.go says why).
SELECT tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at
FROM ledger_adjustment
WHERE tenant_id = $1
	AND ($2::bigint IS NULL OR seq < $2)
	AND ($3::text IS NULL OR status = $3)
	AND ($4::boolean IS NULL OR (expires_at <= now()) = $4)
	AND (chain_id, wallet) IN (SELECT * FROM unnest($5::bigint[], $6::bytea[]))
ORDER BY seq DESC LIMIT $7;

-- name: ApproveAdjustment
-- Approves tenant $1's adjustment $2 for key $3 (named $4), if it is
-- pending, not expired, and $3 is not the key that proposed it. No row:
-- nothing changed, and the caller reads the adjustment to say why.
UPDATE ledger_adjustment SET status = 'approved', approved_by_key_id = $3, approved_by_key_name = $4, approved_at = now()
WHERE tenant_id = $1 AND adjustment_id = $2 AND status = 'pending_approval' AND expires_at > now() AND proposed_by_key_id <> $3
RETURNING tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at;

-- name: RejectAdjustment
-- Rejects tenant $1's adjustment $2 for key $3 (named $4), if it is
-- pending and not expired. No row: nothing changed.
UPDATE ledger_adjustment SET status = 'rejected', rejected_by_key_id = $3, rejected_by_key_name = $4, rejected_at = now()
WHERE tenant_id = $1 AND adjustment_id = $2 AND status = 'pending_approval' AND expires_at > now()
RETURNING tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at;

-- name: BookAdjustment
-- Records that the ledger booked tenant $1's approved adjustment $2 as
-- journal $3. No row: it is not approved (booked before, perhaps).
UPDATE ledger_adjustment SET status = 'booked', journal_id = $3, booked_at = now()
WHERE tenant_id = $1 AND adjustment_id = $2 AND status = 'approved'
RETURNING tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at;

-- name: RefuseAdjustment
-- Records that the ledger refused tenant $1's approved adjustment $2,
-- with the refusal's kind $3 and detail $4. No row: it is not approved
-- (refused before, perhaps).
UPDATE ledger_adjustment SET status = 'refused', refusal_kind = $3, refusal = $4, refused_at = now()
WHERE tenant_id = $1 AND adjustment_id = $2 AND status = 'approved'
RETURNING tenant_id, adjustment_id, seq, chain_id, wallet, asset, amount::text, counter_kind, counter_address, reason,
	CASE WHEN status = 'pending_approval' AND expires_at <= now() THEN 'expired' ELSE status END,
	needs_approval, threshold::text, proposed_by_key_id, proposed_by_key_name, proposed_at, expires_at,
	approved_by_key_id, approved_by_key_name, approved_at, rejected_by_key_id, rejected_by_key_name, rejected_at,
	journal_id, booked_at, coalesce(refusal_kind, ''), coalesce(refusal, ''), refused_at;
