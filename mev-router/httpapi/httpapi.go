// Package httpapi is mevrouterd's HTTP API (openapi/mevrouter.yaml): the
// broadcast route, the private sends' status and cancel. Every route
// admits the txmanager identity only.
package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/go-chi/chi/v5"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
)

// Caller is the only identity the API admits.
const Caller = "txmanager"

// maxBody bounds a request body: 256 transactions of up to 128 KiB (the
// size geth's pool accepts), hex-encoded, and the options.
const maxBody = 256*2*128<<10 + 64<<10

// API serves the broadcast routes of every chain the routers serve.
type API struct {
	Routers *mevrouter.Routers
}

// Mount adds the routes to r, behind the txmanager-only allowlist.
func (a *API) Mount(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(mtls.Allow(Caller))
		r.Post("/v1/broadcast", httpserver.Handle(a.broadcast))
		r.Get("/v1/private/{hash}", httpserver.Handle(a.privateStatus))
		r.Post("/v1/private/{hash}/cancel", httpserver.Handle(a.cancelPrivate))
	})
}

// BroadcastRequest is the body of POST /v1/broadcast.
type BroadcastRequest struct {
	Transactions []hexutil.Bytes `json:"transactions"`
	Route        mevrouter.Route `json:"route"`
	MaxBlock     *uint64         `json:"max_block"`
	Builders     []string        `json:"builders"`
	Fallback     string          `json:"fallback"`
	Hints        []string        `json:"hints"`
	Fast         bool            `json:"fast"`
}

// hints are the MEV-Share hint names a request may give.
var hints = map[string]bool{"calldata": true, "contract_address": true, "logs": true, "function_selector": true, "hash": true, "tx_hash": true}

// DecodeBroadcast reads and checks a broadcast body: unknown fields,
// trailing data and bad options are refused with every problem named.
func DecodeBroadcast(body io.Reader) (mevrouter.Request, error) {
	var in BroadcastRequest
	if err := httpserver.DecodeStrict(body, &in); err != nil {
		return mevrouter.Request{}, err
	}
	var problems []string
	if len(in.Transactions) == 0 {
		problems = append(problems, "transactions: at least one is needed")
	}
	if len(in.Transactions) > mevrouter.MaxBatch {
		problems = append(problems, fmt.Sprintf("transactions: %d given, at most %d", len(in.Transactions), mevrouter.MaxBatch))
	}
	switch in.Route {
	case "":
		in.Route = mevrouter.RoutePublic
	case mevrouter.RoutePublic, mevrouter.RoutePrivate, mevrouter.RouteAuto:
	default:
		problems = append(problems, fmt.Sprintf("route: %q is not public, private or auto", in.Route))
	}
	fallback := mevrouter.FallbackNone
	switch in.Fallback {
	case "", "none":
	case "public":
		fallback = mevrouter.FallbackPublic
	default:
		problems = append(problems, fmt.Sprintf("fallback: %q is not none or public", in.Fallback))
	}
	for _, h := range in.Hints {
		if !hints[h] {
			problems = append(problems, fmt.Sprintf("hints: %q is not a MEV-Share hint", h))
		}
	}
	if len(in.Builders) > 32 {
		problems = append(problems, "builders: at most 32")
	}
	if len(problems) > 0 {
		return mevrouter.Request{}, errs.E(errs.Invalid, strings.Join(problems, "; "))
	}
	req := mevrouter.Request{Route: in.Route, Raw: make([][]byte, len(in.Transactions)),
		Private: mevrouter.PrivateRequest{Relays: in.Builders, Fallback: fallback, Hints: in.Hints, Fast: in.Fast}}
	for i, t := range in.Transactions {
		req.Raw[i] = t
	}
	if in.MaxBlock != nil {
		req.Private.MaxBlock = *in.MaxBlock
	}
	return req, nil
}

