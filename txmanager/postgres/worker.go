package postgres

import (
	"context"
	"fmt"
	"math/big"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/worker.sql.
var (
	qOpenTxs      = query("OpenTxs")
	qParentStates = query("ParentStates")
	qCountOpenTxs = query("CountOpenTxs")
	qLockSubState = query("LockSubState")
	qRawAttempts  = query("RawAttempts")
	qSignerStatus = query("SignerStatus")
	qPendingCost  = query("PendingCost")
)

// Open lists a signer's transactions in the given states, in acceptance
// order, at most limit: the worker's queue.
func (s *Store) Open(ctx context.Context, key txmanager.SignerKey, states []txmanager.State, limit int) ([]txmanager.Tx, error) {
	return s.OpenAfter(ctx, key, states, uuid.Nil, limit)
}

// OpenAfter is Open from the transaction after the one after (uuid.Nil:
// from the first): a page of the queue.
func (s *Store) OpenAfter(ctx context.Context, key txmanager.SignerKey, states []txmanager.State, after uuid.UUID, limit int) ([]txmanager.Tx, error) {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	var from *uuid.UUID
	if after != uuid.Nil {
		from = &after
	}
	rows, err := s.pool.Query(ctx, qOpenTxs.SQL, int64(key.ChainID), key.Signer.Bytes(), names, limit, from)
	if err != nil {
		return nil, fmt.Errorf("open transactions of %s: %w", key, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Tx, error) { return scanTx(r) })
}

// ParentStates reads the states of the transactions ids in one statement;
// an id with no transaction is absent from the map.
func (s *Store) ParentStates(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]txmanager.State, error) {
	out := make(map[uuid.UUID]txmanager.State, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, qParentStates.SQL, ids)
	if err != nil {
		return nil, fmt.Errorf("read the states of %d transactions: %w", len(ids), err)
	}
	var id uuid.UUID
	var state string
	_, err = pgx.ForEachRow(rows, []any{&id, &state}, func() error {
		out[id] = txmanager.State(state)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the states of %d transactions: %w", len(ids), err)
	}
	return out, nil
}

// CountOpen counts a signer's transactions in the given states.
func (s *Store) CountOpen(ctx context.Context, key txmanager.SignerKey, states []txmanager.State) (int, error) {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	var n int
	err := s.pool.QueryRow(ctx, qCountOpenTxs.SQL, int64(key.ChainID), key.Signer.Bytes(), names).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count open transactions of %s: %w", key, err)
	}
	return n, nil
}

// SetSubState changes a transaction's sub-state within its state (a hold
// for funds or a dependency), under the fence, with its event; no change
// writes nothing.
func (s *Store) SetSubState(ctx context.Context, f txmanager.Fence, id uuid.UUID, state txmanager.State, sub txmanager.SubState, reason string) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var cur string
		if err := tx.QueryRow(ctx, qLockSubState.SQL, id).Scan(&cur); err != nil {
			return err
		}
		if txmanager.SubState(cur) == sub {
			var err error
			out, err = scanTx(tx.QueryRow(ctx, qGetTx.SQL, id))
			return err
		}
		var subArg *string
		if sub != txmanager.SubNone {
			v := string(sub)
			subArg = &v
		}
		var err error
		out, err = move(ctx, tx, f, qMoveSubState, id, []txmanager.State{state}, state,
			txmanager.StateChanged{SubState: sub, Reason: reason}, subArg, reason)
		return err
	})
	return out, err
}

// RawAttempts are the raw signed transactions of the transactions'
// current attempts, by transaction; one without an attempt is absent.
func (s *Store) RawAttempts(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]byte, error) {
	rows, err := s.pool.Query(ctx, qRawAttempts.SQL, ids)
	if err != nil {
		return nil, fmt.Errorf("signed attempts: %w", err)
	}
	out := make(map[uuid.UUID][]byte, len(ids))
	var id uuid.UUID
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		out[id] = raw
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("signed attempts: %w", err)
	}
	return out, nil
}

// Status reads a signer's status in one statement.
func (s *Store) Status(ctx context.Context, key txmanager.SignerKey) (txmanager.SignerStatus, error) {
	st := txmanager.SignerStatus{Key: key, Counts: map[txmanager.State]int{}}
	var owner *string
	var token *int64
	var next *int64
	var counts map[string]int
	err := s.pool.QueryRow(ctx, qSignerStatus.SQL, int64(key.ChainID), key.Signer.Bytes()).Scan(&owner, &token, &st.LeaseExpiresAt, &next, &counts, &st.OldestOpenSince)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", key, err)
	}
	if owner != nil {
		st.Owner = *owner
	}
	if token != nil {
		st.Token = *token
	}
	if next != nil {
		n := uint64(*next)
		st.NextNonce = &n
	}
	for k, v := range counts {
		st.Counts[txmanager.State(k)] = v
	}
	return st, nil
}

// PendingCost is the most a signer's open transactions may still take
// from its balance: value + fee cap × gas limit of every transaction that
// passed simulation and is not yet mined, judged by its nonce against the
// chain's mined nonce (a transaction below it is mined, by us or anyone,
// and already paid for in the balance). A transaction not yet signed is
// priced at its own fee cap, else at feeCap, the market's cap now.
func (s *Store) PendingCost(ctx context.Context, key txmanager.SignerKey, minedNonce uint64, feeCap *big.Int) (*big.Int, error) {
	var total string
	err := s.pool.QueryRow(ctx, qPendingCost.SQL, int64(key.ChainID), key.Signer.Bytes(), int64(minedNonce), feeCap.String()).Scan(&total)
	if err != nil {
		return nil, fmt.Errorf("pending cost of %s: %w", key, err)
	}
	v, ok := new(big.Int).SetString(total, 10)
	if !ok {
		return nil, fmt.Errorf("pending cost of %s: %q is not an integer", key, total)
	}
	return v, nil
}
