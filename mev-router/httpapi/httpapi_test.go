package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/httpapi"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/prommetrics"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// api is mevrouterd's API over mutual TLS, broadcasting to a real anvil,
// every exchange checked against mevrouter.yaml.
type api struct {
	url  string
	pki  string
	node *anvil.Node
}

func start(t *testing.T, router func(node *anvil.Node, m *metrics.Chain) *mevrouter.Router) *api {
	t.Helper()
	node := chaintest.Anvil(t, anvil.Options{})
	exported := prommetrics.New("mevrouter")
	srv := httpserver.New(httpserver.Options{Service: "mevrouter", Metrics: exported})
	return serve(t, srv, router(node, metrics.New(exported.Registry).Chain(node.ChainID())), node)
}

// serve mounts router's API on srv behind mutual TLS and the spec check.
func serve(t *testing.T, srv *httpserver.Server, router *mevrouter.Router, node *anvil.Node) *api {
	t.Helper()
	routers, err := mevrouter.NewRouters(router)
	if err != nil {
		t.Fatal(err)
	}
	(&httpapi.API{Routers: routers}).Mount(srv.Router)
	pki := servicetest.PKI(t)
	ts := servicetest.ServeMTLS(t, pki, "mevrouter", openapitest.Conform(t, openapi.MEVRouter, srv))
	return &api{url: ts.URL, pki: pki, node: node}
}

// publicOnly is a router with anvil as its one public endpoint and no relay.
func publicOnly(t *testing.T) func(*anvil.Node, *metrics.Chain) *mevrouter.Router {
	return func(node *anvil.Node, m *metrics.Chain) *mevrouter.Router {
		fanout, err := public.New(public.Endpoints{{Name: "anvil", URL: node.URL()}}, public.Options{}, m)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fanout.Close)
		return &mevrouter.Router{ChainID: new(big.Int).SetUint64(node.ChainID()), Public: fanout, Auto: mevrouter.NewAutoRule(nil, nil, nil), Metrics: m}
	}
}

func (a *api) do(t *testing.T, as, method, path, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	return servicetest.Do(t, servicetest.Client(t, a.pki, as, "mevrouter"), method, a.url+path, body, "Content-Type", contentType)
}

// signed signs a transfer with the first dev account's key at nonce, by
// signer (of this chain unless a test wants otherwise).
func signed(t *testing.T, node *anvil.Node, nonce uint64, txData types.TxData, signer types.Signer) string {
	t.Helper()
	tx, err := types.SignNewTx(node.Accounts()[0].Key, signer, txData)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return hexutil.Encode(raw)
}

func transfer(t *testing.T, node *anvil.Node, nonce uint64) string {
	return hexutil.Encode(must(chaintest.SignTransfer(t, node, node.Accounts()[0].Key, common.HexToAddress("0xb0b"), big.NewInt(1), nonce).MarshalBinary()))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

type result struct {
	Hash        common.Hash `json:"hash"`
	Route       string      `json:"route"`
	RouteReason string      `json:"route_reason"`
	Accepted    bool        `json:"accepted"`
	AcceptedBy  []string    `json:"accepted_by"`
	Error       *struct {
		Category string `json:"category"`
		Message  string `json:"message"`
		Endpoint string `json:"endpoint"`
	} `json:"error"`
}

func TestBroadcastOverMTLS(t *testing.T) {
	t.Parallel()
	a := start(t, publicOnly(t))
	body := fmt.Sprintf(`{"transactions": [%q, %q], "route": "public"}`, transfer(t, a.node, 0), transfer(t, a.node, 1))
	resp, b := a.do(t, "txmanager", "POST", "/v1/broadcast", "application/json", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("broadcast: %d %s", resp.StatusCode, b)
	}
	var out struct{ Results []result }
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 2 {
		t.Fatalf("results: %s", b)
	}
	for _, r := range out.Results {
		if !r.Accepted || r.Route != "public" || len(r.AcceptedBy) != 1 || r.AcceptedBy[0] != "anvil" {
			t.Errorf("result %+v", r)
		}
		chaintest.WaitReceipt(t, a.node, r.Hash)
	}

	// Sent again: both nonces are used now, and the category says so.
	resp, b = a.do(t, "txmanager", "POST", "/v1/broadcast", "application/json", body)
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("resend: %d %s", resp.StatusCode, b)
	}
	for _, r := range out.Results {
		if r.Accepted || r.Error == nil || r.Error.Category != "nonce_too_low" || r.Error.Endpoint != "anvil" {
			t.Errorf("resend of a mined transaction: %s", b)
		}
	}
}

