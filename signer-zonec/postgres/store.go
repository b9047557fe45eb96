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

// The statements of queries/store.sql.
var (
	qNow              = Queries.Use("Now")
	qCreateSignerLock = Queries.Use("CreateSignerLock")
	qLockSigner       = Queries.Use("LockSigner")
	qSigned           = Queries.Use("Signed")
	qFirstOfTx        = Queries.Use("FirstOfTx")
	qNextNonces       = Queries.Use("NextNonces")
	qSpent            = Queries.Use("Spent")
	qSpentToken       = Queries.Use("SpentToken")
	qFees             = Queries.Use("Fees")
	qLockAuditHead    = Queries.Use("LockAuditHead")
	qAppendAudit      = Queries.Use("AppendAudit")
	qAdvanceAuditHead = Queries.Use("AdvanceAuditHead")
	qRecordSignatures = Queries.Use("RecordSignatures")
	qAuditPage        = Queries.Use("AuditPage")
	qAuditHead        = Queries.Use("AuditHead")
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
// concurrent signers. Each StoreTx method is one round trip, Append two.
func (s *Store) InTx(ctx context.Context, fn func(signer.StoreTx) error) error {
	return pg.InTx(ctx, s.pool, pg.TxOptions{TxOptions: pgx.TxOptions{BeginQuery: beginTx}}, func(tx pgx.Tx) error { return fn(storeTx{tx}) })
}

// beginTx starts the transaction and has its statements run on generic
// plans. The batch statements take arrays, whose length PostgreSQL knows
// only when it plans for the values at hand, so left alone it never
// settles on a cached plan and plans them again at every execution, which
// costs more than running a small batch; their generic plans are the index
// lookups every batch size wants. Both statements go in one round trip:
// without arguments, pgx sends them over the simple protocol. This is the
// one piece of the store's SQL that is not in queries/: a named query is
// one statement, which the server prepares (pgtest.RequireQueries does),
// and sending the SET on its own would cost every batch a round trip.
const beginTx = `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan`

type storeTx struct{ tx pgx.Tx }

func (t storeTx) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := t.tx.QueryRow(ctx, qNow.SQL).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read the database clock: %w", err)
	}
	return now, nil
}

// LockSigners takes the locks in one round trip: the statements of a
// batch run one after another, in the order given.
func (t storeTx) LockSigners(ctx context.Context, keys []signer.SignerKey) error {
	batch := &pgx.Batch{}
	for _, k := range keys {
		// Insert the row the first time a signer is seen, then lock it.
		batch.Queue(qCreateSignerLock.SQL, int64(k.ChainID), k.From.Bytes())
		batch.Queue(qLockSigner.SQL, int64(k.ChainID), k.From.Bytes())
	}
	br := t.tx.SendBatch(ctx, batch)
	defer br.Close()
	for _, k := range keys {
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("lock signer %s: %w", k.From.Hex(), err)
			}
		}
	}
	return br.Close()
}

// Signed reads every nonce of a batch in one query.
func (t storeTx) Signed(ctx context.Context, at []signer.NonceKey) (map[signer.NonceKey][]signer.Signed, error) {
	chainIDs, signers, nonces := make([]int64, len(at)), make([][]byte, len(at)), make([]int64, len(at))
	for i, k := range at {
		chainIDs[i], signers[i], nonces[i] = int64(k.ChainID), k.From.Bytes(), int64(k.Nonce)
	}
	rows, err := t.tx.Query(ctx, qSigned.SQL, chainIDs, signers, nonces)
	if err != nil {
		return nil, fmt.Errorf("read signatures at %d nonces: %w", len(at), err)
	}
	list, err := pgx.CollectRows(rows, scanSigned)
	if err != nil {
		return nil, fmt.Errorf("read signatures at %d nonces: %w", len(at), err)
	}
	signed := make(map[signer.NonceKey][]signer.Signed)
	for _, s := range list {
		k := signer.NonceKey{ChainID: s.ChainID, From: s.From, Nonce: s.Nonce}
		signed[k] = append(signed[k], s)
	}
	return signed, nil
}

// scanSigned reads a row of Signed or FirstOfTx.
func scanSigned(row pgx.CollectableRow) (signer.Signed, error) {
	var s signer.Signed
	var chainID, nonce, gas int64
	var from, intent, digest, hash []byte
	var value, feeCap, tipCap pgtype.Numeric
	var kind string
	if err := row.Scan(&chainID, &from, &nonce, &s.TxID, &intent, &digest, &value, &feeCap, &tipCap, &kind, &hash, &s.RawTx, &gas); err != nil {
		return s, err
	}
	s.ChainID, s.From, s.Nonce, s.Gas = uint64(chainID), common.BytesToAddress(from), uint64(nonce), uint64(gas)
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
}

