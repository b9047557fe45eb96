package flashbots_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/flashbots"
)

// call is one JSON-RPC request as a relay received it.
type call struct {
	Method string
	Params json.RawMessage // params[0]
}

// answer is what the fake relay says: an HTTP status and a body.
type answer struct {
	status int
	body   string
}

// fakeRelay is an httptest server that checks the signature header of
// every POST against the body it received and the key the client was
// given, records the calls, and answers with reply.
type fakeRelay struct {
	t      *testing.T
	signer common.Address
	reply  func(call) answer

	mu    sync.Mutex
	calls []call
}

func newFakeRelay(t *testing.T, signer common.Address, reply func(call) answer) (*fakeRelay, *httptest.Server) {
	t.Helper()
	r := &fakeRelay{t: t, signer: signer, reply: reply}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *fakeRelay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		r.t.Errorf("read request: %v", err)
		return
	}
	if req.Method != http.MethodPost {
		r.t.Errorf("relay got %s %s, want POST", req.Method, req.URL)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		r.t.Errorf("Content-Type = %q, want application/json", ct)
	}
	got, err := flashbots.Verify(req.Header.Get(flashbots.SignatureHeader), body)
	if err != nil {
		r.t.Errorf("request %s: %v", body, err)
	} else if got != r.signer {
		r.t.Errorf("request signed by %s, want %s", got, r.signer)
	}
	var rpc struct {
		JSONRPC string            `json:"jsonrpc"`
		ID      json.RawMessage   `json:"id"`
		Method  string            `json:"method"`
		Params  []json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &rpc); err != nil {
		r.t.Errorf("request %s is not JSON-RPC: %v", body, err)
		return
	}
	if rpc.JSONRPC != "2.0" || len(rpc.ID) == 0 || len(rpc.Params) != 1 {
		r.t.Errorf("request %s: want jsonrpc 2.0, an id and one parameter", body)
		return
	}
	c := call{Method: rpc.Method, Params: rpc.Params[0]}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	a := r.reply(c)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (r *fakeRelay) recorded() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func result(v string) func(call) answer {
	return func(call) answer { return answer{200, `{"jsonrpc":"2.0","id":1,"result":` + v + `}`} }
}

// newKey returns a fresh relay identity key and its address.
func newKey(t *testing.T) (*ecdsa.PrivateKey, common.Address) {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k, crypto.PubkeyToAddress(k.PublicKey)
}

// signedTx returns a signed mainnet transfer with the given nonce.
func signedTx(t *testing.T, key *ecdsa.PrivateKey, nonce uint64) (*types.Transaction, []byte) {
	t.Helper()
	to := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	chainID := big.NewInt(1)
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(2e9), GasFeeCap: big.NewInt(50e9),
		Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return tx, raw
}

// jsonDiff compares two JSON texts as values, so key order and spacing
// do not matter.
func jsonDiff(t *testing.T, want string, got []byte) string {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got %s: %v", got, err)
	}
	return cmp.Diff(w, g)
}

