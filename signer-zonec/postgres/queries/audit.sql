-- Verification's cross-check of the double-sign record with the audit log
-- (audit.go). Both run on verification's read-only repeatable-read
-- snapshot, after the chain verified, so every body they read is one that
-- was hashed.

-- name: SignaturesWithTheirRecords
-- Every row of the double-sign record with the body of the audit record it
-- names (NULL where there is none), for signer.CheckRecordedSignature: a
-- deleted or edited signature row could otherwise let a second intent be
-- signed at its nonce, or lower what a window counts, leaving the chain
-- intact.
SELECT s.chain_id, s.signer, s.nonce, s.attempt, s.tx_id, s.digest, s.value, s.fee_cap, s.tip_cap, s.gas,
	s.tx_hash, s.raw_tx, s.audit_seq, a.body
FROM signature s LEFT JOIN audit_log a ON a.seq = s.audit_seq
ORDER BY s.audit_seq, s.chain_id, s.signer, s.nonce, s.attempt;

-- name: SignedWithoutSignature
-- The bodies of the audit records of signatures that have no row in the
-- double-sign record: a signature deleted from it.
SELECT a.body FROM audit_log a
WHERE a.outcome = 'signed' AND NOT EXISTS (SELECT 1 FROM signature s WHERE s.audit_seq = a.seq)
ORDER BY a.seq;
