package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/batch"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
)

// The statements of queries/books.sql.
var (
	qInsertAccounts = Queries.Use("InsertAccounts")
	qAccountsByKey  = Queries.Use("AccountsByKey")
	qWriteJournals  = Queries.Use("WriteJournals")
	qBookedUnderKey = Queries.Use("BookedUnderKey")
	qBalance        = Queries.Use("Balance")
)

// Store is ledgerd's PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// accounts caches account ids: accounts never change, and an id is
	// cached only once the transaction that made it has committed.
	accounts sync.Map // ledger.AccountKey -> int64
	posts    *batch.Queue[*pendingPost]
}

// The store is every store the ledger's parts take.
var (
	_ ledger.ConsumerStore  = (*Store)(nil)
	_ ledger.ScannerStore   = (*Store)(nil)
	_ ledger.ReconcileStore = (*Store)(nil)
	_ ledger.TransitStore   = (*Store)(nil)
	_ ledger.APIStore       = (*Store)(nil)
)

// New returns a store on pool, whose schema Migrations produced.
func New(pool *pgxpool.Pool, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	s := &Store{pool: pool, log: log}
	s.posts = batch.New(maxPostFlushes, batch.UpTo[*pendingPost](maxPostBatch), s.flushPosts)
	return s
}

// Concurrent postings share a transaction (shared/batch): one commit, and
// one update of each balance they move, however many journals move it, so
// a hot wallet is not a queue of row locks. Two flushes may run, so that
// one commits (a disk flush) while the other writes; each takes up to
// maxPostBatch journals, and a lone posting is flushed at once. They lock
// journals by key and balances by account in one order: they wait for
// each other, never deadlock.
const (
	maxPostFlushes = 2
	maxPostBatch   = 256
	// postFlushTimeout bounds a flush, which no single caller owns.
	postFlushTimeout = 10 * time.Second
)

// pendingPost is a journal waiting for its flush.
type pendingPost struct {
	j    *ledger.Journal
	hash [32]byte
	done chan postResult // buffered: a flush never blocks on a caller who left
}

// postResult is a flush's answer to one posting.
type postResult struct {
	id int64
	// taken says the key was booked before, or earlier in the batch: the
	// caller reads which fact holds it.
	taken bool
	// alone says the shared transaction failed and stored nothing: the
	// caller posts its journal by itself.
	alone bool
}

// Post books j: its journal and entries in one transaction, which the
// database refuses unless the legs balance per asset. Booking the same
// fact again (the same key and payload) books nothing and answers with the
// journal booked before; the same key with another payload is an
// errs.Conflict, logged as an alert: two different facts claim one key.
// Contention (deadlocks, serialization failures) is retried, not returned.
func (s *Store) Post(ctx context.Context, j *ledger.Journal) (ledger.Posted, error) {
	if err := j.Validate(); err != nil {
		return ledger.Posted{}, errs.Wrap(errs.Invalid, "journal "+j.Key, err)
	}
	p := &pendingPost{j: j, hash: j.PayloadHash(), done: make(chan postResult, 1)}
	s.posts.Add(p)
	var r postResult
	select {
	case r = <-p.done:
	case <-ctx.Done():
		return ledger.Posted{}, ctx.Err()
	}
	switch {
	case r.alone:
		return s.postAlone(ctx, p)
	case r.taken:
		out, err := s.booked(ctx, j.Key, p.hash)
		if err != nil {
			return ledger.Posted{}, s.classify(err, j)
		}
		return out, nil
	}
	return ledger.Posted{JournalID: r.id, Created: true}, nil
}

// flushPosts books a batch of journals in one transaction. When it fails,
// nothing of it was stored, and each journal is sent back to be posted
// alone, so that only a bad one fails, with its own error.
func (s *Store) flushPosts(posts []*pendingPost) {
	ctx, cancel := context.WithTimeout(context.Background(), postFlushTimeout)
	defer cancel()
	ids, err := s.insertJournals(ctx, posts)
	for _, p := range posts {
		if err != nil {
			p.done <- postResult{alone: true}
		} else if id, ok := ids.claim(p); ok {
			p.done <- postResult{id: id}
		} else {
			p.done <- postResult{taken: true}
		}
	}
}

// postAlone books one journal in a transaction of its own.
func (s *Store) postAlone(ctx context.Context, p *pendingPost) (ledger.Posted, error) {
	ids, err := s.insertJournals(ctx, []*pendingPost{p})
	if err != nil {
		return ledger.Posted{}, s.classify(err, p.j)
	}
	if id, ok := ids.claim(p); ok {
		return ledger.Posted{JournalID: id, Created: true}, nil
	}
	out, err := s.booked(ctx, p.j.Key, p.hash)
	if err != nil {
		return ledger.Posted{}, s.classify(err, p.j)
	}
	return out, nil
}

