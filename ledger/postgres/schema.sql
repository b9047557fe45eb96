-- Schema produced by the migrations; regenerate with make schema. Do not edit.

CREATE DOMAIN amount AS numeric
	CONSTRAINT amount_check CHECK ((scale(VALUE) = 0))
	CONSTRAINT amount_check1 CHECK (((VALUE >= '-115792089237316195423570985008687907853269984665640564039457584007913129639935'::numeric) AND (VALUE <= '115792089237316195423570985008687907853269984665640564039457584007913129639935'::numeric)));

CREATE FUNCTION ledger_balance_by_entries() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'balances change only by entries'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE FUNCTION ledger_entries_in_open_journals() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    id bigint;
BEGIN
    -- A loop of primary-key lookups: a join could scan a whole table.
    FOR id IN SELECT DISTINCT journal_id FROM new_entries LOOP
        IF NOT EXISTS (SELECT 1 FROM journal WHERE journal_id = id AND txid = pg_current_xact_id()) THEN
            RAISE EXCEPTION 'journal % is closed or does not exist: entries are written with their journal, in its transaction', id
                USING ERRCODE = 'restrict_violation';
        END IF;
    END LOOP;
    FOR id IN SELECT DISTINCT account_id FROM new_entries LOOP
        IF NOT EXISTS (SELECT 1 FROM account WHERE account_id = id) THEN
            RAISE EXCEPTION 'entry on account %, which does not exist', id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE FUNCTION ledger_journal_balances() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    legs bigint;
    off_asset text;
    off_total numeric;
BEGIN
    SELECT sum(n), min(asset) FILTER (WHERE total <> 0), min(total) FILTER (WHERE total <> 0)
        INTO legs, off_asset, off_total
        FROM (SELECT asset, count(*) AS n, sum(amount) AS total
              FROM (SELECT (SELECT a.asset FROM account a WHERE a.account_id = e.account_id) AS asset, e.amount
                    FROM entry e WHERE e.journal_id = NEW.journal_id) journal_legs
              GROUP BY asset) per_asset;
    IF coalesce(legs, 0) < 2 THEN
        RAISE EXCEPTION 'journal % has % entries: a journal moves an amount between at least two accounts', NEW.journal_id, coalesce(legs, 0)
            USING ERRCODE = 'check_violation';
    END IF;
    IF off_asset IS NOT NULL THEN
        RAISE EXCEPTION 'journal % does not balance: its % entries sum to %', NEW.journal_id, off_asset, off_total
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION ledger_move_balances() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    WITH moves AS MATERIALIZED (
        SELECT account_id, sum(amount) AS amount, min(entry_id) AS first_entry_id, max(entry_id) AS last_entry_id
        FROM new_entries GROUP BY account_id
    ), moved AS (
        INSERT INTO balance (account_id, amount, version)
            SELECT account_id, amount, 1 FROM moves
            ORDER BY account_id -- one lock order for every writer: no deadlock between postings
        ON CONFLICT (account_id) DO UPDATE
            SET amount = balance.amount + EXCLUDED.amount, version = balance.version + 1
        RETURNING account_id, version
    )
    INSERT INTO movement (account_id, version, txid, first_entry_id, last_entry_id)
        SELECT account_id, moved.version, pg_current_xact_id(), moves.first_entry_id, moves.last_entry_id
        FROM moved JOIN moves USING (account_id);
    RETURN NULL;
END $$;

CREATE FUNCTION ledger_movement_by_entries() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'movements are written only by entries'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION ledger_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE FUNCTION reconciliation_refuse_update() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'a reconciliation report is never changed: UPDATE on % is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE TABLE account (
    account_id bigint NOT NULL,
    chain_id bigint NOT NULL,
    asset text NOT NULL,
    kind text NOT NULL,
    address bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT account_address_check CHECK ((length(address) = 20)),
    CONSTRAINT account_asset_check CHECK (((asset = 'native'::text) OR (asset ~ '^0x[0-9a-f]{40}$'::text))),
    CONSTRAINT account_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT account_kind_check CHECK ((kind = ANY (ARRAY['wallet'::text, 'fee_expense'::text, 'counterparty'::text, 'in_transit'::text, 'suspense'::text, 'deposit_source'::text, 'opening_balance'::text])))
);

