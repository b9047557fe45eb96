package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

// The state changes of the owner's worker. Each runs in one transaction
// whose every write is fenced: conditioned, in the same statement, on the
// worker's node holding the signer's current unexpired lease. A fenced
// write that touches nothing rolls the whole transaction back and returns
// a *txmanager.FencedError: the node must stop working on the signer.

// fencedTx runs fn in a transaction on f's signer.
func (s *Store) fencedTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pg.InTx(ctx, s.pool, pg.TxOptions{}, fn)
}

// move changes one transaction's state from one of from to `to`, setting
// the extra columns given, under the fence, and writes its event. It
// returns the transaction as changed.
func move(ctx context.Context, tx pgx.Tx, f txmanager.Fence, id uuid.UUID, from []txmanager.State, to txmanager.State,
	set string, setArgs []any, ev txmanager.StateChanged) (txmanager.Tx, error) {
	states := make([]string, len(from))
	for i, s := range from {
		states[i] = string(s)
	}
	args := append([]any{id, states, string(to), int64(f.Key.ChainID), f.Key.Signer.Bytes()}, setArgs...)
	fence, fenceArgs := FenceSQL(f, len(args))
	args = append(args, fenceArgs...)
	// Lock the row first: the state read is the one the update replaces.
	var prev string
	if err := tx.QueryRow(ctx, `SELECT state FROM tx WHERE tx_id = $1 FOR UPDATE`, id).Scan(&prev); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return txmanager.Tx{}, fmt.Errorf("no transaction %s", id)
		}
		return txmanager.Tx{}, err
	}
	sql := `
		UPDATE tx SET state = $3, updated_at = now()` + set + `
		WHERE tx_id = $1 AND state = ANY($2) AND chain_id = $4 AND signer = $5 AND ` + fence + `
		RETURNING ` + txColumns
	t, err := scanTx(tx.QueryRow(ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, whyNotMoved(ctx, tx, f, id, from)
	}
	if err != nil {
		return t, err
	}
	ev.FromState, ev.ToState = txmanager.State(prev), to
	return t, insertEvent(ctx, tx, &t, ev)
}