// FirstOfTx reads attempt 1 of each tx id's first nonce: a tx id is at one
// nonce only, so its first signature is the earliest attempt there.
func (t storeTx) FirstOfTx(ctx context.Context, txIDs []string) (map[string]signer.Signed, error) {
	rows, err := t.tx.Query(ctx, qFirstOfTx.SQL, txIDs)
	if err != nil {
		return nil, fmt.Errorf("read signatures of %d tx ids: %w", len(txIDs), err)
	}
	list, err := pgx.CollectRows(rows, scanSigned)
	if err != nil {
		return nil, fmt.Errorf("read signatures of %d tx ids: %w", len(txIDs), err)
	}
	first := make(map[string]signer.Signed, len(list))
	for _, s := range list {
		first[s.TxID] = s
	}
	return first, nil
}

func (t storeTx) NextNonces(ctx context.Context, keys []signer.SignerKey) (map[signer.SignerKey]uint64, error) {
	chainIDs, signers := make([]int64, len(keys)), make([][]byte, len(keys))
	for i, k := range keys {
		chainIDs[i], signers[i] = int64(k.ChainID), k.From.Bytes()
	}
	rows, err := t.tx.Query(ctx, qNextNonces.SQL, chainIDs, signers)
	if err != nil {
		return nil, fmt.Errorf("read the next nonces of %d signers: %w", len(keys), err)
	}
	next := make(map[signer.SignerKey]uint64, len(keys))
	var chainID, nonce int64
	var from []byte
	_, err = pgx.ForEachRow(rows, []any{&chainID, &from, &nonce}, func() error {
		next[signer.SignerKey{ChainID: uint64(chainID), From: common.BytesToAddress(from)}] = uint64(nonce)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the next nonces of %d signers: %w", len(keys), err)
	}
	return next, nil
}

func (t storeTx) Spent(ctx context.Context, chainID uint64, from common.Address, since time.Time) (*big.Int, error) {
	var sum pgtype.Numeric
	err := t.tx.QueryRow(ctx, qSpent.SQL, int64(chainID), from.Bytes(), since).Scan(&sum)
	if err != nil {
		return nil, fmt.Errorf("sum signed value: %w", err)
	}
	return integer(sum)
}

func (t storeTx) SpentToken(ctx context.Context, chainID uint64, from, token common.Address, since time.Time) (*big.Int, error) {
	var sum pgtype.Numeric
	err := t.tx.QueryRow(ctx, qSpentToken.SQL, int64(chainID), from.Bytes(), since, token.Bytes()).Scan(&sum)
	if err != nil {
		return nil, fmt.Errorf("sum signed units of %s: %w", token.Hex(), err)
	}
	return integer(sum)
}

// Fees counts each nonce once, at its costliest signature: only one
// transaction per nonce can be mined.
func (t storeTx) Fees(ctx context.Context, chainID uint64, from common.Address, since time.Time, except uint64) (*big.Int, error) {
	var sum pgtype.Numeric
	err := t.tx.QueryRow(ctx, qFees.SQL, int64(chainID), from.Bytes(), since, int64(min(except, math.MaxInt64))).Scan(&sum)
	if err != nil {
		return nil, fmt.Errorf("sum signed fees: %w", err)
	}
	return integer(sum)
}

// Append takes two round trips: one to lock and read the head, which
// sealing needs, and one for the records and the new head.
func (t storeTx) Append(ctx context.Context, entries []signer.AuditEntry) ([]signer.AuditRecord, error) {
	var seq int64
	var hash []byte
	if err := t.tx.QueryRow(ctx, qLockAuditHead.SQL).Scan(&seq, &hash); err != nil {
		return nil, fmt.Errorf("lock audit head: %w", err)
	}
	head := signer.AuditHead{Seq: uint64(seq), Hash: common.BytesToHash(hash)}
	n := len(entries)
	records := make([]signer.AuditRecord, 0, n)
	seqs, ats, txIDs, chainIDs, signers, nonces := make([]int64, n), make([]time.Time, n), make([]string, n), make([]int64, n), make([][]byte, n), make([]int64, n)
	outcomes, txHashes, bodies, prevHashes, hashes := make([]string, n), make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, e := range entries {
		rec, err := signer.Seal(e, head.Seq+1, head.Hash)
		if err != nil {
			return nil, err
		}
		e = rec.Entry
		if e.TxHash != nil {
			txHashes[i] = e.TxHash.Bytes() // NULL otherwise
		}
		seqs[i], ats[i], txIDs[i], chainIDs[i], signers[i], nonces[i] = int64(e.Seq), e.At, e.TxID, int64(e.ChainID), e.From.Bytes(), int64(e.Nonce)
		outcomes[i], bodies[i], prevHashes[i], hashes[i] = string(e.Outcome), rec.Body, e.PrevHash.Bytes(), rec.Hash.Bytes()
		records = append(records, rec)
		head = signer.AuditHead{Seq: e.Seq, Hash: rec.Hash}
	}
	batch := &pgx.Batch{}
	batch.Queue(qAppendAudit.SQL, seqs, ats, txIDs, chainIDs, signers, nonces, outcomes, txHashes, bodies, prevHashes, hashes)
	batch.Queue(qAdvanceAuditHead.SQL, int64(head.Seq), head.Hash.Bytes())
	if err := t.tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("append audit records: %w", err)
	}
	return records, nil
}

