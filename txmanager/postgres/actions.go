package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/actions.sql.
var (
	qLockTxForAction          = query("LockTxForAction")
	qActionByID               = query("ActionByID")
	qWaitingAction            = query("WaitingAction")
	qInsertAction             = query("InsertAction")
	qActionsOfTx              = query("ActionsOfTx")
	qFollowerActions          = query("FollowerActions")
	qWorkerActions            = query("WorkerActions")
	qActionHeld               = fenced("ActionHeld")
	qActionDone               = query("ActionDone")
	qPlanActionFees           = fenced("PlanActionFees")
	qRefixSigningFees         = fenced("RefixSigningFees")
	qCurrentAttempt           = query("CurrentAttempt")
	qInsertActionAttempt      = fenced("InsertActionAttempt")
	qMakeActionAttemptCurrent = query("MakeActionAttemptCurrent")
)

// Operator actions on transactions that do not move: any node takes the
// request (Request); the signer's owner carries it out under its lease and
// records the outcome, so that no node but the owner ever writes an
// attempt. Its chain follower acts on broadcast transactions
// (PendingActions), its worker on those not broadcast yet, ALLOCATED or
// SIGNED, and on every abandon (WorkerActions).

// RequestAction records an operator's request (see Request) and returns
// it.
func (s *Store) RequestAction(ctx context.Context, id uuid.UUID, action, operator string) (txmanager.Action, error) {
	a, _, err := s.Request(ctx, txmanager.ActionRequest{TxID: id, Action: action, Operator: operator})
	return a, err
}

// Request records an operator's request on a transaction that does not
// move: ALLOCATED, SIGNED, or BROADCASTED and not mined (abandon: ALLOCATED
// or SIGNED only). It returns the action and whether it is new. Not new:
// r names an action id already recorded for the same request (another
// request under that id is errs.Conflict), or, without an action id, the
// same request (action and operator) waits on the transaction already.
// errs.NotFound when there is no such transaction, errs.Conflict when it
// is in another state.
func (s *Store) Request(ctx context.Context, r txmanager.ActionRequest) (txmanager.Action, bool, error) {
	var (
		a     txmanager.Action
		fresh bool
	)
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		fresh = false
		var state string
		var mined *int32
		err := tx.QueryRow(ctx, qLockTxForAction.SQL, r.TxID).Scan(&state, &mined)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "no transaction %s", r.TxID)
		}
		if err != nil {
			return fmt.Errorf("operator action on %s: %w", r.TxID, err)
		}
		if r.ActionID != nil {
			a, err = scanAction(tx.QueryRow(ctx, qActionByID.SQL, *r.ActionID))
			switch {
			case err == nil:
				if a.TxID != r.TxID || a.Action != r.Action || a.Operator != r.Operator {
					return errs.Errorf(errs.Conflict, "action_id %s was used for another request (%s of transaction %s by %s)", a.ID, a.Action, a.TxID, a.Operator)
				}
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("operator action %s: %w", *r.ActionID, err)
			}
		}
		if err := actionFits(r, txmanager.State(state), mined != nil); err != nil {
			return err
		}
		if r.ActionID == nil {
			a, err = scanAction(tx.QueryRow(ctx, qWaitingAction.SQL, r.TxID, r.Action, r.Operator))
			switch {
			case err == nil:
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("operator action on %s: %w", r.TxID, err)
			}
		}
		id := uuid.New()
		if r.ActionID != nil {
			id = *r.ActionID
		}
		a, err = scanAction(tx.QueryRow(ctx, qInsertAction.SQL, id, r.TxID, r.Action, r.Operator))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			// The same id, recorded for another transaction meanwhile.
			return errs.Errorf(errs.Conflict, "action_id %s was used for another request", id)
		}
		fresh = err == nil
		return err
	})
	return a, fresh, err
}

