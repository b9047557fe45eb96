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
	"github.com/txfence/txfence/shared/pg"
)

// The statements of queries/read.sql.
var (
	qAccounts       = Queries.Use("Accounts")
	qAccount        = Queries.Use("Account")
	qBalancesAt     = Queries.Use("BalancesAt")
	qJITOff         = Queries.Use("JITOff")
	qOwnBalancesAt  = Queries.Use("OwnBalancesAt")
	qStatement      = Queries.Use("Statement")
	qAccountExists  = Queries.Use("AccountExists")
	qJournalByID    = Queries.Use("JournalByID")
	qJournalEntries = Queries.Use("JournalEntries")
	qJournals       = Queries.Use("Journals")
)

// The read side of the books: accounts with their balances, current or as
// of a block, an account's statement, and journals. Accounts, journals and
// entries never change once committed. The balances of a page are read
// in one statement per chain (as of a block) or in all (current), so they
// are of one moment and sum the entries of whole journals.

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
	// generic plan that would have to serve every combination (one that
	// reads the primary key and filters every account, where a custom
	// plan finds an address through account_address_idx).
	rows, err := s.pool.Query(ctx, qAccounts.SQL, pgx.QueryExecModeExec, f.After, chain, addr, kind, asset, f.Limit)
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
	a, err := scanAccount(s.pool.QueryRow(ctx, qAccount.SQL, id))
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
// as of block at, one query per chain (BalancesAt), and, for the accounts
// it leaves, one over their own entries (OwnBalancesAt).
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
	read := func(db querier, q pg.Query, args ...any) error {
		rows, err := db.Query(ctx, q.SQL, args...)
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
		if err := read(s.pool, qBalancesAt, int64(chain), int64(at), ids); err != nil {
			return err
		}
	}
	if len(own) > 0 {
		// JIT off, for this transaction only (JITOff says why).
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, qJITOff.SQL); err != nil {
				return err
			}
			return read(tx, qOwnBalancesAt, own, int64(at))
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

// scanAccount reads an account with its balance as Account selects it.
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
	rows, err := s.pool.Query(ctx, qStatement.SQL, accountID, pos.Version, pos.EntryID, start, limit)
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
		if err := s.pool.QueryRow(ctx, qAccountExists.SQL, accountID).Scan(&exists); err != nil {
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

// JournalByID is journal id with its entries; errs.NotFound when there is
// none.
func (s *Store) JournalByID(ctx context.Context, id int64) (ledger.BookedJournal, error) {
	j, err := scanJournal(s.pool.QueryRow(ctx, qJournalByID.SQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.BookedJournal{}, errs.Errorf(errs.NotFound, "no journal %d", id)
	}
	if err != nil {
		return ledger.BookedJournal{}, fmt.Errorf("read journal %d: %w", id, err)
	}
	// A journal's entries were committed with it and never change, so
	// reading them apart from it sees them all.
	rows, err := s.pool.Query(ctx, qJournalEntries.SQL, id)
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
	rows, err := s.pool.Query(ctx, qJournals.SQL, pgx.QueryExecModeExec, f.After, chain, txHash, kind, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("read journals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.BookedJournal, error) { return scanJournal(row) })
	if err != nil {
		return nil, fmt.Errorf("read journals: %w", err)
	}
	return out, nil
}

// scanJournal reads a journal as JournalByID selects it.
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