func TestClientRequests(t *testing.T) {
	authKey, authAddr := newKey(t)
	userKey, _ := newKey(t)
	tx0, raw0 := signedTx(t, userKey, 0)
	tx1, raw1 := signedTx(t, userKey, 1)
	hex0, hex1 := "0x"+common.Bytes2Hex(raw0), "0x"+common.Bytes2Hex(raw1)
	target := common.HexToHash("0x24e6e999b8abf2c4df46e8a02516c0983043039a5a54f89fa87274427ce64798")
	bundleHash := common.HexToHash("0x2228f5d8954ce31dc1601a8ba264dbd401bf1428388ce88238932815c5d6f23f")

	tests := map[string]struct {
		do         func(context.Context, *flashbots.Client) (any, error)
		reply      func(call) answer
		wantMethod string
		wantParams string
		want       any
	}{
		"private tx with preferences": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendPrivateTransaction(ctx, raw0, 0xcd23a0, &flashbots.Preferences{
					Fast: true,
					Privacy: &flashbots.Privacy{
						Hints:    []flashbots.Hint{flashbots.HintCalldata, flashbots.HintTxHash},
						Builders: []string{"default", "flashbots"},
					},
				})
			},
			reply:      result(`"` + tx0.Hash().Hex() + `"`),
			wantMethod: "eth_sendPrivateTransaction",
			wantParams: `{"tx":"` + hex0 + `","maxBlockNumber":"0xcd23a0","preferences":{"fast":true,
				"privacy":{"hints":["calldata","tx_hash"],"builders":["default","flashbots"]}}}`,
			want: tx0.Hash(),
		},
		"private tx, relay defaults": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendPrivateTransaction(ctx, raw0, 0, nil)
			},
			reply:      result(`"` + tx0.Hash().Hex() + `"`),
			wantMethod: "eth_sendPrivateTransaction",
			wantParams: `{"tx":"` + hex0 + `"}`,
			want:       tx0.Hash(),
		},
		"private tx, fast false is still sent": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendPrivateTransaction(ctx, raw0, 5, &flashbots.Preferences{})
			},
			reply:      result(`"` + tx0.Hash().Hex() + `"`),
			wantMethod: "eth_sendPrivateTransaction",
			wantParams: `{"tx":"` + hex0 + `","maxBlockNumber":"0x5","preferences":{"fast":false}}`,
			want:       tx0.Hash(),
		},
		"private tx, builder acknowledges with 200": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendPrivateTransaction(ctx, raw0, 0, nil)
			},
			reply:      result(`200`),
			wantMethod: "eth_sendPrivateTransaction",
			wantParams: `{"tx":"` + hex0 + `"}`,
			want:       tx0.Hash(),
		},
		"cancel": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.CancelPrivateTransaction(ctx, tx0.Hash())
			},
			reply:      result(`true`),
			wantMethod: "eth_cancelPrivateTransaction",
			wantParams: `{"txHash":"` + tx0.Hash().Hex() + `"}`,
			want:       true,
		},
		"cancel refused": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.CancelPrivateTransaction(ctx, tx0.Hash())
			},
			reply:      result(`false`),
			wantMethod: "eth_cancelPrivateTransaction",
			wantParams: `{"txHash":"` + tx0.Hash().Hex() + `"}`,
			want:       false,
		},
		"mev bundle": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendBundle(ctx, &flashbots.MevBundle{
					Inclusion: flashbots.Inclusion{Block: 0x8b8da8, MaxBlock: 0x8b8dab},
					Body:      []flashbots.BundleItem{{Tx: raw0}, {Tx: raw1, CanRevert: true}},
					Validity:  &flashbots.Validity{Refund: []flashbots.Refund{{BodyIdx: 0, Percent: 90}}},
					Privacy:   &flashbots.Privacy{Hints: []flashbots.Hint{flashbots.HintLogs}, Builders: []string{"flashbots"}},
				})
			},
			reply:      result(`{"bundleHash":"` + bundleHash.Hex() + `"}`),
			wantMethod: "mev_sendBundle",
			wantParams: `{"version":"v0.1","inclusion":{"block":"0x8b8da8","maxBlock":"0x8b8dab"},
				"body":[{"tx":"` + hex0 + `","canRevert":false},{"tx":"` + hex1 + `","canRevert":true}],
				"validity":{"refund":[{"bodyIdx":0,"percent":90}]},
				"privacy":{"hints":["logs"],"builders":["flashbots"]}}`,
			want: bundleHash,
		},
		"mev bundle backrunning a pending tx": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendBundle(ctx, &flashbots.MevBundle{
					Inclusion: flashbots.Inclusion{Block: 100},
					Body:      []flashbots.BundleItem{{Hash: target}, {Tx: raw1}},
				})
			},
			reply:      result(`{"bundleHash":"` + bundleHash.Hex() + `"}`),
			wantMethod: "mev_sendBundle",
			wantParams: `{"version":"v0.1","inclusion":{"block":"0x64"},
				"body":[{"hash":"` + target.Hex() + `"},{"tx":"` + hex1 + `","canRevert":false}]}`,
			want: bundleHash,
		},
		"eth bundle": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendEthBundle(ctx, flashbots.EthBundle{
					Txs:               [][]byte{raw0, raw1},
					BlockNumber:       0xb63dcd,
					MinTimestamp:      1615920000,
					MaxTimestamp:      1615920932,
					RevertingTxHashes: []common.Hash{tx1.Hash()},
					ReplacementUUID:   "2f9ae4e4-5c0b-4e45-8e4f-1f1a4b7e0c11",
					Builders:          []string{"builder0x69"},
				})
			},
			reply:      result(`{"bundleHash":"` + bundleHash.Hex() + `","smart":"true"}`),
			wantMethod: "eth_sendBundle",
			wantParams: `{"txs":["` + hex0 + `","` + hex1 + `"],"blockNumber":"0xb63dcd",
				"minTimestamp":1615920000,"maxTimestamp":1615920932,
				"revertingTxHashes":["` + tx1.Hash().Hex() + `"],
				"replacementUuid":"2f9ae4e4-5c0b-4e45-8e4f-1f1a4b7e0c11","builders":["builder0x69"]}`,
			want: bundleHash,
		},
		"eth bundle, bare hash answer": {
			do: func(ctx context.Context, c *flashbots.Client) (any, error) {
				return c.SendEthBundle(ctx, flashbots.EthBundle{Txs: [][]byte{raw0}, BlockNumber: 7})
			},
			reply:      result(`"` + bundleHash.Hex() + `"`),
			wantMethod: "eth_sendBundle",
			wantParams: `{"txs":["` + hex0 + `"],"blockNumber":"0x7"}`,
			want:       bundleHash,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			relay, srv := newFakeRelay(t, authAddr, tc.reply)
			c := &flashbots.Client{URL: srv.URL, AuthKey: authKey}
			got, err := tc.do(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			calls := relay.recorded()
			if len(calls) != 1 {
				t.Fatalf("relay got %d calls, want 1", len(calls))
			}
			if calls[0].Method != tc.wantMethod {
				t.Errorf("method = %s, want %s", calls[0].Method, tc.wantMethod)
			}
			if diff := jsonDiff(t, tc.wantParams, calls[0].Params); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}

// relayErrorView is what a caller may rely on in a *RelayError.
type relayErrorView struct {
	HTTPStatus int
	Code       int
	Message    string
	Temporary  bool
}

func TestClientErrorShapes(t *testing.T) {
	authKey, authAddr := newKey(t)
	userKey, _ := newKey(t)
	_, raw := signedTx(t, userKey, 0)
	tests := map[string]struct {
		status int
		body   string
		want   relayErrorView
	}{
		"json-rpc error, status 200": {200, `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"nonce too low"}}`,
			relayErrorView{200, -32000, "nonce too low", false}},
		"json-rpc error, status 400": {400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"signature is required"}}`,
			relayErrorView{400, -32600, "signature is required", false}},
		"json-rpc error with data": {200, `{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x08c379a0"}}`,
			relayErrorView{200, 3, `execution reverted (data: "0x08c379a0")`, false}},
		"json-rpc error, status 503": {503, `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error"}}`,
			relayErrorView{503, -32603, "internal error", true}},
		"plain error, 403": {403, `{"error":"error in signature check 0xEcDC4f8318e2E5d92369530871626d54A4eD9c9E"}`,
			relayErrorView{403, 0, "error in signature check 0xEcDC4f8318e2E5d92369530871626d54A4eD9c9E", false}},
		"plain error, 429": {429, `{"error":"rate limit exceeded"}`,
			relayErrorView{429, 0, "rate limit exceeded", true}},
		"plain error, 500": {500, `{"error":"upstream failed"}`,
			relayErrorView{500, 0, "upstream failed", true}},
		"plain text, 502": {502, "<html>bad gateway</html>",
			relayErrorView{502, 0, "<html>bad gateway</html>", true}},
		"empty body, 503": {503, "",
			relayErrorView{503, 0, "Service Unavailable", true}},
		"empty body, 404": {404, "",
			relayErrorView{404, 0, "Not Found", false}},
		"no result": {200, `{"jsonrpc":"2.0","id":1}`,
			relayErrorView{200, 0, "answer has neither result nor error", false}},
		"null result": {200, `{"jsonrpc":"2.0","id":1,"result":null}`,
			relayErrorView{200, 0, "answer has neither result nor error", false}},
		"not json": {200, "ok",
			relayErrorView{200, 0, "answer is not a JSON-RPC object: invalid character 'o' looking for beginning of value", false}},
		"answer too large": {200, `{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("a", 1<<20) + `"}`,
			relayErrorView{200, 0, "answer exceeds 1048576 bytes", false}},
		"wrong hash": {200, `{"jsonrpc":"2.0","id":1,"result":"0x0000000000000000000000000000000000000000000000000000000000000001"}`,
			relayErrorView{200, 0, "", false}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, srv := newFakeRelay(t, authAddr, func(call) answer { return answer{tc.status, tc.body} })
			c := &flashbots.Client{URL: srv.URL, AuthKey: authKey}
			_, err := c.SendPrivateTransaction(t.Context(), raw, 0, nil)
			var re *flashbots.RelayError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *RelayError", err, err)
			}
			got := relayErrorView{re.HTTPStatus, re.Code, re.Message, re.Temporary()}
			if tc.want.Message == "" { // the text is ours; only its presence matters
				got.Message = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RelayError (-want +got):\n%s", diff)
			}
			if msg := err.Error(); !strings.Contains(msg, srv.URL) || !strings.Contains(msg, re.Message) || !strings.Contains(msg, "eth_sendPrivateTransaction") {
				t.Errorf("Error() = %q, want the relay URL %s, the method and the message", msg, srv.URL)
			}
		})
	}
}

