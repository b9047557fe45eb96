// Package httpapi is txmanagerd's internal HTTP API
// (openapi/txmanager.yaml): accepting, reading, listing and cancelling
// transactions for the gateway, and the event feed for the gateway and the
// ledger.
package httpapi

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/remote"
)

// maxBody bounds a create: 128 KiB of call data as hex, 16 KiB of
// metadata, and the rest.
const maxBody = 320 << 10

// maxWait bounds a long poll of the feed.
const maxWait = 30 * time.Second

// API serves the internal routes.
type API struct {
	Store  txmanager.APIStore
	Chains *txmanager.Chains
	// Signer checks approvals and rejections when they are submitted
	// (signerd alone knows the approvers' keys); without it both are
	// refused as unavailable, never stored unchecked.
	Signer ApprovalChecker
	// Feed wakes long polls of the feed when its head moves (one LISTEN
	// per process). Without it a long poll looks again every PollEvery.
	Feed      txmanager.FeedWaiter
	PollEvery time.Duration
}

// Mount adds the routes to r: transactions for the gateway, the feed for
// the gateway and the ledger.
func (a *API) Mount(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(mtls.Allow("gateway"))
		r.Post("/internal/v1/tx", httpserver.Handle(a.create))
		r.Post("/internal/v1/tx/batch", httpserver.Handle(a.createBatch))
		r.Get("/internal/v1/tx", httpserver.Handle(a.list))
		r.Get("/internal/v1/tx/by-request", httpserver.Handle(a.getByRequest))
		r.Get("/internal/v1/tx/{tx_id}", httpserver.Handle(a.get))
		r.Get("/internal/v1/tx/{tx_id}/events", httpserver.Handle(a.txEvents))
		r.Post("/internal/v1/tx/{tx_id}/cancel", httpserver.Handle(a.cancel))
		r.Post("/internal/v1/tx/{tx_id}/approvals", httpserver.Handle(a.approve))
		r.Post("/internal/v1/tx/{tx_id}/reject", httpserver.Handle(a.reject))
		r.Post("/internal/v1/tx/{tx_id}/actions", httpserver.Handle(a.requestAction))
		r.Get("/internal/v1/tx/{tx_id}/actions", httpserver.Handle(a.listActions))
		r.Get("/internal/v1/signers/{chain_id}/{address}", httpserver.Handle(a.signerStatus))
	})
	r.Group(func(r chi.Router) {
		r.Use(mtls.Allow("gateway", "ledger"))
		r.Get("/internal/v1/events", httpserver.Handle(a.events))
	})
}

// CreateTxRequest is the body of a create.
type CreateTxRequest struct {
	ChainID              uint64          `json:"chain_id"`
	From                 *common.Address `json:"from"`
	RequestID            string          `json:"request_id"`
	To                   *common.Address `json:"to"`
	Value                *string         `json:"value"`
	Data                 *hexutil.Bytes  `json:"data"`
	Gas                  *uint64         `json:"gas"`
	MaxFeePerGas         *string         `json:"max_fee_per_gas"`
	MaxPriorityFeePerGas *string         `json:"max_priority_fee_per_gas"`
	Route                string          `json:"route"`
	DependsOn            dependson.List  `json:"depends_on"`
	Metadata             json.RawMessage `json:"metadata"`
	TransitNamespace     string          `json:"transit_namespace"`
}

