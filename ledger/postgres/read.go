package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// The read side of the books: accounts with their balances, current or as
// of a block, an account's statement, and journals. Accounts, journals and
// entries never change once committed. The balances of a page are read
// in one statement per chain (as of a block) or in all (current), so they
// are of one moment and sum the entries of whole journals.

// accountColumns are an account's key, as scanAccount reads it.
const accountColumns = `a.account_id, a.chain_id, a.asset, a.kind, a.address`

// accountsSQL lists the accounts a filter selects, with their current
// balances.
const accountsSQL = `
	SELECT ` + accountColumns + `, coalesce(b.amount, 0)::text, coalesce(b.version, 0)
	FROM account a LEFT JOIN balance b USING (account_id)
	WHERE a.account_id > $1
		AND ($2::bigint IS NULL OR a.chain_id = $2)
		AND ($3::bytea IS NULL OR a.address = $3)
		AND ($4::text IS NULL OR a.kind = $4)
		AND ($5::text IS NULL OR a.asset = $5)
	ORDER BY a.account_id
	LIMIT $6`

// balancesAtSQL is the balance of accounts $3, all of chain $1, as of
// block $2: the sum of their entries in journals of blocks up to it (a
// journal without a block counts at none). Reading one costs what it
// reads, so it reads the least of three (fewer than 1,000 journals are
// few: a literal, so that even a generic plan knows a scan under that
// LIMIT is short):
//   - few journals after the block (journal_block_idx, and
//     journal_unblocked_idx for those without one): the current balance
//     less what they moved;
//   - else few journals up to the block: what they moved;
//   - else, with many journals either side, it answers NULL, and
//     ownBalancesAtSQL sums the account's own entries.
//
// One statement, so one snapshot: the counts that choose the way and the
// sums agree, and a LIMIT under a count below it cuts nothing. The way not
// chosen is not run (one-time filters), and the entries of few journals
// are read journal by journal (LATERAL, OFFSET 0 keeps it a nested loop
// of entry_journal_idx lookups whatever the plan). Its estimated cost
// stays below jit_above_cost: JIT compiling a plan costs tens of
// milliseconds, more than running it.
const balancesAtSQL = `
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
		LEFT JOIN earlier r USING (account_id)`

// ownBalancesAtSQL is the balance of accounts $1 as of block $2, from each
// account's own entries (entry_account_idx), each looked up in its
// journal: what balancesAtSQL leaves when many journals lie either side
// of the block. It costs the accounts' entries: for a hot wallet in the
// middle of a long history, hundreds of thousands.
const ownBalancesAtSQL = `
	SELECT a.account_id, coalesce((
		SELECT sum(e.amount) FROM entry e,
			LATERAL (SELECT block_number FROM journal WHERE journal.journal_id = e.journal_id OFFSET 0) j
		WHERE e.account_id = a.account_id AND j.block_number <= $2), 0)::text
	FROM unnest($1::bigint[]) AS a(account_id)`

