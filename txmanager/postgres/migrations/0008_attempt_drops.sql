-- How many times the nodes dropped an attempt after taking it: the chain
-- follower found it unknown to every read endpoint at two blocks in a row
-- after a send (a tx.attempt event of kind dropped each time). Counted per
-- attempt, not per transaction: a fee bump is another transaction to a
-- node and may be kept where the attempt it replaces was not. At the
-- chain's max_drops the transaction is left stuck (dropped_by_node).
ALTER TABLE attempt ADD COLUMN drops integer NOT NULL DEFAULT 0 CHECK (drops >= 0);
