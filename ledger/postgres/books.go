package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
)

// Store is ledgerd's PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// accounts caches account ids: accounts never change, and an id is
	// cached only once the transaction that made it has committed.
	accounts sync.Map // ledger.AccountKey -> int64
}

// New returns a store on pool, whose schema Migrations produced.
func New(pool *pgxpool.Pool, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{pool: pool, log: log}
}

// Posted is the outcome of a Post.
type Posted struct {
	JournalID int64
	// Created is false when the journal had been booked before (a replay).
	Created bool
}

// Post books j: its journal and entries in one transaction, which the
// database refuses unless the legs balance per asset. Booking the same
// fact again (the same key and payload) books nothing and answers with the
// journal booked before; the same key with another payload is an
// errs.Conflict, logged as an alert: two different facts claim one key.
// Contention (deadlocks, serialization failures) is retried, not returned.
func (s *Store) Post(ctx context.Context, j *ledger.Journal) (Posted, error) {
	if err := j.Validate(); err != nil {
		return Posted{}, errs.Wrap(errs.Invalid, "journal "+j.Key, err)
	}
	hash := j.PayloadHash()
	var out Posted
	var made map[ledger.AccountKey]int64
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		ids, fresh, err := s.accountIDs(ctx, tx, j.Legs)
		if err != nil {
			return err
		}
		made = fresh
		out, err = insertJournal(ctx, tx, j, hash, ids)
		return err
	})
	if err != nil {
		return Posted{}, s.classify(err, j)
	}
	for k, id := range made {
		s.accounts.Store(k, id)
	}
	return out, nil
}

// accountIDs returns the id of every leg's account, making the missing
// ones; fresh are those read or made in tx, to cache once it commits.
func (s *Store) accountIDs(ctx context.Context, tx pgx.Tx, legs []ledger.Leg) (ids, fresh map[ledger.AccountKey]int64, err error) {
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
	if _, err := tx.Exec(ctx, `
		INSERT INTO account (chain_id, asset, kind, address)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[])
		ORDER BY 1, 2, 3, 4
		ON CONFLICT DO NOTHING`, chains, assets, kinds, addrs); err != nil {
		return nil, nil, fmt.Errorf("make accounts: %w", err)
	}
	rows, err := tx.Query(ctx, `
		SELECT account_id, chain_id, asset, kind, address FROM account
		WHERE (chain_id, asset, kind, address) IN (SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bytea[]))`,
		chains, assets, kinds, addrs)
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

// insertJournal writes j and its entries, or finds j booked before.
func insertJournal(ctx context.Context, tx pgx.Tx, j *ledger.Journal, hash [32]byte, ids map[ledger.AccountKey]int64) (Posted, error) {
	var txHash, blockHash []byte
	var blockNumber *int64
	if j.TxHash != nil {
		txHash = j.TxHash.Bytes()
	}
	if j.Block != nil {
		n := int64(j.Block.Number)
		blockNumber, blockHash = &n, j.Block.Hash.Bytes()
	}
	var status, reverses, memo any
	if j.Status != "" {
		status = j.Status
	}
	if j.Reverses != 0 {
		reverses = j.Reverses
	}
	if j.Memo != nil {
		memo = string(j.Memo)
	} else {
		memo = "{}"
	}
	var id int64
	err := tx.QueryRow(ctx, `
		INSERT INTO journal (kind, idem_key, payload_hash, chain_id, tx_hash, block_number, block_hash, status, reverses, memo)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (idem_key) DO NOTHING
		RETURNING journal_id`,
		string(j.Kind), j.Key, hash[:], int64(j.ChainID), txHash, blockNumber, blockHash, status, reverses, memo).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return booked(ctx, tx, j.Key, hash)
	}
	if err != nil {
		return Posted{}, err
	}
	journals, accounts, amounts := make([]int64, len(j.Legs)), make([]int64, len(j.Legs)), make([]string, len(j.Legs))
	for i, l := range j.Legs {
		journals[i], accounts[i], amounts[i] = id, ids[l.Account], l.Amount.String()
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO entry (journal_id, account_id, amount)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::numeric[])`, journals, accounts, amounts); err != nil {
		return Posted{}, err
	}
	return Posted{JournalID: id, Created: true}, nil
}

// booked reads the journal holding key: a replay when its payload is the
// same, a conflict otherwise.
func booked(ctx context.Context, tx pgx.Tx, key string, hash [32]byte) (Posted, error) {
	var id int64
	var stored []byte
	if err := tx.QueryRow(ctx, `SELECT journal_id, payload_hash FROM journal WHERE idem_key = $1`, key).Scan(&id, &stored); err != nil {
		return Posted{}, fmt.Errorf("read journal %q: %w", key, err)
	}
	if !bytes.Equal(stored, hash[:]) {
		return Posted{}, &keyConflict{key: key, id: id}
	}
	return Posted{JournalID: id}, nil
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
	err := s.pool.QueryRow(ctx, `
		SELECT b.amount::text FROM account a LEFT JOIN balance b USING (account_id)
		WHERE a.chain_id = $1 AND a.asset = $2 AND a.kind = $3 AND a.address = $4`,
		int64(k.ChainID), k.Asset, string(k.Kind), k.Address.Bytes()).Scan(&amount)
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
