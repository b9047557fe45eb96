-- Accepting intents (create_batch.go): concurrent creates share one
-- statement and one commit.

-- name: InsertIntents
-- Inserts every intent of the batch (parallel arrays $1 to $14, $16 the
-- INIT events' payloads; $13 each one's parents as an array literal, since
-- an array of arrays would have to be rectangular) whose request id is
-- free, with its INIT event of type $15 under the feed's barrier ($17),
-- and returns the transactions it created. Rows go in the order of their unique key: two nodes inserting
-- the same request ids lock them in the same order, so their batches wait
-- for each other instead of deadlocking; of two intents with one request
-- id in a batch, the first to arrive is the one stored.
WITH input AS (
	SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bytea[], $4::text[], $5::bytea[], $6::bytea[], $7::numeric[],
		$8::bytea[], $9::bigint[], $10::numeric[], $11::numeric[], $12::text[], $13::text[], $14::jsonb[], $16::jsonb[])
		WITH ORDINALITY AS i(tx_id, chain_id, signer, request_id, request_hash, to_address, value, data, gas,
			max_fee_per_gas, max_priority_fee_per_gas, route, depends_on, metadata, payload, arrival)),
created AS (
	INSERT INTO tx (tx_id, chain_id, signer, request_id, request_hash, to_address, value, data, gas,
		max_fee_per_gas, max_priority_fee_per_gas, route, depends_on, metadata, state)
	SELECT tx_id, chain_id, signer, request_id, request_hash, to_address, value, data, gas,
		max_fee_per_gas, max_priority_fee_per_gas, route, depends_on::uuid[], metadata, 'INIT'
	FROM input ORDER BY chain_id, signer, request_id, arrival
	ON CONFLICT (chain_id, signer, request_id) DO NOTHING
	RETURNING tx_id, chain_id, signer, request_id, to_address, value::text, data, gas, max_fee_per_gas::text,
		max_priority_fee_per_gas::text, route, depends_on, metadata, state, coalesce(sub_state, ''), coalesce(reason, ''),
		gas_limit, nonce, (SELECT hash FROM attempt a WHERE a.tx_id = tx.tx_id AND a.attempt = coalesce(tx.mined_attempt, tx.current_attempt)),
		CASE WHEN state = 'PENDING_APPROVAL' THEN approval_expires_at END,
		signing_max_fee_per_gas::text, signing_max_priority_fee_per_gas::text, signing_gas_price::text, created_at, updated_at),
event AS (
	INSERT INTO event (tx_id, type, payload)
	SELECT created.tx_id, $15, input.payload FROM created JOIN input USING (tx_id), (SELECT pg_advisory_xact_lock_shared($17)) AS writing)
SELECT * FROM created;
