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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/pg"
	signer "github.com/txfence/txfence/signer-zonec"
)

// Store is signerd's PostgreSQL store.
type Store struct {
	pool *pgxpool.Pool
}

var _ signer.Store = (*Store)(nil)

// New returns a store on pool, whose schema Migrations produced.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// InTx runs fn in one read-committed transaction, retried on deadlocks and
// serialization failures. The signer locks, not the isolation level, order
// concurrent signers.
func (s *Store) InTx(ctx context.Context, fn func(signer.StoreTx) error) error {
	return pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error { return fn(storeTx{tx}) })
}

type storeTx struct{ tx pgx.Tx }

func (t storeTx) LockSigners(ctx context.Context, keys []signer.SignerKey) error {
	for _, k := range keys {
		// Insert the row the first time a signer is seen, then lock it.
		if _, err := t.tx.Exec(ctx, `INSERT INTO signer_lock (chain_id, signer) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			int64(k.ChainID), k.From.Bytes()); err != nil {
			return fmt.Errorf("lock signer %s: %w", k.From.Hex(), err)
		}
		if _, err := t.tx.Exec(ctx, `SELECT 1 FROM signer_lock WHERE chain_id = $1 AND signer = $2 FOR UPDATE`,
			int64(k.ChainID), k.From.Bytes()); err != nil {
			return fmt.Errorf("lock signer %s: %w", k.From.Hex(), err)
		}
	}
	return nil
}

func (t storeTx) Signed(ctx context.Context, chainID uint64, from common.Address, nonce uint64) ([]signer.Signed, error) {
	rows, err := t.tx.Query(ctx, `
		SELECT tx_id, intent, digest, value, fee_cap, tip_cap, kind, tx_hash, raw_tx
		FROM signature WHERE chain_id = $1 AND signer = $2 AND nonce = $3 ORDER BY attempt`,
		int64(chainID), from.Bytes(), int64(nonce))
	if err != nil {
		return nil, fmt.Errorf("read signatures at nonce %d: %w", nonce, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (signer.Signed, error) {
		s := signer.Signed{ChainID: chainID, From: from, Nonce: nonce}
		var intent, digest, hash []byte
		var value, feeCap, tipCap pgtype.Numeric
		var kind string
		if err := row.Scan(&s.TxID, &intent, &digest, &value, &feeCap, &tipCap, &kind, &hash, &s.RawTx); err != nil {
			return s, err
		}
		copy(s.Intent[:], intent)
		s.Digest, s.TxHash = common.BytesToHash(digest), common.BytesToHash(hash)
		var err error
		if s.Value, err = integer(value); err != nil {
			return s, err
		}
		if s.FeeCap, err = integer(feeCap); err != nil {
			return s, err
		}
		if s.TipCap, err = integer(tipCap); err != nil {
			return s, err
		}
		s.Cancel = kind == "cancel"
		return s, nil
	})
}

func (t storeTx) Spent(ctx context.Context, chainID uint64, from common.Address, since time.Time) (*big.Int, error) {
	var sum pgtype.Numeric
	err := t.tx.QueryRow(ctx, `
		SELECT coalesce(sum(value), 0) FROM signature
		WHERE chain_id = $1 AND signer = $2 AND attempt = 1 AND signed_at > $3`,
		int64(chainID), from.Bytes(), since).Scan(&sum)
	if err != nil {
		return nil, fmt.Errorf("sum signed value: %w", err)
	}
	return integer(sum)
}

func (t storeTx) Append(ctx context.Context, entries []signer.AuditEntry) ([]signer.AuditRecord, error) {
	var head signer.AuditHead
	var seq int64
	var hash []byte
	if err := t.tx.QueryRow(ctx, `SELECT seq, hash FROM audit_head FOR UPDATE`).Scan(&seq, &hash); err != nil {
		return nil, fmt.Errorf("lock audit head: %w", err)
	}
	head = signer.AuditHead{Seq: uint64(seq), Hash: common.BytesToHash(hash)}
	records := make([]signer.AuditRecord, 0, len(entries))
	batch := &pgx.Batch{}
	for _, e := range entries {
		rec, err := signer.Seal(e, head.Seq+1, head.Hash)
		if err != nil {
			return nil, err
		}
		var txHash []byte
		if rec.Entry.TxHash != nil {
			txHash = rec.Entry.TxHash.Bytes()
		}
		batch.Queue(`INSERT INTO audit_log (seq, at, tx_id, chain_id, signer, nonce, outcome, tx_hash, body, prev_hash, hash)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			int64(rec.Entry.Seq), rec.Entry.At, rec.Entry.TxID, int64(rec.Entry.ChainID), rec.Entry.From.Bytes(),
			int64(rec.Entry.Nonce), string(rec.Entry.Outcome), txHash, rec.Body, rec.Entry.PrevHash.Bytes(), rec.Hash.Bytes())
		records = append(records, rec)
		head = signer.AuditHead{Seq: rec.Entry.Seq, Hash: rec.Hash}
	}
	batch.Queue(`UPDATE audit_head SET seq = $1, hash = $2`, int64(head.Seq), head.Hash.Bytes())
	if err := t.tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("append audit records: %w", err)
	}
	return records, nil
}

