package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/gaps.sql.
var (
	qCheckRelease      = query("CheckRelease")
	qRewindNonceCursor = fenced("RewindNonceCursor")
	qLockGap           = query("LockGap")
	qInsertGapFiller   = fenced("InsertGapFiller")
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
		var lowest *int64
		var blocked bool
		err := tx.QueryRow(ctx, qCheckRelease.SQL, int64(f.Key.ChainID), f.Key.Signer.Bytes(), ids).Scan(&lowest, &blocked)
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
			var waitsUntil *time.Time // approval_expires_at stays unless it waits again
			if r.To == txmanager.StatePendingApproval {
				waitsUntil = &r.ApprovalExpires
			}
			t, err := move(ctx, tx, f, qMoveGivingUpNonce, r.TxID, []txmanager.State{txmanager.StateAllocated}, r.To,
				txmanager.StateChanged{Reason: r.Reason}, r.Reason, waitsUntil)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		_, err = qRewindNonceCursor.exec(ctx, tx, f, *lowest)
		return err
	})
	return out, err
}

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
	if err := tx.QueryRow(ctx, qLockGap.SQL, id, states).Scan(&nonce, &route); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return failed, filler, whyNotMoved(ctx, tx, f, id, from)
		}
		return failed, filler, fmt.Errorf("fill the gap of %s: %w", id, err)
	}
	failed, err = move(ctx, tx, f, qMoveGivingUpNonce, id, from, txmanager.StateFailed, txmanager.StateChanged{Reason: reason}, reason, nil)
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
	// The filler's chain and signer are the fence's ($1, $2).
	filler, err = scanTx(qInsertGapFiller.queryRow(ctx, tx, f, append([]any{fid, in.RequestID, hash[:], in.To.Bytes(), string(in.Route), metadata(in.Metadata), nonce},
		signingFeeArgs(fees)...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return failed, filler, &txmanager.FencedError{Fence: f, Op: "fill the gap of " + id.String()}
	}
	if err != nil {
		return failed, filler, err
	}
	n := uint64(nonce)
	return failed, filler, insertEvent(ctx, tx, &filler, txmanager.StateChanged{ToState: txmanager.StateAllocated, Nonce: &n, Reason: txmanager.ReasonGapFill})
}