// newJournal is a journal insertJournals wrote.
type newJournal struct {
	id   int64
	hash [32]byte
}

// writtenJournals are the journals a transaction wrote, by key.
type writtenJournals map[string]newJournal

// claim returns the id of p's journal when p is the one written under its
// key, once: of two postings of one key, the second is not (a replay, or a
// conflict, for its caller to find out).
func (w writtenJournals) claim(p *pendingPost) (int64, bool) {
	j, ok := w[p.j.Key]
	if !ok || j.hash != p.hash {
		return 0, false
	}
	delete(w, p.j.Key)
	return j.id, true
}

// insertJournals writes the journals whose keys are free, with their
// entries, and returns them by key. Of two journals with one key, the
// first is written. Missing accounts are made first, each committed on
// its own (an account without entries changes no balance); the journals
// and entries are then one statement, so a flush is one round trip to the
// server and holds its balance rows only while the server works.
// Contention is retried.
func (s *Store) insertJournals(ctx context.Context, posts []*pendingPost) (writtenJournals, error) {
	ids, made, err := s.accountIDs(ctx, s.pool, legsOf(posts))
	if err != nil {
		return nil, err
	}
	s.cacheAccounts(made)
	var out writtenJournals
	err = pg.Retrying(ctx, pg.TxOptions{}, func() error {
		out, err = writeRows(ctx, s.pool, posts, ids)
		return err
	})
	return out, err
}

// writeJournals writes, in tx, the journals whose keys are free, with
// their accounts and entries; made are the accounts read or made in tx,
// for cacheAccounts once it commits.
func (s *Store) writeJournals(ctx context.Context, tx pgx.Tx, posts []*pendingPost) (written writtenJournals, made map[ledger.AccountKey]int64, err error) {
	ids, made, err := s.accountIDs(ctx, tx, legsOf(posts))
	if err != nil {
		return nil, nil, err
	}
	written, err = writeRows(ctx, tx, posts, ids)
	return written, made, err
}

// legsOf lists the legs of every posting.
func legsOf(posts []*pendingPost) []ledger.Leg {
	var legs []ledger.Leg
	for _, p := range posts {
		legs = append(legs, p.j.Legs...)
	}
	return legs
}

