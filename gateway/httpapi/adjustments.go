package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// Operators' adjustments of the ledger's suspense accounts take one path:
// an admin key that may use the wallet proposes one here; one above the
// approval threshold waits for a second admin key; the gateway then has
// ledgerd book it, naming the operator (and approver), and ledgerd books
// adjustments from no one else. The gateway keeps every proposal and what
// became of it (gateway.Adjustment), ledgerd the journal with both keys
// in its memo and an audit row.

// AdjustmentRules are when an operator's adjustment needs a second admin
// key: its magnitude, with those of the wallet's adjustments in the asset
// booked without one within Window, above the chain's and asset's
// threshold. A pending one lapses after TTL.
type AdjustmentRules struct {
	Thresholds AdjustmentThresholds
	// Window and TTL: 0 means 24 h and 72 h.
	Window, TTL time.Duration
}

// rule is the approval rule of chain and asset.
func (r *AdjustmentRules) rule(chainID uint64, asset string) gateway.ApprovalRule {
	return gateway.ApprovalRule{Threshold: r.Thresholds.Of(chainID, asset), Window: r.Window, TTL: r.TTL}
}

// AdjustmentThresholds are the amounts above which an adjustment needs a
// second admin key, per chain and asset, in the asset's base units (wei,
// a token's smallest unit), as amounts are: a threshold for all assets
// would mean nothing. Written "CHAIN:ASSET=AMOUNT,...", ASSET `native` or
// a token's address. A chain and asset without one has none: every
// adjustment in it needs a second key.
type AdjustmentThresholds struct {
	byAsset map[thresholdKey]*big.Int
}

type thresholdKey struct {
	chainID uint64
	asset   string
}

// UnmarshalText reads "CHAIN:ASSET=AMOUNT,...".
func (t *AdjustmentThresholds) UnmarshalText(text []byte) error {
	t.byAsset = map[thresholdKey]*big.Int{}
	for entry := range strings.SplitSeq(string(text), ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		target, amount, ok := strings.Cut(entry, "=")
		chain, asset, ok2 := strings.Cut(target, ":")
		id, err := strconv.ParseUint(chain, 10, 63)
		if !ok || !ok2 || err != nil || id == 0 {
			return fmt.Errorf("%q: not CHAIN:ASSET=AMOUNT", entry)
		}
		asset = strings.ToLower(asset)
		if asset != "native" && !(strings.HasPrefix(asset, "0x") && len(asset) == 42 && common.IsHexAddress(asset)) {
			return fmt.Errorf("%q: the asset is `native` or a token's address", entry)
		}
		n, ok := new(big.Int).SetString(amount, 10)
		if !ok || n.Sign() < 0 || n.BitLen() > 256 || strings.HasPrefix(amount, "+") {
			return fmt.Errorf("%q: the amount is a whole number of base units", entry)
		}
		key := thresholdKey{chainID: id, asset: asset}
		if _, dup := t.byAsset[key]; dup {
			return fmt.Errorf("%q: %d:%s has a threshold already", entry, id, asset)
		}
		t.byAsset[key] = n
	}
	return nil
}

