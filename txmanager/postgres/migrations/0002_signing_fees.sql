-- The fees a transaction's first attempt is signed with, fixed in the
-- same commit as its nonce. A crash between signerd's signature and the
-- SIGNED commit is resumed by asking signerd again: with the same fees
-- the request is identical and signerd hands back its first signature;
-- priced again at a moved market it would be another transaction at that
-- nonce, which double-sign protection refuses. NULL on rows allocated
-- before this migration: those are priced when signed, as before.
ALTER TABLE tx
	ADD COLUMN signing_max_fee_per_gas          numeric(78) CHECK (signing_max_fee_per_gas >= 0 AND signing_max_fee_per_gas < 2::numeric ^ 256),
	ADD COLUMN signing_max_priority_fee_per_gas numeric(78) CHECK (signing_max_priority_fee_per_gas >= 0 AND signing_max_priority_fee_per_gas < 2::numeric ^ 256),
	ADD COLUMN signing_gas_price                numeric(78) CHECK (signing_gas_price >= 0 AND signing_gas_price < 2::numeric ^ 256);
