-- What a signer's new owner reads and writes when the chain is ahead of
-- the database (restore.go): after a restore from a backup, the chain
-- holds nonces the database never saw assigned.

-- name: NonceCursor
-- The signer's stored next nonce.
SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2;

-- name: NoncesHeld
-- The nonces from $3 to $4 - 1 that a transaction of the signer holds.
SELECT nonce FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce >= $3 AND nonce < $4;

-- name: InsertFoundAttempt
-- Stores the attempt the chain holds (nonce $2, hash $3, raw $4, fees $5
-- to $7, gas limit $8) as attempt 1 of transaction $1, still waiting for a
-- nonce, sent now as far as the database knows. Its current attempt is
-- checked at commit (tx_current_attempt_fk is deferred): the attempt row
-- comes first only because it needs the route the move after it
-- (MoveFoundMined, fenced) keeps.
INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price, gas_limit, route, sent_at, kind)
SELECT tx_id, 1, $2, $3, $4, $5::numeric, $6::numeric, $7::numeric, $8, route, now(), 'initial'
FROM tx WHERE tx_id = $1 AND state IN ('INIT', 'SIMULATED', 'PENDING_APPROVAL');