type sendError struct {
	Category string `json:"category"`
	Message  string `json:"message"`
	Endpoint string `json:"endpoint,omitempty"`
}

type sendResult struct {
	Hash        common.Hash `json:"hash"`
	Route       string      `json:"route"`
	RouteReason string      `json:"route_reason"`
	Accepted    bool        `json:"accepted"`
	AcceptedBy  []string    `json:"accepted_by,omitempty"`
	MaxBlock    *uint64     `json:"max_block,omitempty"`
	Error       *sendError  `json:"error,omitempty"`
}

func (a *API) broadcast(w http.ResponseWriter, r *http.Request) error {
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	req, err := DecodeBroadcast(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return err
	}
	results, err := a.Routers.Broadcast(r.Context(), req)
	if err != nil {
		return err
	}
	out := make([]sendResult, len(results))
	for i, res := range results {
		out[i] = sendResult{Hash: res.Hash, Route: string(res.Route), RouteReason: res.Reason, Accepted: res.Accepted, AcceptedBy: res.AcceptedBy}
		if res.Route == mevrouter.RoutePrivate {
			out[i].MaxBlock = &results[i].MaxBlock
		}
		if res.Err != nil {
			out[i].Error = &sendError{Category: string(res.Err.Category), Message: res.Err.Message, Endpoint: res.Err.Endpoint}
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"results": out})
	return nil
}

type privateStatus struct {
	Hash     common.Hash `json:"hash"`
	State    string      `json:"state"`
	Block    *uint64     `json:"block,omitempty"`
	MaxBlock uint64      `json:"max_block"`
	Relays   []string    `json:"relays"`
	Fallback string      `json:"fallback,omitempty"`
	FellBack bool        `json:"fell_back"`
	SentAt   time.Time   `json:"sent_at"`
}

func toStatus(s mevrouter.Status) privateStatus {
	out := privateStatus{Hash: s.Hash, State: string(s.State), MaxBlock: s.MaxBlock, Relays: s.Relays,
		Fallback: string(s.Fallback), FellBack: s.FellBack, SentAt: s.SentAt.UTC()}
	if out.Relays == nil {
		out.Relays = []string{}
	}
	if s.State == mevrouter.PrivateIncluded {
		out.Block = &s.Block
	}
	return out
}

// hashParam reads the {hash} path parameter.
func hashParam(r *http.Request) (common.Hash, error) {
	raw := chi.URLParam(r, "hash")
	b, err := hexutil.Decode(raw)
	if err != nil || len(b) != common.HashLength {
		return common.Hash{}, errs.Errorf(errs.Invalid, "%q is not a transaction hash (0x and 64 hex digits)", raw)
	}
	return common.BytesToHash(b), nil
}

// privateSend reads the {hash} parameter, answering the problem itself
// when it is bad or when no chain has a private route.
func (a *API) privateSend(w http.ResponseWriter, r *http.Request) (common.Hash, bool) {
	hash, err := hashParam(r)
	if err == nil && !a.Routers.HasPrivate() {
		err = errs.E(errs.NotFound, "no private relay is configured, so there are no private sends")
	}
	if err != nil {
		httpserver.Error(w, r, err)
		return hash, false
	}
	return hash, true
}

func (a *API) privateStatus(w http.ResponseWriter, r *http.Request) error {
	hash, ok := a.privateSend(w, r)
	if !ok {
		return nil
	}
	st, found := a.Routers.PrivateStatus(hash)
	if !found {
		return errs.Errorf(errs.NotFound, "no private send of %s by this mevrouterd (since its last start)", hash.Hex())
	}
	httpserver.WriteJSON(w, http.StatusOK, toStatus(st))
	return nil
}

func (a *API) cancelPrivate(w http.ResponseWriter, r *http.Request) error {
	hash, ok := a.privateSend(w, r)
	if !ok {
		return nil
	}
	st, err := a.Routers.CancelPrivate(r.Context(), hash)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toStatus(st))
	return nil
}
