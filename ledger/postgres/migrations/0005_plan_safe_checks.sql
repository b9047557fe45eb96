-- The bookkeeping checks, rewritten so that their plans stay index lookups
-- whatever the size of the tables and whatever plan a session has cached.
--
-- The balance check joined entry to account: once plpgsql cached a generic
-- plan (after five calls) it hashed the whole account table for every
-- journal, a cost that grew with the ledger. It now looks up each entry's
-- account by primary key.
CREATE OR REPLACE FUNCTION ledger_journal_balances() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    legs bigint;
    off_asset text;
    off_total numeric;
BEGIN
    SELECT sum(n), min(asset) FILTER (WHERE total <> 0), min(total) FILTER (WHERE total <> 0)
        INTO legs, off_asset, off_total
        FROM (SELECT asset, count(*) AS n, sum(amount) AS total
              FROM (SELECT (SELECT a.asset FROM account a WHERE a.account_id = e.account_id) AS asset, e.amount
                    FROM entry e WHERE e.journal_id = NEW.journal_id) journal_legs
              GROUP BY asset) per_asset;
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

-- An entry's journal and account must exist. The statement trigger that
-- admits entries only into journals of their own transaction checks both,
-- one primary-key lookup per distinct journal and account of the
-- statement, in place of the two foreign keys: those ran a query per entry
-- and share-locked each account row, which made a hot wallet's row a
-- point of contention between concurrent postings. Journals and accounts
-- are never deleted (their append-only triggers), so existence at insert
-- is existence for good.
ALTER TABLE entry DROP CONSTRAINT entry_journal_id_fkey, DROP CONSTRAINT entry_account_id_fkey;

CREATE OR REPLACE FUNCTION ledger_entries_in_open_journals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    id bigint;
BEGIN
    -- A loop of primary-key lookups: a join could scan a whole table.
    FOR id IN SELECT DISTINCT journal_id FROM new_entries LOOP
        IF NOT EXISTS (SELECT 1 FROM journal WHERE journal_id = id AND txid = pg_current_xact_id()) THEN
            RAISE EXCEPTION 'journal % is closed or does not exist: entries are written with their journal, in its transaction', id
                USING ERRCODE = 'restrict_violation';
        END IF;
    END LOOP;
    FOR id IN SELECT DISTINCT account_id FROM new_entries LOOP
        IF NOT EXISTS (SELECT 1 FROM account WHERE account_id = id) THEN
            RAISE EXCEPTION 'entry on account %, which does not exist', id
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END LOOP;
    RETURN NULL;
END $$;
