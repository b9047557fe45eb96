package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/keyset"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/tx.sql.
var (
	qGetTx          = query("GetTx")
	qGetTxByRequest = query("GetTxByRequest")
	qListTxs        = query("ListTxs")
	qLockTxState    = query("LockTxState")
	qCancelTx       = query("CancelTx")
)

// Create accepts an intent: a new INIT transaction and its event, in one
// transaction. The same (chain, from, request id) again answers with the
// transaction already accepted (created false) when the intent is the
// same, and errs.Conflict when it differs: whatever the concurrency, one
// request id is one transaction. Concurrent creates share statements and
// commits (see createQueue).
func (s *Store) Create(ctx context.Context, in *txmanager.Intent) (txmanager.Tx, bool, error) {
	p, err := newPendingCreate(in)
	if err != nil {
		return txmanager.Tx{}, false, err
	}
	s.creates.Add(p)
	return s.await(ctx, p)
}

// CreateMany creates each intent as Create would, and answers in the same
// order. The intents queue together, so they share statements; each
// succeeds or fails on its own.
func (s *Store) CreateMany(ctx context.Context, intents []*txmanager.Intent) []txmanager.CreateResult {
	out := make([]txmanager.CreateResult, len(intents))
	pending := make([]*pendingCreate, 0, len(intents))
	index := make([]int, 0, len(intents))
	for i, in := range intents {
		p, err := newPendingCreate(in)
		if err != nil {
			out[i].Err = err
			continue
		}
		pending, index = append(pending, p), append(index, i)
	}
	s.creates.Add(pending...)
	for j, p := range pending {
		r := &out[index[j]]
		r.Tx, r.Created, r.Err = s.await(ctx, p)
	}
	return out
}

// newPendingCreate checks an intent and prepares its place in the queue.
func newPendingCreate(in *txmanager.Intent) (*pendingCreate, error) {
	if err := in.Validate(); err != nil {
		return nil, txmanager.Invalid(err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	return &pendingCreate{in: in, hash: in.Hash(), id: id, done: make(chan createResult, 1)}, nil
}

// createOne inserts one create alone: the shared statement with a batch
// of one, whose failure is this create's own.
func (s *Store) createOne(ctx context.Context, p *pendingCreate) (txmanager.Tx, bool, error) {
	created, err := s.insertBatch(ctx, []*pendingCreate{p})
	if err != nil {
		return txmanager.Tx{}, false, classifyInsert(err, p.in)
	}
	if t, ok := created[p.id]; ok {
		return t, true, nil
	}
	t, err := s.existing(ctx, p.in, p.hash)
	return t, false, err
}

// existing reads the transaction that holds the request id: the answer to
// a repeated create, or a conflict.
func (s *Store) existing(ctx context.Context, in *txmanager.Intent, hash [32]byte) (txmanager.Tx, error) {
	var stored []byte
	row := s.pool.QueryRow(ctx, qGetTxByRequest.SQL, int64(in.ChainID), in.From.Bytes(), in.RequestID)
	t, err := scanTxWith(row, &stored)
	if err != nil {
		return t, fmt.Errorf("read the transaction of request id %q: %w", in.RequestID, err)
	}
	if i := in.DependsOn.Index(t.ID); i >= 0 {
		return t, errs.InvalidFields(fmt.Sprintf("depends_on/%d: the transaction itself (request_id %q is transaction %s)", i, in.RequestID, t.ID),
			errs.FieldError{Pointer: dependson.Pointer(i), Detail: "the transaction itself"})
	}
	if !bytes.Equal(stored, hash[:]) {
		return t, errs.Errorf(errs.Conflict, "request_id %q was used by transaction %s with another body", in.RequestID, t.ID)
	}
	return t, nil
}

// classifyInsert turns constraint violations into the caller's errors:
// each parent that does not exist is named by its place in depends_on (the
// trigger tx_depends_on_fkey lists them in its DETAIL).
func classifyInsert(err error, in *txmanager.Intent) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" && strings.Contains(pgErr.ConstraintName, "depends_on") {
		var fields []errs.FieldError
		var named []string
		for _, s := range strings.Split(pgErr.Detail, ",") {
			id, err := uuid.Parse(s)
			if i := in.DependsOn.Index(id); err == nil && i >= 0 {
				fields = append(fields, errs.FieldError{Pointer: dependson.Pointer(i), Detail: "no transaction " + id.String()})
				named = append(named, fmt.Sprintf("depends_on/%d: no transaction %s", i, id))
			}
		}
		if len(fields) == 0 {
			return errs.E(errs.Invalid, "depends_on: no such transaction")
		}
		return errs.InvalidFields(strings.Join(named, "; "), fields...)
	}
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		return errs.Errorf(errs.Invalid, "the transaction breaks the rule %s", pgErr.ConstraintName)
	}
	return err
}

