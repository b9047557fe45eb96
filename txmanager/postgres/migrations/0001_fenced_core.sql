-- The fenced core: nodes and their heartbeats, per-signer leases with
-- fencing tokens, nonce cursors, managed transactions and their attempts,
-- approvals, and the outbox of events. Every time comparison that decides
-- ownership uses the database clock (now()), never a node's.

-- Live txmanager nodes. A node heartbeats its row; one whose expires_at
-- has passed is dead for rendezvous assignment and its leases are taken
-- over once they expire.
CREATE TABLE node (
	node_id      text        PRIMARY KEY CHECK (node_id <> ''),
	started_at   timestamptz NOT NULL DEFAULT now(),
	heartbeat_at timestamptz NOT NULL DEFAULT now(),
	expires_at   timestamptz NOT NULL
);

-- Who may work on a signer. A lease is held while expires_at lies ahead
-- of the database clock; every acquisition by a new owner (or after the
-- lease lapsed) raises fencing_token, and every critical write checks
-- owner and token in the same statement, so a stale owner writes nothing.
CREATE TABLE signer_lease (
	chain_id      bigint      NOT NULL CHECK (chain_id > 0),
	signer        bytea       NOT NULL CHECK (length(signer) = 20),
	owner_node    text,
	fencing_token bigint      NOT NULL DEFAULT 0 CHECK (fencing_token >= 0),
	expires_at    timestamptz NOT NULL DEFAULT '-infinity',
	acquired_at   timestamptz,
	PRIMARY KEY (chain_id, signer)
);

CREATE INDEX signer_lease_owner_idx ON signer_lease (owner_node);

-- The next nonce to assign per signer, written only by fenced statements.
CREATE TABLE nonce_cursor (
	chain_id   bigint NOT NULL,
	signer     bytea  NOT NULL,
	next_nonce bigint NOT NULL CHECK (next_nonce >= 0),
	PRIMARY KEY (chain_id, signer),
	FOREIGN KEY (chain_id, signer) REFERENCES signer_lease (chain_id, signer)
);

-- Managed transactions. The intent is immutable once accepted; state,
-- sub_state, reason, gas_limit, nonce and current_attempt move with the
-- state machine, under the signer's lease.
CREATE TABLE tx (
	tx_id          uuid        PRIMARY KEY,
	-- Acceptance order: a signer's INIT rows are worked in this order.
	accept_seq     bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
	chain_id       bigint      NOT NULL CHECK (chain_id > 0),
	signer         bytea       NOT NULL CHECK (length(signer) = 20),
	request_id     text        NOT NULL CHECK (request_id <> '' AND length(request_id) <= 255),
	-- SHA-256 of the canonical intent: the same request id with another
	-- body is a conflict, the same body the same transaction.
	request_hash   bytea       NOT NULL CHECK (length(request_hash) = 32),
	to_address     bytea       CHECK (length(to_address) = 20),
	value          numeric(78) NOT NULL CHECK (value >= 0 AND value < 2::numeric ^ 256),
	data           bytea       NOT NULL DEFAULT '',
	-- The gas limit asked for (NULL: estimate) and the one fixed at
	-- SIMULATED.
	gas            bigint      CHECK (gas > 0),
	gas_limit      bigint      CHECK (gas_limit > 0),
	-- Fee caps asked for; NULL: the signer's configured caps.
	max_fee_per_gas          numeric(78) CHECK (max_fee_per_gas >= 0 AND max_fee_per_gas < 2::numeric ^ 256),
	max_priority_fee_per_gas numeric(78) CHECK (max_priority_fee_per_gas >= 0 AND max_priority_fee_per_gas < 2::numeric ^ 256),
	route          text        NOT NULL CHECK (route IN ('public', 'private', 'auto')),
	depends_on     uuid        REFERENCES tx (tx_id),
	metadata       jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object'),
	state          text        NOT NULL CHECK (state IN ('INIT', 'SIMULATED', 'PENDING_APPROVAL', 'ALLOCATED', 'SIGNED',
	                                                     'BROADCASTED', 'CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED')),
	sub_state      text        CHECK (sub_state IN ('waiting_dependency', 'insufficient_funds', 'included', 'stale', 'stuck', 'replaced')),
	reason         text,
	nonce          bigint      CHECK (nonce >= 0),
	current_attempt integer    CHECK (current_attempt >= 1),
	approval_expires_at timestamptz,
	created_at     timestamptz NOT NULL DEFAULT now(),
	updated_at     timestamptz NOT NULL DEFAULT now(),
	UNIQUE (chain_id, signer, request_id),
	-- Fields tied to states: no nonce before allocation; a nonce from
	-- ALLOCATED on; a signed attempt from SIGNED on.
	CONSTRAINT tx_nonce_by_state CHECK (
		CASE
			WHEN state IN ('INIT', 'SIMULATED', 'PENDING_APPROVAL') THEN nonce IS NULL AND current_attempt IS NULL
			WHEN state = 'ALLOCATED' THEN nonce IS NOT NULL AND current_attempt IS NULL
			WHEN state IN ('SIGNED', 'BROADCASTED', 'CONFIRMED', 'REVERTED') THEN nonce IS NOT NULL AND current_attempt IS NOT NULL
			ELSE true
		END),
	CONSTRAINT tx_gas_limit_by_state CHECK (state IN ('INIT', 'PENDING_APPROVAL', 'FAILED', 'CANCELLED') OR gas_limit IS NOT NULL),
	CONSTRAINT tx_creation_has_data CHECK (to_address IS NOT NULL OR length(data) > 0)
);

