-- Operators' adjustments of suspense (adjust.go): an amount moved out of a
-- wallet's suspense account to the account it was found to belong to.

-- name: LockSuspenseBalance
-- The balance of the suspense account of wallet $3 in asset $2 on chain
-- $1, its row locked until the adjustment commits: two adjustments of one
-- suspense account go one after the other, the second checked against
-- what the first left.
SELECT b.amount::text FROM account a JOIN balance b USING (account_id)
WHERE a.chain_id = $1 AND a.asset = $2 AND a.kind = 'suspense' AND a.address = $3
FOR UPDATE OF b;

-- name: InsertAdjustment
-- Records who booked adjustment $1 (journal $2): the operator's key and
-- tenant, and the approver's key when there is one ($7 and $8, else NULL).
INSERT INTO adjustment (adjustment_id, journal_id, operator_key_id, operator_key_name, tenant_id, tenant_name, approver_key_id, approver_key_name)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8);
