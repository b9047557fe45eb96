package relay_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/flashbots/mev-share-node/mevshare"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/relay"
)

// TestEveryBundleTheRouterEmitsIsValidMevShare checks each mev_sendBundle
// the router sends (one per private transaction, with hints) against the
// MEV-Share reference node's own decoding and validation. The reference is
// AGPL-3.0 and is linked into this test only.
func TestEveryBundleTheRouterEmitsIsValidMevShare(t *testing.T) {
	t.Parallel()
	var checked atomic.Int32
	var s *mevroutertest.Stack
	front := func(relay http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var call struct {
				Method string            `json:"method"`
				Params []json.RawMessage `json:"params"`
			}
			if json.Unmarshal(body, &call) == nil && call.Method == "mev_sendBundle" {
				dec := json.NewDecoder(bytes.NewReader(call.Params[0]))
				dec.DisallowUnknownFields()
				var args mevshare.SendMevBundleArgs
				err := dec.Decode(&args)
				if err == nil {
					_, _, err = mevshare.ValidateBundle(&args, s.Head(t), types.LatestSignerForChainID(new(big.Int).SetUint64(s.Node.ChainID())))
				}
				if err != nil {
					t.Errorf("the reference refuses the router's bundle %s: %v", call.Params[0], err)
				}
				checked.Add(1)
			}
			relay.ServeHTTP(w, r)
		})
	}
	s = mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.MEVShare}, RelayFront: front})
	for i, hints := range [][]string{nil, {"hash"}, {"calldata", "logs", "function_selector", "contract_address", "tx_hash", "hash"}} {
		raws, _ := s.Transfers(t, i, 2)
		res, err := s.Router.Broadcast(mevroutertest.Context(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePrivate,
			Private: mevrouter.PrivateRequest{Hints: hints, MaxBlock: s.Head(t) + 10}})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if !r.Accepted {
				t.Errorf("hints %v: %+v (%v)", hints, r, r.Err)
			}
		}
	}
	if got := checked.Load(); got != 6 {
		t.Errorf("%d bundles checked, want 6", got)
	}
}