// cacheAccounts remembers account ids a committed transaction read or made.
func (s *Store) cacheAccounts(made map[ledger.AccountKey]int64) {
	for k, id := range made {
		s.accounts.Store(k, id)
	}
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// accountIDs returns the id of every leg's account, making the missing
// ones; fresh are those read or made through db, to cache once committed.
func (s *Store) accountIDs(ctx context.Context, db querier, legs []ledger.Leg) (ids, fresh map[ledger.AccountKey]int64, err error) {
	ids = make(map[ledger.AccountKey]int64, len(legs))
	var missing []ledger.AccountKey
	for _, l := range legs {
		if id, ok := s.accounts.Load(l.Account); ok {
			ids[l.Account] = id.(int64)
		} else if _, listed := ids[l.Account]; !listed {
			ids[l.Account] = 0
			missing = append(missing, l.Account)
		}
	}
	if len(missing) == 0 {
		return ids, nil, nil
	}
	chains, assets, kinds, addrs := make([]int64, len(missing)), make([]string, len(missing)), make([]string, len(missing)), make([][]byte, len(missing))
	for i, k := range missing {
		chains[i], assets[i], kinds[i], addrs[i] = int64(k.ChainID), k.Asset, string(k.Kind), k.Address.Bytes()
	}
	// Insert what is new, then read them all: a concurrent insert of the
	// same account commits first or waits, and either way it is read.
	if _, err := db.Exec(ctx, qInsertAccounts.SQL, chains, assets, kinds, addrs); err != nil {
		return nil, nil, fmt.Errorf("make accounts: %w", err)
	}
	rows, err := db.Query(ctx, qAccountsByKey.SQL, chains, assets, kinds, addrs)
	if err != nil {
		return nil, nil, fmt.Errorf("read accounts: %w", err)
	}
	defer rows.Close()
	fresh = make(map[ledger.AccountKey]int64, len(missing))
	for rows.Next() {
		var id, chain int64
		var asset, kind string
		var addr []byte
		if err := rows.Scan(&id, &chain, &asset, &kind, &addr); err != nil {
			return nil, nil, err
		}
		k := ledger.AccountKey{ChainID: uint64(chain), Asset: asset, Kind: ledger.AccountKind(kind), Address: common.BytesToAddress(addr)}
		ids[k], fresh[k] = id, id
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	if len(fresh) != len(missing) {
		return nil, nil, fmt.Errorf("made %d accounts, read %d back", len(missing), len(fresh))
	}
	return ids, fresh, nil
}

// writeRows writes, through db, the journals whose keys are free and their
// entries, in one statement. The entries sent are those of the first
// posting of each key, the one the insert keeps; a journal not written
// (its key was taken) takes none.
func writeRows(ctx context.Context, db querier, posts []*pendingPost, ids map[ledger.AccountKey]int64) (writtenJournals, error) {
	n := len(posts)
	kinds, keys, statuses, memos := make([]string, n), make([]string, n), make([]*string, n), make([]string, n)
	hashes, txHashes, blockHashes := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	chains, blockNumbers, reverses := make([]int64, n), make([]*int64, n), make([]*int64, n)
	var legKeys []string
	var legAccounts []int64
	var legAmounts []string
	first := make(map[string]bool, n)
	for i, p := range posts {
		j := p.j
		kinds[i], keys[i], hashes[i], chains[i], memos[i] = string(j.Kind), j.Key, p.hash[:], int64(j.ChainID), "{}"
		if j.TxHash != nil {
			txHashes[i] = j.TxHash.Bytes()
		}
		if j.Block != nil {
			blockNumbers[i], blockHashes[i] = new(int64(j.Block.Number)), j.Block.Hash.Bytes()
		}
		if j.Status != "" {
			statuses[i] = new(j.Status)
		}
		if j.Reverses != 0 {
			reverses[i] = new(j.Reverses)
		}
		if j.Memo != nil {
			memos[i] = string(j.Memo)
		}
		if first[j.Key] {
			continue
		}
		first[j.Key] = true
		for _, l := range j.Legs {
			legKeys, legAccounts, legAmounts = append(legKeys, j.Key), append(legAccounts, ids[l.Account]), append(legAmounts, l.Amount.String())
		}
	}
	rows, err := db.Query(ctx, qWriteJournals.SQL,
		kinds, keys, hashes, chains, txHashes, blockNumbers, blockHashes, statuses, reverses, memos, legKeys, legAccounts, legAmounts)
	if err != nil {
		return nil, err
	}
	written := make(writtenJournals, n)
	for rows.Next() {
		var key string
		var j newJournal
		var hash []byte
		if err := rows.Scan(&key, &j.id, &hash); err != nil {
			rows.Close()
			return nil, err
		}
		copy(j.hash[:], hash)
		written[key] = j
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return written, nil
}

// booked reads the journal holding key: a replay when its payload is the
// same, a conflict otherwise.
func (s *Store) booked(ctx context.Context, key string, hash [32]byte) (ledger.Posted, error) {
	return bookedIn(ctx, s.pool, key, hash)
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// bookedIn is booked, read through db.
func bookedIn(ctx context.Context, db rowQuerier, key string, hash [32]byte) (ledger.Posted, error) {
	var id int64
	var stored []byte
	if err := db.QueryRow(ctx, qBookedUnderKey.SQL, key).Scan(&id, &stored); err != nil {
		return ledger.Posted{}, fmt.Errorf("read journal %q: %w", key, err)
	}
	if !bytes.Equal(stored, hash[:]) {
		return ledger.Posted{}, &keyConflict{key: key, id: id}
	}
	return ledger.Posted{JournalID: id}, nil
}

// keyConflict is a different fact under a key already booked.
type keyConflict struct {
	key string
	id  int64
}

func (e *keyConflict) Error() string {
	return fmt.Sprintf("journal %d holds key %q with another payload", e.id, e.key)
}

// classify turns a failed Post into the caller's error, and raises the
// alert a key conflict deserves.
func (s *Store) classify(err error, j *ledger.Journal) error {
	var conflict *keyConflict
	switch {
	case errors.As(err, &conflict):
		s.log.Error("ledger: a fact differs from the one booked under its key", "alert", true,
			"key", conflict.key, "journal_id", conflict.id, "kind", string(j.Kind))
		return errs.Wrap(errs.Conflict, "journal "+j.Key, err)
	case pg.Code(err) == pg.CodeCheckViolation, pg.Code(err) == pg.CodeForeignKeyViolation, pg.Code(err) == "23001":
		return errs.Wrap(errs.Invalid, "journal "+j.Key+" refused by the database", err)
	}
	return err
}

// Balance is an account's balance: the sum of its entries.
func (s *Store) Balance(ctx context.Context, k ledger.AccountKey) (*big.Int, error) {
	var amount *string
	err := s.pool.QueryRow(ctx, qBalance.SQL, int64(k.ChainID), k.Asset, string(k.Kind), k.Address.Bytes()).Scan(&amount)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Errorf(errs.NotFound, "no account %s", k)
	}
	if err != nil {
		return nil, err
	}
	v := new(big.Int)
	if amount != nil {
		v.SetString(*amount, 10)
	}
	return v, nil
}
