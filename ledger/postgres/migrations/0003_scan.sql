-- The block scanner and wallet openings.
--
-- A wallet is opened at a block: an opening journal books its chain
-- balances at that block (native, and each configured token), and from the
-- next block on the ledger books its movements itself. Whatever the chain
-- settled at or before the opening block is in the opening balance, so the
-- feed consumer and the scanner book a wallet's movements only in blocks
-- after it.
ALTER TABLE wallet
    ADD COLUMN opened_block bigint CHECK (opened_block >= 0),
    ADD COLUMN opened_hash  bytea  CHECK (length(opened_hash) = 32),
    ADD CONSTRAINT wallet_opened_whole CHECK ((opened_block IS NULL) = (opened_hash IS NULL));

-- The scanner finds the wallets it has not opened yet, and a reorg those
-- opened after its fork point, without reading the whole registry.
CREATE INDEX wallet_unopened_idx ON wallet (chain_id) WHERE opened_block IS NULL;
CREATE INDEX wallet_opened_idx ON wallet (chain_id, opened_block) WHERE opened_block IS NOT NULL;

-- The opening balance account holds the other side of wallet openings.
ALTER TABLE account DROP CONSTRAINT account_kind_check;
ALTER TABLE account ADD CONSTRAINT account_kind_check
    CHECK (kind IN ('wallet', 'fee_expense', 'counterparty', 'in_transit', 'suspense', 'deposit_source', 'opening_balance'));
ALTER TABLE journal DROP CONSTRAINT journal_kind_check;
ALTER TABLE journal ADD CONSTRAINT journal_kind_check
    CHECK (kind IN ('confirmed', 'reverted', 'reversal', 'deposit', 'reconciliation', 'transit_out', 'transit_in', 'opening'));

-- How far the scanner has booked each chain: the last block scanned, by
-- number and hash.
CREATE TABLE scan_cursor (
    chain_id     bigint      PRIMARY KEY CHECK (chain_id > 0),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   bytea       NOT NULL CHECK (length(block_hash) = 32),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- The recent blocks the scanner booked, to find where a reorg forked: a
-- window of the newest ones is kept.
CREATE TABLE scanned_block (
    chain_id     bigint      NOT NULL CHECK (chain_id > 0),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   bytea       NOT NULL CHECK (length(block_hash) = 32),
    parent_hash  bytea       NOT NULL CHECK (length(parent_hash) = 32),
    scanned_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, block_number)
);

-- Transactions the scanner saw a wallet send: the feed consumer books
-- txfence's own (their journal's key is tx:chain:hash:block). One that
-- stays unbooked was sent outside txfence, or is not yet settled in
-- txmanager: reconciliation waits for it a while, then reports it.
CREATE TABLE wallet_tx (
    chain_id     bigint      NOT NULL CHECK (chain_id > 0),
    tx_hash      bytea       NOT NULL CHECK (length(tx_hash) = 32),
    block_hash   bytea       NOT NULL CHECK (length(block_hash) = 32),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    sender       bytea       NOT NULL CHECK (length(sender) = 20),
    seen_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chain_id, tx_hash, block_hash)
);

CREATE INDEX wallet_tx_block_idx ON wallet_tx (chain_id, block_number);
