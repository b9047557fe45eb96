package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// The statements of queries/adjust.sql.
var (
	qLockSuspenseBalance = Queries.Use("LockSuspenseBalance")
	qInsertAdjustment    = Queries.Use("InsertAdjustment")
)

// Adjust books a: it moves an amount out of a wallet's suspense account
// to the account an operator found it belongs to. It may clear what
// suspense holds, in part or whole, never more: an amount that would take
// the balance past zero (or one on a suspense account at zero) is an
// errs.Conflict, as is a's id booked before with another adjustment (or
// by another operator or approver); the same adjustment again is a replay
// (ledger.Posted.Created false). A wallet with no suspense account in the asset
// is errs.NotFound. The operator and approver are recorded with the
// journal (table adjustment) and logged.
func (s *Store) Adjust(ctx context.Context, a *ledger.SuspenseAdjustment) (ledger.Posted, error) {
	if err := a.Validate(); err != nil {
		return ledger.Posted{}, errs.Wrap(errs.Invalid, "adjustment "+a.ID, err)
	}
	j := a.Journal()
	posts, err := newPosts([]*ledger.Journal{j})
	if err != nil {
		return ledger.Posted{}, err
	}
	var out ledger.Posted
	err = s.inBookingTx(ctx, func(tx pgx.Tx, w *journalWriter) error {
		taken, err := takenKeys(ctx, tx, []string{j.Key})
		if err != nil {
			return err
		}
		if t, ok := taken[j.Key]; ok {
			if !bytes.Equal(t.hash, posts[0].hash[:]) {
				return errs.Errorf(errs.Conflict, "adjustment %s: booked before (journal %d) with another account, amount or reason", a.ID, t.id)
			}
			out = ledger.Posted{JournalID: t.id}
			return nil
		}
		// The balance row stays locked until the adjustment commits: two
		// adjustments of one suspense account go one after the other, the
		// second checked against what the first left.
		var held string
		k := a.Suspense()
		err = tx.QueryRow(ctx, qLockSuspenseBalance.SQL, int64(k.ChainID), k.Asset, k.Address.Bytes()).Scan(&held)
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.Errorf(errs.NotFound, "wallet %s has no suspense account in %s on chain %d", k.Address.Hex(), k.Asset, k.ChainID)
		}
		if err != nil {
			return fmt.Errorf("read suspense %s: %w", k, err)
		}
		balance, err := parseInt(held)
		if err != nil {
			return fmt.Errorf("suspense %s: %w", k, err)
		}
		after := new(big.Int).Add(balance, a.Amount)
		clears := after.Sign() == 0 || after.Sign() == balance.Sign() && after.CmpAbs(balance) < 0
		if balance.Sign() == 0 || !clears {
			return errs.Errorf(errs.Conflict, "adjustment %s: suspense holds %s, and %s would take it to %s: an adjustment clears what suspense holds, not more",
				a.ID, balance, a.Amount, after)
		}
		posted, err := w.bookOnce(ctx, tx, posts)
		if err != nil {
			return err
		}
		out = posted[0]
		var approverID *uuid.UUID
		var approverName *string
		if ap := a.Approver; ap != nil {
			approverID, approverName = &ap.KeyID, &ap.KeyName
		}
		if _, err := tx.Exec(ctx, qInsertAdjustment.SQL,
			a.ID, out.JournalID, a.Operator.KeyID, a.Operator.KeyName, a.Operator.TenantID, a.Operator.TenantName, approverID, approverName); err != nil {
			return fmt.Errorf("record adjustment %s's operator: %w", a.ID, err)
		}
		return nil
	})
	if err != nil {
		return ledger.Posted{}, err
	}
	if out.Created {
		log := s.log.With("adjustment_id", a.ID, "journal_id", out.JournalID, "chain_id", a.ChainID, "wallet", a.Wallet.Hex(),
			"asset", a.Asset, "amount", a.Amount.String(), "counter_kind", string(a.Counter), "counter_address", a.CounterAddress.Hex(),
			"operator_key_id", a.Operator.KeyID.String(), "operator_key_name", a.Operator.KeyName,
			"tenant_id", a.Operator.TenantID.String(), "tenant_name", a.Operator.TenantName)
		if ap := a.Approver; ap != nil {
			log = log.With("approver_key_id", ap.KeyID.String(), "approver_key_name", ap.KeyName)
		}
		log.Info("ledger: an operator's adjustment of suspense is booked")
	}
	return out, nil
}
