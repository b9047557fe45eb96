-- How far the ledger has read each feed it consumes (txmanager's event
-- feed): moved in the same transaction as the journals those events
-- produced, so that a crash anywhere neither books twice nor skips.
CREATE TABLE feed_cursor (
    feed       text        PRIMARY KEY CHECK (length(feed) BETWEEN 1 AND 100),
    seq        bigint      NOT NULL CHECK (seq >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The ledger's wallets: the addresses whose movements it books as its
-- own. A signer named by the feed is a wallet from its first event on.
CREATE TABLE wallet (
    chain_id   bigint      NOT NULL CHECK (chain_id > 0),
    address    bytea       NOT NULL CHECK (length(address) = 20),
    source     text        NOT NULL CHECK (source IN ('signer', 'configured')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, address)
);