ALTER TABLE account ALTER COLUMN account_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME account_account_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE adjustment (
    adjustment_id text NOT NULL,
    journal_id bigint NOT NULL,
    operator_key_id uuid NOT NULL,
    operator_key_name text NOT NULL,
    tenant_id uuid NOT NULL,
    tenant_name text NOT NULL,
    approver_key_id uuid,
    approver_key_name text,
    booked_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT adjustment_adjustment_id_check CHECK ((adjustment_id ~ '^[A-Za-z0-9._:-]{1,128}$'::text)),
    CONSTRAINT adjustment_approver_key_name_check CHECK (((approver_key_name <> ''::text) AND (length(approver_key_name) <= 100))),
    CONSTRAINT adjustment_approver_whole CHECK ((num_nulls(approver_key_id, approver_key_name) = ANY (ARRAY[0, 2]))),
    CONSTRAINT adjustment_id_of_tenant CHECK (starts_with(adjustment_id, ((tenant_id)::text || ':'::text))),
    CONSTRAINT adjustment_operator_key_name_check CHECK (((operator_key_name <> ''::text) AND (length(operator_key_name) <= 100))),
    CONSTRAINT adjustment_second_key CHECK ((approver_key_id <> operator_key_id)),
    CONSTRAINT adjustment_tenant_name_check CHECK (((tenant_name <> ''::text) AND (length(tenant_name) <= 100)))
);

CREATE TABLE balance (
    account_id bigint NOT NULL,
    amount numeric(1000,0) NOT NULL,
    version bigint NOT NULL
);

CREATE TABLE entry (
    entry_id bigint NOT NULL,
    journal_id bigint NOT NULL,
    account_id bigint NOT NULL,
    amount amount NOT NULL,
    CONSTRAINT entry_amount_check CHECK (((amount)::numeric <> (0)::numeric))
);

ALTER TABLE entry ALTER COLUMN entry_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME entry_entry_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE feed_backlog (
    feed text NOT NULL,
    seq bigint NOT NULL,
    chain_id bigint NOT NULL,
    tx_id text NOT NULL,
    event jsonb NOT NULL,
    event_at timestamp with time zone NOT NULL,
    reason text NOT NULL,
    error text,
    added_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT feed_backlog_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT feed_backlog_feed_check CHECK (((length(feed) >= 1) AND (length(feed) <= 100))),
    CONSTRAINT feed_backlog_reason_check CHECK ((reason = ANY (ARRAY['halted'::text, 'endpoint'::text, 'no_endpoint'::text, 'wallet_not_opened'::text, 'queued'::text]))),
    CONSTRAINT feed_backlog_seq_check CHECK ((seq > 0))
);

CREATE TABLE feed_cursor (
    feed text NOT NULL,
    seq bigint NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT feed_cursor_feed_check CHECK (((length(feed) >= 1) AND (length(feed) <= 100))),
    CONSTRAINT feed_cursor_seq_check CHECK ((seq >= 0))
);

