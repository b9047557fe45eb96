package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// createTx passes the client's intent to txmanager with its
// Idempotency-Key as the request id. The body goes on as the client wrote
// it (the spec has checked it), so metadata keeps its numbers exactly.
func (a *API) createTx(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return errs.Wrap(errs.Invalid, "read the request body", err)
	}
	// Only the three members the gateway checks are decoded.
	var head struct {
		ChainID   uint64         `json:"chain_id"`
		From      common.Address `json:"from"`
		DependsOn dependson.List `json:"depends_on"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		var invalid *errs.Error
		if errors.As(err, &invalid) {
			return invalid
		}
		return errs.Wrap(errs.Invalid, "the request body", err)
	}
	from := gateway.SignerRef{ChainID: head.ChainID, Address: head.From}
	if !p.mayUse(from) {
		return errs.InvalidFields("from is not a signer this key may use", errs.FieldError{Pointer: "/from",
			Detail: fmt.Sprintf("%s is not one of the tenant's signers this key may use", from)})
	}
	if err := a.checkParents(r, head.DependsOn); err != nil {
		return err
	}
	body, err := withRequestID(raw, r.Header.Get("Idempotency-Key"), transitNamespace(p))
	if err != nil {
		return err
	}
	tx, created, err := a.cfg.TxManager.Create(r.Context(), body)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Location", "/api/v1/tx/"+tx.ID.String())
	writeRaw(w, status, tx.JSON)
	return nil
}

// checkParents refuses a depends_on that names a transaction twice, more
// than dependson.Max, or one the key may not see (another tenant's, or on
// a signer the key may not use: on any chain), naming each such parent by
// its place (/depends_on/2). Another tenant's transaction is worded as one
// that does not exist.
func (a *API) checkParents(r *http.Request, parents dependson.List) error {
	fields := parents.Check(uuid.Nil)
	if len(fields) > 0 {
		return errs.InvalidFields("depends_on: "+fields[0].Detail, fields...)
	}
	for i, id := range parents {
		_, err := a.ownedTx(r, id)
		switch {
		case errs.Is(err, errs.NotFound):
			fields = append(fields, errs.FieldError{Pointer: dependson.Pointer(i), Detail: "no transaction " + id.String()})
		case err != nil:
			return err
		}
	}
	if len(fields) > 0 {
		return errs.InvalidFields("depends_on names no transaction of the tenant's", fields...)
	}
	return nil
}

// withRequestID returns the JSON object body with request_id and
// transit_namespace added as its first members. The spec, checked before,
// lets neither into a client's body, and the rest of it goes on byte for
// byte.
func withRequestID(body []byte, requestID, namespace string) ([]byte, error) {
	rest := bytes.TrimLeft(body, " \t\r\n")
	if len(rest) == 0 || rest[0] != '{' {
		return nil, errs.E(errs.Invalid, "the request body is not a JSON object")
	}
	rest = rest[1:]
	id, err := json.Marshal(requestID)
	if err != nil {
		return nil, err
	}
	ns, err := json.Marshal(namespace)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(body)+len(id)+len(ns)+40)
	out = append(append(out, `{"request_id":`...), id...)
	out = append(append(out, `,"transit_namespace":`...), ns...)
	if trimmed := bytes.TrimLeft(rest, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...), nil
}

// ownedTx reads a transaction the caller may see; any other is NotFound,
// exactly as if it did not exist.
func (a *API) ownedTx(r *http.Request, id uuid.UUID) (remote.Tx, error) {
	tx, err := a.cfg.TxManager.Get(r.Context(), id)
	if err != nil {
		return tx, err
	}
	if !caller(r.Context()).mayUse(gateway.SignerRef{ChainID: tx.ChainID, Address: tx.From}) {
		return remote.Tx{}, errs.Errorf(errs.NotFound, "no transaction %s", id)
	}
	return tx, nil
}

// txParam reads the {tx_id} of the path (the spec has checked its form)
// and the transaction, which the caller must be allowed to see.
func (a *API) txParam(r *http.Request) (remote.Tx, error) {
	id, err := uuid.Parse(chi.URLParam(r, "tx_id"))
	if err != nil {
		return remote.Tx{}, errs.InvalidFields("tx_id is not a transaction id", errs.FieldError{Pointer: "tx_id", Detail: err.Error()})
	}
	return a.ownedTx(r, id)
}

func (a *API) getTx(w http.ResponseWriter, r *http.Request) error {
	tx, err := a.txParam(r)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, tx.JSON)
	return nil
}

func (a *API) getTxByRequest(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	chainID, _ := strconv.ParseUint(q.Get("chain_id"), 10, 63)
	signer := gateway.SignerRef{ChainID: chainID, Address: common.HexToAddress(q.Get("from"))}
	if !caller(r.Context()).mayUse(signer) {
		return errs.Errorf(errs.NotFound, "no transaction of %s with request_id %q", signer, q.Get("request_id"))
	}
	tx, err := a.cfg.TxManager.GetByRequest(r.Context(), chainID, q.Get("from"), q.Get("request_id"))
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, tx.JSON)
	return nil
}

func (a *API) txEvents(w http.ResponseWriter, r *http.Request) error {
	tx, err := a.txParam(r)
	if err != nil {
		return err
	}
	events, err := a.cfg.TxManager.TxEvents(r.Context(), tx.ID)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, components.EventList{Events: events})
	return nil
}

func (a *API) cancelTx(w http.ResponseWriter, r *http.Request) error {
	tx, err := a.txParam(r)
	if err == nil {
		tx, err = a.cfg.TxManager.Cancel(r.Context(), tx.ID)
	}
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, tx.JSON)
	return nil
}

// requestAction passes an operator's action on a transaction the caller
// may see to txmanager, with the key as the operator: 202 with a new
// action, 200 with the one recorded before when the request repeats it.
func (a *API) requestAction(w http.ResponseWriter, r *http.Request) error {
	tx, err := a.txParam(r)
	if err != nil {
		return err
	}
	var body gatewayapi.TxActionRequest
	if err := httpserver.DecodeStrict(r.Body, &body); err != nil {
		return err
	}
	action, fresh, err := a.cfg.TxManager.RequestAction(r.Context(), tx.ID, txmanagerapi.TxActionRequest{Action: body.Action,
		ActionId: body.ActionId, Operator: caller(r.Context()).operator()})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if fresh {
		status = http.StatusAccepted
	}
	httpserver.WriteJSON(w, status, action)
	return nil
}

func (a *API) listActions(w http.ResponseWriter, r *http.Request) error {
	tx, err := a.txParam(r)
	if err != nil {
		return err
	}
	actions, err := a.cfg.TxManager.Actions(r.Context(), tx.ID)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, actions)
	return nil
}

func (a *API) listTx(w http.ResponseWriter, r *http.Request) error {
	return a.list(w, r, "")
}

func (a *API) pendingApprovals(w http.ResponseWriter, r *http.Request) error {
	return a.list(w, r, components.StatePendingApproval)
}

// list lists the caller's transactions: txmanager filters by the signers
// the key may use, narrowed by the chain_id and from the client gave.
func (a *API) list(w http.ResponseWriter, r *http.Request, state components.TxState) error {
	q := r.URL.Query()
	params := txmanagerapi.ListTxParams{}
	var signers []string
	for _, s := range caller(r.Context()).signers {
		if c := q.Get("chain_id"); c != "" && c != strconv.FormatUint(s.ChainID, 10) {
			continue
		}
		if f := q.Get("from"); f != "" && common.HexToAddress(f) != s.Address {
			continue
		}
		signers = append(signers, s.String())
	}
	joined := strings.Join(signers, ",")
	params.Signers = &joined
	if state == "" {
		state = components.TxState(q.Get("state"))
	}
	if state != "" {
		params.State = &state
	}
	if v := q.Get("sub_state"); v != "" {
		sub := components.TxSubState(v)
		params.SubState = &sub
	}
	for name, dst := range map[string]**time.Time{"created_after": &params.CreatedAfter, "created_before": &params.CreatedBefore} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return errs.InvalidFields(name+" is not a time", errs.FieldError{Pointer: name, Detail: err.Error()})
			}
			*dst = &t
		}
	}
	if v := q.Get("cursor"); v != "" {
		params.Cursor = &v
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return errs.InvalidFields("limit is not a number", errs.FieldError{Pointer: "limit", Detail: err.Error()})
		}
		limit := components.Limit(n)
		params.Limit = &limit
	}
	body, err := a.cfg.TxManager.List(r.Context(), params)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

func (a *API) approve(w http.ResponseWriter, r *http.Request) error {
	return decide(a, w, r, a.cfg.TxManager.Approve)
}

func (a *API) reject(w http.ResponseWriter, r *http.Request) error {
	return decide(a, w, r, a.cfg.TxManager.Reject)
}

// decide passes an approver's decision (body B) on a transaction the
// caller may see to txmanager and answers the transaction.
func decide[B any](a *API, w http.ResponseWriter, r *http.Request, call func(context.Context, uuid.UUID, B) (remote.Tx, error)) error {
	tx, err := a.txParam(r)
	if err != nil {
		return err
	}
	var body B
	if err := httpserver.DecodeStrict(r.Body, &body); err != nil {
		return err
	}
	if tx, err = call(r.Context(), tx.ID, body); err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, tx.JSON)
	return nil
}