// String writes the thresholds as they are read, in order.
func (t AdjustmentThresholds) String() string {
	keys := slices.SortedFunc(maps.Keys(t.byAsset), func(a, b thresholdKey) int {
		return cmp.Or(cmp.Compare(a.chainID, b.chainID), strings.Compare(a.asset, b.asset))
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d:%s=%s", k.chainID, k.asset, t.byAsset[k])
	}
	return strings.Join(out, ",")
}

// Of is the threshold of chain and asset (lower-case), nil when none is
// set.
func (t AdjustmentThresholds) Of(chainID uint64, asset string) *big.Int {
	return t.byAsset[thresholdKey{chainID: chainID, asset: asset}]
}

// adjustmentRequest is a LedgerAdjustmentRequest of gateway.yaml (the
// spec has checked its form).
type adjustmentRequest struct {
	ID             string `json:"adjustment_id"`
	ChainID        uint64 `json:"chain_id"`
	Wallet         string `json:"wallet"`
	Asset          string `json:"asset"`
	Amount         string `json:"amount"`
	CounterAccount struct {
		Kind    string `json:"kind"`
		Address string `json:"address"`
	} `json:"counter_account"`
	Reason string `json:"reason"`
}

// keyRef is the caller's key as the audit names it.
func (p *principal) keyRef() gateway.KeyRef { return gateway.KeyRef{ID: p.key.ID, Name: p.key.Name} }

// proposeAdjustment takes an operator's adjustment: 201 booked at once,
// 202 waiting for a second key, 200 proposed before (booked now if the
// ledger had not answered).
func (a *API) proposeAdjustment(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	var req adjustmentRequest
	if err := httpserver.DecodeStrict(r.Body, &req); err != nil {
		return err
	}
	wallet := gateway.SignerRef{ChainID: req.ChainID, Address: common.HexToAddress(req.Wallet)}
	if !p.mayUse(wallet) {
		// The same words whether the wallet is another tenant's or beyond
		// the key's signers: nothing about others' wallets leaks.
		return errs.Errorf(errs.Forbidden, "this key may not adjust wallet %s: an adjustment needs an admin key that may use the wallet", wallet)
	}
	amount, ok := new(big.Int).SetString(req.Amount, 10)
	if !ok {
		return errs.InvalidFields("amount is not a number", errs.FieldError{Pointer: "/amount", Detail: "a non-zero integer"})
	}
	asset := strings.ToLower(req.Asset)
	adj, created, err := a.cfg.Store.ProposeAdjustment(r.Context(), gateway.NewAdjustment{Tenant: p.tenant.ID, ID: req.ID,
		ChainID: req.ChainID, Wallet: wallet.Address, Asset: asset, Amount: amount, CounterKind: req.CounterAccount.Kind,
		CounterAddress: common.HexToAddress(req.CounterAccount.Address), Reason: req.Reason, ProposedBy: p.keyRef()},
		a.cfg.Adjustments.rule(req.ChainID, asset))
	if err != nil {
		return err
	}
	if created {
		a.cfg.Log.Info("gateway: an operator proposed a ledger adjustment", adjustmentAttrs(&adj)...)
	}
	if adj, err = a.settle(r.Context(), p, adj); err != nil {
		return err
	}
	status := http.StatusOK
	switch {
	case created && adj.Status == gateway.AdjustmentBooked:
		status = http.StatusCreated
	case created:
		status = http.StatusAccepted
	}
	httpserver.WriteJSON(w, status, toAdjustment(&adj))
	return nil
}

// settle books adj when it is cleared to book and not booked yet; a
// refused one is answered with the ledger's refusal again.
func (a *API) settle(ctx context.Context, p *principal, adj gateway.Adjustment) (gateway.Adjustment, error) {
	switch adj.Status {
	case gateway.AdjustmentApproved:
		return a.book(ctx, p, adj)
	case gateway.AdjustmentRefused:
		kind, ok := errs.ParseKind(adj.RefusalKind)
		if !ok {
			kind = errs.Conflict
		}
		return adj, errs.Errorf(kind, "adjustment %q was refused by the ledger: %s", adj.ID, adj.Refusal)
	}
	return adj, nil
}

// book has ledgerd book adj, approved, with its operator and approver,
// and records what ledgerd answered: the journal, or its refusal (which
// is the error). A ledger that did not answer leaves adj approved, for
// the next attempt.
func (a *API) book(ctx context.Context, p *principal, adj gateway.Adjustment) (gateway.Adjustment, error) {
	// The tenant is the caller's: an adjustment is only ever read within
	// its tenant.
	named := func(k gateway.KeyRef) ledgerapi.Operator {
		return ledgerapi.Operator{KeyId: k.ID, KeyName: k.Name, TenantId: adj.Tenant, TenantName: p.tenant.Name}
	}
	req := ledgerapi.AdjustmentRequest{AdjustmentId: ledgerAdjustmentPrefix(adj.Tenant) + adj.ID, ChainId: components.ChainId(adj.ChainID),
		Wallet: strings.ToLower(adj.Wallet.Hex()), Asset: adj.Asset, Amount: adj.Amount.String(), Reason: adj.Reason,
		Operator: named(adj.ProposedBy)}
	req.CounterAccount.Kind = ledgerapi.AdjustmentRequestCounterAccountKind(adj.CounterKind)
	req.CounterAccount.Address = strings.ToLower(adj.CounterAddress.Hex())
	if adj.ApprovedBy != nil {
		req.Approver = new(named(*adj.ApprovedBy))
	}
	journal, _, err := a.cfg.Ledger.Adjust(ctx, req)
	if err != nil {
		kind := errs.KindOf(err)
		if kind != errs.Invalid && kind != errs.Conflict && kind != errs.NotFound {
			return adj, err // unanswered or internal: it stays approved
		}
		var e *errs.Error
		detail := err.Error()
		if errors.As(err, &e) && e.Message != "" {
			detail = e.Message
		}
		if _, rerr := a.cfg.Store.AdjustmentRefused(ctx, adj.Tenant, adj.ID, kind, detail); rerr != nil {
			return adj, rerr
		}
		a.cfg.Log.Warn("gateway: the ledger refused an operator's adjustment", append(adjustmentAttrs(&adj), "refusal", detail)...)
		return adj, err
	}
	if adj, err = a.cfg.Store.AdjustmentBooked(ctx, adj.Tenant, adj.ID, journal); err != nil {
		return adj, err
	}
	a.cfg.Log.Info("gateway: an operator's ledger adjustment is booked", adjustmentAttrs(&adj)...)
	return adj, nil
}

// visibleAdjustment reads the {adjustment_id} of the path: one of a
// wallet the key may not use is NotFound, as an unknown one.
func (a *API) visibleAdjustment(r *http.Request) (gateway.Adjustment, error) {
	p := caller(r.Context())
	id := chi.URLParam(r, "adjustment_id") // the spec has checked its form
	adj, err := a.cfg.Store.Adjustment(r.Context(), p.tenant.ID, id)
	if err == nil && !p.mayUse(adj.Signer()) {
		err = errs.Errorf(errs.NotFound, "no adjustment %q", id)
	}
	return adj, err
}

func (a *API) getAdjustment(w http.ResponseWriter, r *http.Request) error {
	adj, err := a.visibleAdjustment(r)
	return writeAdjustment(w, adj, err)
}

// writeAdjustment ends the handlers of one adjustment: it answers adj, or
// returns err for httpserver.Handle to answer.
func writeAdjustment(w http.ResponseWriter, adj gateway.Adjustment, err error) error {
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toAdjustment(&adj))
	return nil
}