CREATE TABLE journal (
    journal_id bigint NOT NULL,
    kind text NOT NULL,
    idem_key text NOT NULL,
    payload_hash bytea NOT NULL,
    chain_id bigint NOT NULL,
    tx_hash bytea,
    block_number bigint,
    block_hash bytea,
    status text,
    reverses bigint,
    memo jsonb DEFAULT '{}'::jsonb NOT NULL,
    txid xid8 DEFAULT pg_current_xact_id() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT journal_block_hash_check CHECK ((length(block_hash) = 32)),
    CONSTRAINT journal_block_number_check CHECK ((block_number >= 0)),
    CONSTRAINT journal_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT journal_check CHECK (((block_number IS NULL) = (block_hash IS NULL))),
    CONSTRAINT journal_check1 CHECK (((reverses IS NULL) OR (kind = 'reversal'::text))),
    CONSTRAINT journal_check2 CHECK (((kind <> 'reversal'::text) OR (reverses IS NOT NULL))),
    CONSTRAINT journal_idem_key_check CHECK (((length(idem_key) >= 1) AND (length(idem_key) <= 512))),
    CONSTRAINT journal_kind_check CHECK ((kind = ANY (ARRAY['confirmed'::text, 'reverted'::text, 'reversal'::text, 'deposit'::text, 'reconciliation'::text, 'transit_out'::text, 'transit_in'::text, 'opening'::text, 'adjustment'::text]))),
    CONSTRAINT journal_memo_check CHECK ((jsonb_typeof(memo) = 'object'::text)),
    CONSTRAINT journal_payload_hash_check CHECK ((length(payload_hash) = 32)),
    CONSTRAINT journal_status_check CHECK ((status = ANY (ARRAY['success'::text, 'reverted'::text]))),
    CONSTRAINT journal_tx_hash_check CHECK ((length(tx_hash) = 32))
);

ALTER TABLE journal ALTER COLUMN journal_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME journal_journal_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE movement (
    account_id bigint NOT NULL,
    version bigint NOT NULL,
    txid xid8 NOT NULL,
    first_entry_id bigint NOT NULL,
    last_entry_id bigint NOT NULL,
    CONSTRAINT movement_check CHECK ((first_entry_id <= last_entry_id)),
    CONSTRAINT movement_version_check CHECK ((version > 0))
);

CREATE TABLE reconciliation_item (
    run_id bigint NOT NULL,
    address bytea NOT NULL,
    asset text NOT NULL,
    ledger_balance numeric(1000,0) NOT NULL,
    chain_balance numeric(78,0),
    difference numeric(1000,0),
    cause text DEFAULT ''::text NOT NULL,
    journal_id bigint,
    pending bytea[] DEFAULT '{}'::bytea[] NOT NULL,
    negative boolean NOT NULL,
    CONSTRAINT reconciliation_item_address_check CHECK ((length(address) = 20)),
    CONSTRAINT reconciliation_item_asset_check CHECK (((asset = 'native'::text) OR (asset ~ '^0x[0-9a-f]{40}$'::text))),
    CONSTRAINT reconciliation_item_chain_balance_check CHECK (((chain_balance >= (0)::numeric) AND (chain_balance <= '115792089237316195423570985008687907853269984665640564039457584007913129639935'::numeric))),
    CONSTRAINT reconciliation_item_check CHECK (((difference IS NULL) OR (chain_balance IS NOT NULL))),
    CONSTRAINT reconciliation_item_check1 CHECK (((journal_id IS NULL) OR (difference <> (0)::numeric)))
);

CREATE TABLE reconciliation_run (
    run_id bigint NOT NULL,
    chain_id bigint NOT NULL,
    block_number bigint NOT NULL,
    block_hash bytea NOT NULL,
    trigger text NOT NULL,
    status text NOT NULL,
    problem text DEFAULT ''::text NOT NULL,
    differences integer NOT NULL,
    deferred integer NOT NULL,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone NOT NULL,
    CONSTRAINT reconciliation_run_block_hash_check CHECK ((length(block_hash) = 32)),
    CONSTRAINT reconciliation_run_block_number_check CHECK ((block_number >= 0)),
    CONSTRAINT reconciliation_run_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT reconciliation_run_check CHECK ((finished_at >= started_at)),
    CONSTRAINT reconciliation_run_check1 CHECK (((status = 'complete'::text) = (problem = ''::text))),
    CONSTRAINT reconciliation_run_deferred_check CHECK ((deferred >= 0)),
    CONSTRAINT reconciliation_run_differences_check CHECK ((differences >= 0)),
    CONSTRAINT reconciliation_run_status_check CHECK ((status = ANY (ARRAY['complete'::text, 'incomplete'::text]))),
    CONSTRAINT reconciliation_run_trigger_check CHECK ((trigger = ANY (ARRAY['schedule'::text, 'request'::text])))
);