-- One transaction per assigned nonce of a signer.
CREATE UNIQUE INDEX tx_nonce_idx ON tx (chain_id, signer, nonce) WHERE nonce IS NOT NULL;
-- A signer's open work, in acceptance order.
CREATE INDEX tx_open_idx ON tx (chain_id, signer, accept_seq)
	WHERE state NOT IN ('CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED');
-- Listing, newest first, by chain and signer or state.
CREATE INDEX tx_list_idx ON tx (chain_id, signer, created_at DESC, tx_id DESC);
CREATE INDEX tx_state_idx ON tx (state, created_at DESC, tx_id DESC);
CREATE INDEX tx_created_idx ON tx (created_at DESC, tx_id DESC);

-- Every signed attempt of a transaction; whichever is mined decides.
CREATE TABLE attempt (
	tx_id      uuid        NOT NULL REFERENCES tx (tx_id),
	attempt    integer     NOT NULL CHECK (attempt >= 1),
	nonce      bigint      NOT NULL CHECK (nonce >= 0),
	hash       bytea       NOT NULL UNIQUE CHECK (length(hash) = 32),
	raw        bytea       NOT NULL CHECK (length(raw) > 0),
	max_fee_per_gas          numeric(78),
	max_priority_fee_per_gas numeric(78),
	gas_price  numeric(78),
	route      text        CHECK (route IN ('public', 'private')),
	created_at timestamptz NOT NULL DEFAULT now(),
	sent_at    timestamptz,
	PRIMARY KEY (tx_id, attempt)
);

ALTER TABLE tx ADD CONSTRAINT tx_current_attempt_fk
	FOREIGN KEY (tx_id, current_attempt) REFERENCES attempt (tx_id, attempt) DEFERRABLE INITIALLY DEFERRED;

-- Approvers' decisions on a transaction waiting for approval. An approval
-- carries the approver's signature that signerd verifies; a rejection
-- fails the transaction.
CREATE TABLE approval (
	tx_id      uuid        NOT NULL REFERENCES tx (tx_id),
	approver   text        NOT NULL CHECK (approver <> ''),
	decision   text        NOT NULL CHECK (decision IN ('approve', 'reject')),
	expiry     timestamptz,
	signature  bytea,
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (tx_id, approver),
	CHECK (decision = 'reject' OR (expiry IS NOT NULL AND signature IS NOT NULL))
);

-- The outbox: one row per state change, written in the transaction of the
-- change. seq, the feed's gap-free global order, is given by the
-- sequencer once every event-writing transaction in flight has ended (an
-- advisory lock writers hold shared and the sequencer takes exclusively),
-- so a reader never sees seq N+1 and later an N.
CREATE TABLE event (
	id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	seq        bigint      UNIQUE,
	tx_id      uuid        NOT NULL REFERENCES tx (tx_id),
	type       text        NOT NULL,
	payload    jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
	created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX event_unsequenced_idx ON event (id) WHERE seq IS NULL;
CREATE INDEX event_tx_idx ON event (tx_id, id);

-- The last seq given, one row.
CREATE TABLE event_sequence (
	one      boolean PRIMARY KEY DEFAULT true CHECK (one),
	last_seq bigint  NOT NULL CHECK (last_seq >= 0)
);
INSERT INTO event_sequence (last_seq) VALUES (0);