// scanTx reads a transaction from the columns every statement that returns
// transactions ends its rows with (see GetTx in queries/tx.sql).
func scanTx(row pgx.Row) (txmanager.Tx, error) { return scanTxWith(row) }

// scanTxWith scans a transaction after the given leading destinations.
func scanTxWith(row pgx.Row, lead ...any) (txmanager.Tx, error) {
	var t txmanager.Tx
	var chainID int64
	var signer, to, hash []byte
	var value, maxFee, maxTip, signFee, signTip, signPrice *string
	var gas, gasLimit, nonce *int64
	var route, state, sub string
	dest := append(lead, &t.ID, &chainID, &signer, &t.RequestID, &to, &value, &t.Data, &gas, &maxFee, &maxTip,
		&route, &t.DependsOn, &t.Metadata, &state, &sub, &t.Reason, &gasLimit, &nonce, &hash, &t.ApprovalExpiresAt,
		&signFee, &signTip, &signPrice, &t.CreatedAt, &t.UpdatedAt)
	if err := row.Scan(dest...); err != nil {
		return t, err
	}
	t.ChainID, t.From, t.Route = uint64(chainID), common.BytesToAddress(signer), txmanager.Route(route)
	t.State, t.SubState = txmanager.State(state), txmanager.SubState(sub)
	if to != nil {
		a := common.BytesToAddress(to)
		t.To = &a
	}
	t.Value = bigOf(value)
	t.MaxFeePerGas, t.MaxPriorityFeePerGas = bigOf(maxFee), bigOf(maxTip)
	t.Gas, t.GasLimit, t.Nonce = uintOf(gas), uintOf(gasLimit), uintOf(nonce)
	if hash != nil {
		h := common.BytesToHash(hash)
		t.Hash = &h
	}
	if signFee != nil || signPrice != nil {
		t.SigningFees = &txmanager.Fees{MaxFeePerGas: bigOf(signFee), MaxPriorityFeePerGas: bigOf(signTip), GasPrice: bigOf(signPrice)}
	}
	return t, nil
}

