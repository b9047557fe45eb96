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

// Replacement attempts of broadcast transactions: fee bumps and cancels.
// Each is planned (its fees fixed) before signerd is asked, stored before
// it is sent, and both writes are fenced like every other.

// PlanAttempt fixes the next attempt of a BROADCASTED transaction that is
// not mined: the attempt after its highest, with p's kind, gas limit and
// fees. It returns p with its attempt number.
func (s *Store) PlanAttempt(ctx context.Context, f txmanager.Fence, id uuid.UUID, p txmanager.Plan) (txmanager.Plan, error) {
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		args := []any{id, p.Kind, int64(p.GasLimit), optNumeric(p.Fees.MaxFeePerGas), optNumeric(p.Fees.MaxPriorityFeePerGas),
			optNumeric(p.Fees.GasPrice), p.ActionID, int64(f.Key.ChainID), f.Key.Signer.Bytes()}
		fence, fenceArgs := FenceSQL(f, len(args))
		var attempt int
		err := tx.QueryRow(ctx, `
			INSERT INTO attempt_plan (tx_id, attempt, kind, gas_limit, max_fee_per_gas, max_priority_fee_per_gas, gas_price, action_id)
			SELECT t.tx_id, (SELECT max(attempt) + 1 FROM attempt WHERE tx_id = t.tx_id), $2, $3, $4::numeric, $5::numeric, $6::numeric, $7
			FROM tx t WHERE t.tx_id = $1 AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL
			  AND t.chain_id = $8 AND t.signer = $9 AND `+fence+`
			ON CONFLICT (tx_id) DO NOTHING
			RETURNING attempt`, append(args, fenceArgs...)...).Scan(&attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			var planned bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM attempt_plan WHERE tx_id = $1)`, id).Scan(&planned); err != nil {
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
		args := []any{id, p.Attempt, hash.Bytes(), raw, int64(f.Key.ChainID), f.Key.Signer.Bytes()}
		fence, fenceArgs := FenceSQL(f, len(args))
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
		err := tx.QueryRow(ctx, `
			WITH plan AS (
				DELETE FROM attempt_plan p USING tx t
				WHERE p.tx_id = $1 AND p.attempt = $2 AND t.tx_id = p.tx_id AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL
				  AND t.chain_id = $5 AND t.signer = $6 AND `+fence+`
				RETURNING p.*, t.nonce AS t_nonce, t.route AS t_route, t.current_attempt AS t_current
			), stored AS (
				INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price, route, kind, gas_limit, sent_at)
				SELECT tx_id, attempt, t_nonce, $3, $4, max_fee_per_gas, max_priority_fee_per_gas, gas_price,
					(SELECT a.route FROM attempt a WHERE a.tx_id = plan.tx_id AND a.attempt = t_current), kind, gas_limit, now()
				FROM plan
				RETURNING sent_at, route
			)
			SELECT t_nonce, coalesce((SELECT route FROM stored), t_route),
				(SELECT a.hash FROM attempt a WHERE a.tx_id = plan.tx_id AND a.attempt = t_current), (SELECT sent_at FROM stored),
				max_fee_per_gas::text, max_priority_fee_per_gas::text, gas_price::text, gas_limit, kind, action_id
			FROM plan`, append(args, fenceArgs...)...).Scan(&nonce, &route, &replaces, &sentAt, &planFees[0], &planFees[1], &planFees[2],
			&gasLimit, &kind, &actionID)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.notFollowed(ctx, tx, f, id, fmt.Sprintf("store attempt %d of", p.Attempt))
		}
		if err != nil {
			return fmt.Errorf("store attempt %d of %s: %w", p.Attempt, id, err)
		}
		// A stuck transaction stays stuck (its clock runs from its first
		// send); otherwise the older attempt is now replaced.
		if _, err := tx.Exec(ctx, `UPDATE tx SET current_attempt = $2, updated_at = now(),
			sub_state = CASE WHEN sub_state = 'stuck' THEN 'stuck' ELSE 'replaced' END WHERE tx_id = $1`, id, p.Attempt); err != nil {
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
		args := []any{ids, attempts, since, int64(f.Key.ChainID), f.Key.Signer.Bytes()}
		fence, fenceArgs := FenceSQL(f, len(args))
		tag, err := tx.Exec(ctx, `
			UPDATE attempt a SET waiting_since_block = w_since
			FROM unnest($1::uuid[], $2::int[], $3::bigint[]) AS w (w_id, w_attempt, w_since), tx t
			WHERE a.tx_id = w_id AND a.attempt = w_attempt AND t.tx_id = a.tx_id AND t.current_attempt = a.attempt
			  AND t.state = 'BROADCASTED' AND t.mined_attempt IS NULL AND t.chain_id = $4 AND t.signer = $5 AND `+fence,
			append(args, fenceArgs...)...)
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
		args := []any{id, p.Attempt, int64(f.Key.ChainID), f.Key.Signer.Bytes()}
		fence, fenceArgs := FenceSQL(f, len(args))
		var actionID *uuid.UUID
		err := tx.QueryRow(ctx, `
			DELETE FROM attempt_plan p USING tx t
			WHERE p.tx_id = $1 AND p.attempt = $2 AND t.tx_id = p.tx_id AND t.chain_id = $3 AND t.signer = $4 AND `+fence+`
			RETURNING p.action_id`, append(args, fenceArgs...)...).Scan(&actionID)
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