// Accounts lists the accounts f selects, by account id, with their
// balances.
func (s *Store) Accounts(ctx context.Context, f ledger.AccountFilter) ([]ledger.AccountBalance, error) {
	if f.Limit < 1 || f.Limit > ledger.MaxPage {
		return nil, errs.Errorf(errs.Invalid, "limit %d: 1 to %d", f.Limit, ledger.MaxPage)
	}
	chain, err := chainArg(f.ChainID)
	if err != nil {
		return nil, err
	}
	var addr []byte
	if f.Address != nil {
		addr = f.Address.Bytes()
	}
	var kind, asset *string
	if f.Kind != "" {
		kind = new(string(f.Kind))
	}
	if f.Asset != "" {
		asset = new(f.Asset)
	}
	// The filters are optional: the query is planned for the values it is
	// given (QueryExecModeExec, an unnamed statement), never with a
	// generic plan that would have to serve every combination.
	rows, err := s.pool.Query(ctx, accountsSQL, pgx.QueryExecModeExec, f.After, chain, addr, kind, asset, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("read accounts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.AccountBalance, error) { return scanAccount(row) })
	if err != nil {
		return nil, fmt.Errorf("read accounts: %w", err)
	}
	if f.AtBlock != nil {
		if err := s.balancesAt(ctx, out, *f.AtBlock); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Account is one account with its current balance, or with atBlock its
// balance as of that block; errs.NotFound when there is none.
func (s *Store) Account(ctx context.Context, id int64, atBlock *uint64) (ledger.AccountBalance, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `
		SELECT `+accountColumns+`, coalesce(b.amount, 0)::text, coalesce(b.version, 0)
		FROM account a LEFT JOIN balance b USING (account_id)
		WHERE a.account_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.AccountBalance{}, errs.Errorf(errs.NotFound, "no account %d", id)
	}
	if err != nil {
		return ledger.AccountBalance{}, fmt.Errorf("read account %d: %w", id, err)
	}
	if atBlock != nil {
		accounts := []ledger.AccountBalance{a}
		if err := s.balancesAt(ctx, accounts, *atBlock); err != nil {
			return ledger.AccountBalance{}, err
		}
		a = accounts[0]
	}
	return a, nil
}

// balancesAt replaces the current balances of accounts by their balances
// as of block at, one query per chain.
func (s *Store) balancesAt(ctx context.Context, accounts []ledger.AccountBalance, at uint64) error {
	if at > 1<<63-1 {
		return errs.Errorf(errs.Invalid, "block %d: beyond any block the ledger stores", at)
	}
	byChain := map[uint64][]int64{}
	for _, a := range accounts {
		byChain[a.ChainID] = append(byChain[a.ChainID], a.ID)
	}
	balances := make(map[int64]*big.Int, len(accounts))
	var own []int64
	read := func(db querier, sql string, args ...any) error {
		rows, err := db.Query(ctx, sql, args...)
		if err != nil {
			return fmt.Errorf("read balances at block %d: %w", at, err)
		}
		var id int64
		var amount *string
		_, err = pgx.ForEachRow(rows, []any{&id, &amount}, func() error {
			if amount == nil {
				own = append(own, id)
				return nil
			}
			v, err := parseInt(*amount)
			balances[id] = v
			return err
		})
		if err != nil {
			return fmt.Errorf("read balances at block %d: %w", at, err)
		}
		return nil
	}
	for chain, ids := range byChain {
		if err := read(s.pool, balancesAtSQL, int64(chain), int64(at), ids); err != nil {
			return err
		}
	}
	if len(own) > 0 {
		// A plan over many entries is costed above jit_above_cost, and JIT
		// compiling it costs more than it saves for any but the hottest
		// wallets.
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL jit = off`); err != nil {
				return err
			}
			return read(tx, ownBalancesAtSQL, own, int64(at))
		})
		if err != nil {
			return err
		}
	}
	for i := range accounts {
		a := &accounts[i]
		if a.Balance = balances[a.ID]; a.Balance == nil {
			return fmt.Errorf("read balances at block %d: account %d missing", at, a.ID)
		}
		a.Version, a.AtBlock = 0, &at
	}
	return nil
}

// chainArg is a chain filter as the database stores chain ids: nil for
// none.
func chainArg(id uint64) (*int64, error) {
	switch {
	case id == 0:
		return nil, nil
	case id > 1<<63-1:
		return nil, errs.Errorf(errs.Invalid, "chain_id %d: beyond any chain the ledger stores", id)
	}
	return new(int64(id)), nil
}

func scanAccount(row pgx.Row) (ledger.AccountBalance, error) {
	var a ledger.AccountBalance
	var chain int64
	var kind, balance string
	var addr []byte
	if err := row.Scan(&a.ID, &chain, &a.Asset, &kind, &addr, &balance, &a.Version); err != nil {
		return ledger.AccountBalance{}, err
	}
	a.ChainID, a.Kind, a.Address = uint64(chain), ledger.AccountKind(kind), common.BytesToAddress(addr)
	var err error
	if a.Balance, err = parseInt(balance); err != nil {
		return ledger.AccountBalance{}, err
	}
	return a, nil
}

// statementSQL is a page of account $1's statement after entry $3 of
// version $2, with running balances from $4: up to $5 entries, in the
// order of the movements (0007) that booked them, then of entry ids.
//
// A movement's entries are the account's entries in its id range whose
// journal its transaction wrote. Each movement is read through
// entry_account_idx from its first entry, or from the position for the
// movement the previous page ended in, in id order, so a page costs its
// own entries whatever the account's history and however large a
// movement is (a bulk booking makes one of thousands of entries). The
// journal is looked up per entry (OFFSET 0 keeps it a primary-key lookup
// whatever the plan). No page needs more than $5 + 1 movements (each
// has an entry, and the first may have none left) nor more than $5
// entries of one: the limits bound a page's cost even under a plan that
// sorts all it reads.
const statementSQL = `
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
	ORDER BY l.version, l.entry_id`