// approveAdjustment is a second admin key's approval, which books the
// adjustment. The proposer's own key cannot approve, nor can a key made
// after the proposal: that would let one operator mint the second key it
// needs.
func (a *API) approveAdjustment(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	adj, err := a.visibleAdjustment(r)
	if err == nil && adj.Status == gateway.AdjustmentPending {
		switch {
		case adj.ProposedBy.ID == p.key.ID:
			err = errs.Errorf(errs.Forbidden, "the key that proposed adjustment %q cannot approve it: a second admin key must", adj.ID)
		case !p.key.CreatedAt.Before(adj.ProposedAt):
			err = errs.Errorf(errs.Forbidden, "key %s was made after adjustment %q was proposed: an approving key must be older than the proposal", p.key.Name, adj.ID)
		}
	}
	if err == nil {
		adj, err = a.cfg.Store.ApproveAdjustment(r.Context(), p.tenant.ID, adj.ID, p.keyRef())
	}
	if err == nil && adj.Status == gateway.AdjustmentApproved && adj.ApprovedBy != nil && adj.ApprovedBy.ID == p.key.ID {
		a.cfg.Log.Info("gateway: an operator approved a ledger adjustment", adjustmentAttrs(&adj)...)
	}
	if err == nil {
		adj, err = a.settle(r.Context(), p, adj)
	}
	return writeAdjustment(w, adj, err)
}

// rejectAdjustment ends a pending adjustment unbooked.
func (a *API) rejectAdjustment(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	adj, err := a.visibleAdjustment(r)
	if err == nil {
		adj, err = a.cfg.Store.RejectAdjustment(r.Context(), p.tenant.ID, adj.ID, p.keyRef())
	}
	if err == nil {
		a.cfg.Log.Info("gateway: an operator rejected a ledger adjustment", adjustmentAttrs(&adj)...)
	}
	return writeAdjustment(w, adj, err)
}

// listAdjustments lists the adjustments of the wallets the key may use,
// newest first; the cursor is the last one's position.
func (a *API) listAdjustments(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	q := r.URL.Query()
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	f := gateway.AdjustmentFilter{Status: q.Get("status"), Signers: p.signers, Limit: 100}
	if limit != nil {
		f.Limit = int(*limit)
	}
	if cursor != nil {
		if f.Before, err = strconv.ParseInt(*cursor, 10, 64); err != nil || f.Before < 1 {
			return errs.InvalidFields("cursor is not one of this list's", errs.FieldError{Pointer: "cursor", Detail: "a next_cursor of this list"})
		}
	}
	page := f.Limit
	f.Limit++
	adjs, err := a.cfg.Store.Adjustments(r.Context(), p.tenant.ID, f)
	if err != nil {
		return err
	}
	var next *string
	if len(adjs) > page {
		adjs = adjs[:page]
		next = new(strconv.FormatInt(adjs[page-1].Seq, 10))
	}
	out := make([]adjustmentJSON, len(adjs))
	for i := range adjs {
		out[i] = toAdjustment(&adjs[i])
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"adjustments": out, "next_cursor": next})
	return nil
}

