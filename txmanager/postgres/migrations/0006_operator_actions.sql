-- Operator actions before the broadcast, and abandon. An ALLOCATED
-- transaction signerd refused and a SIGNED one every route refused can be
-- resent, bumped, cancelled or abandoned (its nonce filled by a 0-value
-- transfer to the signer itself, a transaction of its own); the signer's
-- owner carries them out in its worker.
ALTER TABLE tx_action DROP CONSTRAINT tx_action_action_check;
ALTER TABLE tx_action ADD CONSTRAINT tx_action_action_check CHECK (action IN ('resend', 'bump', 'cancel', 'abandon'));

-- The fees of the attempt an action has signerd sign (a bump or a cancel
-- of a transaction not broadcast yet), fixed before signerd is asked: a
-- restart signs exactly these again, which signerd answers by replaying
-- its signature (see attempt_plan for broadcast transactions). The filler
-- an abandon made.
ALTER TABLE tx_action
	ADD COLUMN max_fee_per_gas          numeric(78) CHECK (max_fee_per_gas >= 0),
	ADD COLUMN max_priority_fee_per_gas numeric(78) CHECK (max_priority_fee_per_gas >= 0),
	ADD COLUMN gas_price                numeric(78) CHECK (gas_price >= 0),
	ADD COLUMN filler_tx_id             uuid REFERENCES tx (tx_id),
	ADD CONSTRAINT tx_action_fees_check
		CHECK ((gas_price IS NOT NULL AND max_fee_per_gas IS NULL AND max_priority_fee_per_gas IS NULL)
			OR (gas_price IS NULL AND (max_fee_per_gas IS NULL) = (max_priority_fee_per_gas IS NULL)));

-- A request repeated while the same one waits is the one waiting: found by
-- transaction and action.
CREATE INDEX tx_action_waiting_idx ON tx_action (tx_id, action) WHERE done_at IS NULL;