ALTER TABLE reconciliation_run ALTER COLUMN run_id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME reconciliation_run_run_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE scan_cursor (
    chain_id bigint NOT NULL,
    block_number bigint NOT NULL,
    block_hash bytea NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT scan_cursor_block_hash_check CHECK ((length(block_hash) = 32)),
    CONSTRAINT scan_cursor_block_number_check CHECK ((block_number >= 0)),
    CONSTRAINT scan_cursor_chain_id_check CHECK ((chain_id > 0))
);

CREATE TABLE scanned_block (
    chain_id bigint NOT NULL,
    block_number bigint NOT NULL,
    block_hash bytea NOT NULL,
    parent_hash bytea NOT NULL,
    scanned_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT scanned_block_block_hash_check CHECK ((length(block_hash) = 32)),
    CONSTRAINT scanned_block_block_number_check CHECK ((block_number >= 0)),
    CONSTRAINT scanned_block_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT scanned_block_parent_hash_check CHECK ((length(parent_hash) = 32))
);

CREATE TABLE schema_migrations (
    version bigint NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE transit (
    transit_id text NOT NULL,
    seq bigint NOT NULL,
    status text NOT NULL,
    source_tx_id uuid NOT NULL,
    source_chain_id bigint NOT NULL,
    source_wallet bytea NOT NULL,
    source_journal_id bigint,
    source_tx_hash bytea,
    source_block_hash bytea,
    source_asset text,
    source_amount amount,
    bridge bytea,
    destination_tx_id uuid,
    destination_chain_id bigint,
    destination_wallet bytea,
    destination_journal_id bigint,
    destination_tx_hash bytea,
    destination_block_hash bytea,
    destination_asset text,
    destination_amount amount,
    bridge_fee amount,
    fee_journal_id bigint,
    fee_negative boolean GENERATED ALWAYS AS (((bridge_fee)::numeric < (0)::numeric)) STORED,
    opened_at timestamp with time zone,
    completed_at timestamp with time zone,
    alerted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT transit_alerted CHECK (((alerted_at IS NULL) OR (status = 'open'::text))),
    CONSTRAINT transit_bridge_check CHECK ((length(bridge) = 20)),
    CONSTRAINT transit_completed CHECK (((status = 'completed'::text) = (completed_at IS NOT NULL))),
    CONSTRAINT transit_destination_amount_check CHECK (((destination_amount)::numeric > (0)::numeric)),
    CONSTRAINT transit_destination_asset_check CHECK (((destination_asset = 'native'::text) OR (destination_asset ~ '^0x[0-9a-f]{40}$'::text))),
    CONSTRAINT transit_destination_block_hash_check CHECK ((length(destination_block_hash) = 32)),
    CONSTRAINT transit_destination_booked_linked CHECK (((destination_journal_id IS NULL) OR (destination_tx_id IS NOT NULL))),
    CONSTRAINT transit_destination_booked_whole CHECK ((num_nulls(destination_journal_id, destination_tx_hash, destination_block_hash, destination_asset, destination_amount) = ANY (ARRAY[0, 5]))),
    CONSTRAINT transit_destination_chain_id_check CHECK ((destination_chain_id > 0)),
    CONSTRAINT transit_destination_linked_whole CHECK ((num_nulls(destination_tx_id, destination_chain_id, destination_wallet) = ANY (ARRAY[0, 3]))),
    CONSTRAINT transit_destination_tx_hash_check CHECK ((length(destination_tx_hash) = 32)),
    CONSTRAINT transit_destination_wallet_check CHECK ((length(destination_wallet) = 20)),
    CONSTRAINT transit_fee_amount CHECK (((bridge_fee IS NULL) OR ((bridge_fee)::numeric = ((source_amount)::numeric - (destination_amount)::numeric)))),
    CONSTRAINT transit_fee_journal CHECK (((bridge_fee IS NULL) OR (((bridge_fee)::numeric = (0)::numeric) = (fee_journal_id IS NULL)))),
    CONSTRAINT transit_fee_when_completed CHECK (((status = 'completed'::text) = (bridge_fee IS NOT NULL))),
    CONSTRAINT transit_opened CHECK (((status = 'pending'::text) = (opened_at IS NULL))),
    CONSTRAINT transit_source_amount_check CHECK (((source_amount)::numeric > (0)::numeric)),
    CONSTRAINT transit_source_asset_check CHECK (((source_asset = 'native'::text) OR (source_asset ~ '^0x[0-9a-f]{40}$'::text))),
    CONSTRAINT transit_source_block_hash_check CHECK ((length(source_block_hash) = 32)),
    CONSTRAINT transit_source_booked_whole CHECK ((num_nulls(source_journal_id, source_tx_hash, source_block_hash, source_asset, source_amount, bridge) = ANY (ARRAY[0, 6]))),
    CONSTRAINT transit_source_chain_id_check CHECK ((source_chain_id > 0)),
    CONSTRAINT transit_source_tx_hash_check CHECK ((length(source_tx_hash) = 32)),
    CONSTRAINT transit_source_wallet_check CHECK ((length(source_wallet) = 20)),
    CONSTRAINT transit_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'open'::text, 'completed'::text]))),
    CONSTRAINT transit_status_follows_ends CHECK ((status =
CASE
    WHEN ((source_journal_id IS NOT NULL) AND (destination_journal_id IS NOT NULL)) THEN 'completed'::text
    WHEN ((source_journal_id IS NULL) AND (destination_journal_id IS NULL)) THEN 'pending'::text
    ELSE 'open'::text
END)),
    CONSTRAINT transit_transit_id_check CHECK ((transit_id ~ '^([A-Za-z0-9._:-]{1,36}~)?[A-Za-z0-9._:-]{1,128}$'::text))
);

