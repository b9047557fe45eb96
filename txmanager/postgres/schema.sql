-- Schema produced by the migrations; regenerate with make schema. Do not edit.

CREATE FUNCTION txfence_distinct(ids uuid[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
	SELECT count(DISTINCT id) = count(*) FROM unnest(ids) AS id
$$;

CREATE FUNCTION txfence_holds_lease(p_chain_id bigint, p_signer bytea, p_owner_node text, p_fencing_token bigint) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
	RETURN EXISTS (
		SELECT 1 FROM signer_lease
		WHERE chain_id = p_chain_id AND signer = p_signer AND owner_node = p_owner_node
		  AND fencing_token = p_fencing_token AND expires_at > now()
		FOR KEY SHARE);
END
$$;

CREATE FUNCTION txfence_parents_exist() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
	missing text;
BEGIN
	SELECT string_agg(p.id::text, ',' ORDER BY p.n) INTO missing
	FROM unnest(NEW.depends_on) WITH ORDINALITY AS p(id, n)
	WHERE p.id <> NEW.tx_id AND NOT EXISTS (SELECT 1 FROM tx WHERE tx.tx_id = p.id);
	IF missing IS NOT NULL THEN
		RAISE EXCEPTION 'depends_on names no transaction: %', missing
			USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'tx_depends_on_fkey', TABLE = 'tx', DETAIL = missing;
	END IF;
	RETURN NEW;
END
$$;

CREATE TABLE approval (
    tx_id uuid NOT NULL,
    approver text NOT NULL,
    decision text NOT NULL,
    expiry timestamp with time zone,
    signature bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    max_fee_per_gas numeric(78,0),
    CONSTRAINT approval_approver_check CHECK ((approver <> ''::text)),
    CONSTRAINT approval_check CHECK (((decision = 'reject'::text) OR ((expiry IS NOT NULL) AND (signature IS NOT NULL)))),
    CONSTRAINT approval_decision_check CHECK ((decision = ANY (ARRAY['approve'::text, 'reject'::text]))),
    CONSTRAINT approval_fee_ceiling_check CHECK (((decision = 'reject'::text) OR (max_fee_per_gas IS NOT NULL))),
    CONSTRAINT approval_max_fee_per_gas_check CHECK (((max_fee_per_gas >= (0)::numeric) AND (max_fee_per_gas < ((2)::numeric ^ (256)::numeric))))
);

CREATE TABLE attempt (
    tx_id uuid NOT NULL,
    attempt integer NOT NULL,
    nonce bigint NOT NULL,
    hash bytea NOT NULL,
    raw bytea NOT NULL,
    max_fee_per_gas numeric(78,0),
    max_priority_fee_per_gas numeric(78,0),
    gas_price numeric(78,0),
    route text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    block_number bigint,
    block_hash bytea,
    receipt_status smallint,
    gas_used bigint,
    effective_gas_price numeric(78,0),
    kind text DEFAULT 'initial'::text NOT NULL,
    gas_limit bigint,
    waiting_since_block bigint,
    first_sent_at timestamp with time zone,
    drops integer DEFAULT 0 NOT NULL,
    CONSTRAINT attempt_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT attempt_block_hash_check CHECK ((length(block_hash) = 32)),
    CONSTRAINT attempt_block_number_check CHECK ((block_number >= 0)),
    CONSTRAINT attempt_drops_check CHECK ((drops >= 0)),
    CONSTRAINT attempt_effective_gas_price_check CHECK ((effective_gas_price >= (0)::numeric)),
    CONSTRAINT attempt_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT attempt_gas_used_check CHECK ((gas_used >= 0)),
    CONSTRAINT attempt_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT attempt_kind_check CHECK ((kind = ANY (ARRAY['initial'::text, 'fee_bump'::text, 'cancel'::text]))),
    CONSTRAINT attempt_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT attempt_raw_check CHECK ((length(raw) > 0)),
    CONSTRAINT attempt_receipt_status_check CHECK ((receipt_status = ANY (ARRAY[0, 1]))),
    CONSTRAINT attempt_receipt_whole CHECK ((((block_number IS NULL) = (block_hash IS NULL)) AND ((block_number IS NULL) = (receipt_status IS NULL)))),
    CONSTRAINT attempt_route_check CHECK ((route = ANY (ARRAY['public'::text, 'private'::text]))),
    CONSTRAINT attempt_waiting_since_block_check CHECK ((waiting_since_block >= 0))
);

CREATE TABLE attempt_plan (
    tx_id uuid NOT NULL,
    attempt integer NOT NULL,
    kind text NOT NULL,
    gas_limit bigint NOT NULL,
    max_fee_per_gas numeric(78,0),
    max_priority_fee_per_gas numeric(78,0),
    gas_price numeric(78,0),
    action_id uuid,
    planned_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT attempt_plan_attempt_check CHECK ((attempt >= 2)),
    CONSTRAINT attempt_plan_check CHECK ((((gas_price IS NULL) = (max_fee_per_gas IS NOT NULL)) AND ((max_fee_per_gas IS NULL) = (max_priority_fee_per_gas IS NULL)))),
    CONSTRAINT attempt_plan_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT attempt_plan_gas_price_check CHECK ((gas_price >= (0)::numeric)),
    CONSTRAINT attempt_plan_kind_check CHECK ((kind = ANY (ARRAY['fee_bump'::text, 'cancel'::text]))),
    CONSTRAINT attempt_plan_max_fee_per_gas_check CHECK ((max_fee_per_gas >= (0)::numeric)),
    CONSTRAINT attempt_plan_max_priority_fee_per_gas_check CHECK ((max_priority_fee_per_gas >= (0)::numeric))
);

CREATE TABLE event (
    id bigint NOT NULL,
    seq bigint,
    tx_id uuid NOT NULL,
    type text NOT NULL,
    payload jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT event_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text))
);

