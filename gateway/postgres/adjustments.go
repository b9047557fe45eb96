package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/shared/errs"
)

// The statements of queries/adjustments.sql.
var (
	qLockAdjustmentWallet = Queries.Use("LockAdjustmentWallet")
	qGetAdjustment        = Queries.Use("GetAdjustment")
	qBookedAlone          = Queries.Use("BookedAlone")
	qProposeAdjustment    = Queries.Use("ProposeAdjustment")
	qAdjustments          = Queries.Use("Adjustments")
	qApproveAdjustment    = Queries.Use("ApproveAdjustment")
	qRejectAdjustment     = Queries.Use("RejectAdjustment")
	qBookAdjustment       = Queries.Use("BookAdjustment")
	qRefuseAdjustment     = Queries.Use("RefuseAdjustment")
)

// ProposeAdjustment stores n, pending a second key's approval when rule
// says so and approved otherwise, and returns it with created true. The
// same proposal again (same id, same fields) returns the stored one as it
// stands, created false, whoever sends it; another under the same id is
// errs.Conflict. Proposals of one wallet and asset are decided one at a
// time, so that concurrent ones cannot each stay below the threshold that
// together they pass.
func (s *Store) ProposeAdjustment(ctx context.Context, n gateway.NewAdjustment, rule gateway.ApprovalRule) (gateway.Adjustment, bool, error) {
	var out gateway.Adjustment
	created := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qLockAdjustmentWallet.SQL, fmt.Sprintf("%d:%x:%s", n.ChainID, n.Wallet, n.Asset)); err != nil {
			return err
		}
		stored, err := scanAdjustment(tx.QueryRow(ctx, qGetAdjustment.SQL, n.Tenant, n.ID))
		if err == nil {
			if !n.SameAs(&stored) {
				return errs.Errorf(errs.Conflict, "adjustment %q exists with another wallet, asset, amount, counter account or reason", n.ID)
			}
			out = stored
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		needs := rule.Threshold == nil
		if !needs {
			var alone string
			if err := tx.QueryRow(ctx, qBookedAlone.SQL, int64(n.ChainID), n.Wallet.Bytes(), n.Asset, rule.Window).Scan(&alone); err != nil {
				return err
			}
			sum, ok := new(big.Int).SetString(alone, 10)
			if !ok {
				return fmt.Errorf("the window's sum %q", alone)
			}
			needs = sum.Add(sum, new(big.Int).Abs(n.Amount)).Cmp(rule.Threshold) > 0
		}
		status := gateway.AdjustmentApproved
		var ttl *time.Duration
		if needs {
			status, ttl = gateway.AdjustmentPending, &rule.TTL
		}
		out, err = scanAdjustment(tx.QueryRow(ctx, qProposeAdjustment.SQL,
			n.Tenant, n.ID, int64(n.ChainID), n.Wallet.Bytes(), n.Asset, n.Amount.String(), n.CounterKind, n.CounterAddress.Bytes(), n.Reason,
			status, needs, optNumeric(rule.Threshold), n.ProposedBy.ID, n.ProposedBy.Name, ttl))
		created = err == nil
		return err
	})
	if err != nil {
		return gateway.Adjustment{}, false, fmt.Errorf("propose adjustment %q: %w", n.ID, err)
	}
	return out, created, nil
}

