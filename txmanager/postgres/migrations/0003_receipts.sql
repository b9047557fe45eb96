-- What the chain follower records: the receipt of the attempt mined in a
-- canonical block, and how deep that block is. A reorg that orphans the
-- block clears them (the attempt's receipt columns go back to NULL with
-- the transaction's pointer), so what is stored is always what the
-- follower last saw on the canonical chain.
ALTER TABLE attempt
	ADD COLUMN block_number        bigint      CHECK (block_number >= 0),
	ADD COLUMN block_hash          bytea       CHECK (length(block_hash) = 32),
	ADD COLUMN receipt_status      smallint    CHECK (receipt_status IN (0, 1)),
	ADD COLUMN gas_used            bigint      CHECK (gas_used >= 0),
	ADD COLUMN effective_gas_price numeric(78) CHECK (effective_gas_price >= 0),
	ADD CONSTRAINT attempt_receipt_whole CHECK (
		(block_number IS NULL) = (block_hash IS NULL) AND (block_number IS NULL) = (receipt_status IS NULL));

ALTER TABLE tx
	ADD COLUMN mined_attempt integer,
	ADD COLUMN confirmations bigint CHECK (confirmations >= 1),
	ADD CONSTRAINT tx_mined_attempt_fk FOREIGN KEY (tx_id, mined_attempt) REFERENCES attempt (tx_id, attempt),
	ADD CONSTRAINT tx_final_is_mined CHECK (state NOT IN ('CONFIRMED', 'REVERTED') OR mined_attempt IS NOT NULL),
	ADD CONSTRAINT tx_confirmations_with_receipt CHECK ((mined_attempt IS NULL) = (confirmations IS NULL));

-- The follower's view of a chain: what is mined and not yet final, and
-- what was final recently enough for a deep reorg to re-open it.
CREATE INDEX tx_mined_idx ON tx (chain_id, signer) WHERE mined_attempt IS NOT NULL;
