-- Operators' adjustments of the ledger's suspense accounts, as the
-- gateway's operator path takes them (POST /api/v1/ledger/adjustments,
-- scope admin): every proposal, who made it, whether it needed a second
-- key, who approved or rejected it, and what the ledger answered. ledgerd
-- books an adjustment only from this path, with the operator and approver
-- in the journal's memo; this table is the gateway's side of that record,
-- proposals the ledger never saw included.
--
-- status: pending_approval (waits for a second admin key until
-- expires_at), approved (cleared to book: at or below the threshold, or
-- approved; not booked yet when the ledger did not answer, and booked by
-- the next attempt), booked (journal_id), rejected, refused (the ledger
-- refused it: refusal_kind, refusal). A pending proposal past expires_at
-- is expired: it is read so, and can no longer be approved.
CREATE TABLE ledger_adjustment (
	tenant_id            uuid        NOT NULL REFERENCES tenant (tenant_id),
	-- The operator's id for it (a ticket number), one per tenant; the
	-- ledger's id is the tenant's id, ':' and this one.
	adjustment_id        text        NOT NULL CHECK (adjustment_id ~ '^[A-Za-z0-9._:-]{1,64}$'),
	-- seq orders a tenant's list, newest first.
	seq                  bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
	chain_id             bigint      NOT NULL CHECK (chain_id > 0),
	wallet               bytea       NOT NULL CHECK (length(wallet) = 20),
	asset                text        NOT NULL CHECK (asset = 'native' OR asset ~ '^0x[0-9a-f]{40}$'),
	amount               numeric     NOT NULL CHECK (amount = trunc(amount) AND amount <> 0
	                                                 AND abs(amount) < 115792089237316195423570985008687907853269984665640564039457584007913129639936),
	counter_kind         text        NOT NULL CHECK (counter_kind IN ('counterparty', 'deposit_source', 'fee_expense', 'in_transit', 'opening_balance')),
	counter_address      bytea       NOT NULL CHECK (length(counter_address) = 20),
	reason               text        NOT NULL CHECK (reason <> '' AND length(reason) <= 1000),
	status               text        NOT NULL CHECK (status IN ('pending_approval', 'approved', 'booked', 'rejected', 'refused')),
	-- Whether a second admin key had to approve it, and the threshold of
	-- its chain and asset then (NULL: none configured, every amount needs
	-- a second key).
	needs_approval       boolean     NOT NULL,
	threshold            numeric     CHECK (threshold >= 0),
	-- Keys are named as they were (a key is never renamed, but may be
	-- revoked): the audit reads without joining api_key.
	proposed_by_key_id   uuid        NOT NULL REFERENCES api_key (key_id),
	proposed_by_key_name text        NOT NULL,
	proposed_at          timestamptz NOT NULL DEFAULT now(),
	expires_at           timestamptz,
	approved_by_key_id   uuid        REFERENCES api_key (key_id),
	approved_by_key_name text,
	approved_at          timestamptz,
	rejected_by_key_id   uuid        REFERENCES api_key (key_id),
	rejected_by_key_name text,
	rejected_at          timestamptz,
	journal_id           bigint      CHECK (journal_id > 0),
	booked_at            timestamptz,
	refusal_kind         text,
	refusal              text        CHECK (length(refusal) <= 2000),
	refused_at           timestamptz,
	PRIMARY KEY (tenant_id, adjustment_id),
	CHECK (needs_approval = (expires_at IS NOT NULL)),
	CHECK (num_nulls(approved_by_key_id, approved_by_key_name, approved_at) IN (0, 3)),
	CHECK (num_nulls(rejected_by_key_id, rejected_by_key_name, rejected_at) IN (0, 3)),
	CHECK (num_nulls(refusal_kind, refusal, refused_at) IN (0, 3)),
	CHECK ((status = 'booked') = (journal_id IS NOT NULL) AND (journal_id IS NULL) = (booked_at IS NULL)),
	CHECK ((status = 'rejected') = (rejected_at IS NOT NULL)),
	CHECK ((status = 'refused') = (refused_at IS NOT NULL)),
	-- An approval is a second key's, and what needs none has none.
	CHECK (approved_by_key_id <> proposed_by_key_id),
	CHECK (needs_approval OR approved_at IS NULL),
	CHECK (status NOT IN ('approved', 'booked', 'refused') OR NOT needs_approval OR approved_at IS NOT NULL)
);

-- The window of adjustments booked without a second key, per wallet and
-- asset: what one key books alone is bounded over time, not only per
-- adjustment.
CREATE INDEX ledger_adjustment_wallet_idx ON ledger_adjustment (chain_id, wallet, asset, proposed_at) WHERE NOT needs_approval;
-- A tenant's list, newest first, whole or by status.
CREATE INDEX ledger_adjustment_tenant_idx ON ledger_adjustment (tenant_id, seq);
CREATE INDEX ledger_adjustment_status_idx ON ledger_adjustment (tenant_id, status, seq);
