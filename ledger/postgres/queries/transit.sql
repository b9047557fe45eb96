-- Transits: transfers between chains (transit.go), written by the feed
-- consumer and read by the API and the age alert.
--
-- A statement that returns transits returns the columns scanTransit
-- reads, in its order, as Transit does; TestQueries holds every copy of
-- that list to Transit's.

-- name: WriteTransit
-- Writes transit $1 as a run of the feed leaves it, unless it is stored
-- with another source transaction than $3 (no row then). Status changes
-- set the times: opened_at when value goes into transit (leaving pending,
-- or re-opening after completion), completed_at on completion; the age
-- alert's mark is cleared when the transit leaves the opening it was
-- raised for.
INSERT INTO transit AS t (transit_id, status,
	source_tx_id, source_chain_id, source_wallet, source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount, bridge,
	destination_tx_id, destination_chain_id, destination_wallet, destination_journal_id, destination_tx_hash, destination_block_hash,
	destination_asset, destination_amount, bridge_fee, fee_journal_id, opened_at, completed_at)
VALUES ($1, $2::text, $3::uuid, $4, $5, $6, $7, $8, $9, $10::numeric, $11, $12::uuid, $13, $14, $15, $16, $17, $18, $19::numeric,
	$20::numeric, $21, CASE WHEN $2::text <> 'pending' THEN now() END, CASE WHEN $2::text = 'completed' THEN now() END)
ON CONFLICT (transit_id) DO UPDATE SET
	status = EXCLUDED.status,
	source_journal_id = EXCLUDED.source_journal_id, source_tx_hash = EXCLUDED.source_tx_hash,
	source_block_hash = EXCLUDED.source_block_hash, source_asset = EXCLUDED.source_asset,
	source_amount = EXCLUDED.source_amount, bridge = EXCLUDED.bridge,
	destination_tx_id = EXCLUDED.destination_tx_id, destination_chain_id = EXCLUDED.destination_chain_id,
	destination_wallet = EXCLUDED.destination_wallet, destination_journal_id = EXCLUDED.destination_journal_id,
	destination_tx_hash = EXCLUDED.destination_tx_hash, destination_block_hash = EXCLUDED.destination_block_hash,
	destination_asset = EXCLUDED.destination_asset, destination_amount = EXCLUDED.destination_amount,
	bridge_fee = EXCLUDED.bridge_fee, fee_journal_id = EXCLUDED.fee_journal_id,
	opened_at = CASE WHEN EXCLUDED.status = 'pending' THEN NULL
	                 WHEN EXCLUDED.status <> t.status AND t.status <> 'open' THEN now()
	                 ELSE t.opened_at END,
	completed_at = CASE WHEN EXCLUDED.status <> 'completed' THEN NULL
	                    WHEN t.status = 'completed' THEN t.completed_at
	                    ELSE now() END,
	alerted_at = CASE WHEN EXCLUDED.status = 'open' AND t.status = 'open' THEN t.alerted_at END,
	updated_at = now()
WHERE t.source_tx_id = EXCLUDED.source_tx_id;

-- name: TransitsOf
-- The transits named by ids $1, and those whose source or destination is
-- one of transactions $2: what a page of the feed may link or move.
SELECT transit_id, seq, status,
	source_tx_id, source_chain_id, source_wallet, source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount::text, bridge,
	destination_tx_id, destination_chain_id, destination_wallet, destination_journal_id, destination_tx_hash, destination_block_hash,
	destination_asset, destination_amount::text, bridge_fee::text, fee_journal_id, opened_at, completed_at, alerted_at, updated_at
FROM transit
WHERE transit_id = ANY($1::text[]) OR source_tx_id = ANY($2::uuid[]) OR destination_tx_id = ANY($2::uuid[]);

-- name: Transit
-- Transit $1.
SELECT transit_id, seq, status,
	source_tx_id, source_chain_id, source_wallet, source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount::text, bridge,
	destination_tx_id, destination_chain_id, destination_wallet, destination_journal_id, destination_tx_hash, destination_block_hash,
	destination_asset, destination_amount::text, bridge_fee::text, fee_journal_id, opened_at, completed_at, alerted_at, updated_at
FROM transit WHERE transit_id = $1;

-- name: Transits
-- A page of transits, newest first: seq below $1, $4 at most; each filter
-- applies unless its parameter is NULL: $2 status, $3 chain (of either
-- end). WalletTransits reads a wallet's. Store.Transits runs it planned
-- for its arguments at every call.
SELECT transit_id, seq, status,
	source_tx_id, source_chain_id, source_wallet, source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount::text, bridge,
	destination_tx_id, destination_chain_id, destination_wallet, destination_journal_id, destination_tx_hash, destination_block_hash,
	destination_asset, destination_amount::text, bridge_fee::text, fee_journal_id, opened_at, completed_at, alerted_at, updated_at
FROM transit
WHERE seq < $1 AND ($2::text IS NULL OR status = $2)
	AND ($3::bigint IS NULL OR source_chain_id = $3 OR destination_chain_id = $3)
ORDER BY seq DESC
LIMIT $4;

-- name: WalletTransits
-- Transits with the parameters of Transits, of wallet $5 only: those whose
-- source or destination wallet it is (with $3, only the end on that
-- chain). A statement of its own, so that its OR can be read through each
-- end's wallet index (0008).
SELECT transit_id, seq, status,
	source_tx_id, source_chain_id, source_wallet, source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount::text, bridge,
	destination_tx_id, destination_chain_id, destination_wallet, destination_journal_id, destination_tx_hash, destination_block_hash,
	destination_asset, destination_amount::text, bridge_fee::text, fee_journal_id, opened_at, completed_at, alerted_at, updated_at
FROM transit
WHERE seq < $1 AND ($2::text IS NULL OR status = $2)
	AND ((source_wallet = $5 AND ($3::bigint IS NULL OR source_chain_id = $3))
		OR (destination_wallet = $5 AND ($3::bigint IS NULL OR destination_chain_id = $3)))
ORDER BY seq DESC
LIMIT $4;

-- name: AlertTransits
-- Marks the open transits opened before $1 and not alerted in their
-- current opening as alerted at $2, and returns them: each opening is
-- returned once, whichever node asks.
UPDATE transit SET alerted_at = $2
WHERE status = 'open' AND opened_at < $1 AND alerted_at IS NULL
RETURNING transit_id, seq, status,
	source_tx_id, source_chain_id, source_wallet, source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount::text, bridge,
	destination_tx_id, destination_chain_id, destination_wallet, destination_journal_id, destination_tx_hash, destination_block_hash,
	destination_asset, destination_amount::text, bridge_fee::text, fee_journal_id, opened_at, completed_at, alerted_at, updated_at;
