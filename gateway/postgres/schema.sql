-- Schema produced by the migrations; regenerate with make schema. Do not edit.

CREATE TABLE api_key (
    key_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    secret_hash bytea NOT NULL,
    scopes text[] NOT NULL,
    signers text[],
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    CONSTRAINT api_key_name_check CHECK (((name <> ''::text) AND (length(name) <= 100))),
    CONSTRAINT api_key_scopes_check CHECK (((cardinality(scopes) > 0) AND (scopes <@ ARRAY['tx:write'::text, 'tx:read'::text, 'approvals'::text, 'webhooks'::text, 'admin'::text, 'ledger:read'::text]))),
    CONSTRAINT api_key_secret_hash_check CHECK ((length(secret_hash) = 32)),
    CONSTRAINT api_key_signers_check CHECK (((signers IS NULL) OR (cardinality(signers) > 0)))
);

CREATE TABLE ledger_adjustment (
    tenant_id uuid NOT NULL,
    adjustment_id text NOT NULL,
    seq bigint NOT NULL,
    chain_id bigint NOT NULL,
    wallet bytea NOT NULL,
    asset text NOT NULL,
    amount numeric NOT NULL,
    counter_kind text NOT NULL,
    counter_address bytea NOT NULL,
    reason text NOT NULL,
    status text NOT NULL,
    needs_approval boolean NOT NULL,
    threshold numeric,
    proposed_by_key_id uuid NOT NULL,
    proposed_by_key_name text NOT NULL,
    proposed_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    approved_by_key_id uuid,
    approved_by_key_name text,
    approved_at timestamp with time zone,
    rejected_by_key_id uuid,
    rejected_by_key_name text,
    rejected_at timestamp with time zone,
    journal_id bigint,
    booked_at timestamp with time zone,
    refusal_kind text,
    refusal text,
    refused_at timestamp with time zone,
    CONSTRAINT ledger_adjustment_adjustment_id_check CHECK ((adjustment_id ~ '^[A-Za-z0-9._:-]{1,64}$'::text)),
    CONSTRAINT ledger_adjustment_amount_check CHECK (((amount = trunc(amount)) AND (amount <> (0)::numeric) AND (abs(amount) < '115792089237316195423570985008687907853269984665640564039457584007913129639936'::numeric))),
    CONSTRAINT ledger_adjustment_asset_check CHECK (((asset = 'native'::text) OR (asset ~ '^0x[0-9a-f]{40}$'::text))),
    CONSTRAINT ledger_adjustment_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT ledger_adjustment_check CHECK ((needs_approval = (expires_at IS NOT NULL))),
    CONSTRAINT ledger_adjustment_check1 CHECK ((num_nulls(approved_by_key_id, approved_by_key_name, approved_at) = ANY (ARRAY[0, 3]))),
    CONSTRAINT ledger_adjustment_check2 CHECK ((num_nulls(rejected_by_key_id, rejected_by_key_name, rejected_at) = ANY (ARRAY[0, 3]))),
    CONSTRAINT ledger_adjustment_check3 CHECK ((num_nulls(refusal_kind, refusal, refused_at) = ANY (ARRAY[0, 3]))),
    CONSTRAINT ledger_adjustment_check4 CHECK ((((status = 'booked'::text) = (journal_id IS NOT NULL)) AND ((journal_id IS NULL) = (booked_at IS NULL)))),
    CONSTRAINT ledger_adjustment_check5 CHECK (((status = 'rejected'::text) = (rejected_at IS NOT NULL))),
    CONSTRAINT ledger_adjustment_check6 CHECK (((status = 'refused'::text) = (refused_at IS NOT NULL))),
    CONSTRAINT ledger_adjustment_check7 CHECK ((approved_by_key_id <> proposed_by_key_id)),
    CONSTRAINT ledger_adjustment_check8 CHECK ((needs_approval OR (approved_at IS NULL))),
    CONSTRAINT ledger_adjustment_check9 CHECK (((status <> ALL (ARRAY['approved'::text, 'booked'::text, 'refused'::text])) OR (NOT needs_approval) OR (approved_at IS NOT NULL))),
    CONSTRAINT ledger_adjustment_counter_address_check CHECK ((length(counter_address) = 20)),
    CONSTRAINT ledger_adjustment_counter_kind_check CHECK ((counter_kind = ANY (ARRAY['counterparty'::text, 'deposit_source'::text, 'fee_expense'::text, 'in_transit'::text, 'opening_balance'::text]))),
    CONSTRAINT ledger_adjustment_journal_id_check CHECK ((journal_id > 0)),
    CONSTRAINT ledger_adjustment_reason_check CHECK (((reason <> ''::text) AND (length(reason) <= 1000))),
    CONSTRAINT ledger_adjustment_refusal_check CHECK ((length(refusal) <= 2000)),
    CONSTRAINT ledger_adjustment_status_check CHECK ((status = ANY (ARRAY['pending_approval'::text, 'approved'::text, 'booked'::text, 'rejected'::text, 'refused'::text]))),
    CONSTRAINT ledger_adjustment_threshold_check CHECK ((threshold >= (0)::numeric)),
    CONSTRAINT ledger_adjustment_wallet_check CHECK ((length(wallet) = 20))
);