// Intent checks the request's fields and converts it, naming every
// problem.
func (c *CreateTxRequest) Intent() (*txmanager.Intent, error) {
	var problems []string
	in := &txmanager.Intent{ChainID: c.ChainID, RequestID: c.RequestID, To: c.To, Gas: c.Gas, DependsOn: c.DependsOn,
		Route: txmanager.Route(c.Route), Metadata: c.Metadata, TransitNamespace: c.TransitNamespace, Value: new(big.Int), Data: []byte{}}
	if c.From == nil {
		problems = append(problems, "from: required")
	} else {
		in.From = *c.From
	}
	if in.Route == "" {
		in.Route = txmanager.RouteAuto
	}
	if c.Data != nil {
		in.Data = *c.Data
	}
	wei := func(name string, s *string) *big.Int {
		if s == nil {
			return nil
		}
		v, ok := new(big.Int).SetString(*s, 10)
		if !ok || strings.HasPrefix(*s, "+") || (len(*s) > 1 && (*s)[0] == '0') {
			problems = append(problems, fmt.Sprintf("%s: %q is not a decimal wei amount", name, *s))
			return nil
		}
		return v
	}
	if v := wei("value", c.Value); v != nil {
		in.Value = v
	}
	in.MaxFeePerGas = wei("max_fee_per_gas", c.MaxFeePerGas)
	in.MaxPriorityFeePerGas = wei("max_priority_fee_per_gas", c.MaxPriorityFeePerGas)
	if len(problems) > 0 {
		return nil, errs.E(errs.Invalid, strings.Join(problems, "; "))
	}
	if err := in.Validate(); err != nil {
		return nil, txmanager.Invalid(err)
	}
	return in, nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request) error {
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	var body CreateTxRequest
	if err := httpserver.DecodeStrict(http.MaxBytesReader(w, r.Body, maxBody), &body); err != nil {
		return err
	}
	in, err := a.intentOf(&body)
	if err != nil {
		return err
	}
	tx, created, err := a.Store.Create(r.Context(), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpserver.WriteJSON(w, status, a.toTx(&tx))
	return nil
}

// intentOf checks a create's request against its shape and the chain's
// configuration.
func (a *API) intentOf(c *CreateTxRequest) (*txmanager.Intent, error) {
	in, err := c.Intent()
	if err != nil {
		return nil, err
	}
	if err := a.Chains.CheckIntent(in); err != nil {
		return nil, txmanager.Invalid(err)
	}
	return in, nil
}

// writeTx answers with the transaction, or with err as a problem.
func (a *API) writeTx(w http.ResponseWriter, r *http.Request, tx txmanager.Tx, err error) error {
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, a.toTx(&tx))
	return nil
}

func txIDParam(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "tx_id"))
	if err != nil {
		return id, errs.Errorf(errs.Invalid, "tx_id %q is not a transaction id", chi.URLParam(r, "tx_id"))
	}
	return id, nil
}

func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	if err != nil {
		return err
	}
	tx, err := a.Store.Get(r.Context(), id)
	return a.writeTx(w, r, tx, err)
}

func (a *API) getByRequest(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var fields []errs.FieldError
	chainID, err := strconv.ParseUint(q.Get("chain_id"), 10, 63)
	if err != nil || chainID == 0 {
		fields = append(fields, errs.FieldError{Pointer: "chain_id", Detail: "a chain id is required"})
	}
	from := q.Get("from")
	if !common.IsHexAddress(from) || !strings.HasPrefix(from, "0x") {
		fields = append(fields, errs.FieldError{Pointer: "from", Detail: "an 0x-prefixed address is required"})
	}
	requestID := q.Get("request_id")
	if requestID == "" || len(requestID) > 255 {
		fields = append(fields, errs.FieldError{Pointer: "request_id", Detail: "1 to 255 characters"})
	}
	if len(fields) > 0 {
		return errs.InvalidFields("chain_id, from and request_id name a transaction", fields...)
	}
	tx, err := a.Store.GetByRequest(r.Context(), txmanager.SignerKey{ChainID: chainID, Signer: common.HexToAddress(from)}, requestID)
	return a.writeTx(w, r, tx, err)
}

// timelineSequenceWait bounds how long a timeline read waits for events
// still being written to be numbered.
const timelineSequenceWait = 2 * time.Second