func TestClientTransportErrors(t *testing.T) {
	authKey, authAddr := newKey(t)
	release := make(chan struct{})
	_, slow := newFakeRelay(t, authAddr, func(call) answer {
		<-release
		return answer{200, `{"jsonrpc":"2.0","id":1,"result":true}`}
	})
	// Registered after the server's Close, so it runs first (cleanups run
	// last in, first out): Close waits for the handlers it releases.
	t.Cleanup(func() { close(release) })
	_, gone := newFakeRelay(t, authAddr, result("true"))
	gone.Close() // connection refused from now on

	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := map[string]struct {
		client        *flashbots.Client
		ctx           context.Context
		wantTemporary bool
	}{
		"client timeout": {
			client:        &flashbots.Client{URL: slow.URL, AuthKey: authKey, HTTP: &http.Client{Timeout: 50 * time.Millisecond}},
			ctx:           t.Context(),
			wantTemporary: true,
		},
		"context deadline": {
			client:        &flashbots.Client{URL: slow.URL, AuthKey: authKey},
			ctx:           deadlineCtx(t, 50*time.Millisecond),
			wantTemporary: true,
		},
		"connection refused": {
			client:        &flashbots.Client{URL: gone.URL, AuthKey: authKey},
			ctx:           t.Context(),
			wantTemporary: true,
		},
		"caller canceled": {
			client:        &flashbots.Client{URL: slow.URL, AuthKey: authKey},
			ctx:           canceled,
			wantTemporary: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.client.CancelPrivateTransaction(tc.ctx, common.Hash{1})
			var re *flashbots.RelayError
			if !errors.As(err, &re) {
				t.Fatalf("error %v (%T) is not a *RelayError", err, err)
			}
			if re.HTTPStatus != 0 || re.Err == nil {
				t.Errorf("RelayError{HTTPStatus: %d, Err: %v}, want no status and the transport error", re.HTTPStatus, re.Err)
			}
			if re.Temporary() != tc.wantTemporary {
				t.Errorf("Temporary() = %t, want %t (error: %v)", re.Temporary(), tc.wantTemporary, err)
			}
		})
	}
}

func deadlineCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestClientHidesURLSecrets: builder endpoints often carry an API key in
// the path or query, and errors end up in logs.
func TestClientHidesURLSecrets(t *testing.T) {
	authKey, authAddr := newKey(t)
	_, srv := newFakeRelay(t, authAddr, func(call) answer { return answer{401, `{"error":"bad key"}`} })
	c := &flashbots.Client{URL: srv.URL + "/v2/s3cr3tpath?apikey=s3cr3tquery", AuthKey: authKey}
	_, err := c.CancelPrivateTransaction(t.Context(), common.Hash{1})
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %q shows the URL's secret", err)
	}
	gone := &flashbots.Client{URL: "http://127.0.0.1:1/v2/s3cr3tpath?apikey=s3cr3tquery", AuthKey: authKey}
	if _, err := gone.CancelPrivateTransaction(t.Context(), common.Hash{1}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("transport error %v: want an error without the URL's secret", err)
	}
}

// TestClientRefusesBeforeSending: input no relay would take is refused
// here, and nothing reaches the relay.
func TestClientRefusesBeforeSending(t *testing.T) {
	authKey, authAddr := newKey(t)
	userKey, _ := newKey(t)
	_, raw := signedTx(t, userKey, 0)
	hash := common.Hash{9}
	relay, srv := newFakeRelay(t, authAddr, result(`"0x00"`))
	c := &flashbots.Client{URL: srv.URL, AuthKey: authKey}
	noKey := &flashbots.Client{URL: srv.URL}
	bundle := func(f func(*flashbots.MevBundle)) *flashbots.MevBundle {
		b := &flashbots.MevBundle{Inclusion: flashbots.Inclusion{Block: 10}, Body: []flashbots.BundleItem{{Tx: raw}}}
		f(b)
		return b
	}
	tests := map[string]func(context.Context) error{
		"private tx not rlp": func(ctx context.Context) error {
			_, err := c.SendPrivateTransaction(ctx, []byte{1, 2, 3}, 0, nil)
			return err
		},
		"private tx empty": func(ctx context.Context) error {
			_, err := c.SendPrivateTransaction(ctx, nil, 0, nil)
			return err
		},
		"no auth key": func(ctx context.Context) error {
			_, err := noKey.SendPrivateTransaction(ctx, raw, 0, nil)
			return err
		},
		"nil bundle": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, nil)
			return err
		},
		"bundle without block": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Inclusion.Block = 0 }))
			return err
		},
		"bundle maxBlock before block": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Inclusion.MaxBlock = 9 }))
			return err
		},
		"bundle empty body": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Body = nil }))
			return err
		},
		"bundle item with tx and hash": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Body[0].Hash = hash }))
			return err
		},
		"bundle item with neither": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Body[0] = flashbots.BundleItem{} }))
			return err
		},
		"bundle hash not first": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Body = append(b.Body, flashbots.BundleItem{Hash: hash}) }))
			return err
		},
		"bundle only a hash": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Body = []flashbots.BundleItem{{Hash: hash}} }))
			return err
		},
		"backrun bundle with hints": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) {
				b.Body = []flashbots.BundleItem{{Hash: hash}, {Tx: raw}}
				b.Privacy = &flashbots.Privacy{Hints: []flashbots.Hint{flashbots.HintCalldata}}
			}))
			return err
		},
		"bundle tx not rlp": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Body[0].Tx = []byte{0xc0} }))
			return err
		},
		"bundle version": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) { b.Version = "v0.2" }))
			return err
		},
		"bundle refund out of range": func(ctx context.Context) error {
			_, err := c.SendBundle(ctx, bundle(func(b *flashbots.MevBundle) {
				b.Validity = &flashbots.Validity{Refund: []flashbots.Refund{{BodyIdx: 1, Percent: 10}}}
			}))
			return err
		},
		"eth bundle without txs": func(ctx context.Context) error {
			_, err := c.SendEthBundle(ctx, flashbots.EthBundle{BlockNumber: 1})
			return err
		},
		"eth bundle without block": func(ctx context.Context) error {
			_, err := c.SendEthBundle(ctx, flashbots.EthBundle{Txs: [][]byte{raw}})
			return err
		},
		"eth bundle tx not rlp": func(ctx context.Context) error {
			_, err := c.SendEthBundle(ctx, flashbots.EthBundle{Txs: [][]byte{{1}}, BlockNumber: 1})
			return err
		},
		"eth bundle timestamps reversed": func(ctx context.Context) error {
			_, err := c.SendEthBundle(ctx, flashbots.EthBundle{Txs: [][]byte{raw}, BlockNumber: 1, MinTimestamp: 5, MaxTimestamp: 4})
			return err
		},
	}
	for name, do := range tests {
		t.Run(name, func(t *testing.T) {
			if err := do(t.Context()); err == nil {
				t.Error("no error")
			}
		})
	}
	if calls := relay.recorded(); len(calls) != 0 {
		t.Errorf("relay got %d calls, want none: %v", len(calls), calls)
	}
}