// Statement returns up to limit entries of the account after pos, in the
// order they became visible, each with the account's running balance
// after it; errs.NotFound when there is no such account.
//
// The running balance starts from the one pos carries, so a page costs
// its own entries whatever the account's history: pos must be a position
// a previous page ended at, which the caller keeps from being forged (the
// API authenticates its cursors).
//
// Entry ids are taken before a posting commits, so they do not order an
// account's entries as they become visible; the balance versions of its
// movements do (0007_statement_order.sql): an account's versions commit
// in order and without gaps, so a page that shows a version has every
// version before it, and the next page resumes after it without skipping
// an entry that was not visible yet or showing one twice. Should a page
// find a version missing all the same, it answers errs.Unavailable rather
// than go past it.
func (s *Store) Statement(ctx context.Context, accountID int64, pos ledger.StatementPosition, limit int) ([]ledger.StatementLine, error) {
	if limit < 1 || limit > ledger.MaxPage {
		return nil, errs.Errorf(errs.Invalid, "limit %d: 1 to %d", limit, ledger.MaxPage)
	}
	if pos.Version < 0 || pos.EntryID < 0 || pos.Version == 0 && pos.EntryID != 0 {
		// An entry id alone is a position before 0007, which would page
		// from the start again.
		return nil, errs.Errorf(errs.Invalid, "statement position %d/%d: not one a page ended at", pos.Version, pos.EntryID)
	}
	start := "0"
	if pos.Balance != nil {
		start = pos.Balance.String()
	}
	rows, err := s.pool.Query(ctx, statementSQL, accountID, pos.Version, pos.EntryID, start, limit)
	if err != nil {
		return nil, fmt.Errorf("read account %d's statement: %w", accountID, err)
	}
	lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.StatementLine, error) {
		var l ledger.StatementLine
		var kind, amount, balance string
		var reverses, number *int64
		var txHash, blockHash []byte
		if err := row.Scan(&l.Version, &l.EntryID, &l.JournalID, &kind, &reverses, &txHash, &number, &blockHash, &amount, &balance); err != nil {
			return ledger.StatementLine{}, err
		}
		l.Kind, l.TxHash, l.Block = ledger.JournalKind(kind), hashOf(txHash), blockOf(number, blockHash)
		if reverses != nil {
			l.Reverses = *reverses
		}
		var err error
		if l.Amount, err = parseInt(amount); err != nil {
			return ledger.StatementLine{}, err
		}
		l.Balance, err = parseInt(balance)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read account %d's statement: %w", accountID, err)
	}
	if err := s.checkVersions(accountID, pos, lines); err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		// An empty page: the end of the statement, or no account.
		var exists bool
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM account WHERE account_id = $1)`, accountID).Scan(&exists); err != nil {
			return nil, fmt.Errorf("read account %d: %w", accountID, err)
		}
		if !exists {
			return nil, errs.Errorf(errs.NotFound, "no account %d", accountID)
		}
	}
	return lines, nil
}

// checkVersions makes sure a page skipped no version: each version it
// shows is the one it resumes in, or the one after the version before.
// Every movement has an entry, so a version without a line is a movement
// the page could not see, which commit order rules out (0007); were it to
// happen, the page would leave that movement's entries behind for good.
// The account's first version is not checked: it is 1, or where the
// backfill of 0007 started an older account.
func (s *Store) checkVersions(accountID int64, pos ledger.StatementPosition, lines []ledger.StatementLine) error {
	prev := pos.Version
	for i, l := range lines {
		if (i > 0 || pos.Version > 0) && l.Version != prev && l.Version != prev+1 {
			s.log.Error("ledger: a statement page found a version of an account missing", "alert", true,
				"account_id", accountID, "after_version", prev, "version", l.Version)
			return errs.Errorf(errs.Unavailable, "account %d's statement: version %d follows %d, the versions between are not visible: try again", accountID, l.Version, prev)
		}
		prev = l.Version
	}
	return nil
}

// journalColumns are what scanJournal reads; r is the journal's reversal.
const journalColumns = `j.journal_id, j.kind, j.chain_id, j.tx_hash, j.block_number, j.block_hash,
	coalesce(j.status, ''), j.reverses, r.journal_id, j.memo, j.created_at`

// JournalByID is journal id with its entries; errs.NotFound when there is
// none.
func (s *Store) JournalByID(ctx context.Context, id int64) (ledger.BookedJournal, error) {
	j, err := scanJournal(s.pool.QueryRow(ctx, `
		SELECT `+journalColumns+`
		FROM journal j LEFT JOIN journal r ON r.reverses = j.journal_id
		WHERE j.journal_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.BookedJournal{}, errs.Errorf(errs.NotFound, "no journal %d", id)
	}
	if err != nil {
		return ledger.BookedJournal{}, fmt.Errorf("read journal %d: %w", id, err)
	}
	// A journal's entries were committed with it and never change, so
	// reading them apart from it sees them all.
	rows, err := s.pool.Query(ctx, `
		SELECT e.entry_id, `+accountColumns+`, e.amount::text
		FROM entry e JOIN account a USING (account_id)
		WHERE e.journal_id = $1
		ORDER BY e.entry_id`, id)
	if err != nil {
		return ledger.BookedJournal{}, fmt.Errorf("read journal %d's entries: %w", id, err)
	}
	j.Entries, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.BookedEntry, error) {
		var e ledger.BookedEntry
		var chain int64
		var kind, amount string
		var addr []byte
		if err := row.Scan(&e.ID, &e.AccountID, &chain, &e.Account.Asset, &kind, &addr, &amount); err != nil {
			return ledger.BookedEntry{}, err
		}
		e.Account.ChainID, e.Account.Kind, e.Account.Address = uint64(chain), ledger.AccountKind(kind), common.BytesToAddress(addr)
		var err error
		e.Amount, err = parseInt(amount)
		return e, err
	})
	if err != nil {
		return ledger.BookedJournal{}, fmt.Errorf("read journal %d's entries: %w", id, err)
	}
	return j, nil
}

