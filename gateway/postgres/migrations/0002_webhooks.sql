-- Webhooks: what a tenant subscribed to and where, the secrets deliveries
-- are signed with, how far the dispatcher has read txmanager's event feed,
-- and one delivery per (subscription, event) with every HTTP attempt made
-- for it. Every gateway node runs a dispatcher on these tables; the
-- database alone coordinates them (a compare-and-set on the feed cursor,
-- claims with a lease on deliveries), so nodes can come and go.

CREATE TABLE webhook_subscription (
	subscription_id uuid        PRIMARY KEY,
	tenant_id       uuid        NOT NULL REFERENCES tenant (tenant_id),
	-- Checked in full by the store (absolute http(s), public host unless
	-- the deployment allows otherwise); the database keeps the bound.
	url             text        NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
	description     text        NOT NULL DEFAULT '' CHECK (length(description) <= 500),
	-- Empty: every event type, including types txmanager adds later (which
	-- consumers must ignore when they do not know them). A new type that
	-- subscriptions may name explicitly needs a migration widening this.
	event_types     text[]      NOT NULL DEFAULT '{}'
	                            CHECK (event_types <@ ARRAY['tx.state_changed', 'tx.attempt', 'tx.confirmation', 'tx.reorged']),
	-- The signers whose events the subscription wants, as
	-- "chain_id:0xaddress" like api_key.signers; NULL: every signer the
	-- tenant owns, now and later.
	signers         text[]      CHECK (signers IS NULL OR cardinality(signers) > 0),
	-- A disabled subscription gets no new deliveries, and its pending ones
	-- wait (they are not attempted) until it is enabled again.
	enabled         boolean     NOT NULL DEFAULT true,
	created_at      timestamptz NOT NULL DEFAULT now(),
	updated_at      timestamptz NOT NULL DEFAULT now()
);

-- A tenant's list (oldest first, keyset pages), and the fan-out's join from
-- an event's owner to its subscriptions.
CREATE INDEX webhook_subscription_tenant_idx ON webhook_subscription (tenant_id, created_at, subscription_id);

-- Signing secrets, several per subscription so that one can be rotated
-- without a window where the receiver rejects deliveries: every unexpired
-- secret signs each delivery. They are stored as they are, not hashed,
-- because signing needs the secret itself (an HMAC key): whoever reads this
-- table can forge deliveries, so it is as sensitive as the secrets.
CREATE TABLE webhook_secret (
	secret_id       uuid        PRIMARY KEY,
	subscription_id uuid        NOT NULL REFERENCES webhook_subscription (subscription_id) ON DELETE CASCADE,
	-- "whsec_" and the standard base64 of 32 random bytes.
	secret          text        NOT NULL CHECK (secret ~ '^whsec_[A-Za-z0-9+/]{43}=$'),
	created_at      timestamptz NOT NULL DEFAULT now(),
	-- Set when a newer secret replaced this one: it signs until then.
	expires_at      timestamptz
);

CREATE INDEX webhook_secret_subscription_idx ON webhook_secret (subscription_id, created_at);

-- The last sequence of txmanager's event feed that has been fanned out into
-- deliveries. One row, advanced by compare-and-set in the same transaction
-- as the deliveries it stands for, so that two nodes fanning out at once
-- neither skip nor double an event.
CREATE TABLE webhook_feed_cursor (
	only_row   boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
	seq        bigint      NOT NULL CHECK (seq >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
);

INSERT INTO webhook_feed_cursor (seq) VALUES (0);

-- One event to deliver to one subscription. The body is the event envelope
-- exactly as the feed gave it, kept as json (not jsonb) so that every
-- attempt and replay sends, and signs, the same bytes. Deleting the
-- subscription deletes its deliveries: nothing is sent for it any more.
CREATE TABLE webhook_delivery (
	delivery_id      uuid        PRIMARY KEY,
	subscription_id  uuid        NOT NULL REFERENCES webhook_subscription (subscription_id) ON DELETE CASCADE,
	event_seq        bigint      NOT NULL CHECK (event_seq > 0),
	event_id         text        NOT NULL CHECK (event_id <> '' AND length(event_id) <= 64),
	event_type       text        NOT NULL,
	tx_id            text        NOT NULL,
	event            json        NOT NULL,
	status           text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dead')),
	-- Attempts since the delivery was queued or last replayed; the history
	-- of every attempt is in webhook_attempt.
	attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
	-- When a pending delivery is due. A claim moves it to the end of the
	-- claim's lease, so a node that dies mid-attempt leaves a delivery that
	-- simply becomes due again.
	next_attempt_at  timestamptz NOT NULL DEFAULT now(),
	-- The claim of the node attempting it; the result is written only under
	-- the same claim, so a node that outlived its lease cannot overwrite
	-- the outcome of the node that took over.
	claim_token      uuid,
	last_status_code integer,
	last_error       text,
	-- Where the dead letter horizon is counted from.
	first_attempt_at timestamptz,
	delivered_at     timestamptz,
	created_at       timestamptz NOT NULL DEFAULT now(),
	UNIQUE (subscription_id, event_seq),
	CHECK ((status = 'delivered') = (delivered_at IS NOT NULL))
);

-- The workers' question: which pending deliveries are due?
CREATE INDEX webhook_delivery_due_idx ON webhook_delivery (next_attempt_at) WHERE status = 'pending';
-- Ordering per transaction: a delivery waits while an earlier one of the
-- same subscription and transaction is pending.
CREATE INDEX webhook_delivery_pending_tx_idx ON webhook_delivery (subscription_id, tx_id, event_seq) WHERE status = 'pending';
-- A subscription's delivery log filtered by status, newest first (the
-- unique index serves it unfiltered).
CREATE INDEX webhook_delivery_log_idx ON webhook_delivery (subscription_id, status, event_seq);

-- Every HTTP attempt of a delivery, for the delivery log.
CREATE TABLE webhook_attempt (
	attempt_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	delivery_id  uuid        NOT NULL REFERENCES webhook_delivery (delivery_id) ON DELETE CASCADE,
	attempted_at timestamptz NOT NULL,
	-- NULL: no HTTP answer (timeout, refused connection, TLS failure).
	status_code  integer     CHECK (status_code BETWEEN 100 AND 999),
	error        text        CHECK (length(error) <= 1000),
	duration_ms  integer     NOT NULL CHECK (duration_ms >= 0)
);

CREATE INDEX webhook_attempt_delivery_idx ON webhook_attempt (delivery_id, attempt_id);
