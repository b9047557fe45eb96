-- Start nonces an operator declares, as the tables' owner (nonces.go).
-- The serving role may only read nonce_start: a compromised signerd cannot
-- move a start ahead to sign far-future nonces. LockNonceStart and
-- NonceStarts return the row scanNonceStart reads; TestQueries holds them
-- alike.

-- name: LockNonceStart
-- The start declared for signer ($1, $2), if any, locked until the
-- transaction ends: DeclareNonceStart reports the declaration it replaces.
SELECT chain_id, signer, nonce, set_at FROM nonce_start
WHERE chain_id = $1 AND signer = $2 FOR UPDATE;

-- name: DeclareNonceStart
-- Declares $3 the next nonce of signer ($1, $2), replacing an earlier
-- declaration.
INSERT INTO nonce_start (chain_id, signer, nonce) VALUES ($1, $2, $3)
ON CONFLICT (chain_id, signer) DO UPDATE SET nonce = EXCLUDED.nonce, set_at = now();

-- name: NonceStarts
-- Every declared start, by chain and signer.
SELECT chain_id, signer, nonce, set_at FROM nonce_start ORDER BY chain_id, signer;
