-- Reconciliation reports: each run compares, at one pinned block of one
-- chain, every wallet's ledger balance in each asset with the chain's
-- balance at that block. The differences it finds are booked as
-- reconciliation journals into suspense (see 0001); these tables keep the
-- report an operator shows for that block.

-- A run is written whole, in the transaction that books its differences,
-- and never changed afterwards: it is the evidence of what was compared.
-- Old runs may be deleted (retention); their journals stay.
CREATE TABLE reconciliation_run (
    run_id       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain_id     bigint      NOT NULL CHECK (chain_id > 0),
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   bytea       NOT NULL CHECK (length(block_hash) = 32),
    trigger      text        NOT NULL CHECK (trigger IN ('schedule', 'request')),
    -- complete: every item was compared; incomplete: some were deferred or
    -- not compared, and problem says why.
    status       text        NOT NULL CHECK (status IN ('complete', 'incomplete')),
    problem      text        NOT NULL DEFAULT '',
    differences  integer     NOT NULL CHECK (differences >= 0),
    deferred     integer     NOT NULL CHECK (deferred >= 0),
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    CHECK (finished_at >= started_at),
    CHECK ((status = 'complete') = (problem = ''))
);

-- Runs of one chain, newest first; all chains' runs use the primary key.
CREATE INDEX reconciliation_run_chain_idx ON reconciliation_run (chain_id, run_id DESC);

-- An item is one (wallet, asset) of a run. difference is chain_balance -
-- ledger_balance, NULL when the item was not compared (deferred while
-- transactions the wallet sent are not booked yet, or the chain's balance
-- could not be read); journal_id is the reconciliation journal that booked
-- a difference to suspense. pending lists the hashes of the wallet's
-- transactions the ledger had not booked. The primary key lists a run's
-- items.
CREATE TABLE reconciliation_item (
    run_id         bigint           NOT NULL REFERENCES reconciliation_run ON DELETE CASCADE,
    address        bytea            NOT NULL CHECK (length(address) = 20),
    asset          text             NOT NULL CHECK (asset = 'native' OR asset ~ '^0x[0-9a-f]{40}$'),
    ledger_balance numeric(1000, 0) NOT NULL,
    chain_balance  numeric(78, 0)   CHECK (chain_balance BETWEEN 0 AND 115792089237316195423570985008687907853269984665640564039457584007913129639935),
    difference     numeric(1000, 0),
    cause          text             NOT NULL DEFAULT '',
    journal_id     bigint           REFERENCES journal,
    pending        bytea[]          NOT NULL DEFAULT '{}',
    negative       boolean          NOT NULL,
    PRIMARY KEY (run_id, address, asset),
    CHECK (difference IS NULL OR chain_balance IS NOT NULL),
    CHECK (journal_id IS NULL OR difference <> 0)
);

CREATE INDEX reconciliation_item_journal_idx ON reconciliation_item (journal_id) WHERE journal_id IS NOT NULL;

CREATE FUNCTION reconciliation_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a reconciliation report is never changed: UPDATE on % is not allowed', TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE TRIGGER reconciliation_run_unchanged BEFORE UPDATE ON reconciliation_run
    FOR EACH ROW EXECUTE FUNCTION reconciliation_refuse_update();
CREATE TRIGGER reconciliation_item_unchanged BEFORE UPDATE ON reconciliation_item
    FOR EACH ROW EXECUTE FUNCTION reconciliation_refuse_update();

-- A reconciliation sums, per wallet account, the entries of journals after
-- the pinned block (journal_block_idx) and those with no block, found here
-- without reading every journal.
CREATE INDEX journal_unblocked_idx ON journal (chain_id) WHERE block_number IS NULL;
