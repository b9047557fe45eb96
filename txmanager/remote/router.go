package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/mevrouterapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
)

// Router calls mevrouterd.
type Router struct {
	api *mevrouterapi.ClientWithResponses
}

// NewRouter is a client of the mevrouterd at baseURL, through hc (an mTLS
// client whose identity is txmanager, pinned to mevrouterd's).
func NewRouter(baseURL string, hc *http.Client) (*Router, error) {
	if hc == nil {
		return nil, errors.New("remote: no HTTP client (an mTLS client as txmanager is needed)")
	}
	c, err := mevrouterapi.NewClientWithResponses(baseURL, mevrouterapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &Router{api: c}, nil
}

// Broadcast is a broadcast request: signed transactions and how to send
// them.
type Broadcast struct {
	Raw   [][]byte
	Route txmanager.Route
	// FallbackPublic lets a private send that expires go public.
	FallbackPublic bool
	// MaxBlock is the private sends' last block; 0: mevrouterd's default.
	MaxBlock uint64
}

// Sent is mevrouterd's answer for one transaction.
type Sent struct {
	Hash        common.Hash
	Route       txmanager.Route // taken: public or private
	RouteReason string
	Accepted    bool
	AcceptedBy  []string
	// Category and Message explain a refusal (Accepted false): the node's
	// own words, classified (mevrouter.yaml ErrorCategory).
	Category string
	Message  string
}

// Broadcast sends the transactions. A batch mevrouterd refuses whole
// (malformed, another chain) is an error; each transaction's acceptance or
// classified refusal is in its Sent.
func (r *Router) Broadcast(ctx context.Context, b Broadcast) ([]Sent, error) {
	body := mevrouterapi.BroadcastRequest{Transactions: make([]string, len(b.Raw))}
	for i, raw := range b.Raw {
		body.Transactions[i] = hexutil.Encode(raw)
	}
	route := components.Route(b.Route)
	body.Route = &route
	fallback := mevrouterapi.FallbackNone
	if b.FallbackPublic {
		fallback = mevrouterapi.FallbackPublic
	}
	body.Fallback = &fallback
	if b.MaxBlock > 0 {
		mb := int64(b.MaxBlock)
		body.MaxBlock = &mb
	}
	resp, err := r.api.BroadcastWithResponse(ctx, body)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, "mevrouterd unreachable", err)
	}
	if resp.JSON200 == nil {
		return nil, problem("mevrouterd broadcast", resp.HTTPResponse, resp.Body)
	}
	if len(resp.JSON200.Results) != len(b.Raw) {
		return nil, fmt.Errorf("mevrouterd answered %d results for %d transactions", len(resp.JSON200.Results), len(b.Raw))
	}
	out := make([]Sent, len(b.Raw))
	for i, s := range resp.JSON200.Results {
		out[i] = Sent{Hash: common.HexToHash(s.Hash), Route: txmanager.Route(s.Route), RouteReason: s.RouteReason, Accepted: s.Accepted}
		if s.AcceptedBy != nil {
			out[i].AcceptedBy = *s.AcceptedBy
		}
		if s.Error != nil {
			out[i].Category, out[i].Message = string(s.Error.Category), s.Error.Message
		}
	}
	return out, nil
}
