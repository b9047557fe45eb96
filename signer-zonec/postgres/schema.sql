-- Schema produced by the migrations; regenerate with make schema. Do not edit.

CREATE FUNCTION audit_head_advances() RETURNS trigger
    LANGUAGE plpgsql
    AS $_$
DECLARE
	on_record boolean;
BEGIN
	EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.audit_log WHERE seq = $1 AND hash = $2)', TG_TABLE_SCHEMA)
		INTO on_record USING NEW.seq, NEW.hash;
	IF NEW.seq <= OLD.seq OR NOT on_record THEN
		RAISE EXCEPTION 'audit_head may only advance onto a record of audit_log: % to % refused', OLD.seq, NEW.seq
			USING ERRCODE = 'integrity_constraint_violation';
	END IF;
	RETURN NEW;
END
$_$;

CREATE FUNCTION grant_serving_role(serving name) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
	g record;
	r record;
BEGIN
	-- Two migrates at once would otherwise race on the same privileges
	-- ("tuple concurrently updated").
	PERFORM pg_advisory_xact_lock(hashtextextended('txfence.grant_serving_role.' || current_schema(), 0));
	SELECT rolsuper, pg_has_role(serving, current_user, 'MEMBER') AS is_owner INTO r
		FROM pg_roles WHERE rolname = serving;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'serving role % does not exist: create it (LOGIN, no other attributes) first', serving
			USING ERRCODE = 'undefined_object';
	ELSIF r.is_owner THEN
		RAISE EXCEPTION 'serving role % is, or is a member of, %, which owns signerd''s tables: serve as another role', serving, current_user
			USING ERRCODE = 'invalid_grant_operation';
	ELSIF r.rolsuper THEN
		RAISE EXCEPTION 'serving role % is a superuser: serve as an ordinary role', serving
			USING ERRCODE = 'invalid_grant_operation';
	END IF;
	EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I', current_schema(), serving);
	EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM %I', current_schema(), serving);
	IF NOT has_schema_privilege(serving, current_schema(), 'USAGE') THEN
		EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), serving);
	END IF;
	FOR g IN SELECT table_name, privilege FROM serving_grant LOOP
		EXECUTE format('GRANT %s ON TABLE %I.%I TO %I', g.privilege, current_schema(), g.table_name, serving);
	END LOOP;
END
$$;

CREATE FUNCTION refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
	RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TABLE audit_head (
    singleton boolean DEFAULT true NOT NULL,
    seq bigint NOT NULL,
    hash bytea NOT NULL,
    CONSTRAINT audit_head_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT audit_head_seq_check CHECK ((seq >= 0)),
    CONSTRAINT audit_head_singleton_check CHECK (singleton)
);

CREATE TABLE audit_log (
    seq bigint NOT NULL,
    at timestamp with time zone NOT NULL,
    tx_id text NOT NULL,
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    nonce bigint NOT NULL,
    outcome text NOT NULL,
    tx_hash bytea,
    body bytea NOT NULL,
    prev_hash bytea NOT NULL,
    hash bytea NOT NULL,
    CONSTRAINT audit_log_hash_check CHECK ((length(hash) = 32)),
    CONSTRAINT audit_log_prev_hash_check CHECK ((length(prev_hash) = 32)),
    CONSTRAINT audit_log_seq_check CHECK ((seq >= 1))
);

CREATE TABLE nonce_start (
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    nonce bigint NOT NULL,
    set_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT nonce_start_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT nonce_start_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT nonce_start_signer_check CHECK ((length(signer) = 20))
);