func TestOnlyTxmanagerGetsIn(t *testing.T) {
	t.Parallel()
	a := start(t, publicOnly(t))
	for _, as := range []string{"gateway", "ledger", "signer"} {
		resp, b := a.do(t, as, "POST", "/v1/broadcast", "application/json", `{"transactions": ["0x00"]}`)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), as) {
			t.Errorf("%s: %d %s; want 403 naming the caller", as, resp.StatusCode, b)
		}
	}
}

// TestBadInputGetsAProblemDocument: every malformed request is refused
// whole with a problem document naming the problem, and nothing is sent.
func TestBadInputGetsAProblemDocument(t *testing.T) {
	t.Parallel()
	a := start(t, publicOnly(t))
	node := a.node
	chainID := new(big.Int).SetUint64(node.ChainID())
	to := common.HexToAddress("0xb0b")
	good := transfer(t, node, 0)
	otherChain := signed(t, node, 0, &types.DynamicFeeTx{ChainID: big.NewInt(1), Nonce: 0, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(1e10), Gas: 21000, To: &to}, types.LatestSignerForChainID(big.NewInt(1)))
	unprotected := signed(t, node, 0, &types.LegacyTx{Nonce: 0, GasPrice: big.NewInt(1e10), Gas: 21000, To: &to}, types.HomesteadSigner{})
	// A high s (the malleable twin of a valid signature) decodes, but no
	// sender is recovered from it since EIP-2.
	badSig := func() string {
		var tx types.Transaction
		if err := tx.UnmarshalBinary(must(hexutil.Decode(good))); err != nil {
			t.Fatal(err)
		}
		v, r, sv := tx.RawSignatureValues()
		sig := make([]byte, 65)
		r.FillBytes(sig[:32])
		new(big.Int).Sub(crypto.S256().Params().N, sv).FillBytes(sig[32:64])
		sig[64] = byte(v.Uint64() ^ 1)
		high, err := tx.WithSignature(types.LatestSignerForChainID(chainID), sig)
		if err != nil {
			t.Fatal(err)
		}
		return hexutil.Encode(must(high.MarshalBinary()))
	}()
	many := make([]string, 257)
	for i := range many {
		many[i] = fmt.Sprintf("%q", good)
	}
	tests := []struct {
		name, contentType, body, want string
	}{
		{"not JSON", "application/json", `{"transactions": [`, "request body"},
		{"not a JSON content type", "text/plain", `{"transactions": ["` + good + `"]}`, "application/json"},
		{"an unknown field", "application/json", `{"transactions": ["` + good + `"], "gas_price": 1}`, "gas_price"},
		{"trailing data", "application/json", `{"transactions": ["` + good + `"]} {}`, "after the JSON document"},
		{"no transactions", "application/json", `{"transactions": []}`, "at least one"},
		{"an oversized batch", "application/json", `{"transactions": [` + strings.Join(many, ",") + `]}`, "at most 256"},
		{"not hex", "application/json", `{"transactions": ["hello"]}`, "request body"},
		{"not RLP", "application/json", `{"transactions": ["0x0102"]}`, "not a signed transaction"},
		{"another chain", "application/json", `{"transactions": ["` + otherChain + `"]}`, fmt.Sprintf("chain id 1, but this mevrouterd broadcasts on chain %s", chainID)},
		{"no replay protection", "application/json", `{"transactions": ["` + unprotected + `"]}`, "EIP-155"},
		{"a broken signature", "application/json", `{"transactions": ["` + badSig + `"]}`, "sender cannot be recovered"},
		{"the same transaction twice", "application/json", `{"transactions": ["` + good + `", "` + good + `"]}`, "again"},
		{"a bad route", "application/json", `{"transactions": ["` + good + `"], "route": "fast"}`, "route"},
		{"a bad fallback", "application/json", `{"transactions": ["` + good + `"], "fallback": "maybe"}`, "fallback"},
		{"a bad hint", "application/json", `{"transactions": ["` + good + `"], "hints": ["everything"]}`, "hints"},
		{"private without relays", "application/json", `{"transactions": ["` + good + `"], "route": "private"}`, "no private relay is configured"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, b := a.do(t, "txmanager", "POST", "/v1/broadcast", tt.contentType, tt.body)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), tt.want) {
				t.Errorf("%d %s %s; want a 400 problem mentioning %q", resp.StatusCode, resp.Header.Get("Content-Type"), b, tt.want)
			}
		})
	}
	// Nothing was sent: the dev account's nonce is untouched.
	nonce, err := node.Client().PendingNonceAt(context.Background(), node.Accounts()[0].Address)
	if err != nil || nonce != 0 {
		t.Errorf("pending nonce %d (%v) after refused broadcasts; want 0", nonce, err)
	}

	for path, want := range map[string]int{
		"/v1/private/0x1234":                          http.StatusBadRequest,
		"/v1/private/" + crypto.Keccak256Hash().Hex(): http.StatusNotFound,
	} {
		resp, b := a.do(t, "txmanager", "GET", path, "", "")
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, b, want)
		}
	}
}