// adjustmentAttrs are the audit's log attributes of adj.
func adjustmentAttrs(adj *gateway.Adjustment) []any {
	attrs := []any{"tenant_id", adj.Tenant.String(), "adjustment_id", adj.ID, "status", adj.Status, "chain_id", adj.ChainID,
		"wallet", strings.ToLower(adj.Wallet.Hex()), "asset", adj.Asset, "amount", adj.Amount.String(), "needs_approval", adj.NeedsApproval,
		"proposed_by_key_id", adj.ProposedBy.ID.String(), "proposed_by", adj.ProposedBy.Name}
	if k := adj.ApprovedBy; k != nil {
		attrs = append(attrs, "approved_by_key_id", k.ID.String(), "approved_by", k.Name)
	}
	if k := adj.RejectedBy; k != nil {
		attrs = append(attrs, "rejected_by_key_id", k.ID.String(), "rejected_by", k.Name)
	}
	if adj.JournalID != nil {
		attrs = append(attrs, "journal_id", *adj.JournalID)
	}
	return attrs
}

// ledgerAdjustmentPrefix starts the ledger's id of every adjustment of
// tenant: adjustment ids are per tenant, as transit ids are.
func ledgerAdjustmentPrefix(tenant uuid.UUID) string { return tenant.String() + ":" }

// adjustmentJSON is a LedgerAdjustment of gateway.yaml: the request that
// proposed it (whose fields encoding/json flattens into it, first), then
// its state.
type adjustmentJSON struct {
	adjustmentRequest
	Status        string     `json:"status"`
	NeedsApproval bool       `json:"needs_approval"`
	Threshold     *string    `json:"threshold"`
	ProposedBy    keyJSON    `json:"proposed_by"`
	ProposedAt    time.Time  `json:"proposed_at"`
	ExpiresAt     *time.Time `json:"expires_at"`
	ApprovedBy    *keyJSON   `json:"approved_by"`
	ApprovedAt    *time.Time `json:"approved_at"`
	RejectedBy    *keyJSON   `json:"rejected_by"`
	RejectedAt    *time.Time `json:"rejected_at"`
	JournalID     *int64     `json:"journal_id"`
	BookedAt      *time.Time `json:"booked_at"`
	Refusal       *string    `json:"refusal"`
}

type keyJSON struct {
	KeyID uuid.UUID `json:"key_id"`
	Name  string    `json:"name"`
}

func toAdjustment(adj *gateway.Adjustment) adjustmentJSON {
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		return new(t.UTC())
	}
	key := func(k *gateway.KeyRef) *keyJSON {
		if k == nil {
			return nil
		}
		return &keyJSON{KeyID: k.ID, Name: k.Name}
	}
	out := adjustmentJSON{adjustmentRequest: adjustmentRequest{ID: adj.ID, ChainID: adj.ChainID, Wallet: strings.ToLower(adj.Wallet.Hex()),
		Asset: adj.Asset, Amount: adj.Amount.String(), Reason: adj.Reason}, Status: adj.Status, NeedsApproval: adj.NeedsApproval,
		ProposedBy: *key(&adj.ProposedBy), ProposedAt: adj.ProposedAt.UTC(), ExpiresAt: utc(adj.ExpiresAt),
		ApprovedBy: key(adj.ApprovedBy), ApprovedAt: utc(adj.ApprovedAt), RejectedBy: key(adj.RejectedBy), RejectedAt: utc(adj.RejectedAt),
		JournalID: adj.JournalID, BookedAt: utc(adj.BookedAt)}
	out.CounterAccount.Kind, out.CounterAccount.Address = adj.CounterKind, strings.ToLower(adj.CounterAddress.Hex())
	if adj.Threshold != nil {
		out.Threshold = new(adj.Threshold.String())
	}
	if adj.Status == gateway.AdjustmentRefused {
		out.Refusal = new(adj.Refusal)
	}
	return out
}
