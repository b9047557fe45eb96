-- When an attempt was first sent, kept when a resend moves sent_at on: the
-- stuck clock runs from a transaction's first send, and a transaction
-- resent every resubmit_interval would otherwise never be older than that
-- and never become stuck. Written once, by the first resend (from the
-- sent_at it replaces), never moved afterwards; NULL while sent_at is
-- still the first send, so readers take coalesce(first_sent_at, sent_at).
ALTER TABLE attempt ADD COLUMN first_sent_at timestamptz;

-- The attempts still waiting to be mined may have been resent already and
-- lost their first send: they start from when they were stored (for a
-- first attempt its signature, just before its broadcast; for a
-- replacement its send). Only those: the others no longer run a clock.
UPDATE attempt a SET first_sent_at = a.created_at
FROM tx t
WHERE t.tx_id = a.tx_id AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL AND a.sent_at IS NOT NULL;