// Journals lists the journals f selects, oldest first, without their
// entries.
func (s *Store) Journals(ctx context.Context, f ledger.JournalFilter) ([]ledger.BookedJournal, error) {
	if f.Limit < 1 || f.Limit > ledger.MaxPage {
		return nil, errs.Errorf(errs.Invalid, "limit %d: 1 to %d", f.Limit, ledger.MaxPage)
	}
	chain, err := chainArg(f.ChainID)
	if err != nil {
		return nil, err
	}
	var txHash []byte
	if f.TxHash != nil {
		txHash = f.TxHash.Bytes()
	}
	var kind *string
	if f.Kind != "" {
		kind = new(string(f.Kind))
	}
	// Planned for the filters given, as Accounts is.
	rows, err := s.pool.Query(ctx, `
		SELECT `+journalColumns+`
		FROM journal j LEFT JOIN journal r ON r.reverses = j.journal_id
		WHERE j.journal_id > $1
			AND ($2::bigint IS NULL OR j.chain_id = $2)
			AND ($3::bytea IS NULL OR j.tx_hash = $3)
			AND ($4::text IS NULL OR j.kind = $4)
		ORDER BY j.journal_id
		LIMIT $5`, pgx.QueryExecModeExec, f.After, chain, txHash, kind, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("read journals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.BookedJournal, error) { return scanJournal(row) })
	if err != nil {
		return nil, fmt.Errorf("read journals: %w", err)
	}
	return out, nil
}

func scanJournal(row pgx.Row) (ledger.BookedJournal, error) {
	var j ledger.BookedJournal
	var chain int64
	var kind string
	var number, reverses, reversedBy *int64
	var txHash, blockHash, memo []byte
	if err := row.Scan(&j.ID, &kind, &chain, &txHash, &number, &blockHash, &j.Status, &reverses, &reversedBy, &memo, &j.CreatedAt); err != nil {
		return ledger.BookedJournal{}, err
	}
	j.Kind, j.ChainID, j.TxHash, j.Block, j.Memo = ledger.JournalKind(kind), uint64(chain), hashOf(txHash), blockOf(number, blockHash), memo
	if reverses != nil {
		j.Reverses = *reverses
	}
	if reversedBy != nil {
		j.ReversedBy = *reversedBy
	}
	return j, nil
}

func hashOf(b []byte) *common.Hash {
	if b == nil {
		return nil
	}
	h := common.BytesToHash(b)
	return &h
}

func blockOf(number *int64, hash []byte) *ledger.Block {
	if number == nil {
		return nil
	}
	return &ledger.Block{Number: uint64(*number), Hash: common.BytesToHash(hash)}
}

// parseInt reads an integer the database wrote as text.
func parseInt(s string) (*big.Int, error) {
	v, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return nil, fmt.Errorf("amount %q: not an integer", s)
	}
	return v, nil
}