ALTER TABLE transit ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME transit_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE wallet (
    chain_id bigint NOT NULL,
    address bytea NOT NULL,
    source text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    opened_block bigint,
    opened_hash bytea,
    CONSTRAINT wallet_address_check CHECK ((length(address) = 20)),
    CONSTRAINT wallet_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT wallet_opened_block_check CHECK ((opened_block >= 0)),
    CONSTRAINT wallet_opened_hash_check CHECK ((length(opened_hash) = 32)),
    CONSTRAINT wallet_opened_whole CHECK (((opened_block IS NULL) = (opened_hash IS NULL))),
    CONSTRAINT wallet_source_check CHECK ((source = ANY (ARRAY['signer'::text, 'configured'::text])))
);

CREATE TABLE wallet_tx (
    chain_id bigint NOT NULL,
    tx_hash bytea NOT NULL,
    block_hash bytea NOT NULL,
    block_number bigint NOT NULL,
    sender bytea NOT NULL,
    seen_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT wallet_tx_block_hash_check CHECK ((length(block_hash) = 32)),
    CONSTRAINT wallet_tx_block_number_check CHECK ((block_number >= 0)),
    CONSTRAINT wallet_tx_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT wallet_tx_sender_check CHECK ((length(sender) = 20)),
    CONSTRAINT wallet_tx_tx_hash_check CHECK ((length(tx_hash) = 32))
);

ALTER TABLE ONLY account
    ADD CONSTRAINT account_chain_id_asset_kind_address_key UNIQUE (chain_id, asset, kind, address);

ALTER TABLE ONLY account
    ADD CONSTRAINT account_pkey PRIMARY KEY (account_id);

