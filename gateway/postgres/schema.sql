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

ALTER TABLE ONLY api_key
    ADD CONSTRAINT api_key_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (version);

ALTER TABLE ONLY tenant
    ADD CONSTRAINT tenant_name_key UNIQUE (name);

ALTER TABLE ONLY tenant
    ADD CONSTRAINT tenant_pkey PRIMARY KEY (tenant_id);

ALTER TABLE ONLY tenant_signer
    ADD CONSTRAINT tenant_signer_pkey PRIMARY KEY (chain_id, signer);

CREATE INDEX api_key_tenant_idx ON api_key USING btree (tenant_id, created_at);

CREATE INDEX tenant_signer_tenant_idx ON tenant_signer USING btree (tenant_id);

ALTER TABLE ONLY api_key
    ADD CONSTRAINT api_key_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenant(tenant_id);

ALTER TABLE ONLY tenant_signer
    ADD CONSTRAINT tenant_signer_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenant(tenant_id);
