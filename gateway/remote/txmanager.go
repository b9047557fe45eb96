// Package remote is the gateway's side of the internal APIs it calls over
// mutual TLS as identity "gateway": txmanagerd's and ledgerd's. It wraps
// the clients generated from openapi/txmanager.yaml and
// openapi/ledger.yaml, so the calls follow the specs by construction, and
// turns problem documents back into error kinds (shared/errs), so that a
// service's 404 or 409 reaches the gateway's client as the same kind.
package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/feed"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/batch"
	"github.com/txfence/txfence/shared/errs"
)

// TxManager calls txmanagerd.
type TxManager struct {
	api     *txmanagerapi.ClientWithResponses
	creates *batch.Queue[*pendingCreate]
}

// NewTxManager is a client of the txmanagerd at baseURL through hc, an
// mTLS client whose identity is gateway.
func NewTxManager(baseURL string, hc *http.Client) (*TxManager, error) {
	if hc == nil {
		return nil, errors.New("remote: no HTTP client (an mTLS client as gateway is needed)")
	}
	c, err := txmanagerapi.NewClientWithResponses(baseURL, txmanagerapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	m := &TxManager{api: c}
	m.creates = m.newCreateQueue()
	return m, nil
}

// unreachable is the error of a call that got no answer.
func unreachable(what string, err error) error {
	return errs.Wrap(errs.Unavailable, what+": txmanager did not answer", err)
}

// answer returns *v when the call succeeded with the documented body,
// else the error of the kind the problem document names.
func answer[T any](what string, raw *http.Response, body []byte, v *T) (T, error) {
	if v == nil {
		var zero T
		return zero, fmt.Errorf("%s: %w", what, errs.FromUpstream(raw.StatusCode, raw.Header.Get("Content-Type"), body))
	}
	return *v, nil
}

// Tx is a transaction as txmanager answered it: JSON is the body, passed
// on to the gateway's client unchanged (the client's metadata keeps its
// numbers exactly), and the fields the gateway checks are decoded beside
// it.
type Tx struct {
	ID      uuid.UUID      `json:"tx_id"`
	ChainID uint64         `json:"chain_id"`
	From    common.Address `json:"from"`
	State   string         `json:"state"`
	JSON    []byte         `json:"-"`
}

// decodeTx reads the fields of a Tx answer the gateway checks.
func decodeTx(what string, raw *http.Response, body []byte, ok bool) (Tx, error) {
	if !ok {
		_, err := answer[Tx](what, raw, body, nil)
		return Tx{}, err
	}
	t := Tx{JSON: body}
	if err := json.Unmarshal(body, &t); err != nil {
		return Tx{}, fmt.Errorf("%s: txmanager's answer: %w", what, err)
	}
	return t, nil
}

// rawJSON returns the body of a successful answer, else its error.
func rawJSON(what string, raw *http.Response, body []byte, ok bool) ([]byte, error) {
	if !ok {
		_, err := answer[[]byte](what, raw, body, nil)
		return nil, err
	}
	return body, nil
}

// Get reads one transaction.
func (m *TxManager) Get(ctx context.Context, id uuid.UUID) (Tx, error) {
	resp, err := m.api.GetTxWithResponse(ctx, id)
	if err != nil {
		return Tx{}, unreachable("get", err)
	}
	return decodeTx("get", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// GetByRequest reads the transaction a signer's request id names.
func (m *TxManager) GetByRequest(ctx context.Context, chainID uint64, from, requestID string) (Tx, error) {
	resp, err := m.api.GetTxByRequestWithResponse(ctx, &txmanagerapi.GetTxByRequestParams{ChainId: int64(chainID), From: from, RequestId: requestID})
	if err != nil {
		return Tx{}, unreachable("get by request", err)
	}
	return decodeTx("get by request", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// TxEvents reads one transaction's events, in order: its timeline.
func (m *TxManager) TxEvents(ctx context.Context, id uuid.UUID) ([]components.Event, error) {
	resp, err := m.api.ListTxEventsWithResponse(ctx, id)
	if err != nil {
		return nil, unreachable("tx events", err)
	}
	list, err := answer("tx events", resp.HTTPResponse, resp.Body, resp.JSON200)
	return list.Events, err
}

// List reads a page of transactions, newest first, as TxList JSON.
func (m *TxManager) List(ctx context.Context, params txmanagerapi.ListTxParams) ([]byte, error) {
	resp, err := m.api.ListTxWithResponse(ctx, &params)
	if err != nil {
		return nil, unreachable("list", err)
	}
	return rawJSON("list", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// Cancel cancels a transaction that has no nonce yet.
func (m *TxManager) Cancel(ctx context.Context, id uuid.UUID) (Tx, error) {
	resp, err := m.api.CancelTxWithResponse(ctx, id)
	if err != nil {
		return Tx{}, unreachable("cancel", err)
	}
	return decodeTx("cancel", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// Approve adds an approver's signed approval.
func (m *TxManager) Approve(ctx context.Context, id uuid.UUID, req components.ApprovalRequest) (Tx, error) {
	resp, err := m.api.ApproveTxWithResponse(ctx, id, req)
	if err != nil {
		return Tx{}, unreachable("approve", err)
	}
	return decodeTx("approve", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// Reject records an approver's rejection, which fails the transaction.
func (m *TxManager) Reject(ctx context.Context, id uuid.UUID, req components.RejectRequest) (Tx, error) {
	resp, err := m.api.RejectTxWithResponse(ctx, id, req)
	if err != nil {
		return Tx{}, unreachable("reject", err)
	}
	return decodeTx("reject", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// RequestAction asks for an operator action on a transaction that does
// not move. fresh reports a new action (txmanager's 202), not the one a
// repeated request names (its 200).
func (m *TxManager) RequestAction(ctx context.Context, id uuid.UUID, req txmanagerapi.TxActionRequest) (a components.TxAction, fresh bool, err error) {
	resp, err := m.api.RequestTxActionWithResponse(ctx, id, req)
	if err != nil {
		return components.TxAction{}, false, unreachable("request action", err)
	}
	if resp.JSON200 != nil {
		return *resp.JSON200, false, nil
	}
	a, err = answer("request action", resp.HTTPResponse, resp.Body, resp.JSON202)
	return a, err == nil, err
}

// Actions lists a transaction's operator actions, oldest first.
func (m *TxManager) Actions(ctx context.Context, id uuid.UUID) (components.TxActionList, error) {
	resp, err := m.api.ListTxActionsWithResponse(ctx, id)
	if err != nil {
		return components.TxActionList{}, unreachable("list actions", err)
	}
	return answer("list actions", resp.HTTPResponse, resp.Body, resp.JSON200)
}

// SignerStatus reads where a signer stands.
func (m *TxManager) SignerStatus(ctx context.Context, chainID uint64, signer string) (components.SignerStatus, error) {
	resp, err := m.api.GetSignerStatusWithResponse(ctx, int64(chainID), signer)
	if err != nil {
		return components.SignerStatus{}, unreachable("signer status", err)
	}
	return answer("signer status", resp.HTTPResponse, resp.Body, resp.JSON200)
}

// EventsAfter reads up to limit events of the feed after seq, in order;
// with wait, an empty answer is held up to that long for new events
// (whole seconds, at most 30).
func (m *TxManager) EventsAfter(ctx context.Context, after uint64, limit int, wait time.Duration) ([]components.Event, error) {
	page, err := m.Feed(ctx, after, limit, wait)
	return page.Events, err
}

// Feed is EventsAfter with the feed's head: the highest seq numbered when
// the page was read.
func (m *TxManager) Feed(ctx context.Context, after uint64, limit int, wait time.Duration) (components.EventList, error) {
	return feed.Read(ctx, m.api, after, limit, wait)
}
