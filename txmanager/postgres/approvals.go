package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/approvals.sql.
var (
	qCountOtherApprovals  = query("CountOtherApprovals")
	qUpsertApproval       = query("UpsertApproval")
	qHasRejected          = query("HasRejected")
	qUpsertRejection      = query("UpsertRejection")
	qFailRejected         = query("FailRejected")
	qLockAwaitingApproval = query("LockAwaitingApproval")
	qApprovals            = query("Approvals")
	qAwaitingApproval     = query("AwaitingApproval")
)

// Approve stores an approval of a transaction waiting for approvals, with
// the fee ceiling its signature covers; the signer's worker passes it to
// signerd. The same approver again replaces its earlier approval (ceiling
// included). At most maxApprovals (the N approvers of the rule that needs
// them) are stored per transaction: a new approver beyond them is an
// errs.Conflict, so that no pile of approvals ever outgrows what signerd
// takes in one request. A transaction in any other state is an
// errs.Conflict, one that does not exist errs.NotFound.
func (s *Store) Approve(ctx context.Context, id uuid.UUID, a txmanager.Approval, maxApprovals int) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		t, err := lockAwaitingApproval(ctx, tx, id, "approved")
		if err != nil {
			return err
		}
		// The row lock on tx serializes approvals of one transaction, so
		// the count cannot race.
		var others int
		if err := tx.QueryRow(ctx, qCountOtherApprovals.SQL, id, a.Approver).Scan(&others); err != nil {
			return err
		}
		if others >= maxApprovals {
			return errs.Errorf(errs.Conflict, "transaction %s holds %d approvals already, as many as its rule has approvers", id, others)
		}
		tag, err := tx.Exec(ctx, qUpsertApproval.SQL, id, a.Approver, a.Expiry, a.Signature, optNumeric(a.MaxFeePerGas))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errs.Errorf(errs.Conflict, "approver %q rejected transaction %s", a.Approver, id)
		}
		out = t
		return nil
	})
	return out, err
}

// Reject records an approver's signed rejection (the approver, the expiry
// and the signature stay on the approval row: the evidence of who failed
// the transaction) and fails the transaction (reason approval_rejected,
// the event naming the approver) in one transaction. Rejecting a
// transaction the same approver already rejected answers it unchanged.
func (s *Store) Reject(ctx context.Context, id uuid.UUID, r txmanager.Rejection) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		var already bool
		if err := tx.QueryRow(ctx, qHasRejected.SQL, id, r.Approver).Scan(&already); err != nil {
			return err
		}
		if already {
			var err error
			out, err = scanTx(tx.QueryRow(ctx, qGetTx.SQL, id))
			return err
		}
		if _, err := lockAwaitingApproval(ctx, tx, id, "rejected"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qUpsertRejection.SQL, id, r.Approver, r.Expiry, r.Signature); err != nil {
			return err
		}
		t, err := scanTx(tx.QueryRow(ctx, qFailRejected.SQL, id, txmanager.ReasonApprovalRejected))
		if err != nil {
			return err
		}
		out = t
		return insertEvent(ctx, tx, &t, txmanager.StateChanged{FromState: txmanager.StatePendingApproval, ToState: txmanager.StateFailed,
			Reason: txmanager.ReasonApprovalRejected, Approver: r.Approver})
	})
	return out, err
}

// lockAwaitingApproval locks a transaction that must be waiting for
// approvals; what names the decision for the error.
func lockAwaitingApproval(ctx context.Context, tx pgx.Tx, id uuid.UUID, what string) (txmanager.Tx, error) {
	var expires *time.Time
	var expired bool
	t, err := scanTxWith(tx.QueryRow(ctx, qLockAwaitingApproval.SQL, id), &expires, &expired)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no transaction %s", id)
	}
	if err != nil {
		return t, err
	}
	if t.State != txmanager.StatePendingApproval {
		return t, errs.Errorf(errs.Conflict, "transaction %s is %s: only a transaction waiting for approvals can be %s", id, t.State, what)
	}
	if expired {
		return t, errs.Errorf(errs.Conflict, "transaction %s stopped waiting for approvals at %s", id, expires.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// Approvals are the stored approvals of the transactions ids, by
// transaction, in approver order.
func (s *Store) Approvals(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]txmanager.Approval, error) {
	rows, err := s.pool.Query(ctx, qApprovals.SQL, ids)
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	out := map[uuid.UUID][]txmanager.Approval{}
	var id uuid.UUID
	var a txmanager.Approval
	var ceiling string
	_, err = pgx.ForEachRow(rows, []any{&id, &a.Approver, &ceiling, &a.Expiry, &a.Signature}, func() error {
		a.MaxFeePerGas = bigOf(&ceiling)
		out[id] = append(out[id], a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("approvals: %w", err)
	}
	return out, nil
}

// Approved ends a transaction's wait: the policy, given its approvals,
// allows it. PENDING_APPROVAL → SIMULATED, ready for a nonce.
func (s *Store) Approved(ctx context.Context, f txmanager.Fence, id uuid.UUID, approvers []string) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, qMoveApproved, id, []txmanager.State{txmanager.StatePendingApproval}, txmanager.StateSimulated,
			txmanager.StateChanged{Approvers: approvers})
		return err
	})
	return out, err
}

// AwaitingApproval lists a signer's transactions waiting for approvals,
// with when each stops waiting, oldest first, at most limit.
func (s *Store) AwaitingApproval(ctx context.Context, key txmanager.SignerKey, limit int) ([]txmanager.Awaiting, error) {
	rows, err := s.pool.Query(ctx, qAwaitingApproval.SQL, int64(key.ChainID), key.Signer.Bytes(), limit)
	if err != nil {
		return nil, fmt.Errorf("transactions awaiting approval: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Awaiting, error) {
		var a txmanager.Awaiting
		var err error
		a.Tx, err = scanTxWith(r, &a.Expires, &a.Expired, &a.Decisions)
		return a, err
	})
}
