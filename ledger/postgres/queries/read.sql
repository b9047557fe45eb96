-- The read side of the books (read.go): accounts with their balances,
-- current or as of a block, an account's statement, and journals.
--
-- A statement that returns accounts returns the columns scanAccount reads,
-- in its order, as Account does; one that returns journals those
-- scanJournal reads, as JournalByID does. TestQueries holds every copy of
-- those lists to the original.

-- name: Accounts
-- A page of accounts by id, after account $1, $6 at most, with their
-- current balances; each filter applies unless its parameter is NULL: $2
-- chain, $3 address, $4 kind, $5 asset. Store.Accounts runs it planned for
-- its arguments at every call (read.go says why).
SELECT a.account_id, a.chain_id, a.asset, a.kind, a.address, coalesce(b.amount, 0)::text, coalesce(b.version, 0)
FROM account a LEFT JOIN balance b USING (account_id)
WHERE a.account_id > $1
	AND ($2::bigint IS NULL OR a.chain_id = $2)
	AND ($3::bytea IS NULL OR a.address = $3)
	AND ($4::text IS NULL OR a.kind = $4)
	AND ($5::text IS NULL OR a.asset = $5)
ORDER BY a.account_id
LIMIT $6;

-- name: Account
-- Account $1 with its current balance.
SELECT a.account_id, a.chain_id, a.asset, a.kind, a.address, coalesce(b.amount, 0)::text, coalesce(b.version, 0)
FROM account a LEFT JOIN balance b USING (account_id)
WHERE a.account_id = $1;

-- name: BalancesAt
-- The balance of accounts $3, all of chain $1, as of block $2: the sum of
-- their entries in journals of blocks up to it (a journal without a block
-- counts at none). Reading one costs what it reads, so it reads the least
-- of three (fewer than 1,000 journals are few: a literal, so that even a
-- generic plan knows a scan under that LIMIT is short):
--   - few journals after the block (journal_block_idx, and
--     journal_unblocked_idx for those without one): the current balance
--     less what they moved;
--   - else few journals up to the block: what they moved;
--   - else, with many journals either side, it answers NULL, and
--     OwnBalancesAt sums the account's own entries.
-- One statement, so one snapshot: the counts that choose the way and the
-- sums agree, and a LIMIT under a count below it cuts nothing. The way not
-- chosen is not run (one-time filters), and the entries of few journals
-- are read journal by journal (LATERAL, OFFSET 0 keeps it a nested loop
-- of entry_journal_idx lookups whatever the plan). Its estimated cost
-- stays below jit_above_cost: JIT compiling a plan costs tens of
-- milliseconds, more than running it.
WITH counts AS MATERIALIZED (
	SELECT
		(SELECT count(*) FROM (SELECT FROM journal WHERE chain_id = $1 AND block_number > $2 LIMIT 1000) l) AS later,
		(SELECT count(*) FROM (SELECT FROM journal WHERE chain_id = $1 AND block_number <= $2 LIMIT 1000) e) AS earlier
), later AS (
	SELECT e.account_id, sum(e.amount) AS amount
	FROM (
		(SELECT journal_id FROM journal
		WHERE chain_id = $1 AND block_number > $2 AND (SELECT later FROM counts) < 1000
		ORDER BY block_number LIMIT 1000)
	UNION ALL
		(SELECT journal_id FROM journal
		WHERE chain_id = $1 AND block_number IS NULL AND (SELECT later FROM counts) < 1000)
	) j, LATERAL (SELECT account_id, amount FROM entry WHERE entry.journal_id = j.journal_id OFFSET 0) e
	WHERE e.account_id = ANY ($3::bigint[])
	GROUP BY e.account_id
), earlier AS (
	SELECT e.account_id, sum(e.amount) AS amount
	FROM (
		SELECT journal_id FROM journal
		WHERE chain_id = $1 AND block_number <= $2 AND (SELECT later >= 1000 AND earlier < 1000 FROM counts)
		ORDER BY block_number LIMIT 1000
	) j, LATERAL (SELECT account_id, amount FROM entry WHERE entry.journal_id = j.journal_id OFFSET 0) e
	WHERE e.account_id = ANY ($3::bigint[])
	GROUP BY e.account_id
)
SELECT a.account_id, (CASE
	WHEN c.later < 1000 THEN coalesce((SELECT b.amount FROM balance b WHERE b.account_id = a.account_id), 0) - coalesce(l.amount, 0)
	WHEN c.earlier < 1000 THEN coalesce(r.amount, 0)
	END)::text
FROM unnest($3::bigint[]) AS a(account_id) CROSS JOIN counts c
	LEFT JOIN later l USING (account_id)
	LEFT JOIN earlier r USING (account_id);

-- name: JITOff
-- Turns JIT compilation off until the transaction ends: OwnBalancesAt's
-- plan over many entries is costed above jit_above_cost, and compiling it
-- costs more than it saves for any but the hottest wallets.
SET LOCAL jit = off;

