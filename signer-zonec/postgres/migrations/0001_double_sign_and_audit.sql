-- signerd's own record of what it signed (double-sign protection and the
-- rolling-window spend) and its hash-chained audit log. Both are
-- append-only: the database refuses UPDATE, DELETE and TRUNCATE on them.

CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
		USING ERRCODE = 'insufficient_privilege';
END
$$;

-- One row per (chain, signer), locked FOR UPDATE by every signing
-- transaction of that signer: signatures of one signer are decided one at
-- a time across all signerd replicas, so nonce checks and window sums see
-- everything signed before them.
CREATE TABLE signer_lock (
	chain_id bigint NOT NULL CHECK (chain_id > 0),
	signer   bytea  NOT NULL CHECK (length(signer) = 20),
	PRIMARY KEY (chain_id, signer)
);

-- Every signature given. attempt 1 at a nonce fixed its intent; later
-- attempts are fee-bump replacements or a cancel.
CREATE TABLE signature (
	chain_id  bigint        NOT NULL,
	signer    bytea         NOT NULL,
	nonce     bigint        NOT NULL CHECK (nonce >= 0),
	attempt   integer       NOT NULL CHECK (attempt >= 1),
	kind      text          NOT NULL CHECK (kind IN ('original', 'replacement', 'cancel')),
	tx_id     text          NOT NULL,
	intent    bytea         NOT NULL CHECK (length(intent) = 32),
	digest    bytea         NOT NULL CHECK (length(digest) = 32),
	value     numeric(78,0) NOT NULL CHECK (value >= 0),
	fee_cap   numeric(78,0) NOT NULL CHECK (fee_cap >= 0),
	tip_cap   numeric(78,0) NOT NULL CHECK (tip_cap >= 0),
	tx_hash   bytea         NOT NULL UNIQUE CHECK (length(tx_hash) = 32),
	raw_tx    bytea         NOT NULL,
	signed_at timestamptz   NOT NULL,
	audit_seq bigint        NOT NULL,
	PRIMARY KEY (chain_id, signer, nonce, attempt),
	UNIQUE (chain_id, signer, nonce, digest),
	FOREIGN KEY (chain_id, signer) REFERENCES signer_lock (chain_id, signer),
	CHECK ((attempt = 1) = (kind = 'original'))
);

-- Rolling-window sums read the originals of one signer by time.
CREATE INDEX signature_window_idx ON signature (chain_id, signer, signed_at) WHERE attempt = 1;

CREATE TRIGGER signature_append_only BEFORE UPDATE OR DELETE ON signature
	FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER signature_no_truncate BEFORE TRUNCATE ON signature
	FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

-- The audit log: body is the canonical JSON that was hashed,
-- hash = sha256(prev_hash || body). The other columns repeat fields of the
-- body so records can be found; verification checks they agree.
CREATE TABLE audit_log (
	seq       bigint      PRIMARY KEY CHECK (seq >= 1),
	at        timestamptz NOT NULL,
	tx_id     text        NOT NULL,
	chain_id  bigint      NOT NULL,
	signer    bytea       NOT NULL,
	nonce     bigint      NOT NULL,
	outcome   text        NOT NULL,
	tx_hash   bytea,
	body      bytea       NOT NULL,
	prev_hash bytea       NOT NULL CHECK (length(prev_hash) = 32),
	hash      bytea       NOT NULL UNIQUE CHECK (length(hash) = 32)
);

CREATE INDEX audit_log_tx_idx ON audit_log (tx_id);

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
	FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
	FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

-- The head of the chain: the last record's seq and hash. Appends lock this
-- one row, which orders them across replicas; a log shorter than the head
-- was truncated.
CREATE TABLE audit_head (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	seq       bigint  NOT NULL CHECK (seq >= 0),
	hash      bytea   NOT NULL CHECK (length(hash) = 32)
);

INSERT INTO audit_head (seq, hash) VALUES (0, '\x0000000000000000000000000000000000000000000000000000000000000000');