// Adjustment reads one of tenant's adjustments; an unknown one is
// errs.NotFound.
func (s *Store) Adjustment(ctx context.Context, tenant uuid.UUID, id string) (gateway.Adjustment, error) {
	a, err := scanAdjustment(s.pool.QueryRow(ctx, qGetAdjustment.SQL, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, errs.Errorf(errs.NotFound, "no adjustment %q", id)
	}
	if err != nil {
		return a, fmt.Errorf("read adjustment %q: %w", id, err)
	}
	return a, nil
}

// Adjustments lists tenant's adjustments of f's wallets, newest first.
func (s *Store) Adjustments(ctx context.Context, tenant uuid.UUID, f gateway.AdjustmentFilter) ([]gateway.Adjustment, error) {
	chains, wallets := make([]int64, len(f.Signers)), make([][]byte, len(f.Signers))
	for i, sg := range f.Signers {
		chains[i], wallets[i] = int64(sg.ChainID), sg.Address.Bytes()
	}
	// Filters the statement skips are NULL.
	var before *int64
	if f.Before > 0 {
		before = &f.Before
	}
	// expired is read, not stored: a pending row past its expiry, or not.
	var status *string
	var expired *bool
	switch f.Status {
	case "":
	case gateway.AdjustmentExpired, gateway.AdjustmentPending:
		pending, past := gateway.AdjustmentPending, f.Status == gateway.AdjustmentExpired
		status, expired = &pending, &past
	default:
		status = &f.Status
	}
	// Planned for its arguments at every call rather than as a prepared
	// statement: a generic plan of the static filters cannot drop those
	// that are NULL, so the page's cursor would filter rows rather than
	// bound the walk of ledger_adjustment_tenant_idx, and a status would
	// not reach ledger_adjustment_status_idx.
	rows, err := s.pool.Query(ctx, qAdjustments.SQL, pgx.QueryExecModeCacheDescribe,
		tenant, before, status, expired, chains, wallets, f.Limit)
	if err != nil {
		return nil, fmt.Errorf("list adjustments: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (gateway.Adjustment, error) { return scanAdjustment(r) })
}

// ApproveAdjustment records approver's approval of tenant's pending
// adjustment id, which makes it approved (cleared to book). The key that
// proposed it cannot approve it (errs.Forbidden); an expired, rejected,
// booked or refused one cannot be approved (errs.Conflict). One already
// approved is returned as it is, for its booking to be tried again.
func (s *Store) ApproveAdjustment(ctx context.Context, tenant uuid.UUID, id string, approver gateway.KeyRef) (gateway.Adjustment, error) {
	a, err := scanAdjustment(s.pool.QueryRow(ctx, qApproveAdjustment.SQL, tenant, id, approver.ID, approver.Name))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("approve adjustment %q: %w", id, err)
	}
	// Nothing changed: say why.
	if a, err = s.Adjustment(ctx, tenant, id); err != nil {
		return a, err
	}
	switch {
	case a.Status == gateway.AdjustmentApproved:
		return a, nil
	case a.Status == gateway.AdjustmentPending && a.ProposedBy.ID == approver.ID:
		return a, errs.Errorf(errs.Forbidden, "the key that proposed adjustment %q cannot approve it: a second admin key must", id)
	default:
		return a, errs.Errorf(errs.Conflict, "adjustment %q is %s: only a pending one can be approved", id, a.Status)
	}
}

// RejectAdjustment records by's rejection of tenant's pending adjustment
// id (its proposer may withdraw it so). Any other is errs.Conflict.
func (s *Store) RejectAdjustment(ctx context.Context, tenant uuid.UUID, id string, by gateway.KeyRef) (gateway.Adjustment, error) {
	a, err := scanAdjustment(s.pool.QueryRow(ctx, qRejectAdjustment.SQL, tenant, id, by.ID, by.Name))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return a, fmt.Errorf("reject adjustment %q: %w", id, err)
	}
	if a, err = s.Adjustment(ctx, tenant, id); err != nil {
		return a, err
	}
	return a, errs.Errorf(errs.Conflict, "adjustment %q is %s: only a pending one can be rejected", id, a.Status)
}

// AdjustmentBooked records that the ledger booked tenant's approved
// adjustment id as journal; recorded so before, it changes nothing.
func (s *Store) AdjustmentBooked(ctx context.Context, tenant uuid.UUID, id string, journal int64) (gateway.Adjustment, error) {
	a, err := scanAdjustment(s.pool.QueryRow(ctx, qBookAdjustment.SQL, tenant, id, journal))
	if errors.Is(err, pgx.ErrNoRows) {
		if a, err = s.Adjustment(ctx, tenant, id); err == nil && (a.JournalID == nil || *a.JournalID != journal) {
			err = fmt.Errorf("adjustment %q is %s, not approved: journal %d not recorded", id, a.Status, journal)
		}
	}
	return a, err
}

// AdjustmentRefused records that the ledger refused tenant's approved
// adjustment id, with the refusal's kind and detail; recorded so before,
// it changes nothing.
func (s *Store) AdjustmentRefused(ctx context.Context, tenant uuid.UUID, id string, kind errs.Kind, detail string) (gateway.Adjustment, error) {
	detail = strings.ToValidUTF8(detail, "?")
	if r := []rune(detail); len(r) > 2000 {
		detail = string(r[:2000])
	}
	a, err := scanAdjustment(s.pool.QueryRow(ctx, qRefuseAdjustment.SQL, tenant, id, kind.String(), detail))
	if errors.Is(err, pgx.ErrNoRows) {
		if a, err = s.Adjustment(ctx, tenant, id); err == nil && a.Status != gateway.AdjustmentRefused {
			err = fmt.Errorf("adjustment %q is %s, not approved: the refusal not recorded", id, a.Status)
		}
	}
	return a, err
}

// scanAdjustment reads an adjustment's columns as queries/adjustments.sql
// lists them (tenant_id to refused_at).
func scanAdjustment(row pgx.Row) (gateway.Adjustment, error) {
	var a gateway.Adjustment
	var chain int64
	var wallet, counter []byte
	var amount string
	var threshold *string
	var approverID, rejecterID *uuid.UUID
	var approverName, rejecterName *string
	if err := row.Scan(&a.Tenant, &a.ID, &a.Seq, &chain, &wallet, &a.Asset, &amount, &a.CounterKind, &counter, &a.Reason,
		&a.Status, &a.NeedsApproval, &threshold, &a.ProposedBy.ID, &a.ProposedBy.Name, &a.ProposedAt, &a.ExpiresAt,
		&approverID, &approverName, &a.ApprovedAt, &rejecterID, &rejecterName, &a.RejectedAt,
		&a.JournalID, &a.BookedAt, &a.RefusalKind, &a.Refusal, &a.RefusedAt); err != nil {
		return a, err
	}
	a.ChainID, a.Wallet, a.CounterAddress = uint64(chain), common.BytesToAddress(wallet), common.BytesToAddress(counter)
	var ok bool
	if a.Amount, ok = new(big.Int).SetString(amount, 10); !ok {
		return a, fmt.Errorf("adjustment %q: stored amount %q", a.ID, amount)
	}
	if threshold != nil {
		if a.Threshold, ok = new(big.Int).SetString(*threshold, 10); !ok {
			return a, fmt.Errorf("adjustment %q: stored threshold %q", a.ID, *threshold)
		}
	}
	if approverID != nil {
		a.ApprovedBy = &gateway.KeyRef{ID: *approverID, Name: *approverName}
	}
	if rejecterID != nil {
		a.RejectedBy = &gateway.KeyRef{ID: *rejecterID, Name: *rejecterName}
	}
	return a, nil
}

// optNumeric is v as numeric text, or NULL.
func optNumeric(v *big.Int) *string {
	if v == nil {
		return nil
	}
	s := v.String()
	return &s
}
