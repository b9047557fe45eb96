package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/replace.sql.
var (
	qPlanAttempt        = fenced("PlanAttempt")
	qIsPlanned          = query("IsPlanned")
	qStoreAttempt       = fenced("StoreAttempt")
	qMakeAttemptCurrent = query("MakeAttemptCurrent")
	qSetWaitingSince    = fenced("SetWaitingSince")
	qDropPlan           = fenced("DropPlan")
)

// Replacement attempts of broadcast transactions: fee bumps and cancels.
// Each is planned (its fees fixed) before signerd is asked, stored before
// it is sent, and both writes are fenced like every other.

// PlanAttempt fixes the next attempt of a BROADCASTED transaction that is
// not mined: the attempt after its highest, with p's kind, gas limit and
// fees. It returns p with its attempt number.
func (s *Store) PlanAttempt(ctx context.Context, f txmanager.Fence, id uuid.UUID, p txmanager.Plan) (txmanager.Plan, error) {
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var attempt int
		err := qPlanAttempt.queryRow(ctx, tx, f, id, p.Kind, int64(p.GasLimit), optNumeric(p.Fees.MaxFeePerGas), optNumeric(p.Fees.MaxPriorityFeePerGas),
			optNumeric(p.Fees.GasPrice), p.ActionID).Scan(&attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			var planned bool
			if err := tx.QueryRow(ctx, qIsPlanned.SQL, id).Scan(&planned); err != nil {
				return err
			}
			if planned {
				return fmt.Errorf("plan an attempt of %s: %w", id, txmanager.ErrPlanned)
			}
			return s.notFollowed(ctx, tx, f, id, "plan an attempt of")
		}
		if err != nil {
			return fmt.Errorf("plan an attempt of %s: %w", id, err)
		}
		p.Attempt = attempt
		return nil
	})
	return p, err
}

// StoreAttempt stores the signed attempt of a plan as the transaction's
// current one, claimed as sent now, with its tx.attempt event (kind and the
// hash it replaces), and marks the operator action behind it done, all in
// one transaction: what is sent afterwards is durable first. A crash
// before the send leaves it to the next resubmission.
func (s *Store) StoreAttempt(ctx context.Context, f txmanager.Fence, id uuid.UUID, p txmanager.Plan, raw []byte, hash common.Hash) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		var (
			nonce    int64
			route    string
			replaces []byte
			sentAt   time.Time
			planFees [3]*string
			gasLimit int64
			kind     string
			actionID *uuid.UUID
		)
		err := qStoreAttempt.queryRow(ctx, tx, f, id, p.Attempt, hash.Bytes(), raw).Scan(&nonce, &route, &replaces, &sentAt, &planFees[0], &planFees[1], &planFees[2],
			&gasLimit, &kind, &actionID)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.notFollowed(ctx, tx, f, id, fmt.Sprintf("store attempt %d of", p.Attempt))
		}
		if err != nil {
			return fmt.Errorf("store attempt %d of %s: %w", p.Attempt, id, err)
		}
		if _, err := tx.Exec(ctx, qMakeAttemptCurrent.SQL, id, p.Attempt); err != nil {
			return fmt.Errorf("store attempt %d of %s: %w", p.Attempt, id, err)
		}
		if actionID != nil {
			if err := actionDone(ctx, tx, *actionID, txmanager.ActionDone, "", &p.Attempt); err != nil {
				return err
			}
		}
		prev := common.BytesToHash(replaces)
		return insertTypedEvent(ctx, tx, txmanager.EventAttempt, id, txmanager.AttemptSent{Attempt: p.Attempt, Kind: kind,
			Nonce: uint64(nonce), Hash: hash, Replaces: &prev, Route: txmanager.Route(route), SentAt: sentAt.UTC(),
			Fees: txmanager.AttemptFees{GasLimit: uint64(gasLimit), MaxFeePerGas: deref(planFees[0]), MaxPriorityFeePerGas: deref(planFees[1]),
				GasPrice: deref(planFees[2])}})
	})
}

// SetWaitingSince stores, with each attempt, the block from which its
// bump_after_blocks counts: where the follower first saw it waiting to be
// mined, or last tried to bump it. One fenced statement; an attempt that is
// no longer the current one of a BROADCASTED transaction not mined is left
// as it is.
func (s *Store) SetWaitingSince(ctx context.Context, f txmanager.Fence, ws []txmanager.Waiting) error {
	if len(ws) == 0 {
		return nil
	}
	ids, attempts, since := make([]uuid.UUID, len(ws)), make([]int32, len(ws)), make([]int64, len(ws))
	for i, w := range ws {
		ids[i], attempts[i], since[i] = w.TxID, int32(w.Attempt), int64(w.Since)
	}
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		tag, err := qSetWaitingSince.exec(ctx, tx, f, ids, attempts, since)
		if err != nil {
			return fmt.Errorf("store when %d attempts started waiting: %w", len(ws), err)
		}
		if tag.RowsAffected() == 0 {
			return fencedOrNothing(ctx, tx, f, "store when attempts started waiting")
		}
		return nil
	})
}

// DropPlan forgets a transaction's planned attempt that signerd would not
// sign (or that no longer applies), and refuses the operator action behind
// it with why.
func (s *Store) DropPlan(ctx context.Context, f txmanager.Fence, id uuid.UUID, p txmanager.Plan, why string) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		var actionID *uuid.UUID
		err := qDropPlan.queryRow(ctx, tx, f, id, p.Attempt).Scan(&actionID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fencedOrNothing(ctx, tx, f, "drop the plan of "+id.String())
		}
		if err != nil {
			return fmt.Errorf("drop the plan of %s: %w", id, err)
		}
		if actionID != nil {
			return actionDone(ctx, tx, *actionID, txmanager.ActionRefused, why, nil)
		}
		return nil
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