ALTER TABLE ONLY adjustment
    ADD CONSTRAINT adjustment_journal_id_key UNIQUE (journal_id);

ALTER TABLE ONLY adjustment
    ADD CONSTRAINT adjustment_pkey PRIMARY KEY (adjustment_id);

ALTER TABLE ONLY balance
    ADD CONSTRAINT balance_pkey PRIMARY KEY (account_id);

ALTER TABLE ONLY entry
    ADD CONSTRAINT entry_pkey PRIMARY KEY (entry_id);

ALTER TABLE ONLY feed_backlog
    ADD CONSTRAINT feed_backlog_pkey PRIMARY KEY (feed, seq);

ALTER TABLE ONLY feed_cursor
    ADD CONSTRAINT feed_cursor_pkey PRIMARY KEY (feed);

ALTER TABLE ONLY journal
    ADD CONSTRAINT journal_idem_key_key UNIQUE (idem_key);

ALTER TABLE ONLY journal
    ADD CONSTRAINT journal_pkey PRIMARY KEY (journal_id);

ALTER TABLE ONLY journal
    ADD CONSTRAINT journal_reverses_key UNIQUE (reverses);

ALTER TABLE ONLY movement
    ADD CONSTRAINT movement_pkey PRIMARY KEY (account_id, version);

ALTER TABLE ONLY reconciliation_item
    ADD CONSTRAINT reconciliation_item_pkey PRIMARY KEY (run_id, address, asset);

ALTER TABLE ONLY reconciliation_run
    ADD CONSTRAINT reconciliation_run_pkey PRIMARY KEY (run_id);

ALTER TABLE ONLY scan_cursor
    ADD CONSTRAINT scan_cursor_pkey PRIMARY KEY (chain_id);

ALTER TABLE ONLY scanned_block
    ADD CONSTRAINT scanned_block_pkey PRIMARY KEY (chain_id, block_number);

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_destination_tx_id_key UNIQUE (destination_tx_id);

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_pkey PRIMARY KEY (transit_id);

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_seq_key UNIQUE (seq);

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_source_tx_id_key UNIQUE (source_tx_id);

ALTER TABLE ONLY wallet
    ADD CONSTRAINT wallet_pkey PRIMARY KEY (chain_id, address);

ALTER TABLE ONLY wallet_tx
    ADD CONSTRAINT wallet_tx_pkey PRIMARY KEY (chain_id, tx_hash, block_hash);

CREATE INDEX account_address_idx ON account USING btree (address, chain_id);

CREATE INDEX adjustment_tenant_idx ON adjustment USING btree (tenant_id, booked_at);

CREATE INDEX entry_account_idx ON entry USING btree (account_id, entry_id);

CREATE INDEX entry_journal_idx ON entry USING btree (journal_id);

CREATE INDEX feed_backlog_chain ON feed_backlog USING btree (feed, chain_id, seq);

CREATE INDEX journal_block_idx ON journal USING btree (chain_id, block_number) WHERE (block_number IS NOT NULL);

CREATE INDEX journal_tx_idx ON journal USING btree (chain_id, tx_hash) WHERE (tx_hash IS NOT NULL);

CREATE INDEX journal_unblocked_idx ON journal USING btree (chain_id) WHERE (block_number IS NULL);

CREATE INDEX reconciliation_item_journal_idx ON reconciliation_item USING btree (journal_id) WHERE (journal_id IS NOT NULL);

CREATE INDEX reconciliation_run_chain_idx ON reconciliation_run USING btree (chain_id, run_id DESC);

CREATE INDEX transit_destination_wallet_idx ON transit USING btree (destination_wallet, destination_chain_id, seq) WHERE (destination_wallet IS NOT NULL);

CREATE INDEX transit_open_idx ON transit USING btree (opened_at) WHERE (status = 'open'::text);