// actionFits tells whether r may be asked of a transaction in state
// (mined: a receipt is recorded).
func actionFits(r txmanager.ActionRequest, state txmanager.State, mined bool) error {
	switch {
	case state == txmanager.StateAllocated || state == txmanager.StateSigned:
		return nil
	case state == txmanager.StateBroadcasted && r.Action == txmanager.ActionAbandon && !mined:
		return errs.Errorf(errs.Conflict, "transaction %s is BROADCASTED: it cannot be abandoned, since it may be mined at any moment; "+
			"cancel it instead (a cancel is an attempt of the same transaction, so whichever is mined decides)", r.TxID)
	case state == txmanager.StateBroadcasted && mined:
		return errs.Errorf(errs.Conflict, "transaction %s is mined and confirming: it cannot be %s", r.TxID, pastTense[r.Action])
	case state == txmanager.StateBroadcasted:
		return nil
	}
	return errs.Errorf(errs.Conflict, "transaction %s is %s: only an ALLOCATED or SIGNED transaction, or a BROADCASTED one not mined (abandon: not broadcast), can be %s",
		r.TxID, state, pastTense[r.Action])
}

var pastTense = map[string]string{
	txmanager.ActionResend: "resent", txmanager.ActionBump: "bumped", txmanager.ActionCancel: "cancelled", txmanager.ActionAbandon: "abandoned",
}

// scanAction reads an action from the columns every statement that returns
// actions ends its rows with (see ActionByID in queries/actions.sql).
func scanAction(row pgx.Row) (txmanager.Action, error) {
	var (
		a       txmanager.Action
		chainID int64
		signer  []byte
		attempt *int32
		fees    [3]*string
	)
	if err := row.Scan(&a.ID, &a.TxID, &chainID, &signer, &a.Action, &a.Operator, &a.RequestedAt, &a.DoneAt, &a.Outcome, &a.Detail, &attempt,
		&fees[0], &fees[1], &fees[2], &a.Filler); err != nil {
		return a, err
	}
	a.Key = txmanager.SignerKey{ChainID: uint64(chainID), Signer: common.BytesToAddress(signer)}
	if attempt != nil {
		n := int(*attempt)
		a.Attempt = &n
	}
	if fees[0] != nil || fees[2] != nil {
		a.Fees = &txmanager.Fees{MaxFeePerGas: bigOf(fees[0]), MaxPriorityFeePerGas: bigOf(fees[1]), GasPrice: bigOf(fees[2])}
	}
	return a, nil
}

func collectActions(rows pgx.Rows, err error, what string) ([]txmanager.Action, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Action, error) { return scanAction(r) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// ActionByID reads one action; errs.NotFound when there is none.
func (s *Store) ActionByID(ctx context.Context, id uuid.UUID) (txmanager.Action, error) {
	a, err := scanAction(s.pool.QueryRow(ctx, qActionByID.SQL, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, errs.Errorf(errs.NotFound, "no action %s", id)
	}
	if err != nil {
		return a, fmt.Errorf("action %s: %w", id, err)
	}
	return a, nil
}

// Actions lists a transaction's operator actions, oldest first.
func (s *Store) Actions(ctx context.Context, id uuid.UUID) ([]txmanager.Action, error) {
	rows, err := s.pool.Query(ctx, qActionsOfTx.SQL, id)
	return collectActions(rows, err, "actions on "+id.String())
}

// PendingActions lists the actions the chain follower carries out for
// key's signer, oldest first: those on transactions broadcast (or past
// it), abandons excepted. The same action asked again while one waits is
// listed once.
func (s *Store) PendingActions(ctx context.Context, key txmanager.SignerKey) ([]txmanager.Action, error) {
	rows, err := s.pool.Query(ctx, qFollowerActions.SQL, int64(key.ChainID), key.Signer.Bytes())
	return collectActions(rows, err, "pending actions of "+key.String())
}

// WorkerActions lists the actions the worker carries out for key's
// signer, oldest first: those on ALLOCATED and SIGNED transactions, and
// every abandon. The same action asked again while one waits is listed
// once.
func (s *Store) WorkerActions(ctx context.Context, key txmanager.SignerKey) ([]txmanager.Action, error) {
	rows, err := s.pool.Query(ctx, qWorkerActions.SQL, int64(key.ChainID), key.Signer.Bytes())
	return collectActions(rows, err, "pending actions of "+key.String())
}

// FinishAction records an action's outcome, under f (the action's
// signer's lease): done, with the attempt it sent, or refused with why.
func (s *Store) FinishAction(ctx context.Context, f txmanager.Fence, id uuid.UUID, outcome, detail string, attempt *int) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		if err := heldAction(ctx, tx, f, id, "finish action"); err != nil {
			return err
		}
		return actionDone(ctx, tx, id, outcome, detail, attempt)
	})
}

