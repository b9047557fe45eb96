package postgres

import (
	"context"
	"fmt"
	"time"

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

// SignerStatus is what an operator asks about a signer: who works on it,
// where its nonces stand and how much is open.
type SignerStatus struct {
	Key            txmanager.SignerKey
	Owner          string // "" when no node holds an unexpired lease
	Token          int64
	LeaseExpiresAt *time.Time
	NextNonce      *uint64 // the cursor; nil before the first allocation
	Counts         map[txmanager.State]int
	// OldestOpenSince is when the oldest transaction not yet terminal was
	// accepted; nil when none is open.
	OldestOpenSince *time.Time
}

// Status reads a signer's status in one statement.
func (s *Store) Status(ctx context.Context, key txmanager.SignerKey) (SignerStatus, error) {
	st := SignerStatus{Key: key, Counts: map[txmanager.State]int{}}
	var owner *string
	var token *int64
	var next *int64
	var counts map[string]int
	err := s.pool.QueryRow(ctx, `
		SELECT
			(SELECT owner_node FROM signer_lease WHERE chain_id = $1 AND signer = $2 AND expires_at > now()),
			(SELECT fencing_token FROM signer_lease WHERE chain_id = $1 AND signer = $2),
			(SELECT expires_at FROM signer_lease WHERE chain_id = $1 AND signer = $2 AND expires_at > now()),
			(SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2),
			coalesce((SELECT jsonb_object_agg(state, n) FROM (SELECT state, count(*) AS n FROM tx
				WHERE chain_id = $1 AND signer = $2 GROUP BY state) c), '{}'),
			(SELECT min(created_at) FROM tx WHERE chain_id = $1 AND signer = $2
				AND state NOT IN ('CONFIRMED', 'REVERTED', 'FAILED', 'CANCELLED'))`,
		int64(key.ChainID), key.Signer.Bytes()).Scan(&owner, &token, &st.LeaseExpiresAt, &next, &counts, &st.OldestOpenSince)
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
