-- Tenants, the signers each one owns, and their API keys. A key is shown
-- once, when it is made; only the SHA-256 of its secret is kept (the
-- secret is 32 random bytes, so a fast hash is enough: there is nothing to
-- guess). A tenant sees and uses only its own signers and transactions.

CREATE TABLE tenant (
	tenant_id  uuid        PRIMARY KEY,
	name       text        NOT NULL UNIQUE CHECK (name <> '' AND length(name) <= 100),
	created_at timestamptz NOT NULL DEFAULT now()
);

-- Which tenant owns a signer: one owner per signer.
CREATE TABLE tenant_signer (
	chain_id   bigint      NOT NULL CHECK (chain_id > 0),
	signer     bytea       NOT NULL CHECK (length(signer) = 20),
	tenant_id  uuid        NOT NULL REFERENCES tenant (tenant_id),
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (chain_id, signer)
);

CREATE INDEX tenant_signer_tenant_idx ON tenant_signer (tenant_id);

CREATE TABLE api_key (
	key_id      uuid        PRIMARY KEY,
	tenant_id   uuid        NOT NULL REFERENCES tenant (tenant_id),
	name        text        NOT NULL CHECK (name <> '' AND length(name) <= 100),
	secret_hash bytea       NOT NULL CHECK (length(secret_hash) = 32),
	scopes      text[]      NOT NULL CHECK (cardinality(scopes) > 0 AND
	                                        scopes <@ ARRAY['tx:write', 'tx:read', 'approvals', 'webhooks', 'admin', 'ledger:read']),
	-- The signers the key may use, as "chain_id:0xaddress"; NULL: all of
	-- its tenant's.
	signers     text[]      CHECK (signers IS NULL OR cardinality(signers) > 0),
	expires_at  timestamptz,
	revoked_at  timestamptz,
	created_at  timestamptz NOT NULL DEFAULT now(),
	last_used_at timestamptz
);

CREATE INDEX api_key_tenant_idx ON api_key (tenant_id, created_at);
