-- Adjustments: an operator's explanation of an amount reconciliation put in
-- a wallet's suspense account, moving it to the account it belongs to
-- (ledger.SuspenseAdjustment). A journal of its own kind, without a block:
-- it books an explanation, not a chain fact.
ALTER TABLE journal DROP CONSTRAINT journal_kind_check;
ALTER TABLE journal ADD CONSTRAINT journal_kind_check
    CHECK (kind IN ('confirmed', 'reverted', 'reversal', 'deposit', 'reconciliation', 'transit_out', 'transit_in', 'opening', 'adjustment'));