ALTER TABLE ledger_adjustment ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ledger_adjustment_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE schema_migrations (
    version bigint NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE tenant (
    tenant_id uuid NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_name_check CHECK (((name <> ''::text) AND (length(name) <= 100)))
);

CREATE TABLE tenant_signer (
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    tenant_id uuid NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT tenant_signer_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT tenant_signer_signer_check CHECK ((length(signer) = 20))
);

CREATE TABLE webhook_attempt (
    attempt_id bigint NOT NULL,
    delivery_id uuid NOT NULL,
    attempted_at timestamp with time zone NOT NULL,
    status_code integer,
    error text,
    duration_ms integer NOT NULL,
    CONSTRAINT webhook_attempt_duration_ms_check CHECK ((duration_ms >= 0)),
    CONSTRAINT webhook_attempt_error_check CHECK ((length(error) <= 1000)),
    CONSTRAINT webhook_attempt_status_code_check CHECK (((status_code >= 100) AND (status_code <= 999)))
);

ALTER TABLE webhook_attempt ALTER COLUMN attempt_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME webhook_attempt_attempt_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE webhook_delivery (
    delivery_id uuid NOT NULL,
    subscription_id uuid NOT NULL,
    event_seq bigint NOT NULL,
    event_id text NOT NULL,
    event_type text NOT NULL,
    tx_id text NOT NULL,
    event json NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT now() NOT NULL,
    claim_token uuid,
    last_status_code integer,
    last_error text,
    first_attempt_at timestamp with time zone,
    delivered_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_delivery_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT webhook_delivery_check CHECK (((status = 'delivered'::text) = (delivered_at IS NOT NULL))),
    CONSTRAINT webhook_delivery_event_id_check CHECK (((event_id <> ''::text) AND (length(event_id) <= 64))),
    CONSTRAINT webhook_delivery_event_seq_check CHECK ((event_seq > 0)),
    CONSTRAINT webhook_delivery_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'delivered'::text, 'dead'::text])))
);

CREATE TABLE webhook_feed_cursor (
    only_row boolean DEFAULT true NOT NULL,
    seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_feed_cursor_only_row_check CHECK (only_row),
    CONSTRAINT webhook_feed_cursor_seq_check CHECK ((seq >= 0))
);

CREATE TABLE webhook_secret (
    secret_id uuid NOT NULL,
    subscription_id uuid NOT NULL,
    secret text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    CONSTRAINT webhook_secret_secret_check CHECK ((secret ~ '^whsec_[A-Za-z0-9+/]{43}=$'::text))
);

CREATE TABLE webhook_subscription (
    subscription_id uuid NOT NULL,
    tenant_id uuid NOT NULL,
    url text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    event_types text[] DEFAULT '{}'::text[] NOT NULL,
    signers text[],
    enabled boolean DEFAULT true NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT webhook_subscription_description_check CHECK ((length(description) <= 500)),
    CONSTRAINT webhook_subscription_event_types_check CHECK ((event_types <@ ARRAY['tx.state_changed'::text, 'tx.attempt'::text, 'tx.confirmation'::text, 'tx.reorged'::text])),
    CONSTRAINT webhook_subscription_signers_check CHECK (((signers IS NULL) OR (cardinality(signers) > 0))),
    CONSTRAINT webhook_subscription_url_check CHECK (((url ~ '^https?://'::text) AND (length(url) <= 2048)))
);

ALTER TABLE ONLY api_key
    ADD CONSTRAINT api_key_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY ledger_adjustment
    ADD CONSTRAINT ledger_adjustment_pkey PRIMARY KEY (tenant_id, adjustment_id);

ALTER TABLE ONLY ledger_adjustment
    ADD CONSTRAINT ledger_adjustment_seq_key UNIQUE (seq);

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY tenant
    ADD CONSTRAINT tenant_name_key UNIQUE (name);