func (a *API) txEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	if err != nil {
		return err
	}
	// Events written but not numbered yet are numbered first, so a
	// timeline read right after a change shows it. One try of Sequence may
	// find the writers busy and number nothing, so keep trying, for a
	// moment only: a writer stuck in its transaction must not hold the
	// read, which then shows what is numbered.
	seqCtx, cancel := context.WithTimeout(r.Context(), timelineSequenceWait)
	_, err = a.Store.SequenceAll(seqCtx)
	waitedLong := seqCtx.Err() != nil
	cancel()
	if err != nil && !waitedLong {
		return err
	}
	evs, err := a.Store.TxEvents(r.Context(), id)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"events": toEvents(evs)})
	return nil
}

func (a *API) cancel(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	if err != nil {
		return err
	}
	tx, err := a.Store.Cancel(r.Context(), id)
	return a.writeTx(w, r, tx, err)
}

// ApprovalRequest is the body of an approval.
type ApprovalRequest struct {
	Approver string `json:"approver"`
	// MaxFeePerGas is the fee ceiling the approver signed (wei per gas,
	// decimal); an approval without one was signed before
	// txfence/approval/v2 and is refused.
	MaxFeePerGas *string   `json:"max_fee_per_gas"`
	Expiry       time.Time `json:"expiry"`
	Signature    []byte    `json:"signature"`
}

// RejectRequest is the body of a rejection: the approver's signature over
// txfence/rejection/v1 (the intent, the tx id, the expiry).
type RejectRequest struct {
	Approver  string    `json:"approver"`
	Expiry    time.Time `json:"expiry"`
	Signature []byte    `json:"signature"`
}

// check names every problem of the rejection's shape; now is the server's
// clock.
func (b *RejectRequest) check(now time.Time) error {
	var fields []errs.FieldError
	bad := func(pointer, detail string) {
		fields = append(fields, errs.FieldError{Pointer: pointer, Detail: detail})
	}
	if !approverID.MatchString(b.Approver) {
		bad("/approver", "1 to 64 letters, digits, '.', '_', '-' or '@'")
	}
	checkExpiry(b.Expiry, now, bad)
	if len(b.Signature) != ed25519.SignatureSize {
		bad("/signature", fmt.Sprintf("%d bytes, want an Ed25519 signature of %d, base64, over txfence/rejection/v1", len(b.Signature), ed25519.SignatureSize))
	}
	return invalid(fields)
}

// ApprovalChecker asks signerd whether approvals or a rejection count
// (remote.Signer).
type ApprovalChecker interface {
	CheckApprovals(ctx context.Context, t remote.ToSign, rejection *remote.Rejection) (remote.ApprovalCheck, error)
}

var _ ApprovalChecker = (*remote.Signer)(nil)

// approverID is what signerd's policy accepts as an approver id.
var approverID = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

// check names every problem of the approval, and returns its fee ceiling;
// now is the server's clock.
func (b *ApprovalRequest) check(now time.Time) (*big.Int, error) {
	var fields []errs.FieldError
	bad := func(pointer, detail string) {
		fields = append(fields, errs.FieldError{Pointer: pointer, Detail: detail})
	}
	if !approverID.MatchString(b.Approver) {
		bad("/approver", "1 to 64 letters, digits, '.', '_', '-' or '@'")
	}
	var ceiling *big.Int
	if b.MaxFeePerGas == nil {
		bad("/max_fee_per_gas", "required: the fee ceiling the approver signed (wei per gas); approvals signed without one (txfence/approval/v1) must be given again")
	} else if v, ok := new(big.Int).SetString(*b.MaxFeePerGas, 10); !ok || !uint256.MatchString(*b.MaxFeePerGas) || v.BitLen() > 256 {
		bad("/max_fee_per_gas", fmt.Sprintf("%q is not a uint256 decimal amount of wei per gas", *b.MaxFeePerGas))
	} else {
		ceiling = v
	}
	checkExpiry(b.Expiry, now, bad)
	if len(b.Signature) != ed25519.SignatureSize {
		bad("/signature", fmt.Sprintf("%d bytes, want an Ed25519 signature of %d, base64", len(b.Signature), ed25519.SignatureSize))
	}
	if err := invalid(fields); err != nil {
		return nil, err
	}
	return ceiling, nil
}

