package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// Open lists a signer's transactions in the given states, in acceptance
// order, at most limit: the worker's queue.
func (s *Store) Open(ctx context.Context, key txmanager.SignerKey, states []txmanager.State, limit int) ([]txmanager.Tx, error) {
	names := make([]string, len(states))
	for i, st := range states {
		names[i] = string(st)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+txColumns+` FROM tx
		WHERE chain_id = $1 AND signer = $2 AND state = ANY($3)
		  AND state NOT IN ('CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED')
		ORDER BY accept_seq LIMIT $4`, int64(key.ChainID), key.Signer.Bytes(), names, limit)
	if err != nil {
		return nil, fmt.Errorf("open transactions of %s: %w", key, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Tx, error) { return scanTx(r) })
}

// SetSubState changes a transaction's sub-state within its state (a hold
// for funds or a dependency), under the fence, with its event; no change
// writes nothing.
func (s *Store) SetSubState(ctx context.Context, f txmanager.Fence, id uuid.UUID, state txmanager.State, sub txmanager.SubState, reason string) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var cur string
		if err := tx.QueryRow(ctx, `SELECT coalesce(sub_state, '') FROM tx WHERE tx_id = $1 FOR UPDATE`, id).Scan(&cur); err != nil {
			return err
		}
		if txmanager.SubState(cur) == sub {
			var err error
			out, err = scanTx(tx.QueryRow(ctx, `SELECT `+txColumns+` FROM tx WHERE tx_id = $1`, id))
			return err
		}
		var subArg *string
		if sub != txmanager.SubNone {
			v := string(sub)
			subArg = &v
		}
		var err error
		out, err = move(ctx, tx, f, id, []txmanager.State{state}, state, `, sub_state = $6, reason = nullif($7, '')`,
			[]any{subArg, reason}, txmanager.StateChanged{SubState: sub, Reason: reason})
		return err
	})
	return out, err
}

// RawAttempt is the raw signed transaction of a transaction's current
// attempt.
func (s *Store) RawAttempt(ctx context.Context, id uuid.UUID) ([]byte, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT a.raw FROM attempt a JOIN tx t ON t.tx_id = a.tx_id AND a.attempt = t.current_attempt
		WHERE a.tx_id = $1`, id).Scan(&raw)
	if err != nil {
		return nil, fmt.Errorf("the signed attempt of %s: %w", id, err)
	}
	return raw, nil
}
