package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
)

// The statements of queries/reconcile.sql.
var (
	qLockReconciliation      = Queries.Use("LockReconciliation")
	qScannedHash             = Queries.Use("ScannedHash")
	qFeedCursorBeforeBacklog = Queries.Use("FeedCursorBeforeBacklog")
	qNewestRun               = Queries.Use("NewestRun")
	qNewestCompleteRun       = Queries.Use("NewestCompleteRun")
	qWalletsOpenedBy         = Queries.Use("WalletsOpenedBy")
	qHoldings                = Queries.Use("Holdings")
	qUnbooked                = Queries.Use("Unbooked")
	qBookedKeys              = Queries.Use("BookedKeys")
	qNewRunID                = Queries.Use("NewRunID")
	qInsertRun               = Queries.Use("InsertRun")
	qReconciliationRuns      = Queries.Use("ReconciliationRuns")
	qChainReconciliationRuns = Queries.Use("ChainReconciliationRuns")
	qReconciliationRun       = Queries.Use("ReconciliationRun")
	qReconciliationItems     = Queries.Use("ReconciliationItems")
)

// Reconciliation is one chain's reconciliation under way: a transaction
// that holds the chain's reconciliation lock, so that two runs of one
// chain (two ledgerd nodes) go one after the other, the second seeing what
// the first booked. It reads the books as of a block, books the
// differences and stores the report, all committed together or not at all.
type Reconciliation struct {
	s       *Store
	tx      pgx.Tx
	chainID uint64
	made    map[ledger.AccountKey]int64
}

var _ ledger.ReconcileTx = (*Reconciliation)(nil)

// Reconcile runs fn in a transaction holding chainID's reconciliation lock
// and commits what fn wrote. fn may run again on a serialization failure
// or a deadlock, and must be safe to re-run; when it fails, nothing it
// wrote is kept. The lock is a transaction-level advisory lock: a node
// that dies mid-run releases it with its connection.
func (s *Store) Reconcile(ctx context.Context, chainID uint64, fn func(ledger.ReconcileTx) error) error {
	var made map[ledger.AccountKey]int64
	err := pg.InTx(ctx, s.pool, pg.TxOptions{Logger: s.log}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qLockReconciliation.SQL, int64(chainID)); err != nil {
			return fmt.Errorf("lock chain %d's reconciliation: %w", chainID, err)
		}
		r := &Reconciliation{s: s, tx: tx, chainID: chainID, made: map[ledger.AccountKey]int64{}}
		if err := fn(r); err != nil {
			return err
		}
		made = r.made
		return nil
	})
	if err != nil {
		return err
	}
	s.cacheAccounts(made)
	return nil
}

// ScanCursor is the last block the scanner booked on the chain; nil when it
// has booked none.
func (r *Reconciliation) ScanCursor(ctx context.Context) (*ledger.Block, error) {
	var number int64
	var hash []byte
	err := r.tx.QueryRow(ctx, qScanCursor.SQL, int64(r.chainID)).Scan(&number, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read chain %d's scan cursor: %w", r.chainID, err)
	}
	return &ledger.Block{Number: uint64(number), Hash: common.BytesToHash(hash)}, nil
}

// ScannedHash is the hash of the block the scanner booked at number, when
// it still keeps that block in its window of recent ones.
func (r *Reconciliation) ScannedHash(ctx context.Context, number uint64) (common.Hash, bool, error) {
	var hash []byte
	err := r.tx.QueryRow(ctx, qScannedHash.SQL, int64(r.chainID), int64(number)).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return common.Hash{}, false, nil
	}
	if err != nil {
		return common.Hash{}, false, fmt.Errorf("read chain %d's scanned block %d: %w", r.chainID, number, err)
	}
	return common.BytesToHash(hash), true, nil
}