func checkExpiry(expiry, now time.Time, bad func(pointer, detail string)) {
	switch {
	case expiry.IsZero():
		bad("/expiry", "required")
	case expiry.Nanosecond() != 0:
		bad("/expiry", "whole seconds (the approver signed it in whole seconds)")
	case !expiry.After(now):
		bad("/expiry", fmt.Sprintf("%s is past", expiry.UTC().Format(time.RFC3339)))
	}
}

// invalid is the problem naming fields, nil without any.
func invalid(fields []errs.FieldError) error {
	if len(fields) == 0 {
		return nil
	}
	details := make([]string, len(fields))
	for i, f := range fields {
		details[i] = strings.TrimPrefix(f.Pointer, "/") + ": " + f.Detail
	}
	return errs.InvalidFields(strings.Join(details, "; "), fields...)
}

// uint256 is a uint256's decimal form without sign or leading zeros
// (components.yaml Uint256); the value is range-checked besides.
var uint256 = regexp.MustCompile(`^(0|[1-9][0-9]{0,77})$`)

// decodeBody reads a small strict JSON body into v.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	return httpserver.DecodeStrict(http.MaxBytesReader(w, r.Body, 4<<10), v)
}

func (a *API) approve(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	var body ApprovalRequest
	if err == nil {
		err = decodeBody(w, r, &body)
	}
	var ceiling *big.Int
	if err == nil {
		ceiling, err = body.check(time.Now())
	}
	approval := txmanager.Approval{Approver: body.Approver, MaxFeePerGas: ceiling, Expiry: body.Expiry, Signature: body.Signature}
	var c remote.ApprovalCheck
	if err == nil {
		c, err = a.checkWithSigner(r.Context(), id, []remote.Approval{approval}, nil)
	}
	if err == nil {
		err = refuseUncounted(c, c.Approvals[0], "the approval does not count")
	}
	if err != nil {
		return err
	}
	// Only an approver of the rule gets here, and each replaces its own
	// approval: N stored at most, which the store enforces too.
	tx, err := a.Store.Approve(r.Context(), id, approval, len(c.Approvers))
	return a.writeTx(w, r, tx, err)
}

func (a *API) reject(w http.ResponseWriter, r *http.Request) error {
	id, err := txIDParam(r)
	var body RejectRequest
	if err == nil {
		err = decodeBody(w, r, &body)
	}
	if err == nil {
		err = body.check(time.Now())
	}
	rejection := remote.Rejection{Approver: body.Approver, Expiry: body.Expiry, Signature: body.Signature}
	var c remote.ApprovalCheck
	if err == nil {
		c, err = a.checkWithSigner(r.Context(), id, nil, &rejection)
	}
	if err == nil {
		err = refuseUncounted(c, *c.Rejection, "the rejection does not count")
	}
	if err != nil {
		return err
	}
	tx, err := a.Store.Reject(r.Context(), id, txmanager.Rejection(rejection))
	return a.writeTx(w, r, tx, err)
}

// checkWithSigner asks signerd whether approvals or rejection of the
// transaction id count, before anything is stored. Only a transaction
// waiting for approvals is asked about: any other is a conflict, as
// storing would be.
func (a *API) checkWithSigner(ctx context.Context, id uuid.UUID, approvals []remote.Approval, rejection *remote.Rejection) (remote.ApprovalCheck, error) {
	if a.Signer == nil {
		return remote.ApprovalCheck{}, errs.E(errs.Unavailable, "this node has no signer to check approvals with")
	}
	tx, err := a.Store.Get(ctx, id)
	if err != nil {
		return remote.ApprovalCheck{}, err
	}
	// A rejection that already failed the transaction is checked again
	// too: the store answers the same rejection again with the
	// transaction, and only to one signed like the first.
	rejected := rejection != nil && tx.State == txmanager.StateFailed && tx.Reason == txmanager.ReasonApprovalRejected
	if tx.State != txmanager.StatePendingApproval && !rejected {
		return remote.ApprovalCheck{}, errs.Errorf(errs.Conflict, "transaction %s is %s: only a transaction waiting for approvals can be approved or rejected", id, tx.State)
	}
	gas := uint64(21000)
	if tx.GasLimit != nil {
		gas = *tx.GasLimit
	}
	// The fees only give the request its type, which the intent the
	// approver signed covers: signerd does not price them here.
	fees := remote.Fees{MaxFeePerGas: new(big.Int), MaxPriorityFeePerGas: new(big.Int)}
	if ch, ok := a.Chains.Chain(tx.ChainID); ok && ch.Legacy {
		fees = remote.Fees{GasPrice: new(big.Int)}
	}
	return a.Signer.CheckApprovals(ctx, remote.ToSign{Tx: &tx, GasLimit: gas, Fees: fees, Approvals: approvals}, rejection)
}