CREATE INDEX transit_source_wallet_idx ON transit USING btree (source_wallet, source_chain_id, seq);

CREATE INDEX transit_status_idx ON transit USING btree (status, seq);

CREATE INDEX wallet_opened_idx ON wallet USING btree (chain_id, opened_block) WHERE (opened_block IS NOT NULL);

CREATE INDEX wallet_tx_block_idx ON wallet_tx USING btree (chain_id, block_number);

CREATE INDEX wallet_unopened_idx ON wallet USING btree (chain_id) WHERE (opened_block IS NULL);

CREATE TRIGGER account_append_only BEFORE DELETE OR UPDATE ON account FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER account_no_truncate BEFORE TRUNCATE ON account FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER adjustment_append_only BEFORE DELETE OR UPDATE ON adjustment FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER adjustment_no_truncate BEFORE TRUNCATE ON adjustment FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER balance_by_entries BEFORE INSERT OR UPDATE ON balance FOR EACH ROW EXECUTE FUNCTION ledger_balance_by_entries();

CREATE TRIGGER balance_no_delete BEFORE DELETE ON balance FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER balance_no_truncate BEFORE TRUNCATE ON balance FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER entries_in_open_journals AFTER INSERT ON entry REFERENCING NEW TABLE AS new_entries FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_in_open_journals();

CREATE TRIGGER entry_append_only BEFORE DELETE OR UPDATE ON entry FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER entry_moves_balances AFTER INSERT ON entry REFERENCING NEW TABLE AS new_entries FOR EACH STATEMENT EXECUTE FUNCTION ledger_move_balances();

CREATE TRIGGER entry_no_truncate BEFORE TRUNCATE ON entry FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER journal_append_only BEFORE DELETE OR UPDATE ON journal FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE CONSTRAINT TRIGGER journal_balances AFTER INSERT ON journal DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_journal_balances();

CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER movement_append_only BEFORE DELETE OR UPDATE ON movement FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER movement_by_entries BEFORE INSERT ON movement FOR EACH STATEMENT EXECUTE FUNCTION ledger_movement_by_entries();

CREATE TRIGGER movement_no_truncate BEFORE TRUNCATE ON movement FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

CREATE TRIGGER reconciliation_item_unchanged BEFORE UPDATE ON reconciliation_item FOR EACH ROW EXECUTE FUNCTION reconciliation_refuse_update();

CREATE TRIGGER reconciliation_run_unchanged BEFORE UPDATE ON reconciliation_run FOR EACH ROW EXECUTE FUNCTION reconciliation_refuse_update();

ALTER TABLE ONLY adjustment
    ADD CONSTRAINT adjustment_journal_id_fkey FOREIGN KEY (journal_id) REFERENCES journal(journal_id);

ALTER TABLE ONLY balance
    ADD CONSTRAINT balance_account_id_fkey FOREIGN KEY (account_id) REFERENCES account(account_id);

ALTER TABLE ONLY journal
    ADD CONSTRAINT journal_reverses_fkey FOREIGN KEY (reverses) REFERENCES journal(journal_id);

ALTER TABLE ONLY reconciliation_item
    ADD CONSTRAINT reconciliation_item_journal_id_fkey FOREIGN KEY (journal_id) REFERENCES journal(journal_id);

ALTER TABLE ONLY reconciliation_item
    ADD CONSTRAINT reconciliation_item_run_id_fkey FOREIGN KEY (run_id) REFERENCES reconciliation_run(run_id) ON DELETE CASCADE;

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_destination_journal_id_fkey FOREIGN KEY (destination_journal_id) REFERENCES journal(journal_id);

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_fee_journal_id_fkey FOREIGN KEY (fee_journal_id) REFERENCES journal(journal_id);

ALTER TABLE ONLY transit
    ADD CONSTRAINT transit_source_journal_id_fkey FOREIGN KEY (source_journal_id) REFERENCES journal(journal_id);
