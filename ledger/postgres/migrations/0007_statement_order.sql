-- A statement in the order an account's entries become visible.
--
-- Entry ids are taken as a posting writes, before it commits, so two
-- postings that overlap commit out of id order: a statement paged by entry
-- id could end a page past an entry not yet visible, and never show it.
-- The balance row is what orders an account's postings: the trigger that
-- moves balances updates it once per statement, and the row stays locked
-- until the posting commits or aborts, so the next posting of the account
-- waits for that end, and reads the version it left. Each statement's
-- move of each account is recorded here with the version it gave the
-- balance: an account's versions are 1, 2, 3… (or, for accounts older than
-- this migration, start where the backfill below starts them) without
-- gaps, and version v + 1 commits after version v, so whoever sees a
-- version sees every version before it. A statement paged by (version,
-- entry id) never passes an entry it cannot see yet.
--
-- A movement's entries are its account's entries with ids from
-- first_entry_id to last_entry_id whose journal txid is the movement's
-- (entries join only journals of their own transaction: 0001, 0005).
-- Another transaction's entries may lie in that range, as concurrent
-- postings take ids in turns, and are told apart by txid; those of another
-- statement of the same transaction cannot, because one session takes ids
-- in increasing order and runs its statements one after another.
--
-- No other posting may commit while this runs: one booked under the old
-- trigger, after the backfill read the entries, would leave its balance a
-- version ahead of its movements, a gap no statement could pass. Inserts
-- of accounts and entries wait until it commits; reads go on. The account
-- lock is taken first, in the order writers take them (a posting that
-- makes its accounts in its own transaction locks account before entry),
-- so that the index on account below cannot deadlock with one.
LOCK TABLE account, entry IN EXCLUSIVE MODE;

-- The gateway lists a tenant's accounts by address, on a chain or on all.
CREATE INDEX account_address_idx ON account (address, chain_id);

CREATE TABLE movement (
    account_id     bigint NOT NULL,
    version        bigint NOT NULL CHECK (version > 0),
    txid           xid8   NOT NULL,
    first_entry_id bigint NOT NULL,
    last_entry_id  bigint NOT NULL,
    PRIMARY KEY (account_id, version),
    CHECK (first_entry_id <= last_entry_id)
);

-- The entries booked already: one movement per account and transaction
-- that moved it, in entry id order. Their versions end at the balance's,
-- so that the next posting's version follows the last one here without a
-- gap. The balance's version is left as it is: the API promises that an
-- unchanged version is an unchanged balance (ledger.yaml, Account), which
-- setting it back to the count of movements would break for a client that
-- read it before, and balance rows change only through the trigger. So an
-- account booked before this starts at a version above 1 when a
-- transaction moved it in more than one statement (each a version): there
-- are never more movements than the version counts, which the check
-- below makes sure of before numbering down from it.
DO $$
DECLARE
    off bigint;
BEGIN
    SELECT m.account_id INTO off
    FROM (SELECT e.account_id, count(DISTINCT j.txid) AS n
          FROM entry e JOIN journal j USING (journal_id) GROUP BY e.account_id) m
        LEFT JOIN balance b USING (account_id)
    WHERE b.version IS NULL OR b.version < m.n
    LIMIT 1;
    IF off IS NOT NULL THEN
        RAISE EXCEPTION 'account % has more posting transactions than its balance version counts: its balance was changed outside the trigger', off
            USING ERRCODE = 'data_exception';
    END IF;
END $$;

INSERT INTO movement (account_id, version, txid, first_entry_id, last_entry_id)
SELECT m.account_id, b.version - count(*) OVER w + row_number() OVER (w ORDER BY m.first_entry_id), m.txid, m.first_entry_id, m.last_entry_id
FROM (SELECT e.account_id, j.txid, min(e.entry_id) AS first_entry_id, max(e.entry_id) AS last_entry_id
      FROM entry e JOIN journal j USING (journal_id)
      GROUP BY e.account_id, j.txid) m
    JOIN balance b USING (account_id)
WINDOW w AS (PARTITION BY m.account_id);

-- Movements are written by the trigger below alone, and never changed.
CREATE FUNCTION ledger_movement_by_entries() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() < 2 THEN
        RAISE EXCEPTION 'movements are written only by entries'
            USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER movement_by_entries BEFORE INSERT ON movement
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_movement_by_entries();
CREATE TRIGGER movement_append_only BEFORE UPDATE OR DELETE ON movement
    FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change();
CREATE TRIGGER movement_no_truncate BEFORE TRUNCATE ON movement
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change();

-- Each statement's entries move their accounts' balances, once per
-- account, and record the move with the version it gave the balance.
CREATE OR REPLACE FUNCTION ledger_move_balances() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH moves AS MATERIALIZED (
        SELECT account_id, sum(amount) AS amount, min(entry_id) AS first_entry_id, max(entry_id) AS last_entry_id
        FROM new_entries GROUP BY account_id
    ), moved AS (
        INSERT INTO balance (account_id, amount, version)
            SELECT account_id, amount, 1 FROM moves
            ORDER BY account_id -- one lock order for every writer: no deadlock between postings
        ON CONFLICT (account_id) DO UPDATE
            SET amount = balance.amount + EXCLUDED.amount, version = balance.version + 1
        RETURNING account_id, version
    )
    INSERT INTO movement (account_id, version, txid, first_entry_id, last_entry_id)
        SELECT account_id, moved.version, pg_current_xact_id(), moves.first_entry_id, moves.last_entry_id
        FROM moved JOIN moves USING (account_id);
    RETURN NULL;
END $$;