// refuseUncounted is a problem naming the field of an item signerd does
// not count: a conflict when nothing could count for the transaction (no
// rule needs approvals now), invalid input otherwise.
func refuseUncounted(c remote.ApprovalCheck, item remote.ItemCheck, title string) error {
	switch {
	case item.Counts:
		return nil
	case c.Why != "":
		return errs.E(errs.Conflict, title+": "+c.Why)
	}
	field := item.Field
	if field == "" {
		field = "approver"
	}
	return errs.InvalidFields(fmt.Sprintf("%s: %q %s", title, item.Approver, item.Why),
		errs.FieldError{Pointer: "/" + field, Detail: item.Why})
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var f txmanager.TxFilter
	var problems []string
	if v := q.Get("chain_id"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			problems = append(problems, "chain_id: a chain id")
		}
		f.ChainID = n
	}
	if v := q.Get("from"); v != "" {
		if !common.IsHexAddress(v) || !strings.HasPrefix(v, "0x") {
			problems = append(problems, "from: an address")
		}
		addr := common.HexToAddress(v)
		f.Signer = &addr
	}
	if v, ok := q["signers"]; ok {
		keys, err := parseSignerKeys(strings.Join(v, ","))
		if err != nil {
			problems = append(problems, "signers: "+err.Error())
		}
		f.Signers = keys
	}
	if v := q.Get("state"); v != "" {
		if f.State = txmanager.State(v); !f.State.Valid() {
			problems = append(problems, "state: not a state")
		}
	}
	if v := q.Get("sub_state"); v != "" {
		if f.SubState = txmanager.SubState(v); !f.SubState.Valid() {
			problems = append(problems, "sub_state: not a sub-state")
		}
	}
	for name, dst := range map[string]*time.Time{"created_after": &f.CreatedAfter, "created_before": &f.CreatedBefore} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				problems = append(problems, name+": an RFC 3339 time")
			}
			*dst = t
		}
	}
	limit, err := queryInt(q.Get("limit"), 100, 1, 1000)
	if err != nil {
		problems = append(problems, "limit: "+err.Error())
	}
	if len(problems) > 0 {
		return errs.E(errs.Invalid, strings.Join(problems, "; "))
	}
	txs, next, err := a.Store.List(r.Context(), f, q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	out := make([]txJSON, len(txs))
	for i := range txs {
		out[i] = a.toTx(&txs[i])
	}
	var cursor *string
	if next != "" {
		cursor = &next
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"transactions": out, "next_cursor": cursor})
	return nil
}

// maxListSigners bounds the signers filter of a list, which travels in
// the query string.
const maxListSigners = 500

// parseSignerKeys reads a comma-separated list of chain_id:address
// signers; an empty list is valid and matches nothing.
func parseSignerKeys(raw string) ([]txmanager.SignerKey, error) {
	keys := []txmanager.SignerKey{}
	if raw == "" {
		return keys, nil
	}
	parts := strings.Split(raw, ",")
	if len(parts) > maxListSigners {
		return nil, fmt.Errorf("at most %d signers", maxListSigners)
	}
	for _, p := range parts {
		chain, addr, ok := strings.Cut(p, ":")
		id, err := strconv.ParseUint(chain, 10, 63)
		if !ok || err != nil || id == 0 || !common.IsHexAddress(addr) || !strings.HasPrefix(addr, "0x") {
			return nil, fmt.Errorf("%q is not chain_id:0x-address", p)
		}
		keys = append(keys, txmanager.SignerKey{ChainID: id, Signer: common.HexToAddress(addr)})
	}
	return keys, nil
}

