-- The block from which a broadcast attempt's bump_after_blocks counts: the
-- one at which the chain follower first saw it waiting to be mined, moved
-- on when an automatic bump of it was tried and not made. Kept with the
-- attempt rather than in the follower's memory, so that a restart or a
-- takeover neither delays nor hastens a fee bump. NULL until first seen
-- (and for signers without fee bumps).
ALTER TABLE attempt ADD COLUMN waiting_since_block bigint CHECK (waiting_since_block >= 0);