ALTER TABLE ONLY tenant
    ADD CONSTRAINT tenant_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY tenant_signer
    ADD CONSTRAINT tenant_signer_pkey PRIMARY KEY (chain_id, signer);

ALTER TABLE ONLY webhook_attempt
    ADD CONSTRAINT webhook_attempt_pkey PRIMARY KEY (attempt_id);

ALTER TABLE ONLY webhook_delivery
    ADD CONSTRAINT webhook_delivery_pkey PRIMARY KEY (delivery_id);

ALTER TABLE ONLY webhook_delivery
    ADD CONSTRAINT webhook_delivery_subscription_id_event_seq_key UNIQUE (subscription_id, event_seq);

ALTER TABLE ONLY webhook_feed_cursor
    ADD CONSTRAINT webhook_feed_cursor_pkey PRIMARY KEY (only_row);

ALTER TABLE ONLY webhook_secret
    ADD CONSTRAINT webhook_secret_pkey PRIMARY KEY (secret_id);

ALTER TABLE ONLY webhook_subscription
    ADD CONSTRAINT webhook_subscription_pkey PRIMARY KEY (subscription_id);

CREATE INDEX api_key_tenant_idx ON api_key USING btree (tenant_id, created_at);

CREATE INDEX ledger_adjustment_status_idx ON ledger_adjustment USING btree (tenant_id, status, seq);

CREATE INDEX ledger_adjustment_tenant_idx ON ledger_adjustment USING btree (tenant_id, seq);

CREATE INDEX ledger_adjustment_wallet_idx ON ledger_adjustment USING btree (chain_id, wallet, asset, proposed_at) WHERE (NOT needs_approval);

CREATE INDEX tenant_signer_tenant_idx ON tenant_signer USING btree (tenant_id);

CREATE INDEX webhook_attempt_delivery_idx ON webhook_attempt USING btree (delivery_id, attempt_id);

CREATE INDEX webhook_delivery_due_idx ON webhook_delivery USING btree (next_attempt_at) WHERE (status = 'pending'::text);

CREATE INDEX webhook_delivery_log_idx ON webhook_delivery USING btree (subscription_id, status, event_seq);

CREATE INDEX webhook_delivery_pending_tx_idx ON webhook_delivery USING btree (subscription_id, tx_id, event_seq) WHERE (status = 'pending'::text);

CREATE INDEX webhook_secret_subscription_idx ON webhook_secret USING btree (subscription_id, created_at);

CREATE INDEX webhook_subscription_tenant_idx ON webhook_subscription USING btree (tenant_id, created_at, subscription_id);

ALTER TABLE ONLY api_key
    ADD CONSTRAINT api_key_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenant(tenant_id);

ALTER TABLE ONLY ledger_adjustment
    ADD CONSTRAINT ledger_adjustment_approved_by_key_id_fkey FOREIGN KEY (approved_by_key_id) REFERENCES api_key(key_id);

ALTER TABLE ONLY ledger_adjustment
    ADD CONSTRAINT ledger_adjustment_proposed_by_key_id_fkey FOREIGN KEY (proposed_by_key_id) REFERENCES api_key(key_id);

ALTER TABLE ONLY ledger_adjustment
    ADD CONSTRAINT ledger_adjustment_rejected_by_key_id_fkey FOREIGN KEY (rejected_by_key_id) REFERENCES api_key(key_id);

ALTER TABLE ONLY ledger_adjustment
    ADD CONSTRAINT ledger_adjustment_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenant(tenant_id);

ALTER TABLE ONLY tenant_signer
    ADD CONSTRAINT tenant_signer_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenant(tenant_id);

ALTER TABLE ONLY webhook_attempt
    ADD CONSTRAINT webhook_attempt_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES webhook_delivery(delivery_id) ON DELETE CASCADE;

ALTER TABLE ONLY webhook_delivery
    ADD CONSTRAINT webhook_delivery_subscription_id_fkey FOREIGN KEY (subscription_id) REFERENCES webhook_subscription(subscription_id) ON DELETE CASCADE;

ALTER TABLE ONLY webhook_secret
    ADD CONSTRAINT webhook_secret_subscription_id_fkey FOREIGN KEY (subscription_id) REFERENCES webhook_subscription(subscription_id) ON DELETE CASCADE;

ALTER TABLE ONLY webhook_subscription
    ADD CONSTRAINT webhook_subscription_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenant(tenant_id);