// Record writes the signatures in one statement. Each row's attempt
// follows the attempts stored at its nonce (the statement's subquery sees
// the table as it was before the statement) and those before it in sigs.
func (t storeTx) Record(ctx context.Context, at time.Time, sigs []signer.Signature) error {
	n := len(sigs)
	chainIDs, signers, nonces, kinds, txIDs := make([]int64, n), make([][]byte, n), make([]int64, n), make([]string, n), make([]string, n)
	intents, digests, txHashes, raws := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	values, feeCaps, tipCaps, auditSeqs, gases := make([]pgtype.Numeric, n), make([]pgtype.Numeric, n), make([]pgtype.Numeric, n), make([]int64, n), make([]int64, n)
	tokens, tokenAmounts := make([][]byte, n), make([]pgtype.Numeric, n) // NULL where no token
	for i, s := range sigs {
		kinds[i] = kindNames[s.Reuse]
		if kinds[i] == "" {
			return fmt.Errorf("record signature: %v is not a new signature", s.Reuse)
		}
		if s.Nonce > math.MaxInt64 || s.ChainID > math.MaxInt64 || s.AuditSeq > math.MaxInt64 || s.Gas > math.MaxInt64 {
			return errors.New("record signature: nonce, chain id, gas or audit seq beyond what signerd stores")
		}
		gases[i] = int64(s.Gas)
		if s.Token != nil {
			tokens[i], tokenAmounts[i] = s.Token.Contract.Bytes(), numeric(s.Token.Amount)
		}
		chainIDs[i], signers[i], nonces[i], txIDs[i] = int64(s.ChainID), s.From.Bytes(), int64(s.Nonce), s.TxID
		intents[i], digests[i], txHashes[i], raws[i] = s.Intent[:], s.Digest.Bytes(), s.TxHash.Bytes(), s.RawTx
		values[i], feeCaps[i], tipCaps[i], auditSeqs[i] = numeric(s.Value), numeric(s.FeeCap), numeric(s.TipCap), int64(s.AuditSeq)
	}
	_, err := t.tx.Exec(ctx, qRecordSignatures.SQL,
		chainIDs, signers, nonces, kinds, txIDs, intents, digests, values, feeCaps, tipCaps, txHashes, raws, auditSeqs, at, gases,
		tokens, tokenAmounts)
	if err != nil {
		return fmt.Errorf("record %d signatures: %w", n, err)
	}
	return nil
}

// kindNames are the kinds a signature row may have, by how it reuses its
// nonce; Identical writes no row.
var kindNames = map[signer.Reuse]string{signer.Fresh: "original", signer.Replacement: "replacement", signer.Cancel: "cancel"}

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
	rows, err := q.Query(ctx, qAuditPage.SQL, int64(min(after, math.MaxInt64)), limit)
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
	if err := q.QueryRow(ctx, qAuditHead.SQL).Scan(&seq, &hash); err != nil {
		return signer.AuditHead{}, fmt.Errorf("read audit head: %w", err)
	}
	return signer.AuditHead{Seq: uint64(seq), Hash: common.BytesToHash(hash)}, nil
}

// Pool is the store's pool, for tests and the audit commands.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
