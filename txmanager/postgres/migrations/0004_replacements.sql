-- Attempts after the first: fee bumps (the same intent with both fee caps
-- up at least 10%) and cancels (a 0-value transfer from the signer to
-- itself at the same nonce), and operator actions on broadcast
-- transactions.

-- What an attempt is: the first signature, a fee bump or a cancel, and its
-- gas limit when it is not the transaction's (a cancel's is 21000).
ALTER TABLE attempt
	ADD COLUMN kind      text   NOT NULL DEFAULT 'initial' CHECK (kind IN ('initial', 'fee_bump', 'cancel')),
	ADD COLUMN gas_limit bigint CHECK (gas_limit > 0);

-- The next attempt of a broadcast transaction, with its fees fixed, written
-- before signerd is asked for it. A restart or a takeover signs exactly
-- this again, which signerd answers by replaying its signature: re-priced
-- at a moved market, it would be another request at a signed nonce, which
-- signerd refuses unless it is 10% above what it already signed. At most
-- one per transaction; it goes when its attempt is stored, or is dropped
-- with the reason when signerd refuses it.
CREATE TABLE attempt_plan (
	tx_id      uuid        PRIMARY KEY REFERENCES tx (tx_id),
	attempt    integer     NOT NULL CHECK (attempt >= 2),
	kind       text        NOT NULL CHECK (kind IN ('fee_bump', 'cancel')),
	gas_limit  bigint      NOT NULL CHECK (gas_limit > 0),
	max_fee_per_gas          numeric(78) CHECK (max_fee_per_gas >= 0),
	max_priority_fee_per_gas numeric(78) CHECK (max_priority_fee_per_gas >= 0),
	gas_price  numeric(78) CHECK (gas_price >= 0),
	-- The operator action it carries out, if any.
	action_id  uuid,
	planned_at timestamptz NOT NULL DEFAULT now(),
	CHECK ((gas_price IS NULL) = (max_fee_per_gas IS NOT NULL) AND (max_fee_per_gas IS NULL) = (max_priority_fee_per_gas IS NULL))
);

-- Operator actions on a broadcast transaction: resend now, bump now,
-- cancel. Any node takes the request; the signer's owner carries it out
-- under its lease and records the outcome here.
CREATE TABLE tx_action (
	action_id    uuid        PRIMARY KEY,
	tx_id        uuid        NOT NULL REFERENCES tx (tx_id),
	chain_id     bigint      NOT NULL,
	signer       bytea       NOT NULL CHECK (length(signer) = 20),
	action       text        NOT NULL CHECK (action IN ('resend', 'bump', 'cancel')),
	operator     text        NOT NULL CHECK (operator <> '' AND length(operator) <= 255),
	requested_at timestamptz NOT NULL DEFAULT now(),
	done_at      timestamptz,
	outcome      text        CHECK (outcome IN ('done', 'refused')),
	detail       text,
	-- The attempt the action produced (or re-sent).
	attempt      integer,
	CHECK ((done_at IS NULL) = (outcome IS NULL))
);

CREATE INDEX tx_action_pending_idx ON tx_action (chain_id, signer, requested_at) WHERE done_at IS NULL;
CREATE INDEX tx_action_tx_idx ON tx_action (tx_id, requested_at);