-- name: OwnBalancesAt
-- The balance of accounts $1 as of block $2, from each account's own
-- entries (entry_account_idx), each looked up in its journal: what
-- BalancesAt leaves when many journals lie either side of the block. It
-- costs the accounts' entries: for a hot wallet in the middle of a long
-- history, hundreds of thousands.
SELECT a.account_id, coalesce((
	SELECT sum(e.amount) FROM entry e,
		LATERAL (SELECT block_number FROM journal WHERE journal.journal_id = e.journal_id OFFSET 0) j
	WHERE e.account_id = a.account_id AND j.block_number <= $2), 0)::text
FROM unnest($1::bigint[]) AS a(account_id);

-- name: Statement
-- A page of account $1's statement after entry $3 of version $2, with
-- running balances from $4: up to $5 entries, in the order of the
-- movements (0007) that booked them, then of entry ids.
-- A movement's entries are the account's entries in its id range whose
-- journal its transaction wrote. Each movement is read through
-- entry_account_idx from its first entry, or from the position for the
-- movement the previous page ended in, in id order, so a page costs its
-- own entries whatever the account's history and however large a
-- movement is (a bulk booking makes one of thousands of entries). The
-- journal is looked up per entry (OFFSET 0 keeps it a primary-key lookup
-- whatever the plan). No page needs more than $5 + 1 movements (each
-- has an entry, and the first may have none left) nor more than $5
-- entries of one: the limits bound a page's cost even under a plan that
-- sorts all it reads.
SELECT l.version, l.entry_id, l.journal_id, l.kind, l.reverses, l.tx_hash, l.block_number, l.block_hash, l.amount::text,
	($4::numeric + sum(l.amount) OVER (ORDER BY l.version, l.entry_id))::text
FROM (
	SELECT m.version, e.*
	FROM (SELECT version, txid, first_entry_id, last_entry_id FROM movement
		WHERE account_id = $1 AND version >= $2
		ORDER BY account_id, version
		LIMIT $5 + 1) m,
	LATERAL (
		SELECT e.entry_id, e.journal_id, e.amount, j.kind, j.reverses, j.tx_hash, j.block_number, j.block_hash
		FROM (SELECT entry_id, journal_id, amount FROM entry
			WHERE account_id = $1
				AND entry_id >= greatest(m.first_entry_id, CASE WHEN m.version = $2 THEN $3 + 1 END)
				AND entry_id <= m.last_entry_id
			ORDER BY account_id, entry_id) e,
		LATERAL (SELECT kind, reverses, tx_hash, block_number, block_hash FROM journal
			WHERE journal_id = e.journal_id AND txid = m.txid OFFSET 0) j
		ORDER BY e.entry_id
		LIMIT $5) e
	ORDER BY m.version, e.entry_id
	LIMIT $5) l
ORDER BY l.version, l.entry_id;

-- name: AccountExists
-- Whether account $1 exists: an empty statement page is the end of the
-- statement, or no account.
SELECT EXISTS (SELECT FROM account WHERE account_id = $1);

-- name: JournalByID
-- Journal $1 without its entries (JournalEntries), with the reversal that
-- undid it, if any.
SELECT j.journal_id, j.kind, j.chain_id, j.tx_hash, j.block_number, j.block_hash,
	coalesce(j.status, ''), j.reverses, r.journal_id, j.memo, j.created_at
FROM journal j LEFT JOIN journal r ON r.reverses = j.journal_id
WHERE j.journal_id = $1;

-- name: JournalEntries
-- Journal $1's entries with their accounts' keys, in booking order. A
-- journal's entries were committed with it and never change, so reading
-- them apart from it sees them all.
SELECT e.entry_id, a.account_id, a.chain_id, a.asset, a.kind, a.address, e.amount::text
FROM entry e JOIN account a USING (account_id)
WHERE e.journal_id = $1
ORDER BY e.entry_id;

-- name: Journals
-- A page of journals by id, after journal $1, $5 at most, without their
-- entries; each filter applies unless its parameter is NULL: $2 chain, $3
-- transaction hash, $4 kind. Store.Journals runs it planned for its
-- arguments at every call, as Store.Accounts does Accounts.
SELECT j.journal_id, j.kind, j.chain_id, j.tx_hash, j.block_number, j.block_hash,
	coalesce(j.status, ''), j.reverses, r.journal_id, j.memo, j.created_at
FROM journal j LEFT JOIN journal r ON r.reverses = j.journal_id
WHERE j.journal_id > $1
	AND ($2::bigint IS NULL OR j.chain_id = $2)
	AND ($3::bytea IS NULL OR j.tx_hash = $3)
	AND ($4::text IS NULL OR j.kind = $4)
ORDER BY j.journal_id
LIMIT $5;
