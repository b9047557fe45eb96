package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

// Operator actions on broadcast transactions. Any node takes the request
// (RequestAction); the signer's owner carries it out under its lease and
// records the outcome, so that no node but the owner ever writes an
// attempt.

// The actions an operator may ask for.
const (
	ActionResend = "resend" // send the current attempt again, now
	ActionBump   = "bump"   // a fee bump now, whatever the signer's automatic bumps
	ActionCancel = "cancel" // replace the transaction by a 0-value transfer to the signer itself
)

// The outcomes of an action.
const (
	ActionDone    = "done"
	ActionRefused = "refused"
)

// Action is an operator's request on one transaction and what became of
// it (Outcome empty while it waits for the signer's owner).
type Action struct {
	ID          uuid.UUID
	TxID        uuid.UUID
	Key         txmanager.SignerKey
	Action      string
	Operator    string
	RequestedAt time.Time
	DoneAt      *time.Time
	Outcome     string
	Detail      string
	// Attempt is the attempt the action produced or sent again.
	Attempt *int
}

// RequestAction records an operator's request on a transaction that is
// broadcast and not yet mined: errs.NotFound when there is no such
// transaction, errs.Conflict when it is in another state (mined, final,
// not yet broadcast).
func (s *Store) RequestAction(ctx context.Context, id uuid.UUID, action, operator string) (Action, error) {
	var a Action
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		var state string
		var sub *string
		var mined *int32
		err := tx.QueryRow(ctx, `SELECT state, sub_state, mined_attempt FROM tx WHERE tx_id = $1 FOR UPDATE`, id).Scan(&state, &sub, &mined)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "no transaction %s", id)
		}
		if err != nil {
			return fmt.Errorf("operator action on %s: %w", id, err)
		}
		switch {
		case state != string(txmanager.StateBroadcasted):
			return errs.Errorf(errs.Conflict, "transaction %s is %s: only a broadcast transaction that is not mined can be %s", id, state, pastTense[action])
		case mined != nil:
			return errs.Errorf(errs.Conflict, "transaction %s is mined and confirming: it cannot be %s", id, pastTense[action])
		}
		row := tx.QueryRow(ctx, `
			INSERT INTO tx_action (action_id, tx_id, chain_id, signer, action, operator)
			SELECT $1, tx_id, chain_id, signer, $3, $4 FROM tx WHERE tx_id = $2
			RETURNING `+actionColumns, uuid.New(), id, action, operator)
		a, err = scanAction(row)
		return err
	})
	return a, err
}

var pastTense = map[string]string{ActionResend: "resent", ActionBump: "bumped", ActionCancel: "cancelled"}

const actionColumns = `action_id, tx_id, chain_id, signer, action, operator, requested_at, done_at, coalesce(outcome, ''), coalesce(detail, ''), attempt`

func scanAction(row pgx.Row) (Action, error) {
	var (
		a       Action
		chainID int64
		signer  []byte
		attempt *int32
	)
	if err := row.Scan(&a.ID, &a.TxID, &chainID, &signer, &a.Action, &a.Operator, &a.RequestedAt, &a.DoneAt, &a.Outcome, &a.Detail, &attempt); err != nil {
		return a, err
	}
	a.Key = txmanager.SignerKey{ChainID: uint64(chainID), Signer: common.BytesToAddress(signer)}
	if attempt != nil {
		n := int(*attempt)
		a.Attempt = &n
	}
	return a, nil
}

// Actions lists a transaction's operator actions, oldest first.
func (s *Store) Actions(ctx context.Context, id uuid.UUID) ([]Action, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+actionColumns+` FROM tx_action WHERE tx_id = $1 ORDER BY requested_at, action_id`, id)
	if err != nil {
		return nil, fmt.Errorf("actions on %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) { return scanAction(r) })
	if err != nil {
		return nil, fmt.Errorf("actions on %s: %w", id, err)
	}
	return out, nil
}

// PendingActions lists the actions on key's transactions that wait for
// the signer's owner, oldest first.
func (s *Store) PendingActions(ctx context.Context, key txmanager.SignerKey) ([]Action, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+actionColumns+` FROM tx_action
		WHERE chain_id = $1 AND signer = $2 AND done_at IS NULL ORDER BY requested_at, action_id`, int64(key.ChainID), key.Signer.Bytes())
	if err != nil {
		return nil, fmt.Errorf("pending actions of %s: %w", key, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Action, error) { return scanAction(r) })
	if err != nil {
		return nil, fmt.Errorf("pending actions of %s: %w", key, err)
	}
	return out, nil
}

// FinishAction records an action's outcome, under f (the action's
// signer's lease): done, with the attempt it sent, or refused with why.
func (s *Store) FinishAction(ctx context.Context, f txmanager.Fence, id uuid.UUID, outcome, detail string, attempt *int) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		fence, fenceArgs := FenceSQL(f, 3)
		var held bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tx_action WHERE action_id = $1 AND chain_id = $2 AND signer = $3) AND `+fence,
			append([]any{id, int64(f.Key.ChainID), f.Key.Signer.Bytes()}, fenceArgs...)...).Scan(&held); err != nil {
			return fmt.Errorf("finish action %s: %w", id, err)
		}
		if !held {
			if err := fencedOrNothing(ctx, tx, f, "finish action "+id.String()); err != nil {
				return err
			}
			return fmt.Errorf("finish action %s: not an action on %s", id, f.Key)
		}
		return actionDone(ctx, tx, id, outcome, detail, attempt)
	})
}

// actionDone records an action's outcome inside a fenced transaction; an
// action already finished keeps its first outcome.
func actionDone(ctx context.Context, tx pgx.Tx, id uuid.UUID, outcome, detail string, attempt *int) error {
	var n *int32
	if attempt != nil {
		v := int32(*attempt)
		n = &v
	}
	var d *string
	if detail != "" {
		d = &detail
	}
	if _, err := tx.Exec(ctx, `UPDATE tx_action SET done_at = now(), outcome = $2, detail = $3, attempt = $4
		WHERE action_id = $1 AND done_at IS NULL`, id, outcome, d, n); err != nil {
		return fmt.Errorf("finish action %s: %w", id, err)
	}
	return nil
}