ALTER TABLE event ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE event_sequence (
    one boolean DEFAULT true NOT NULL,
    last_seq bigint NOT NULL,
    CONSTRAINT event_sequence_last_seq_check CHECK ((last_seq >= 0)),
    CONSTRAINT event_sequence_one_check CHECK (one)
);

CREATE TABLE node (
    node_id text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL,
    heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT node_node_id_check CHECK ((node_id <> ''::text))
);

CREATE TABLE nonce_cursor (
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    next_nonce bigint NOT NULL,
    CONSTRAINT nonce_cursor_next_nonce_check CHECK ((next_nonce >= 0))
);

CREATE TABLE schema_migrations (
    version bigint NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE signer_lease (
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    owner_node text,
    fencing_token bigint DEFAULT 0 NOT NULL,
    expires_at timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    acquired_at timestamp with time zone,
    CONSTRAINT signer_lease_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT signer_lease_fencing_token_check CHECK ((fencing_token >= 0)),
    CONSTRAINT signer_lease_signer_check CHECK ((length(signer) = 20))
);

CREATE TABLE tx (
    tx_id uuid NOT NULL,
    accept_seq bigint NOT NULL,
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    request_id text NOT NULL,
    request_hash bytea NOT NULL,
    to_address bytea,
    value numeric(78,0) NOT NULL,
    data bytea DEFAULT '\x'::bytea NOT NULL,
    gas bigint,
    gas_limit bigint,
    max_fee_per_gas numeric(78,0),
    max_priority_fee_per_gas numeric(78,0),
    route text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    state text NOT NULL,
    sub_state text,
    reason text,
    nonce bigint,
    current_attempt integer,
    approval_expires_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    signing_max_fee_per_gas numeric(78,0),
    signing_max_priority_fee_per_gas numeric(78,0),
    signing_gas_price numeric(78,0),
    mined_attempt integer,
    confirmations bigint,
    depends_on uuid[],
    CONSTRAINT tx_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT tx_confirmations_check CHECK ((confirmations >= 1)),
    CONSTRAINT tx_confirmations_with_receipt CHECK (((mined_attempt IS NULL) = (confirmations IS NULL))),
    CONSTRAINT tx_creation_has_data CHECK (((to_address IS NOT NULL) OR (length(data) > 0))),
    CONSTRAINT tx_current_attempt_check CHECK ((current_attempt >= 1)),
    CONSTRAINT tx_depends_on_self CHECK ((NOT (tx_id = ANY (depends_on)))),
    CONSTRAINT tx_depends_on_shape CHECK (((depends_on IS NULL) OR ((array_ndims(depends_on) = 1) AND ((cardinality(depends_on) >= 1) AND (cardinality(depends_on) <= 16)) AND (array_position(depends_on, NULL::uuid) IS NULL) AND txfence_distinct(depends_on)))),
    CONSTRAINT tx_final_is_mined CHECK (((state <> ALL (ARRAY['CONFIRMED'::text, 'REVERTED'::text])) OR (mined_attempt IS NOT NULL))),
    CONSTRAINT tx_gas_check CHECK ((gas > 0)),
    CONSTRAINT tx_gas_limit_by_state CHECK (((state = ANY (ARRAY['INIT'::text, 'PENDING_APPROVAL'::text, 'FAILED'::text, 'CANCELLED'::text])) OR (gas_limit IS NOT NULL))),
    CONSTRAINT tx_gas_limit_check CHECK ((gas_limit > 0)),
    CONSTRAINT tx_max_fee_per_gas_check CHECK (((max_fee_per_gas >= (0)::numeric) AND (max_fee_per_gas < ((2)::numeric ^ (256)::numeric)))),
    CONSTRAINT tx_max_priority_fee_per_gas_check CHECK (((max_priority_fee_per_gas >= (0)::numeric) AND (max_priority_fee_per_gas < ((2)::numeric ^ (256)::numeric)))),
    CONSTRAINT tx_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT tx_nonce_by_state CHECK (
CASE
    WHEN (state = ANY (ARRAY['INIT'::text, 'SIMULATED'::text, 'PENDING_APPROVAL'::text])) THEN ((nonce IS NULL) AND (current_attempt IS NULL))
    WHEN (state = 'ALLOCATED'::text) THEN ((nonce IS NOT NULL) AND (current_attempt IS NULL))
    WHEN (state = ANY (ARRAY['SIGNED'::text, 'BROADCASTED'::text, 'CONFIRMED'::text, 'REVERTED'::text])) THEN ((nonce IS NOT NULL) AND (current_attempt IS NOT NULL))
    ELSE true
END),
    CONSTRAINT tx_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT tx_request_hash_check CHECK ((length(request_hash) = 32)),
    CONSTRAINT tx_request_id_check CHECK (((request_id <> ''::text) AND (length(request_id) <= 255))),
    CONSTRAINT tx_route_check CHECK ((route = ANY (ARRAY['public'::text, 'private'::text, 'auto'::text]))),
    CONSTRAINT tx_signer_check CHECK ((length(signer) = 20)),
    CONSTRAINT tx_signing_gas_price_check CHECK (((signing_gas_price >= (0)::numeric) AND (signing_gas_price < ((2)::numeric ^ (256)::numeric)))),
    CONSTRAINT tx_signing_max_fee_per_gas_check CHECK (((signing_max_fee_per_gas >= (0)::numeric) AND (signing_max_fee_per_gas < ((2)::numeric ^ (256)::numeric)))),
    CONSTRAINT tx_signing_max_priority_fee_per_gas_check CHECK (((signing_max_priority_fee_per_gas >= (0)::numeric) AND (signing_max_priority_fee_per_gas < ((2)::numeric ^ (256)::numeric)))),
    CONSTRAINT tx_state_check CHECK ((state = ANY (ARRAY['INIT'::text, 'SIMULATED'::text, 'PENDING_APPROVAL'::text, 'ALLOCATED'::text, 'SIGNED'::text, 'BROADCASTED'::text, 'CONFIRMED'::text, 'REVERTED'::text, 'FAILED'::text, 'CANCELLED'::text]))),
    CONSTRAINT tx_sub_state_check CHECK ((sub_state = ANY (ARRAY['waiting_dependency'::text, 'insufficient_funds'::text, 'included'::text, 'stale'::text, 'stuck'::text, 'replaced'::text]))),
    CONSTRAINT tx_to_address_check CHECK ((length(to_address) = 20)),
    CONSTRAINT tx_value_check CHECK (((value >= (0)::numeric) AND (value < ((2)::numeric ^ (256)::numeric))))
);

ALTER TABLE tx ALTER COLUMN accept_seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME tx_accept_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE tx_action (
    action_id uuid NOT NULL,
    tx_id uuid NOT NULL,
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    action text NOT NULL,
    operator text NOT NULL,
    requested_at timestamp with time zone DEFAULT now() NOT NULL,
    done_at timestamp with time zone,
    outcome text,
    detail text,
    attempt integer,
    max_fee_per_gas numeric(78,0),
    max_priority_fee_per_gas numeric(78,0),
    gas_price numeric(78,0),
    filler_tx_id uuid,
    CONSTRAINT tx_action_action_check CHECK ((action = ANY (ARRAY['resend'::text, 'bump'::text, 'cancel'::text, 'abandon'::text]))),
    CONSTRAINT tx_action_check CHECK (((done_at IS NULL) = (outcome IS NULL))),
    CONSTRAINT tx_action_fees_check CHECK ((((gas_price IS NOT NULL) AND (max_fee_per_gas IS NULL) AND (max_priority_fee_per_gas IS NULL)) OR ((gas_price IS NULL) AND ((max_fee_per_gas IS NULL) = (max_priority_fee_per_gas IS NULL))))),
    CONSTRAINT tx_action_gas_price_check CHECK ((gas_price >= (0)::numeric)),
    CONSTRAINT tx_action_max_fee_per_gas_check CHECK ((max_fee_per_gas >= (0)::numeric)),
    CONSTRAINT tx_action_max_priority_fee_per_gas_check CHECK ((max_priority_fee_per_gas >= (0)::numeric)),
    CONSTRAINT tx_action_operator_check CHECK (((operator <> ''::text) AND (length(operator) <= 255))),
    CONSTRAINT tx_action_outcome_check CHECK ((outcome = ANY (ARRAY['done'::text, 'refused'::text]))),
    CONSTRAINT tx_action_signer_check CHECK ((length(signer) = 20))
);

ALTER TABLE ONLY approval
    ADD CONSTRAINT approval_pkey PRIMARY KEY (tx_id, approver);

ALTER TABLE ONLY attempt
    ADD CONSTRAINT attempt_hash_key UNIQUE (hash);

ALTER TABLE ONLY attempt
    ADD CONSTRAINT attempt_pkey PRIMARY KEY (tx_id, attempt);

ALTER TABLE ONLY attempt_plan
    ADD CONSTRAINT attempt_plan_pkey PRIMARY KEY (tx_id);

ALTER TABLE ONLY event
    ADD CONSTRAINT event_pkey PRIMARY KEY (id);

ALTER TABLE ONLY event
    ADD CONSTRAINT event_seq_key UNIQUE (seq);

ALTER TABLE ONLY event_sequence
    ADD CONSTRAINT event_sequence_pkey PRIMARY KEY (one);

ALTER TABLE ONLY node
    ADD CONSTRAINT node_pkey PRIMARY KEY (node_id);

ALTER TABLE ONLY nonce_cursor
    ADD CONSTRAINT nonce_cursor_pkey PRIMARY KEY (chain_id, signer);

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY signer_lease
    ADD CONSTRAINT signer_lease_pkey PRIMARY KEY (chain_id, signer);

ALTER TABLE ONLY tx
    ADD CONSTRAINT tx_accept_seq_key UNIQUE (accept_seq);

ALTER TABLE ONLY tx_action
    ADD CONSTRAINT tx_action_pkey PRIMARY KEY (action_id);

ALTER TABLE ONLY tx
    ADD CONSTRAINT tx_chain_id_signer_request_id_key UNIQUE (chain_id, signer, request_id);

ALTER TABLE ONLY tx
    ADD CONSTRAINT tx_pkey PRIMARY KEY (tx_id);

CREATE INDEX event_tx_idx ON event USING btree (tx_id, id);

CREATE INDEX event_unsequenced_idx ON event USING btree (id) WHERE (seq IS NULL);

CREATE INDEX signer_lease_owner_idx ON signer_lease USING btree (owner_node);

CREATE INDEX tx_action_pending_idx ON tx_action USING btree (chain_id, signer, requested_at) WHERE (done_at IS NULL);

CREATE INDEX tx_action_tx_idx ON tx_action USING btree (tx_id, requested_at);

CREATE INDEX tx_action_waiting_idx ON tx_action USING btree (tx_id, action) WHERE (done_at IS NULL);

CREATE INDEX tx_created_idx ON tx USING btree (created_at DESC, tx_id DESC);

CREATE INDEX tx_list_idx ON tx USING btree (chain_id, signer, created_at DESC, tx_id DESC);

CREATE INDEX tx_mined_idx ON tx USING btree (chain_id, signer) WHERE (mined_attempt IS NOT NULL);

CREATE UNIQUE INDEX tx_nonce_idx ON tx USING btree (chain_id, signer, nonce) WHERE (nonce IS NOT NULL);

CREATE INDEX tx_open_idx ON tx USING btree (chain_id, signer, accept_seq) WHERE (state <> ALL (ARRAY['CONFIRMED'::text, 'REVERTED'::text, 'FAILED'::text, 'CANCELLED'::text]));

CREATE INDEX tx_state_idx ON tx USING btree (state, created_at DESC, tx_id DESC);

CREATE TRIGGER tx_depends_on_fkey BEFORE INSERT OR UPDATE OF depends_on ON tx FOR EACH ROW WHEN ((new.depends_on IS NOT NULL)) EXECUTE FUNCTION txfence_parents_exist();

ALTER TABLE ONLY approval
    ADD CONSTRAINT approval_tx_id_fkey FOREIGN KEY (tx_id) REFERENCES tx(tx_id);

ALTER TABLE ONLY attempt_plan
    ADD CONSTRAINT attempt_plan_tx_id_fkey FOREIGN KEY (tx_id) REFERENCES tx(tx_id);

ALTER TABLE ONLY attempt
    ADD CONSTRAINT attempt_tx_id_fkey FOREIGN KEY (tx_id) REFERENCES tx(tx_id);

ALTER TABLE ONLY event
    ADD CONSTRAINT event_tx_id_fkey FOREIGN KEY (tx_id) REFERENCES tx(tx_id);

ALTER TABLE ONLY nonce_cursor
    ADD CONSTRAINT nonce_cursor_chain_id_signer_fkey FOREIGN KEY (chain_id, signer) REFERENCES signer_lease(chain_id, signer);

ALTER TABLE ONLY tx_action
    ADD CONSTRAINT tx_action_filler_tx_id_fkey FOREIGN KEY (filler_tx_id) REFERENCES tx(tx_id);

ALTER TABLE ONLY tx_action
    ADD CONSTRAINT tx_action_tx_id_fkey FOREIGN KEY (tx_id) REFERENCES tx(tx_id);

ALTER TABLE ONLY tx
    ADD CONSTRAINT tx_current_attempt_fk FOREIGN KEY (tx_id, current_attempt) REFERENCES attempt(tx_id, attempt) DEFERRABLE INITIALLY DEFERRED;

ALTER TABLE ONLY tx
    ADD CONSTRAINT tx_mined_attempt_fk FOREIGN KEY (tx_id, mined_attempt) REFERENCES attempt(tx_id, attempt);