// whyNotMoved tells a fenced write that touched nothing from a
// transaction that was not in an expected state (cancelled meanwhile).
func whyNotMoved(ctx context.Context, tx pgx.Tx, f txmanager.Fence, id uuid.UUID, from []txmanager.State) error {
	fence, fenceArgs := FenceSQL(f, 0)
	var held bool
	if err := tx.QueryRow(ctx, `SELECT `+fence, fenceArgs...).Scan(&held); err != nil {
		return err
	}
	if !held {
		return &txmanager.FencedError{Fence: f, Op: "state change of " + id.String()}
	}
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM tx WHERE tx_id = $1`, id).Scan(&state)
	if err != nil {
		return fmt.Errorf("transaction %s: %w", id, err)
	}
	return &txmanager.StateError{TxID: id, State: txmanager.State(state), Want: from}
}

// Simulated records a passed simulation: INIT → SIMULATED with the gas
// limit fixed.
func (s *Store) Simulated(ctx context.Context, f txmanager.Fence, id uuid.UUID, gasLimit uint64) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, id, []txmanager.State{txmanager.StateInit}, txmanager.StateSimulated,
			`, gas_limit = $6, sub_state = NULL`, []any{int64(gasLimit)}, txmanager.StateChanged{})
		return err
	})
	return out, err
}

// Fail ends a transaction that has no signature as FAILED, why giving the
// reason (and the rule or the decoded revert reason, if any). A nonce it
// held is given up with it: only transactions not yet signed are failed
// here, and the caller settles its cursor again.
func (s *Store) Fail(ctx context.Context, f txmanager.Fence, id uuid.UUID, why txmanager.StateChanged) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, id, []txmanager.State{txmanager.StateInit, txmanager.StateSimulated, txmanager.StatePendingApproval, txmanager.StateAllocated},
			txmanager.StateFailed, `, sub_state = NULL, reason = $6, nonce = NULL`+clearSigningFees, []any{why.Reason}, why)
		return err
	})
	return out, err
}

// Allocate gives consecutive nonces from first to the transactions of ids
// that are still SIMULATED, in the order given, with the fees each will be
// signed with (fees[i] for ids[i]), moves them to ALLOCATED and advances
// the signer's cursor past them, all in one fenced transaction. It
// returns the allocated transactions (those cancelled meanwhile are left
// out, and take no nonce).
func (s *Store) Allocate(ctx context.Context, f txmanager.Fence, ids []uuid.UUID, fees []txmanager.Fees, first uint64) ([]txmanager.Tx, error) {
	if len(fees) != len(ids) {
		return nil, fmt.Errorf("allocate: %d transactions, %d fees", len(ids), len(fees))
	}
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := tx.Query(ctx, `SELECT tx_id FROM tx WHERE tx_id = ANY($1) AND state = 'SIMULATED' FOR UPDATE`, ids)
		if err != nil {
			return err
		}
		ready, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		still := map[uuid.UUID]bool{}
		for _, id := range ready {
			still[id] = true
		}
		next := first
		for i, id := range ids {
			if !still[id] {
				continue
			}
			n := next
			t, err := move(ctx, tx, f, id, []txmanager.State{txmanager.StateSimulated}, txmanager.StateAllocated,
				`, nonce = $6`+setSigningFees(7), append([]any{int64(n)}, signingFeeArgs(fees[i])...), txmanager.StateChanged{Nonce: &n})
			if err != nil {
				return err
			}
			out = append(out, t)
			next++
		}
		if next == first {
			return nil
		}
		args := []any{int64(f.Key.ChainID), f.Key.Signer.Bytes(), int64(next)}
		fence, fenceArgs := FenceSQL(f, len(args))
		tag, err := tx.Exec(ctx, `
			INSERT INTO nonce_cursor AS c (chain_id, signer, next_nonce) SELECT $1, $2, $3 WHERE `+fence+`
			ON CONFLICT (chain_id, signer) DO UPDATE SET next_nonce = GREATEST(c.next_nonce, EXCLUDED.next_nonce)`,
			append(args, fenceArgs...)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &txmanager.FencedError{Fence: f, Op: "advance the nonce cursor"}
		}
		return nil
	})
	return out, err
}

// setSigningFees sets the signing fee columns from three arguments from
// $first on (signingFeeArgs).
func setSigningFees(first int) string {
	return fmt.Sprintf(`, signing_max_fee_per_gas = $%d, signing_max_priority_fee_per_gas = $%d, signing_gas_price = $%d`, first, first+1, first+2)
}

func signingFeeArgs(f txmanager.Fees) []any {
	return []any{optNumeric(f.MaxFeePerGas), optNumeric(f.MaxPriorityFeePerGas), optNumeric(f.GasPrice)}
}

// Attempt is one signed attempt of a transaction, to store.
type Attempt struct {
	TxID                 uuid.UUID
	Raw                  []byte
	Hash                 common.Hash
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
	GasPrice             *big.Int
}

// Signed stores a batch's first signed attempts, ALLOCATED → SIGNED, in
// one fenced transaction: the raw transactions and hashes are durable
// before anything is broadcast, and the batch costs one commit.
func (s *Store) Signed(ctx context.Context, f txmanager.Fence, attempts []Attempt) ([]txmanager.Tx, error) {
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		for _, a := range attempts {
			_, err := tx.Exec(ctx, `
				INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price)
				SELECT tx_id, 1, nonce, $2, $3, $4, $5, $6 FROM tx WHERE tx_id = $1 AND state = 'ALLOCATED'`,
				a.TxID, a.Hash.Bytes(), a.Raw, optNumeric(a.MaxFeePerGas), optNumeric(a.MaxPriorityFeePerGas), optNumeric(a.GasPrice))
			if err != nil {
				return fmt.Errorf("store the attempt of %s: %w", a.TxID, err)
			}
			h := a.Hash
			t, err := move(ctx, tx, f, a.TxID, []txmanager.State{txmanager.StateAllocated}, txmanager.StateSigned,
				`, current_attempt = 1, sub_state = NULL, reason = NULL`, nil, txmanager.StateChanged{Hash: &h})
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// Sent is a transaction whose current attempt a route accepted.
type Sent struct {
	TxID  uuid.UUID
	Route txmanager.Route
}

// Broadcasted records accepted broadcasts, SIGNED → BROADCASTED, in one
// fenced transaction.
func (s *Store) Broadcasted(ctx context.Context, f txmanager.Fence, sent []Sent, at time.Time) ([]txmanager.Tx, error) {
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		for _, b := range sent {
			t, err := move(ctx, tx, f, b.TxID, []txmanager.State{txmanager.StateSigned}, txmanager.StateBroadcasted,
				`, sub_state = NULL, reason = NULL`, nil, txmanager.StateChanged{Route: b.Route})
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE attempt SET route = $2, sent_at = $3
				WHERE tx_id = $1 AND attempt = (SELECT current_attempt FROM tx WHERE tx_id = $1)`, b.TxID, string(b.Route), at)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// PendingApproval parks a simulated transaction until approvals arrive:
// INIT → PENDING_APPROVAL with its gas limit fixed and the time it stops
// waiting.
func (s *Store) PendingApproval(ctx context.Context, f txmanager.Fence, id uuid.UUID, gasLimit uint64, expires time.Time, why txmanager.StateChanged) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, id, []txmanager.State{txmanager.StateInit}, txmanager.StatePendingApproval,
			`, gas_limit = $6, approval_expires_at = $7, sub_state = NULL, reason = nullif($8, '')`,
			[]any{int64(gasLimit), expires, why.Reason}, why)
		return err
	})
	return out, err
}