CREATE TABLE schema_migrations (
    version bigint NOT NULL,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE VIEW serving_grant AS
 SELECT "*VALUES*".column1 AS table_name,
    "*VALUES*".column2 AS privilege
   FROM (VALUES ('schema_migrations'::text,'SELECT'::text), ('serving_grant'::text,'SELECT'::text), ('signer_lock'::text,'SELECT'::text), ('signer_lock'::text,'INSERT'::text), ('signer_lock'::text,'UPDATE'::text), ('signature'::text,'SELECT'::text), ('signature'::text,'INSERT'::text), ('audit_log'::text,'SELECT'::text), ('audit_log'::text,'INSERT'::text), ('audit_head'::text,'SELECT'::text), ('audit_head'::text,'UPDATE'::text), ('nonce_start'::text,'SELECT'::text)) "*VALUES*";

CREATE TABLE signature (
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    nonce bigint NOT NULL,
    attempt integer NOT NULL,
    kind text NOT NULL,
    tx_id text NOT NULL,
    intent bytea NOT NULL,
    digest bytea NOT NULL,
    value numeric(78,0) NOT NULL,
    fee_cap numeric(78,0) NOT NULL,
    tip_cap numeric(78,0) NOT NULL,
    tx_hash bytea NOT NULL,
    raw_tx bytea NOT NULL,
    signed_at timestamp with time zone NOT NULL,
    audit_seq bigint NOT NULL,
    gas bigint NOT NULL,
    token bytea,
    token_amount numeric(78,0),
    CONSTRAINT signature_attempt_check CHECK ((attempt >= 1)),
    CONSTRAINT signature_check CHECK (((attempt = 1) = (kind = 'original'::text))),
    CONSTRAINT signature_digest_check CHECK ((length(digest) = 32)),
    CONSTRAINT signature_fee_cap_check CHECK ((fee_cap >= (0)::numeric)),
    CONSTRAINT signature_gas_check CHECK ((gas >= 0)),
    CONSTRAINT signature_intent_check CHECK ((length(intent) = 32)),
    CONSTRAINT signature_kind_check CHECK ((kind = ANY (ARRAY['original'::text, 'replacement'::text, 'cancel'::text]))),
    CONSTRAINT signature_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT signature_tip_cap_check CHECK ((tip_cap >= (0)::numeric)),
    CONSTRAINT signature_token_amount_check CHECK ((token_amount >= (0)::numeric)),
    CONSTRAINT signature_token_check CHECK ((length(token) = 20)),
    CONSTRAINT signature_token_pair CHECK (((token IS NULL) = (token_amount IS NULL))),
    CONSTRAINT signature_tx_hash_check CHECK ((length(tx_hash) = 32)),
    CONSTRAINT signature_value_check CHECK ((value >= (0)::numeric))
);

CREATE TABLE signer_lock (
    chain_id bigint NOT NULL,
    signer bytea NOT NULL,
    CONSTRAINT signer_lock_chain_id_check CHECK ((chain_id > 0)),
    CONSTRAINT signer_lock_signer_check CHECK ((length(signer) = 20))
);

ALTER TABLE ONLY audit_head
    ADD CONSTRAINT audit_head_pkey PRIMARY KEY (singleton);

ALTER TABLE ONLY audit_log
    ADD CONSTRAINT audit_log_hash_key UNIQUE (hash);

ALTER TABLE ONLY audit_log
    ADD CONSTRAINT audit_log_pkey PRIMARY KEY (seq);

ALTER TABLE ONLY nonce_start
    ADD CONSTRAINT nonce_start_pkey PRIMARY KEY (chain_id, signer);

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY signature
    ADD CONSTRAINT signature_chain_id_signer_nonce_digest_key UNIQUE (chain_id, signer, nonce, digest);

ALTER TABLE ONLY signature
    ADD CONSTRAINT signature_pkey PRIMARY KEY (chain_id, signer, nonce, attempt);

ALTER TABLE ONLY signature
    ADD CONSTRAINT signature_tx_hash_key UNIQUE (tx_hash);

ALTER TABLE ONLY signer_lock
    ADD CONSTRAINT signer_lock_pkey PRIMARY KEY (chain_id, signer);

CREATE INDEX audit_log_tx_idx ON audit_log USING btree (tx_id);

CREATE INDEX signature_signed_at_idx ON signature USING btree (chain_id, signer, signed_at);

CREATE INDEX signature_tx_idx ON signature USING btree (tx_id);

CREATE TRIGGER audit_head_advances BEFORE UPDATE ON audit_head FOR EACH ROW EXECUTE FUNCTION audit_head_advances();

CREATE TRIGGER audit_head_no_delete BEFORE DELETE ON audit_head FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

CREATE TRIGGER audit_log_append_only BEFORE DELETE OR UPDATE ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

CREATE TRIGGER signature_append_only BEFORE DELETE OR UPDATE ON signature FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TRIGGER signature_no_truncate BEFORE TRUNCATE ON signature FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

ALTER TABLE ONLY signature
    ADD CONSTRAINT signature_chain_id_signer_fkey FOREIGN KEY (chain_id, signer) REFERENCES signer_lock(chain_id, signer);