// Get reads one transaction.
func (s *Store) Get(ctx context.Context, id uuid.UUID) (txmanager.Tx, error) {
	t, err := scanTx(s.pool.QueryRow(ctx, qGetTx.SQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no transaction %s", id)
	}
	return t, err
}

// GetByRequest reads the transaction a signer's request id names.
func (s *Store) GetByRequest(ctx context.Context, key txmanager.SignerKey, requestID string) (txmanager.Tx, error) {
	var requestHash []byte
	t, err := scanTxWith(s.pool.QueryRow(ctx, qGetTxByRequest.SQL, int64(key.ChainID), key.Signer.Bytes(), requestID), &requestHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no transaction of %s with request_id %q", key, requestID)
	}
	return t, err
}

// List returns up to limit transactions matching f, newest first, after
// cursor (from a previous page's next cursor; "" for the first page), and
// the cursor of the next page ("" at the end).
func (s *Store) List(ctx context.Context, f txmanager.TxFilter, cursor string, limit int) ([]txmanager.Tx, string, error) {
	// Every filter is an argument, NULL when unset (queries/tx.sql).
	var chainID, signer, chains, signers, state, subState, after, before, cursorAt, cursorID any
	if f.ChainID != 0 {
		chainID = int64(f.ChainID)
	}
	if f.Signer != nil {
		signer = f.Signer.Bytes()
	}
	if f.Signers != nil {
		ids, addrs := make([]int64, len(f.Signers)), make([][]byte, len(f.Signers))
		for i, k := range f.Signers {
			ids[i], addrs[i] = int64(k.ChainID), k.Signer.Bytes()
		}
		chains, signers = ids, addrs
	}
	if f.State != "" {
		state = string(f.State)
	}
	if f.SubState != "" {
		subState = string(f.SubState)
	}
	if !f.CreatedAfter.IsZero() {
		after = f.CreatedAfter
	}
	if !f.CreatedBefore.IsZero() {
		before = f.CreatedBefore
	}
	if cursor != "" {
		at, id, ok := keyset.Decode(cursor)
		if !ok {
			return nil, "", errs.E(errs.Invalid, "cursor: not a cursor this list issued")
		}
		cursorAt, cursorID = at, uuid.UUID(id)
	}
	// Planned for its arguments at every call (the unnamed statement, its
	// description cached), never by a generic plan kept for the prepared
	// statement: a generic plan cannot drop the filters that are unset,
	// nor use an index for one that is set, and PostgreSQL may keep one
	// after five calls with, say, no filter, for every later call.
	rows, err := s.pool.Query(ctx, qListTxs.SQL, pgx.QueryExecModeCacheDescribe,
		chainID, signer, chains, signers, state, subState, after, before, cursorAt, cursorID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list transactions: %w", err)
	}
	txs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Tx, error) { return scanTx(r) })
	if err != nil {
		return nil, "", fmt.Errorf("list transactions: %w", err)
	}
	next := ""
	if len(txs) > limit {
		txs = txs[:limit]
		last := txs[len(txs)-1]
		next = keyset.Encode(last.CreatedAt, last.ID)
	}
	return txs, next, nil
}

// Cancel cancels a transaction that has no nonce yet. One with a nonce is
// a conflict: its nonce is the signer's, and only a cancel transaction on
// chain (a later issue) can take it back.
func (s *Store) Cancel(ctx context.Context, id uuid.UUID) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		var from string
		err := tx.QueryRow(ctx, qLockTxState.SQL, id).Scan(&from)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "no transaction %s", id)
		}
		if err != nil {
			return err
		}
		switch txmanager.State(from) {
		case txmanager.StateInit, txmanager.StateSimulated, txmanager.StatePendingApproval:
		case txmanager.StateCancelled:
			out, err = scanTx(tx.QueryRow(ctx, qGetTx.SQL, id))
			return err
		default:
			return errs.Errorf(errs.Conflict, "transaction %s is %s: only a transaction without a nonce can be cancelled", id, from)
		}
		t, err := scanTx(tx.QueryRow(ctx, qCancelTx.SQL, id, txmanager.ReasonCancelRequested))
		if err != nil {
			return err
		}
		out = t
		return insertEvent(ctx, tx, &t, txmanager.StateChanged{FromState: txmanager.State(from), ToState: txmanager.StateCancelled, Reason: txmanager.ReasonCancelRequested})
	})
	return out, err
}

func addrBytes(a *common.Address) []byte {
	if a == nil {
		return nil
	}
	return a.Bytes()
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func numeric(v *big.Int) string { return v.String() }

func optNumeric(v *big.Int) *string {
	if v == nil {
		return nil
	}
	s := v.String()
	return &s
}

func optInt(v *uint64) *int64 {
	if v == nil {
		return nil
	}
	n := int64(*v)
	return &n
}

func metadata(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	return raw
}

func bigOf(s *string) *big.Int {
	if s == nil {
		return nil
	}
	v, _ := new(big.Int).SetString(*s, 10)
	return v
}

func uintOf(v *int64) *uint64 {
	if v == nil {
		return nil
	}
	n := uint64(*v)
	return &n
}