func (t storeTx) Record(ctx context.Context, s signer.Signed, kind signer.Reuse, at time.Time, auditSeq uint64) error {
	kindName := map[signer.Reuse]string{signer.Fresh: "original", signer.Replacement: "replacement", signer.Cancel: "cancel"}[kind]
	if kindName == "" {
		return fmt.Errorf("record signature: %v is not a new signature", kind)
	}
	if s.Nonce > math.MaxInt64 || s.ChainID > math.MaxInt64 {
		return errors.New("record signature: nonce or chain id beyond what signerd stores")
	}
	_, err := t.tx.Exec(ctx, `
		INSERT INTO signature (chain_id, signer, nonce, attempt, kind, tx_id, intent, digest, value, fee_cap, tip_cap,
			tx_hash, raw_tx, signed_at, audit_seq)
		SELECT $1, $2, $3, coalesce(max(attempt), 0) + 1, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14
		FROM signature WHERE chain_id = $1 AND signer = $2 AND nonce = $3`,
		int64(s.ChainID), s.From.Bytes(), int64(s.Nonce), kindName, s.TxID, s.Intent[:], s.Digest.Bytes(),
		numeric(s.Value), numeric(s.FeeCap), numeric(s.TipCap), s.TxHash.Bytes(), s.RawTx, at, int64(auditSeq))
	if err != nil {
		return fmt.Errorf("record signature at nonce %d: %w", s.Nonce, err)
	}
	return nil
}

func numeric(v *big.Int) pgtype.Numeric { return pgtype.Numeric{Int: new(big.Int).Set(v), Valid: true} }

// integer converts a scale-0 numeric to a big.Int. PostgreSQL may send 60
// as 6 × 10¹, so the exponent must be applied, not dropped.
func integer(n pgtype.Numeric) (*big.Int, error) {
	if !n.Valid || n.NaN || n.InfinityModifier != pgtype.Finite {
		return nil, fmt.Errorf("numeric %v is not an integer", n)
	}
	v := new(big.Int).Set(n.Int)
	switch {
	case n.Exp > 0:
		v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.Exp)), nil))
	case n.Exp < 0:
		div, rem := new(big.Int).QuoRem(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-n.Exp)), nil), new(big.Int))
		if rem.Sign() != 0 {
			return nil, fmt.Errorf("numeric %v has a fraction", n)
		}
		v = div
	}
	return v, nil
}

// Audit reads up to limit audit records after seq, in order.
func (s *Store) Audit(ctx context.Context, after uint64, limit int) ([]signer.AuditRecord, error) {
	return readAudit(ctx, s.pool, after, limit)
}

// AuditHead reads the head of the chain.
func (s *Store) AuditHead(ctx context.Context) (signer.AuditHead, error) {
	return readHead(ctx, s.pool)
}

// querier reads: the pool, or a snapshot transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inSnapshot runs fn on one read-only repeatable-read snapshot: the head
// and every record as of one moment, however many appends run meanwhile.
func (s *Store) inSnapshot(ctx context.Context, fn func(querier) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return fn(tx) })
}

func readAudit(ctx context.Context, q querier, after uint64, limit int) ([]signer.AuditRecord, error) {
	rows, err := q.Query(ctx, `
		SELECT seq, at, tx_id, chain_id, signer, nonce, outcome, tx_hash, body, prev_hash, hash
		FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2`, int64(min(after, math.MaxInt64)), limit)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (signer.AuditRecord, error) {
		var r signer.AuditRecord
		var seq, chainID, nonce int64
		var from, txHash, prevHash, hash []byte
		var outcome string
		if err := row.Scan(&seq, &r.Entry.At, &r.Entry.TxID, &chainID, &from, &nonce, &outcome, &txHash, &r.Body, &prevHash, &hash); err != nil {
			return r, err
		}
		r.Entry.Seq, r.Entry.ChainID, r.Entry.Nonce = uint64(seq), uint64(chainID), uint64(nonce)
		r.Entry.From, r.Entry.Outcome = common.BytesToAddress(from), signer.Outcome(outcome)
		r.Entry.PrevHash, r.Hash = common.BytesToHash(prevHash), common.BytesToHash(hash)
		if txHash != nil {
			h := common.BytesToHash(txHash)
			r.Entry.TxHash = &h
		}
		return r, nil
	})
}

func readHead(ctx context.Context, q querier) (signer.AuditHead, error) {
	var seq int64
	var hash []byte
	if err := q.QueryRow(ctx, `SELECT seq, hash FROM audit_head`).Scan(&seq, &hash); err != nil {
		return signer.AuditHead{}, fmt.Errorf("read audit head: %w", err)
	}
	return signer.AuditHead{Seq: uint64(seq), Hash: common.BytesToHash(hash)}, nil
}

// Pool is the store's pool, for tests and the audit commands.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
