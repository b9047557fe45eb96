-- signerd's signing transaction and the audit log's reads (store.go). A
-- batch runs in one read-committed transaction, so each statement reads
-- what was committed before it started: the signer locks (LockSigner)
-- order the batches of a signer, the audit head's lock (LockAuditHead)
-- orders appends, and what a batch reads after taking them is all that
-- was signed and appended before. Signed and FirstOfTx return the row
-- scanSigned reads; TestQueries holds the copies alike.

-- name: Now
-- The database clock at the transaction's start: every decision of a
-- batch (approval expiry, rolling windows, the time of each record) is
-- taken at this one time, whatever a replica's own clock says.
SELECT now();

-- name: CreateSignerLock
-- Makes the lock row of signer ($1, $2) the first time it signs, for
-- LockSigner to lock: a row must exist before it can be locked.
INSERT INTO signer_lock (chain_id, signer) VALUES ($1, $2) ON CONFLICT DO NOTHING;

-- name: LockSigner
-- Locks signer ($1, $2) until the transaction ends. This lock serialises
-- every decision about the signer on every replica (the double-sign check,
-- tx-id binding, the nonce look-ahead, the window sums): each batch reads
-- the record only once it holds it, so it sees everything signed before.
SELECT 1 FROM signer_lock WHERE chain_id = $1 AND signer = $2 FOR UPDATE;

-- name: Signed
-- Every signature at each of the nonces ($1, $2, $3 in parallel), oldest
-- attempt first: what the double-sign check compares a request with. Run
-- under the signers' locks, so nothing is signed at these nonces until the
-- transaction ends.
SELECT chain_id, signer, nonce, tx_id, intent, digest, value, fee_cap, tip_cap, kind, tx_hash, raw_tx, gas
FROM signature
WHERE (chain_id, signer, nonce) IN (SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bigint[]))
ORDER BY chain_id, signer, nonce, attempt;

-- name: FirstOfTx
-- The first signature of each tx id of $1: a tx id is bound to the nonce
-- it was first signed at, so one set of approvals pays at one nonce only.
SELECT DISTINCT ON (tx_id) chain_id, signer, nonce, tx_id, intent, digest, value, fee_cap, tip_cap, kind, tx_hash, raw_tx, gas
FROM signature WHERE tx_id = ANY($1)
ORDER BY tx_id, signed_at, audit_seq;

-- name: NextNonces
-- Each signer's next nonce ($1, $2 in parallel): one above the highest it
-- has signed at, or the start its owner declared, whichever is higher; 0
-- with neither. The look-ahead bound counts from it.
SELECT k.chain_id, k.signer, greatest(
	(SELECT max(s.nonce) + 1 FROM signature s WHERE s.chain_id = k.chain_id AND s.signer = k.signer),
	(SELECT n.nonce FROM nonce_start n WHERE n.chain_id = k.chain_id AND n.signer = k.signer),
	0)
FROM unnest($1::bigint[], $2::bytea[]) AS k (chain_id, signer);

-- name: Spent
-- The value signer ($1, $2) moved since $3, in originals only (attempt 1):
-- a replacement carries its original's intent and a cancel moves nothing,
-- so each nonce counts once.
SELECT coalesce(sum(value), 0) FROM signature
WHERE chain_id = $1 AND signer = $2 AND attempt = 1 AND signed_at > $3;

-- name: SpentToken
-- The units of token $4 signer ($1, $2) moved or granted since $3, in
-- originals only, as Spent.
SELECT coalesce(sum(token_amount), 0) FROM signature
WHERE chain_id = $1 AND signer = $2 AND attempt = 1 AND signed_at > $3 AND token = $4;

-- name: Fees
-- The fees signer ($1, $2) may pay for what it signed since $3: each
-- nonce but $4 once, at its costliest signature, since only one
-- transaction per nonce can be mined.
SELECT coalesce(sum(cost), 0) FROM (
	SELECT max(gas * fee_cap) AS cost FROM signature
	WHERE chain_id = $1 AND signer = $2 AND signed_at > $3 AND nonce <> $4
	GROUP BY nonce) AS per_nonce;

-- name: LockAuditHead
-- The head of the audit chain, locked until the transaction ends: appends
-- on every replica take it in turn, so each batch seals its records onto
-- the head it read and the chain never forks.
SELECT seq, hash FROM audit_head FOR UPDATE;

-- name: AppendAudit
-- Appends the sealed records (each column an array, one element a record)
-- after the head LockAuditHead locked.
INSERT INTO audit_log (seq, at, tx_id, chain_id, signer, nonce, outcome, tx_hash, body, prev_hash, hash)
SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[], $5::bytea[], $6::bigint[],
	$7::text[], $8::bytea[], $9::bytea[], $10::bytea[], $11::bytea[]);

-- name: AdvanceAuditHead
-- Moves the head onto the last record appended; the audit_head_advances
-- trigger refuses any other move.
UPDATE audit_head SET seq = $1, hash = $2;

-- name: RecordSignatures
-- Stores the double-sign record of new signatures, all signed at $14 (each
-- other column an array, one element a signature). Each row's attempt
-- follows those stored at its nonce (the subquery sees the table as it was
-- before the statement) and those before it in the arrays.
INSERT INTO signature (chain_id, signer, nonce, attempt, kind, tx_id, intent, digest, value, fee_cap, tip_cap,
	tx_hash, raw_tx, signed_at, audit_seq, gas, token, token_amount)
SELECT n.chain_id, n.signer, n.nonce,
	coalesce((SELECT max(s.attempt) FROM signature s
		WHERE s.chain_id = n.chain_id AND s.signer = n.signer AND s.nonce = n.nonce), 0)
		+ row_number() OVER (PARTITION BY n.chain_id, n.signer, n.nonce ORDER BY n.ord),
	n.kind, n.tx_id, n.intent, n.digest, n.value, n.fee_cap, n.tip_cap, n.tx_hash, n.raw_tx, $14, n.audit_seq, n.gas,
	n.token, n.token_amount
FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[], $5::text[], $6::bytea[], $7::bytea[],
	$8::numeric[], $9::numeric[], $10::numeric[], $11::bytea[], $12::bytea[], $13::bigint[], $15::bigint[],
	$16::bytea[], $17::numeric[])
	WITH ORDINALITY AS n(chain_id, signer, nonce, kind, tx_id, intent, digest, value, fee_cap, tip_cap, tx_hash, raw_tx,
		audit_seq, gas, token, token_amount, ord);

-- name: AuditPage
-- Up to $2 audit records after seq $1, in order.
SELECT seq, at, tx_id, chain_id, signer, nonce, outcome, tx_hash, body, prev_hash, hash
FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2;

-- name: AuditHead
-- The head of the audit chain, unlocked: for readers, never for appends
-- (LockAuditHead).
SELECT seq, hash FROM audit_head;
