-- What the custody limits need from signerd's record of what it signed:
-- the gas of every signature (fees count toward a window), the token
-- amount an original moves or grants (token windows), tx ids by id (a tx
-- id is bound to the first nonce it was signed at), and the nonce an
-- operator declared a signer starts at (nonces far ahead are refused).

-- Signatures given before this migration count no fees: their gas was not
-- recorded.
ALTER TABLE signature ADD COLUMN gas bigint NOT NULL DEFAULT 0 CHECK (gas >= 0);
ALTER TABLE signature ALTER COLUMN gas DROP DEFAULT;

-- The token contract an original calls and the token units it moves or
-- grants, as the policy decoded them; both NULL for anything else.
ALTER TABLE signature ADD COLUMN token bytea CHECK (length(token) = 20);
ALTER TABLE signature ADD COLUMN token_amount numeric(78,0) CHECK (token_amount >= 0);
ALTER TABLE signature ADD CONSTRAINT signature_token_pair CHECK ((token IS NULL) = (token_amount IS NULL));

CREATE INDEX signature_tx_idx ON signature (tx_id);

-- The fee window reads every attempt of one signer by time, the value and
-- token windows its originals: one index serves all three.
CREATE INDEX signature_signed_at_idx ON signature (chain_id, signer, signed_at);
DROP INDEX signature_window_idx;

-- The nonce a signer's first signature may be at, declared by an operator
-- for an account that already has history on chain (signerd never talks to
-- a chain, so it cannot know). Without a row the signer starts at 0.
CREATE TABLE nonce_start (
	chain_id bigint      NOT NULL CHECK (chain_id > 0),
	signer   bytea       NOT NULL CHECK (length(signer) = 20),
	nonce    bigint      NOT NULL CHECK (nonce >= 0),
	set_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (chain_id, signer)
);
