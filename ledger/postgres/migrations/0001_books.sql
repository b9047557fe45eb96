-- The ledger's books: accounts, journals of balanced entries, and balances.
-- The database enforces the bookkeeping rules itself, whatever writes to it:
-- every journal balances per asset, journals and entries are append-only,
-- amounts are integers in the uint256 range, and every balance is the sum of
-- its account's entries.

-- amount is a signed integer whose magnitude fits in a uint256: a credit or a
-- debit of any EVM quantity, never a fraction. The base type has no typmod,
-- which would round 0.5 to 1 silently: a fraction is refused instead.
CREATE DOMAIN amount AS numeric
    CHECK (scale(VALUE) = 0)
    CHECK (VALUE BETWEEN -115792089237316195423570985008687907853269984665640564039457584007913129639935
                     AND  115792089237316195423570985008687907853269984665640564039457584007913129639935);

-- An account is one asset on one chain for one address, in one role. asset
-- is 'native' or the token contract's lower-case address.
CREATE TABLE account (
    account_id bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain_id   bigint      NOT NULL CHECK (chain_id > 0),
    asset      text        NOT NULL CHECK (asset = 'native' OR asset ~ '^0x[0-9a-f]{40}$'),
    kind       text        NOT NULL CHECK (kind IN ('wallet', 'fee_expense', 'counterparty', 'in_transit', 'suspense', 'deposit_source')),
    address    bytea       NOT NULL CHECK (length(address) = 20),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (chain_id, asset, kind, address)
);

-- A journal is one booked fact. idem_key derives from what it books (for a
-- transaction: chain, tx hash, block hash), so booking the fact again finds
-- it; payload_hash tells a replay from a different fact under the same key.
-- reverses is unique: a journal is reversed at most once.
CREATE TABLE journal (
    journal_id   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('confirmed', 'reverted', 'reversal', 'deposit', 'reconciliation', 'transit_out', 'transit_in')),
    idem_key     text        NOT NULL UNIQUE CHECK (length(idem_key) BETWEEN 1 AND 512),
    payload_hash bytea       NOT NULL CHECK (length(payload_hash) = 32),
    chain_id     bigint      NOT NULL CHECK (chain_id > 0),
    tx_hash      bytea       CHECK (length(tx_hash) = 32),
    block_number bigint      CHECK (block_number >= 0),
    block_hash   bytea       CHECK (length(block_hash) = 32),
    -- status is the receipt's: whether the transaction succeeded on chain.
    status       text        CHECK (status IN ('success', 'reverted')),
    reverses     bigint      UNIQUE REFERENCES journal,
    memo         jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(memo) = 'object'),
    -- txid is the transaction that wrote the journal: only it may add entries.
    txid         xid8        NOT NULL DEFAULT pg_current_xact_id(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((block_number IS NULL) = (block_hash IS NULL)),
    CHECK (reverses IS NULL OR kind = 'reversal'),
    CHECK (kind <> 'reversal' OR reverses IS NOT NULL)
);

CREATE INDEX journal_block_idx ON journal (chain_id, block_number) WHERE block_number IS NOT NULL;
CREATE INDEX journal_tx_idx ON journal (chain_id, tx_hash) WHERE tx_hash IS NOT NULL;

CREATE TABLE entry (
    entry_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    journal_id bigint NOT NULL REFERENCES journal,
    account_id bigint NOT NULL REFERENCES account,
    amount     amount NOT NULL CHECK (amount <> 0)
);

CREATE INDEX entry_journal_idx ON entry (journal_id);
CREATE INDEX entry_account_idx ON entry (account_id, entry_id);

-- balance is each account's running sum of entries, kept by the trigger on
-- entry alone; version counts the statements that changed it. A sum of
-- amounts may outgrow one amount's range, so only its scale is fixed.
CREATE TABLE balance (
    account_id bigint          PRIMARY KEY REFERENCES account,
    amount     numeric(1000, 0) NOT NULL,
    version    bigint          NOT NULL
);

-- Journals, entries and accounts are never changed or removed: a mistake is
-- undone by a reversal journal.
CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the ledger is append-only: % on % is not allowed', TG_OP, TG_TABLE_NAME
        USING ERRCODE = 'restrict_violation';
END $$;

CREATE TRIGGER journal_append_only BEFORE UPDATE OR DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER entry_append_only BEFORE UPDATE OR DELETE ON entry
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER entry_no_truncate BEFORE TRUNCATE ON entry
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER account_append_only BEFORE UPDATE OR DELETE ON account
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER account_no_truncate BEFORE TRUNCATE ON account
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER balance_no_delete BEFORE DELETE ON balance
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER balance_no_truncate BEFORE TRUNCATE ON balance
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- Entries join only the journal their own transaction wrote: a committed
-- journal is closed, so its balance check below covers every entry it will
-- ever have. Checked once per statement, over all the rows it inserted.
CREATE FUNCTION ledger_entries_in_open_journals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    -- One primary-key lookup per journal: a join could scan all journals.
    FOR jid IN SELECT DISTINCT journal_id FROM new_entries LOOP
        IF NOT EXISTS (SELECT 1 FROM journal WHERE journal_id = jid AND txid = pg_current_xact_id()) THEN
            RAISE EXCEPTION 'journal % is closed: entries are written with their journal, in its transaction', jid
                USING ERRCODE = 'restrict_violation';
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER entries_in_open_journals AFTER INSERT ON entry
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_in_open_journals();

-- At commit, every journal written has at least two entries and sums to
-- zero in each asset: one query per journal.
CREATE FUNCTION ledger_journal_balances() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    legs bigint;
    off_asset text;
    off_total numeric;
BEGIN
    SELECT sum(n), min(asset) FILTER (WHERE total <> 0), min(total) FILTER (WHERE total <> 0)
        INTO legs, off_asset, off_total
        FROM (SELECT a.asset, count(*) AS n, sum(e.amount) AS total
              FROM entry e JOIN account a USING (account_id)
              WHERE e.journal_id = NEW.journal_id GROUP BY a.asset) per_asset;
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

CREATE CONSTRAINT TRIGGER journal_balances AFTER INSERT ON journal
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION ledger_journal_balances();

-- Each statement's entries move their accounts' balances, once per account.
CREATE FUNCTION ledger_move_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO balance (account_id, amount, version)
        SELECT account_id, sum(amount), 1 FROM new_entries GROUP BY account_id
        ORDER BY account_id -- one lock order for every writer: no deadlock between postings
    ON CONFLICT (account_id) DO UPDATE
        SET amount = balance.amount + EXCLUDED.amount, version = balance.version + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER entry_moves_balances AFTER INSERT ON entry
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_move_balances();

-- balance changes only through that trigger.
CREATE FUNCTION ledger_balance_by_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'balances change only by entries'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER balance_by_entries BEFORE INSERT OR UPDATE ON balance
    FOR EACH ROW EXECUTE FUNCTION ledger_balance_by_entries();