// heldAction checks, inside a fenced transaction, that action id is one of
// f's signer and that f holds.
func heldAction(ctx context.Context, tx pgx.Tx, f txmanager.Fence, id uuid.UUID, op string) error {
	var held bool
	if err := qActionHeld.queryRow(ctx, tx, f, id).Scan(&held); err != nil {
		return fmt.Errorf("%s %s: %w", op, id, err)
	}
	if !held {
		if err := fencedOrNothing(ctx, tx, f, op+" "+id.String()); err != nil {
			return err
		}
		return fmt.Errorf("%s %s: not an action on %s", op, id, f.Key)
	}
	return nil
}

// actionDone records an action's outcome inside a fenced transaction; an
// action already finished keeps its first outcome.
func actionDone(ctx context.Context, tx pgx.Tx, id uuid.UUID, outcome, detail string, attempt *int) error {
	return actionDoneWith(ctx, tx, id, outcome, detail, attempt, nil)
}

// actionDoneWith is actionDone, with the filler an abandon made. The same
// action waiting on the same transaction is finished with it (see
// ActionDone in queries/actions.sql).
func actionDoneWith(ctx context.Context, tx pgx.Tx, id uuid.UUID, outcome, detail string, attempt *int, filler *uuid.UUID) error {
	var n *int32
	if attempt != nil {
		v := int32(*attempt)
		n = &v
	}
	if _, err := tx.Exec(ctx, qActionDone.SQL, id, outcome, detail, n, filler); err != nil {
		return fmt.Errorf("finish action %s: %w", id, err)
	}
	return nil
}

// PlanActionFees fixes the fees of the attempt action id has signerd
// sign, under f, unless some are fixed already, and returns those that
// stand: asked again after a crash, signerd gets the very same request.
func (s *Store) PlanActionFees(ctx context.Context, f txmanager.Fence, id uuid.UUID, fees txmanager.Fees) (txmanager.Fees, error) {
	var out txmanager.Fees
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var stored [3]*string
		err := qPlanActionFees.queryRow(ctx, tx, f, append([]any{id}, signingFeeArgs(fees)...)...).Scan(&stored[0], &stored[1], &stored[2])
		if errors.Is(err, pgx.ErrNoRows) {
			if err := heldAction(ctx, tx, f, id, "plan the fees of action"); err != nil {
				return err
			}
			return fmt.Errorf("plan the fees of action %s: %w", id, txmanager.ErrActionDone)
		}
		if err != nil {
			return fmt.Errorf("plan the fees of action %s: %w", id, err)
		}
		out = txmanager.Fees{MaxFeePerGas: bigOf(stored[0]), MaxPriorityFeePerGas: bigOf(stored[1]), GasPrice: bigOf(stored[2])}
		return nil
	})
	return out, err
}

// RefixSigningFees sets the fees an ALLOCATED transaction is to be signed
// with (a bump before signerd signed it), under f. Only a transaction
// signerd has not signed may be re-priced: the caller checks that.
func (s *Store) RefixSigningFees(ctx context.Context, f txmanager.Fence, id uuid.UUID, fees txmanager.Fees) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanTx(qRefixSigningFees.queryRow(ctx, tx, f, append([]any{id}, signingFeeArgs(fees)...)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return whyNotMoved(ctx, tx, f, id, []txmanager.State{txmanager.StateAllocated})
		}
		return err
	})
	return out, err
}