// TestPrivateStatusAndCancel follows a private send through the API: sent,
// pending, cancelled, still watched; another one included.
func TestPrivateStatusAndCancel(t *testing.T) {
	t.Parallel()
	s := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}})
	pki := servicetest.PKI(t)
	a := &api{url: s.Serve(t, pki, func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.MEVRouter, h) }), pki: pki, node: s.Node}

	status := func(hash common.Hash) (int, map[string]any) {
		if err := s.Private.Poll(mevroutertest.Context(t)); err != nil {
			t.Fatal(err)
		}
		resp, b := a.do(t, "txmanager", "GET", "/v1/private/"+hash.Hex(), "", "")
		var out map[string]any
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	send := func(account int) common.Hash {
		raws, hashes := s.Transfers(t, account, 1)
		resp, b := a.do(t, "txmanager", "POST", "/v1/broadcast", "application/json",
			fmt.Sprintf(`{"transactions": [%q], "route": "auto", "builders": ["protect"], "hints": ["hash"]}`, hexutil.Encode(raws[0])))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"accepted":true`) {
			t.Fatalf("send: %d %s", resp.StatusCode, b)
		}
		return hashes[0]
	}

	// auto sends a plain transfer publicly; ask for private explicitly.
	raws, hashes := s.Transfers(t, 1, 1)
	resp, b := a.do(t, "txmanager", "POST", "/v1/broadcast", "application/json",
		fmt.Sprintf(`{"transactions": [%q], "route": "private", "fallback": "none", "max_block": %d}`, hexutil.Encode(raws[0]), s.Head(t)+3))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"route":"private"`) {
		t.Fatalf("private send: %d %s", resp.StatusCode, b)
	}
	if code, st := status(hashes[0]); code != http.StatusOK || st["state"] != "pending" {
		t.Fatalf("status: %d %v", code, st)
	}
	resp, b = a.do(t, "txmanager", "POST", "/v1/private/"+hashes[0].Hex()+"/cancel", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"state":"cancelled"`) {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}

	publicHash := send(2)
	if code, _ := status(publicHash); code != http.StatusNotFound {
		t.Errorf("status of a public send: %d, want 404", code)
	}
	if !s.InPool(t, publicHash) {
		t.Error("the auto route did not send a plain transfer publicly")
	}

	raws, hashes = s.Transfers(t, 3, 1)
	resp, b = a.do(t, "txmanager", "POST", "/v1/broadcast", "application/json", fmt.Sprintf(`{"transactions": [%q], "route": "private"}`, hexutil.Encode(raws[0])))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("private send: %d %s", resp.StatusCode, b)
	}
	block, _, err := s.Relay.BuildBlock(mevroutertest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	if code, st := status(hashes[0]); code != http.StatusOK || st["state"] != "included" || st["block"] != float64(block) {
		t.Fatalf("status after the block: %d %v, want included in %d", code, st, block)
	}
	resp, b = a.do(t, "txmanager", "POST", "/v1/private/"+hashes[0].Hex()+"/cancel", "", "")
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("cancel of an included send: %d %s, want 409", resp.StatusCode, b)
	}
}
