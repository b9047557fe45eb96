-- The chain follower's reads and writes (follow.go): which transactions
-- to look for in blocks, and what it found. Every write is fenced like the
-- worker's and writes its event in the same transaction.

-- name: FeedHead
-- The highest sequence the event feed has given: every event up to it is
-- committed and numbered.
SELECT coalesce(max(seq), 0) FROM event;

-- name: ChangedSince
-- The transactions, of any signer, with an event in the feed after
-- sequence $1, up to $2.
SELECT DISTINCT tx_id FROM event WHERE seq > $1 AND seq <= $2;

-- name: Tracking
-- A signer's transactions the follower watches, one row per attempt, by
-- nonce and attempt: every BROADCASTED and SIGNED one, and those
-- CONFIRMED, REVERTED or CANCELLED by a mined attempt in a block at or
-- above $3; only those of $4 unless it is NULL. Each row carries the
-- transaction's planned attempt, if any.
SELECT t.tx_id, t.state, t.sub_state IS NOT DISTINCT FROM 'stuck', t.route, t.nonce, t.current_attempt, coalesce(t.mined_attempt, 0), coalesce(t.confirmations, 0),
	a.attempt, a.hash, a.block_number, a.block_hash, a.receipt_status, a.gas_used, a.effective_gas_price::text,
	coalesce(a.sent_at, a.created_at), coalesce(a.first_sent_at, a.sent_at, a.created_at), a.kind, a.max_fee_per_gas::text, a.max_priority_fee_per_gas::text, a.gas_price::text, t.gas_limit, a.waiting_since_block,
	coalesce(a.route, t.route), a.drops,
	p.attempt, p.kind, p.gas_limit, p.max_fee_per_gas::text, p.max_priority_fee_per_gas::text, p.gas_price::text, p.action_id
FROM tx t JOIN attempt a ON a.tx_id = t.tx_id LEFT JOIN attempt_plan p ON p.tx_id = t.tx_id
WHERE t.chain_id = $1 AND t.signer = $2
  AND (t.state IN ('BROADCASTED', 'SIGNED') OR (t.state IN ('CONFIRMED', 'REVERTED', 'CANCELLED') AND t.mined_attempt IS NOT NULL AND
	(SELECT m.block_number FROM attempt m WHERE m.tx_id = t.tx_id AND m.attempt = t.mined_attempt) >= $3))
  AND ($4::uuid[] IS NULL OR t.tx_id = ANY($4))
ORDER BY t.nonce, a.attempt;

-- name: LockTxForReceipt
-- Locks a transaction whose receipt the follower records, and reads its
-- state and whether a receipt was reported before (a tx.confirmation
-- event of type $2: a reorg took it away, so this one is a new fork).
SELECT state, EXISTS (SELECT 1 FROM event WHERE tx_id = $1 AND type = $2) FROM tx WHERE tx_id = $1 FOR UPDATE;

-- name: RecordReceipt
-- Records that attempt $6 of BROADCASTED or SIGNED transaction $5 is in
-- block $7 (hash $8; status $9, gas used $10, effective gas price $11)
-- with $12 confirmations: the attempt's receipt, and the transaction
-- BROADCASTED, included. The chain's word beats a send's verdict: a SIGNED
-- transaction moves to BROADCASTED.
WITH receipt AS (
	UPDATE attempt SET block_number = $7, block_hash = $8, receipt_status = $9, gas_used = $10, effective_gas_price = $11
	WHERE tx_id = $5 AND attempt = $6
	RETURNING tx_id AS r_id
)
UPDATE tx SET state = 'BROADCASTED', mined_attempt = $6, confirmations = $12, sub_state = 'included', reason = NULL, updated_at = now()
FROM receipt WHERE tx.tx_id = r_id AND state IN ('BROADCASTED', 'SIGNED') AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: CountConfirmations
-- Stores transaction $5's confirmation count $6, while attempt $7 is the
-- one mined.
UPDATE tx SET confirmations = $6, updated_at = now()
WHERE tx_id = $5 AND mined_attempt = $7 AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: AttemptKind
-- The kind of attempt $2 of transaction $1.
SELECT kind FROM attempt WHERE tx_id = $1 AND attempt = $2;

-- name: LockTxForReorg
-- Locks a transaction whose receipt's block left the canonical chain, and
-- reads its state and confirmations.
SELECT state, confirmations FROM tx WHERE tx_id = $1 FOR UPDATE;

-- name: Reopen
-- Re-opens transaction $5, mined by attempt $6 in a block the chain lost:
-- BROADCASTED again (from BROADCASTED, CONFIRMED, REVERTED, or CANCELLED
-- by a mined cancel), its receipt forgotten.
UPDATE tx SET state = 'BROADCASTED', mined_attempt = NULL, confirmations = NULL, sub_state = NULL, reason = NULL, updated_at = now()
WHERE tx_id = $5 AND mined_attempt = $6 AND state IN ('BROADCASTED', 'CONFIRMED', 'REVERTED', 'CANCELLED')
  AND chain_id = $1 AND signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: ForgetReceipts
-- Forgets the receipts of a re-opened transaction's attempts (only the
-- lost one has one), which wait anew: bump_after_blocks counts from the
-- block the follower next sees them waiting at. Reopen, fenced, ran
-- before it in the same transaction.
UPDATE attempt SET block_number = NULL, block_hash = NULL, receipt_status = NULL, gas_used = NULL,
	effective_gas_price = NULL, waiting_since_block = NULL WHERE tx_id = $1;

-- name: ClaimResend
-- Claims a resend of attempt $6, unchanged, of BROADCASTED transaction $5,
-- not mined: its sent-at moves to now, its first send is kept (the stuck
-- clock runs from it), and it is returned with what its tx.attempt event
-- tells.
UPDATE attempt a SET first_sent_at = coalesce(a.first_sent_at, a.sent_at, a.created_at), sent_at = now()
FROM tx t WHERE a.tx_id = $5 AND a.attempt = $6 AND t.tx_id = a.tx_id AND t.current_attempt = a.attempt
  AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING a.raw, a.hash, a.nonce, t.gas_limit, coalesce(a.route, t.route), a.sent_at,
	coalesce(a.max_fee_per_gas::text, ''), coalesce(a.max_priority_fee_per_gas::text, ''), coalesce(a.gas_price::text, '');

-- name: CountDrop
-- Counts a drop of attempt $6, the current one of BROADCASTED transaction
-- $5, not mined, and returns the count with what its tx.attempt event
-- tells and the transaction's sub-state and reason.
UPDATE attempt a SET drops = a.drops + 1
FROM tx t WHERE a.tx_id = $5 AND a.attempt = $6 AND t.tx_id = a.tx_id AND t.current_attempt = a.attempt
  AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL AND t.chain_id = $1 AND t.signer = $2 AND (SELECT txfence_holds_lease($1, $2, $3, $4))
RETURNING a.drops, a.hash, a.nonce, t.gas_limit, coalesce(a.route, t.route), coalesce(a.sent_at, a.created_at),
	coalesce(a.max_fee_per_gas::text, ''), coalesce(a.max_priority_fee_per_gas::text, ''), coalesce(a.gas_price::text, ''),
	coalesce(t.sub_state, ''), coalesce(t.reason, '');