// CurrentAttempt is a signed transaction's current attempt: its number
// and fees.
func (s *Store) CurrentAttempt(ctx context.Context, id uuid.UUID) (int, txmanager.Fees, error) {
	var attempt int
	var fees [3]*string
	err := s.pool.QueryRow(ctx, qCurrentAttempt.SQL, id).Scan(&attempt, &fees[0], &fees[1], &fees[2])
	if err != nil {
		return 0, txmanager.Fees{}, fmt.Errorf("the current attempt of %s: %w", id, err)
	}
	return attempt, txmanager.Fees{MaxFeePerGas: bigOf(fees[0]), MaxPriorityFeePerGas: bigOf(fees[1]), GasPrice: bigOf(fees[2])}, nil
}

// StoreActionAttempt stores the attempt action a produced as its
// transaction's current one, and marks a done with it, in one fenced
// transaction, before anything is sent. A SIGNED transaction gets it
// after its others (a bump or a cancel of what every route refused), its
// sub-state cleared so that the worker sends it; an ALLOCATED one (a
// cancel of what signerd would not sign) gets it as its first and is
// SIGNED. Either way a tx.state_changed event says so (reason
// operator_action), and the earlier attempts stay tracked: whichever is
// mined decides.
func (s *Store) StoreActionAttempt(ctx context.Context, f txmanager.Fence, a txmanager.Action, at txmanager.ActionAttempt) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var prev string
		if err := tx.QueryRow(ctx, qLockTxState.SQL, a.TxID).Scan(&prev); err != nil {
			return fmt.Errorf("store the attempt of action %s: %w", a.ID, err)
		}
		var attempt int
		err := qInsertActionAttempt.queryRow(ctx, tx, f, append([]any{a.TxID, at.Hash.Bytes(), at.Raw, at.Kind, int64(at.GasLimit)},
			signingFeeArgs(at.Fees)...)...).Scan(&attempt)
		if errors.Is(err, pgx.ErrNoRows) {
			return whyNotMoved(ctx, tx, f, a.TxID, []txmanager.State{txmanager.StateAllocated, txmanager.StateSigned})
		}
		if err != nil {
			return fmt.Errorf("store the attempt of action %s: %w", a.ID, err)
		}
		out, err = scanTx(tx.QueryRow(ctx, qMakeActionAttemptCurrent.SQL, a.TxID, attempt, txmanager.OperatorReason(a)))
		if err != nil {
			return fmt.Errorf("store the attempt of action %s: %w", a.ID, err)
		}
		hash := at.Hash
		out.Hash = &hash // the statement does not see the attempt it wrote
		ev := txmanager.StateChanged{FromState: txmanager.State(prev), ToState: txmanager.StateSigned, Reason: txmanager.OperatorReason(a), Hash: &hash}
		if err := insertEvent(ctx, tx, &out, ev); err != nil {
			return err
		}
		return actionDone(ctx, tx, a.ID, txmanager.ActionDone, "", &attempt)
	})
	return out, err
}

// Abandon carries out action a, an abandon: its ALLOCATED or SIGNED
// transaction FAILS (abandoned) and its nonce goes to a new 0-value
// transfer to the signer itself, ALLOCATED at that nonce with fees (see
// FillGap), and a is done, naming the filler, all in one fenced
// transaction.
func (s *Store) Abandon(ctx context.Context, f txmanager.Fence, a txmanager.Action, fees txmanager.Fees) (failed, filler txmanager.Tx, err error) {
	err = s.fencedTx(ctx, func(tx pgx.Tx) error {
		if err := heldAction(ctx, tx, f, a.ID, "abandon"); err != nil {
			return err
		}
		failed, filler, err = fillGap(ctx, tx, f, a.TxID, []txmanager.State{txmanager.StateAllocated, txmanager.StateSigned}, txmanager.ReasonAbandoned, fees)
		if err != nil {
			return err
		}
		return actionDoneWith(ctx, tx, a.ID, txmanager.ActionDone, "", nil, &filler.ID)
	})
	return failed, filler, err
}