func (a *API) signerStatus(w http.ResponseWriter, r *http.Request) error {
	chainID, err := strconv.ParseUint(chi.URLParam(r, "chain_id"), 10, 63)
	addr := chi.URLParam(r, "address")
	if err != nil || chainID == 0 || !strings.HasPrefix(addr, "0x") || !common.IsHexAddress(addr) {
		return errs.E(errs.Invalid, "a chain id and a 0x-prefixed address")
	}
	key := txmanager.SignerKey{ChainID: chainID, Signer: common.HexToAddress(addr)}
	if _, ok := a.Chains.Signer(key); !ok {
		return errs.Errorf(errs.NotFound, "%s is not a configured signer", key)
	}
	st, err := a.Store.Status(r.Context(), key)
	if err != nil {
		return err
	}
	out := map[string]any{"chain_id": key.ChainID, "signer": key.Signer, "counts": st.Counts, "fencing_token": st.Token}
	if st.Owner != "" {
		out["owner"] = st.Owner
		out["lease_expires_at"] = st.LeaseExpiresAt.UTC()
	}
	if st.NextNonce != nil {
		out["next_nonce"] = *st.NextNonce
	}
	if st.OldestOpenSince != nil {
		out["oldest_open_since"] = st.OldestOpenSince.UTC()
		out["oldest_open_age_seconds"] = time.Since(*st.OldestOpenSince).Seconds()
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
	return nil
}

func queryInt(raw string, def, lo, hi int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("an integer from %d to %d", lo, hi)
	}
	return n, nil
}

func (a *API) events(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	after, err := strconv.ParseUint(q.Get("after"), 10, 63)
	if q.Get("after") == "" {
		after, err = 0, nil
	}
	limit, lerr := queryInt(q.Get("limit"), 100, 1, 1000)
	wait, werr := queryInt(q.Get("wait"), 0, 0, int(maxWait/time.Second))
	if err != nil || lerr != nil || werr != nil {
		return errs.E(errs.Invalid, "after: a sequence (0 or more); limit: 1 to 1000; wait: 0 to 30 seconds")
	}
	evs, err := a.waitForEvents(r.Context(), time.Duration(wait)*time.Second, after, limit)
	if err != nil {
		return err
	}
	head, err := a.Store.HeadSeq(r.Context())
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"events": toEvents(evs), "head_seq": head})
	return nil
}

func toEvents(evs []txmanager.Event) []eventJSON {
	out := make([]eventJSON, len(evs))
	for i := range evs {
		e := &evs[i]
		out[i] = eventJSON{Seq: e.Seq, ID: e.ID(), Type: e.Type, TxID: e.TxID, ChainID: e.ChainID, Signer: e.Signer, CreatedAt: e.CreatedAt.UTC(), Data: e.Data}
	}
	return out
}

// waitForEvents reads the feed after seq and, while it holds nothing
// there, waits for its head to move until wait ends. A long poll only
// reads: the sequencer numbers events (SEQUENCE_EVERY) and announces each
// new head to the Feed watch, so a thousand idle polls cost the database
// nothing. A read without a wait (a stream taking its starting position)
// first numbers what is committed, in one bounded try, so that it finds
// what was written just before it.
func (a *API) waitForEvents(ctx context.Context, wait time.Duration, after uint64, limit int) ([]txmanager.Event, error) {
	if wait == 0 {
		if _, err := a.Store.Sequence(ctx); err != nil {
			return nil, err
		}
	}
	deadline := time.Now().Add(wait)
	for {
		evs, err := a.Store.EventsAfter(ctx, after, limit)
		if err != nil || len(evs) > 0 || !time.Now().Before(deadline) {
			return evs, err
		}
		waitCtx, cancel := context.WithDeadline(ctx, deadline)
		err = a.waitForHead(waitCtx, after)
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		// The head moved, or the wait is over: read once more.
	}
}