func TestTxStatus(t *testing.T) {
	hash := common.HexToHash("0x45df1bc3de765927b053ec029fc9d15d6321945b23cac0614eb0b5e61f3a2f2a")
	tests := map[string]struct {
		status  int
		body    string
		want    flashbots.Status
		wantErr *relayErrorView
	}{
		// The INCLUDED example of docs.flashbots.net's status API page.
		"included, documented example": {200, `{"status":"INCLUDED","hash":"` + hash.Hex() + `","maxBlockNumber":13543898,
			"transaction":{"from":"0xEA674fdDe714fd979de3EdF0F56AA9716B898ec8","to":"0xac03bb73b6a9e108530aff4df5077c2b3d481e5a",
			"gasLimit":"21000","maxFeePerGas":"300","maxPriorityFeePerGas":"10","nonce":"41","value":"10000000000"},
			"fastMode":true,"seenInMempool":false}`,
			flashbots.Status{Status: flashbots.StateIncluded, Hash: hash, MaxBlockNumber: 13543898,
				Transaction: flashbots.StatusTx{From: "0xEA674fdDe714fd979de3EdF0F56AA9716B898ec8", To: "0xac03bb73b6a9e108530aff4df5077c2b3d481e5a",
					GasLimit: "21000", MaxFeePerGas: "300", MaxPriorityFeePerGas: "10", Nonce: "41", Value: "10000000000"},
				FastMode: true}, nil},
		"pending with a simulation error": {200, `{"status":"PENDING","hash":"` + hash.Hex() + `","maxBlockNumber":13543898,
			"transaction":{"from":"","to":"","gasLimit":"","maxFeePerGas":"","maxPriorityFeePerGas":"","nonce":"","value":""},
			"fastMode":true,"seenInMempool":false,"simError":"MaxFeePerGasTooLow"}`,
			flashbots.Status{Status: flashbots.StatePending, Hash: hash, MaxBlockNumber: 13543898, FastMode: true, SimError: "MaxFeePerGasTooLow"}, nil},
		"unknown, empty hash": {200, `{"status":"UNKNOWN","hash":"","maxBlockNumber":0,"transaction":{}}`,
			flashbots.Status{Status: flashbots.StateUnknown}, nil},
		"hex maxBlockNumber": {200, `{"status":"FAILED","hash":"` + hash.Hex() + `","maxBlockNumber":"0xcea8da"}`,
			flashbots.Status{Status: flashbots.StateFailed, Hash: hash, MaxBlockNumber: 13543642}, nil},
		"not found":  {404, `{"error":"not found"}`, flashbots.Status{}, &relayErrorView{404, 0, "not found", false}},
		"overloaded": {503, `busy`, flashbots.Status{}, &relayErrorView{503, 0, "busy", true}},
		"no status":  {200, `{"hash":"` + hash.Hex() + `"}`, flashbots.Status{}, &relayErrorView{200, 0, "answer has no status", false}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/status/tx/"+hash.Hex() {
					t.Errorf("status API got %s %s, want GET /status/tx/%s", r.Method, r.URL.Path, hash.Hex())
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			c := &flashbots.Client{URL: "http://relay.invalid", StatusURL: srv.URL + "/status/"}
			got, err := c.TxStatus(t.Context(), hash)
			if tc.wantErr != nil {
				var re *flashbots.RelayError
				if !errors.As(err, &re) {
					t.Fatalf("error %v (%T) is not a *RelayError", err, err)
				}
				if diff := cmp.Diff(*tc.wantErr, relayErrorView{re.HTTPStatus, re.Code, re.Message, re.Temporary()}); diff != "" {
					t.Errorf("RelayError (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStatusRoundTrip: what a relay writes with encoding/json (devrelay
// does) reads back the same.
func TestStatusRoundTrip(t *testing.T) {
	want := flashbots.Status{Status: flashbots.StateIncluded, Hash: common.Hash{1}, MaxBlockNumber: 42,
		Transaction: flashbots.StatusTx{From: "0x01", Nonce: "3", Value: "0"}, IsRevert: true}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got flashbots.Status
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("round trip of %s (-want +got):\n%s", b, diff)
	}
}

func TestBundleJSONRoundTrip(t *testing.T) {
	userKey, _ := newKey(t)
	_, raw0 := signedTx(t, userKey, 0)
	_, raw1 := signedTx(t, userKey, 1)
	mev := flashbots.MevBundle{
		Version:   flashbots.BundleVersion,
		Inclusion: flashbots.Inclusion{Block: 5, MaxBlock: 9},
		Body:      []flashbots.BundleItem{{Hash: common.Hash{7}}, {Tx: raw0, CanRevert: true}, {Tx: raw1}},
		Validity:  &flashbots.Validity{RefundConfig: []flashbots.RefundConfig{{Address: common.Address{3}, Percent: 50}}},
		Privacy:   &flashbots.Privacy{Builders: []string{"flashbots"}},
	}
	eth := flashbots.EthBundle{Txs: [][]byte{raw0, raw1}, BlockNumber: 12, MaxTimestamp: 99, RevertingTxHashes: []common.Hash{{2}}}
	for name, v := range map[string]any{"mev": &mev, "eth": &eth} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			var got any
			switch v.(type) {
			case *flashbots.MevBundle:
				var m flashbots.MevBundle
				err, got = json.Unmarshal(b, &m), &m
			case *flashbots.EthBundle:
				var e flashbots.EthBundle
				err, got = json.Unmarshal(b, &e), &e
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(v, got); diff != "" {
				t.Errorf("round trip of %s (-want +got):\n%s", b, diff)
			}
		})
	}
}

func TestBundleItemRefusesNested(t *testing.T) {
	var b flashbots.MevBundle
	err := json.Unmarshal([]byte(`{"version":"v0.1","inclusion":{"block":"0x1"},"body":[{"bundle":{"version":"v0.1"}}]}`), &b)
	if err == nil || !strings.Contains(err.Error(), "nested bundles are not supported") {
		t.Errorf("Unmarshal nested bundle: %v, want a refusal naming nested bundles", err)
	}
}