// FeedCursor is the seq up to which the feed is booked for the
// reconciliation's chain, read in its transaction: Store.Cursor, or, when
// the chain has events in the feed's backlog, the seq before the oldest.
// A chain's backlogged settlements are not booked yet: a run that compared
// its wallets would book them to suspense, and then again when the
// backlog books them.
func (r *Reconciliation) FeedCursor(ctx context.Context, feed string) (uint64, error) {
	var seq int64
	err := r.tx.QueryRow(ctx, qFeedCursorBeforeBacklog.SQL, feed, int64(r.chainID)).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read feed %s's cursor: %w", feed, err)
	}
	return uint64(seq), nil
}

// NewestRun is the chain's newest stored run, or with complete its newest
// complete one, without items; nil when there is none.
func (r *Reconciliation) NewestRun(ctx context.Context, complete bool) (*ledger.ReconciliationRun, error) {
	q := qNewestRun
	if complete {
		q = qNewestCompleteRun
	}
	rows, err := r.tx.Query(ctx, q.SQL, int64(r.chainID))
	if err != nil {
		return nil, fmt.Errorf("read chain %d's newest run: %w", r.chainID, err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return &runs[0], nil
}

// Wallets are the chain's wallets opened at or before block, in address
// order.
func (r *Reconciliation) Wallets(ctx context.Context, block uint64) ([]common.Address, error) {
	rows, err := r.tx.Query(ctx, qWalletsOpenedBy.SQL, int64(r.chainID), int64(block))
	if err != nil {
		return nil, fmt.Errorf("read chain %d's wallets: %w", r.chainID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (common.Address, error) {
		var addr []byte
		err := row.Scan(&addr)
		return common.BytesToAddress(addr), err
	})
}

// Holdings reads, as of block, every asset the chain's wallets opened at
// or before block have an account for: each account's entries in the
// chain's journals with a block number at or before block. It takes the
// balance (every entry) less the entries of later journals and of those
// without a block, which is the same sum (the database keeps every
// balance the sum of its entries) at a cost that grows with the journals
// after block, not with the whole history. One grouped query for all the
// chain's wallets.
func (r *Reconciliation) Holdings(ctx context.Context, block uint64) ([]ledger.Holding, error) {
	rows, err := r.tx.Query(ctx, qHoldings.SQL, int64(r.chainID), int64(block))
	if err != nil {
		return nil, fmt.Errorf("read chain %d's wallet balances at block %d: %w", r.chainID, block, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Holding, error) {
		var addr []byte
		var h ledger.Holding
		var wallet, suspense string
		if err := row.Scan(&addr, &h.Asset, &wallet, &suspense); err != nil {
			return ledger.Holding{}, err
		}
		h.Address = common.BytesToAddress(addr)
		var ok1, ok2 bool
		h.Wallet, ok1 = new(big.Int).SetString(wallet, 10)
		h.Suspense, ok2 = new(big.Int).SetString(suspense, 10)
		if !ok1 || !ok2 {
			return ledger.Holding{}, fmt.Errorf("balances %q, %q of %s %s", wallet, suspense, h.Address, h.Asset)
		}
		return h, nil
	})
}

// Unbooked lists the transactions the chain's wallets sent in blocks from
// from to upTo, after each wallet's opening, that the ledger has not
// booked, by sender, block and hash.
func (r *Reconciliation) Unbooked(ctx context.Context, from, upTo uint64, grace time.Duration) ([]ledger.UnbookedTx, error) {
	rows, err := r.tx.Query(ctx, qUnbooked.SQL,
		int64(r.chainID), int64(min(from, math.MaxInt64)), int64(min(upTo, math.MaxInt64)), max(grace, 0).Seconds())
	if err != nil {
		return nil, fmt.Errorf("read chain %d's unbooked wallet transactions: %w", r.chainID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.UnbookedTx, error) {
		var sender, hash []byte
		var number int64
		var t ledger.UnbookedTx
		if err := row.Scan(&sender, &hash, &number, &t.Young); err != nil {
			return ledger.UnbookedTx{}, err
		}
		t.Sender, t.Hash, t.Block = common.BytesToAddress(sender), common.BytesToHash(hash), uint64(number)
		return t, nil
	})
}

// Booked returns the journals, by key, booked under any of keys.
func (r *Reconciliation) Booked(ctx context.Context, keys []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(keys) == 0 {
		return out, nil
	}
	rows, err := r.tx.Query(ctx, qBookedKeys.SQL, keys)
	if err != nil {
		return nil, fmt.Errorf("read booked journals: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var id int64
		if err := rows.Scan(&key, &id); err != nil {
			return nil, err
		}
		out[key] = id
	}
	return out, rows.Err()
}

// NewRunID reserves the id of the run being made, for the memos of its
// journals.
func (r *Reconciliation) NewRunID(ctx context.Context) (int64, error) {
	var id int64
	if err := r.tx.QueryRow(ctx, qNewRunID.SQL).Scan(&id); err != nil {
		return 0, fmt.Errorf("reserve a run id: %w", err)
	}
	return id, nil
}

// Book books journals in the reconciliation's transaction and returns
// their ids. A journal whose key holds the same fact is a replay (its id
// is returned); one whose key holds another fact fails the whole
// reconciliation with errs.Conflict.
func (r *Reconciliation) Book(ctx context.Context, journals []*ledger.Journal) ([]int64, error) {
	if len(journals) == 0 {
		return nil, nil
	}
	posts := make([]*pendingPost, len(journals))
	for i, j := range journals {
		if err := j.Validate(); err != nil {
			return nil, errs.Wrap(errs.Invalid, "journal "+j.Key, err)
		}
		posts[i] = &pendingPost{j: j, hash: j.PayloadHash()}
	}
	written, made, err := r.s.writeJournals(ctx, r.tx, posts)
	if err != nil {
		return nil, fmt.Errorf("book %d reconciliation journals: %w", len(journals), err)
	}
	for k, id := range made {
		r.made[k] = id
	}
	ids := make([]int64, len(posts))
	for i, p := range posts {
		if id, ok := written.claim(p); ok {
			ids[i] = id
			continue
		}
		got, err := bookedIn(ctx, r.tx, p.j.Key, p.hash)
		if err != nil {
			var conflict *keyConflict
			if errors.As(err, &conflict) {
				return nil, r.s.classify(err, p.j)
			}
			return nil, err
		}
		ids[i] = got.JournalID
	}
	return ids, nil
}

// Save stores run, whose ID NewRunID reserved, with its items.
func (r *Reconciliation) Save(ctx context.Context, run *ledger.ReconciliationRun) error {
	if run.ID == 0 || run.ChainID != r.chainID {
		return fmt.Errorf("save run %d of chain %d in chain %d's reconciliation", run.ID, run.ChainID, r.chainID)
	}
	if _, err := r.tx.Exec(ctx, qInsertRun.SQL,
		run.ID, int64(run.ChainID), int64(run.Block.Number), run.Block.Hash.Bytes(), run.Trigger, run.Status, run.Problem,
		run.Differences, run.Deferred, run.StartedAt, run.FinishedAt); err != nil {
		return fmt.Errorf("store run %d: %w", run.ID, err)
	}
	rows := make([][]any, len(run.Items))
	for i, it := range run.Items {
		var journal *int64
		if it.JournalID != 0 {
			journal = new(it.JournalID)
		}
		pending := make([][]byte, len(it.Pending))
		for k, h := range it.Pending {
			pending[k] = h.Bytes()
		}
		rows[i] = []any{run.ID, it.Address.Bytes(), it.Asset, numeric(it.Ledger), numeric(it.Chain), numeric(it.Difference),
			it.Cause, journal, pending, it.Negative}
	}
	if _, err := r.tx.CopyFrom(ctx, pgx.Identifier{"reconciliation_item"},
		[]string{"run_id", "address", "asset", "ledger_balance", "chain_balance", "difference", "cause", "journal_id", "pending", "negative"},
		pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("store run %d's %d items: %w", run.ID, len(rows), err)
	}
	return nil
}

// numeric is v for the database; NULL when v is nil.
func numeric(v *big.Int) pgtype.Numeric {
	if v == nil {
		return pgtype.Numeric{}
	}
	return pgtype.Numeric{Int: new(big.Int).Set(v), Valid: true}
}

// ReconciliationRuns lists stored runs, newest first, without their
// items: of chain chainID, or of every chain when it is 0; those before
// the run id before (a previous page's last id), or the newest when it is
// 0; at most limit (1 to MaxRunsPage).
func (s *Store) ReconciliationRuns(ctx context.Context, chainID uint64, before int64, limit int) ([]ledger.ReconciliationRun, error) {
	if limit < 1 || limit > ledger.MaxRunsPage {
		return nil, errs.Errorf(errs.Invalid, "limit %d: 1 to %d runs", limit, ledger.MaxRunsPage)
	}
	if before < 0 || chainID > math.MaxInt64 {
		return nil, errs.Errorf(errs.Invalid, "before %d, chain %d: a run id and a chain id", before, chainID)
	}
	if before == 0 {
		before = math.MaxInt64
	}
	var rows pgx.Rows
	var err error
	if chainID == 0 {
		rows, err = s.pool.Query(ctx, qReconciliationRuns.SQL, before, limit)
	} else {
		rows, err = s.pool.Query(ctx, qChainReconciliationRuns.SQL, int64(chainID), before, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list reconciliation runs: %w", err)
	}
	return pgx.CollectRows(rows, scanRun)
}

// ReconciliationRun reads the stored run id with its items, by address and
// asset; errs.NotFound when there is none.
func (s *Store) ReconciliationRun(ctx context.Context, id int64) (*ledger.ReconciliationRun, error) {
	rows, err := s.pool.Query(ctx, qReconciliationRun.SQL, id)
	if err != nil {
		return nil, fmt.Errorf("read reconciliation run %d: %w", id, err)
	}
	runs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("read reconciliation run %d: %w", id, err)
	}
	if len(runs) == 0 {
		return nil, errs.Errorf(errs.NotFound, "no reconciliation run %d", id)
	}
	run := &runs[0]
	rows, err = s.pool.Query(ctx, qReconciliationItems.SQL, id)
	if err != nil {
		return nil, fmt.Errorf("read reconciliation run %d's items: %w", id, err)
	}
	run.Items, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.ReconciliationItem, error) {
		var it ledger.ReconciliationItem
		var addr []byte
		var ledgerBal string
		var chainBal, diff *string
		var journal *int64
		var pending [][]byte
		if err := row.Scan(&addr, &it.Asset, &ledgerBal, &chainBal, &diff, &it.Cause, &journal, &pending, &it.Negative); err != nil {
			return it, err
		}
		it.Address = common.BytesToAddress(addr)
		var err error
		if it.Ledger, err = parseOptionalInt(&ledgerBal); err != nil {
			return it, err
		}
		if it.Chain, err = parseOptionalInt(chainBal); err != nil {
			return it, err
		}
		if it.Difference, err = parseOptionalInt(diff); err != nil {
			return it, err
		}
		if journal != nil {
			it.JournalID = *journal
		}
		for _, h := range pending {
			it.Pending = append(it.Pending, common.BytesToHash(h))
		}
		return it, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read reconciliation run %d's items: %w", id, err)
	}
	return run, nil
}

// parseOptionalInt reads a numeric's text; nil for NULL.
func parseOptionalInt(s *string) (*big.Int, error) {
	if s == nil {
		return nil, nil
	}
	v, ok := new(big.Int).SetString(*s, 10)
	if !ok {
		return nil, fmt.Errorf("amount %q: not an integer", *s)
	}
	return v, nil
}

// scanRun reads a run as ReconciliationRun selects it.
func scanRun(row pgx.CollectableRow) (ledger.ReconciliationRun, error) {
	var run ledger.ReconciliationRun
	var chain, number int64
	var hash []byte
	if err := row.Scan(&run.ID, &chain, &number, &hash, &run.Trigger, &run.Status, &run.Problem,
		&run.Differences, &run.Deferred, &run.StartedAt, &run.FinishedAt); err != nil {
		return run, err
	}
	run.ChainID, run.Block = uint64(chain), ledger.Block{Number: uint64(number), Hash: common.BytesToHash(hash)}
	return run, nil
}