// waitForHead waits for the feed's head to move above after: told by the
// Feed watch, or found by looking again after PollEvery.
func (a *API) waitForHead(ctx context.Context, after uint64) error {
	if a.Feed != nil {
		return a.Feed.Wait(ctx, after)
	}
	every := a.PollEvery
	if every <= 0 {
		every = 50 * time.Millisecond
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(every):
		return nil
	}
}

type txJSON struct {
	TxID                 uuid.UUID          `json:"tx_id"`
	ChainID              uint64             `json:"chain_id"`
	From                 common.Address     `json:"from"`
	RequestID            string             `json:"request_id"`
	Type                 string             `json:"type,omitempty"`
	To                   *common.Address    `json:"to,omitempty"`
	Value                string             `json:"value"`
	Data                 hexutil.Bytes      `json:"data"`
	Gas                  *uint64            `json:"gas,omitempty"`
	GasLimit             *uint64            `json:"gas_limit,omitempty"`
	MaxFeePerGas         *string            `json:"max_fee_per_gas,omitempty"`
	MaxPriorityFeePerGas *string            `json:"max_priority_fee_per_gas,omitempty"`
	Route                txmanager.Route    `json:"route"`
	DependsOn            dependson.List     `json:"depends_on,omitempty"`
	Metadata             json.RawMessage    `json:"metadata"`
	State                txmanager.State    `json:"state"`
	SubState             txmanager.SubState `json:"sub_state,omitempty"`
	Reason               string             `json:"reason,omitempty"`
	Nonce                *uint64            `json:"nonce,omitempty"`
	Hash                 *common.Hash       `json:"hash,omitempty"`
	ApprovalExpiresAt    *time.Time         `json:"approval_expires_at,omitempty"`
	FeeCeiling           *string            `json:"fee_ceiling,omitempty"`
	CreatedAt            time.Time          `json:"created_at"`
	UpdatedAt            time.Time          `json:"updated_at"`
}

// toTx is the API's document of t, with the transaction type its chain
// is configured for and the fee ceiling its signer's caps give it.
func (a *API) toTx(t *txmanager.Tx) txJSON {
	out := toTxJSON(t)
	if ch, ok := a.Chains.Chain(t.ChainID); ok {
		out.Type = "eip1559"
		if ch.Legacy {
			out.Type = "legacy"
		}
	}
	if sc, ok := a.Chains.Signer(t.Key()); ok {
		if ceiling := sc.FeeCeiling(&t.Intent); ceiling != nil {
			s := ceiling.String()
			out.FeeCeiling = &s
		}
	}
	return out
}

func toTxJSON(t *txmanager.Tx) txJSON {
	str := func(v *big.Int) *string {
		if v == nil {
			return nil
		}
		s := v.String()
		return &s
	}
	meta := t.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage("{}")
	}
	out := txJSON{TxID: t.ID, ChainID: t.ChainID, From: t.From, RequestID: t.RequestID, To: t.To, Value: t.Value.String(),
		Data: t.Data, Gas: t.Gas, GasLimit: t.GasLimit, MaxFeePerGas: str(t.MaxFeePerGas), MaxPriorityFeePerGas: str(t.MaxPriorityFeePerGas),
		Route: t.Route, DependsOn: t.DependsOn, Metadata: meta, State: t.State, SubState: t.SubState, Reason: t.Reason,
		Nonce: t.Nonce, Hash: t.Hash, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()}
	if t.ApprovalExpiresAt != nil {
		at := t.ApprovalExpiresAt.UTC()
		out.ApprovalExpiresAt = &at
	}
	return out
}

type eventJSON struct {
	Seq       uint64          `json:"seq"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	TxID      uuid.UUID       `json:"tx_id"`
	ChainID   uint64          `json:"chain_id"`
	Signer    common.Address  `json:"signer"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}
