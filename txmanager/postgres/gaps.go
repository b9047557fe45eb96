package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// What to do with an allocated transaction that signerd refused to sign.

// ReleaseNonces gives back the nonces of allocated transactions signerd refused,
// in one fenced transaction, and only while no later nonce of the signer
// is held by a transaction not in rs (SYSTEM.md invariant 1): otherwise it
// changes nothing and returns ErrLaterNonceSigned. The cursor goes back to
// the lowest released nonce when nothing was allocated past the released
// ones; the caller settles its next nonce again.
func (s *Store) ReleaseNonces(ctx context.Context, f txmanager.Fence, rs []txmanager.NonceRelease) ([]txmanager.Tx, error) {
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		ids := make([]uuid.UUID, len(rs))
		for i, r := range rs {
			ids[i] = r.TxID
		}
		// The cursor's row lock keeps a concurrent allocation (there is
		// none under the fence, but a stale owner's would wait and fail).
		var lowest *int64
		var blocked bool
		err := tx.QueryRow(ctx, `
			WITH cursor AS (SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2 FOR UPDATE),
			     released AS (SELECT min(nonce) AS lowest FROM tx WHERE tx_id = ANY($3) AND state = 'ALLOCATED')
			SELECT (SELECT lowest FROM released),
				EXISTS (SELECT 1 FROM tx, released WHERE chain_id = $1 AND signer = $2 AND nonce > released.lowest
					AND NOT (tx_id = ANY($3) AND state = 'ALLOCATED'))
			FROM (SELECT count(*) FROM cursor) AS locked`,
			int64(f.Key.ChainID), f.Key.Signer.Bytes(), ids).Scan(&lowest, &blocked)
		if err != nil {
			return err
		}
		if lowest == nil {
			return fmt.Errorf("release: none of %v is ALLOCATED", ids)
		}
		if blocked {
			return txmanager.ErrLaterNonceSigned
		}
		for _, r := range rs {
			set, args := `, nonce = NULL, sub_state = NULL, reason = $6`+clearSigningFees, []any{r.Reason}
			if r.To == txmanager.StatePendingApproval {
				set, args = set+`, approval_expires_at = $7`, append(args, r.ApprovalExpires)
			}
			t, err := move(ctx, tx, f, r.TxID, []txmanager.State{txmanager.StateAllocated}, r.To, set, args,
				txmanager.StateChanged{Reason: r.Reason})
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		args := []any{int64(f.Key.ChainID), f.Key.Signer.Bytes(), *lowest}
		fence, fenceArgs := FenceSQL(f, len(args))
		_, err = tx.Exec(ctx, `UPDATE nonce_cursor SET next_nonce = $3
			WHERE chain_id = $1 AND signer = $2 AND next_nonce > $3
			  AND NOT EXISTS (SELECT 1 FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce >= $3)
			  AND `+fence, append(args, fenceArgs...)...)
		return err
	})
	return out, err
}

// clearSigningFees forgets the fees of a nonce given up.
const clearSigningFees = `, signing_max_fee_per_gas = NULL, signing_max_priority_fee_per_gas = NULL, signing_gas_price = NULL`

// FillGap fails an allocated transaction signerd refused while later
// nonces are signed, and gives its nonce to a new transaction that only
// fills the gap: a 0-value transfer from the signer to itself with 21,000
// gas, ALLOCATED at that nonce, its metadata naming the transaction it
// replaces. Both changes are events, in one fenced transaction; the filler
// goes through signing (signerd's policy must allow it) and broadcast like
// any other.
func (s *Store) FillGap(ctx context.Context, f txmanager.Fence, id uuid.UUID, reason string, fees txmanager.Fees) (failed, filler txmanager.Tx, err error) {
	err = s.fencedTx(ctx, func(tx pgx.Tx) error {
		failed, filler, err = fillGap(ctx, tx, f, id, []txmanager.State{txmanager.StateAllocated}, reason, fees)
		return err
	})
	return failed, filler, err
}

// fillGap is FillGap inside the caller's fenced transaction, for a
// transaction in one of the states from (an operator's abandon takes a
// SIGNED one too: its filler replaces a signed transaction, which signerd
// and the nodes take only at fees 10% above it).
func fillGap(ctx context.Context, tx pgx.Tx, f txmanager.Fence, id uuid.UUID, from []txmanager.State, reason string, fees txmanager.Fees) (failed, filler txmanager.Tx, err error) {
	states := make([]string, len(from))
	for i, st := range from {
		states[i] = string(st)
	}
	var nonce int64
	var route string
	if err := tx.QueryRow(ctx, `SELECT nonce, route FROM tx WHERE tx_id = $1 AND state = ANY($2) FOR UPDATE`, id, states).Scan(&nonce, &route); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return failed, filler, whyNotMoved(ctx, tx, f, id, from)
		}
		return failed, filler, fmt.Errorf("fill the gap of %s: %w", id, err)
	}
	failed, err = move(ctx, tx, f, id, from, txmanager.StateFailed,
		`, nonce = NULL, sub_state = NULL, reason = $6`+clearSigningFees, []any{reason}, txmanager.StateChanged{Reason: reason})
	if err != nil {
		return failed, filler, err
	}
	self := f.Key.Signer
	in := txmanager.Intent{ChainID: f.Key.ChainID, From: self, To: &self, Value: new(big.Int), RequestID: txmanager.GapFillRequestID(id),
		Route: txmanager.RoutePublic, Metadata: json.RawMessage(`{"fills_gap_of": "` + id.String() + `"}`)}
	if err := in.Validate(); err != nil {
		return failed, filler, err
	}
	fid, err := uuid.NewV7()
	if err != nil {
		return failed, filler, err
	}
	hash := in.Hash()
	args := append([]any{fid, int64(in.ChainID), in.From.Bytes(), in.RequestID, hash[:], in.To.Bytes(), string(in.Route), metadata(in.Metadata), nonce},
		signingFeeArgs(fees)...)
	fence, fenceArgs := FenceSQL(f, len(args))
	filler, err = scanTx(tx.QueryRow(ctx, `
		INSERT INTO tx (tx_id, chain_id, signer, request_id, request_hash, to_address, value, data, gas, gas_limit, route, metadata, state, nonce, reason,
			signing_max_fee_per_gas, signing_max_priority_fee_per_gas, signing_gas_price)
		SELECT $1, $2, $3, $4, $5, $6, 0, '', 21000, 21000, $7, $8, 'ALLOCATED', $9, 'gap_fill', $10, $11, $12
		WHERE `+fence+`
		RETURNING `+txColumns, append(args, fenceArgs...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return failed, filler, &txmanager.FencedError{Fence: f, Op: "fill the gap of " + id.String()}
	}
	if err != nil {
		return failed, filler, err
	}
	n := uint64(nonce)
	return failed, filler, insertEvent(ctx, tx, &filler, txmanager.StateChanged{ToState: txmanager.StateAllocated, Nonce: &n, Reason: txmanager.ReasonGapFill})
}
