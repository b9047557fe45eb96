-- An approval's fee ceiling (txfence/approval/v2): the highest fee cap per
-- gas (max_fee_per_gas, or a legacy gas price) the approver signed, which
-- signerd needs to verify the signature and counts the approval under.
-- Approvals stored before carry none and approved any fee; signerd no
-- longer accepts them, so they are deleted rather than passed on: their
-- transactions wait (or go back to waiting) until approved again.
-- Rejections stay.
DELETE FROM approval WHERE decision = 'approve';

ALTER TABLE approval
	ADD COLUMN max_fee_per_gas numeric(78) CHECK (max_fee_per_gas >= 0 AND max_fee_per_gas < 2::numeric ^ 256),
	ADD CONSTRAINT approval_fee_ceiling_check CHECK (decision = 'reject' OR max_fee_per_gas IS NOT NULL);
