package rpchttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/shared/rpcpool/rpchttp"
)

// node is a JSON-RPC endpoint of a test: it answers eth_chainId and
// eth_blockNumber from its fields, anything else with "0x1", unless
// misbehave answers for it first.
type node struct {
	chainID uint64
	head    atomic.Uint64
	// misbehave, when set, may answer a request itself (true) instead;
	// the pool's health probes (batches) get a healthy answer unless
	// probesToo.
	misbehave func(w http.ResponseWriter, r *http.Request) bool
	probesToo bool
	hits      atomic.Int64 // callers' calls (not probes)
	srv       *httptest.Server
}

func startNode(t *testing.T, chainID, head uint64, misbehave func(w http.ResponseWriter, r *http.Request) bool) *node {
	t.Helper()
	n := &node{chainID: chainID, misbehave: misbehave}
	n.head.Store(head)
	n.srv = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *node) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	batch := bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
	if !batch {
		n.hits.Add(1)
	}
	if n.misbehave != nil && (!batch || n.probesToo) && n.misbehave(w, r) {
		return
	}
	type call struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	answer := func(c call) map[string]any {
		result := "0x1"
		switch c.Method {
		case "eth_chainId":
			result = fmt.Sprintf("0x%x", n.chainID)
		case "eth_blockNumber":
			result = fmt.Sprintf("0x%x", n.head.Load())
		}
		return map[string]any{"jsonrpc": "2.0", "id": c.ID, "result": result}
	}
	w.Header().Set("Content-Type", "application/json")
	if batch {
		var calls []call
		_ = json.Unmarshal(body, &calls)
		var out []map[string]any
		for _, c := range calls {
			out = append(out, answer(c))
		}
		_ = json.NewEncoder(w).Encode(out)
		return
	}
	var c call
	_ = json.Unmarshal(body, &c)
	_ = json.NewEncoder(w).Encode(answer(c))
}

// pool is a pool of chain 31337 over nodes named a, b, c… in order, and
// a Transport over it that gives up on an attempt after 300ms, after one
// round of health probes.
func pool(t *testing.T, nodes ...*node) (*rpcpool.Pool, *rpchttp.Transport) {
	t.Helper()
	var eps []rpcpool.Endpoint
	for i, n := range nodes {
		eps = append(eps, rpcpool.Endpoint{Name: string(rune('a' + i)), URL: n.srv.URL})
	}
	p, err := rpcpool.New(31337, eps, rpcpool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rpchttp.NewTransport(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.Timeout = 300 * time.Millisecond
	(&rpchttp.Prober{Transport: tr}).Round(t.Context())
	return p, tr
}

// call sends one JSON-RPC call through tr and returns the answer's body.
func call(t *testing.T, ctx context.Context, tr *rpchttp.Transport, method string) (string, error) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":[]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rpchttp.PoolURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.Client().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

func health(p *rpcpool.Pool, name string) rpcpool.Health {
	for _, h := range p.Health() {
		if h.Name == name {
			return h
		}
	}
	return rpcpool.Health{}
}

func TestAFailingEndpointsCallGoesToTheNext(t *testing.T) {
	t.Parallel()
	rpcError := func(code int, message string) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"error":{"code":`+jsonInt(code)+`,"message":"`+message+`"}}`)
			return true
		}
	}
	for _, tc := range []struct {
		name      string
		misbehave func(w http.ResponseWriter, r *http.Request) bool
		class     string
		usable    bool
	}{
		{"429 with Retry-After", func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}, "rate_limited", false},
		{"503", func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}, "http_5xx", true},
		{"a proxy's HTML page", func(w http.ResponseWriter, r *http.Request) bool {
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
			return true
		}, "http_5xx", true},
		{"hangs", func(w http.ResponseWriter, r *http.Request) bool { <-r.Context().Done(); return true }, "timeout", true},
		{"-32005 limit exceeded", rpcError(-32005, "daily request count exceeded, request rate limited"), "rate_limited", false},
		{"header not found", rpcError(-32000, "header not found"), "behind", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bad := startNode(t, 31337, 100, tc.misbehave)
			good := startNode(t, 31337, 100, nil)
			p, tr := pool(t, bad, good)
			got, err := call(t, t.Context(), tr, "eth_getBalance")
			if err != nil || !strings.Contains(got, `"result":"0x1"`) {
				t.Fatalf("answer %q, %v; want the good endpoint's", got, err)
			}
			if bad.hits.Load() != 1 || good.hits.Load() != 1 {
				t.Errorf("hits: bad %d, good %d; want one each (tried once, then the next)", bad.hits.Load(), good.hits.Load())
			}
			h := health(p, "a")
			if h.Calls[tc.class] != 1 || h.Usable != tc.usable {
				t.Errorf("a's health %+v, want one %s call and usable=%v", h, tc.class, tc.usable)
			}
		})
	}
}

func jsonInt(v int) string { b, _ := json.Marshal(v); return string(b) }

func TestAnEndpointDownFromTheStartTakesNoCall(t *testing.T) {
	t.Parallel()
	good := startNode(t, 31337, 100, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	p, err := rpcpool.New(31337, []rpcpool.Endpoint{{Name: "dead", URL: dead}, {Name: "good", URL: good.srv.URL}}, rpcpool.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rpchttp.NewTransport(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	(&rpchttp.Prober{Transport: tr}).Round(t.Context())
	for range 10 {
		if got, err := call(t, t.Context(), tr, "eth_call"); err != nil || !strings.Contains(got, "0x1") {
			t.Fatalf("answer %q, %v", got, err)
		}
	}
	// Down from the start, it never confirmed its chain id: only the probe
	// went to it, no caller's call.
	if h := health(p, "dead"); h.Usable || h.Calls["connection"] != 1 || h.Reason != "chain id not confirmed yet" {
		t.Errorf("dead: %+v; want out of the pool, tried by the probe only", h)
	}
}

func TestWhenNoEndpointAnswersTheLastAnswerIsReturned(t *testing.T) {
	t.Parallel()
	limited := func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
	_, tr := pool(t, startNode(t, 31337, 100, limited), startNode(t, 31337, 100, limited))
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, rpchttp.PoolURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_call","params":[]}`))
	resp, err := tr.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("status %d, want the last endpoint's 429", resp.StatusCode)
	}
	if _, err := call(t, t.Context(), tr, "eth_call"); err == nil || !strings.Contains(err.Error(), "rate limited") {
		t.Errorf("with every endpoint backing off: %v, want an error naming why", err)
	}
}

func TestProberExcludesTheWrongChainAndReadsHeadsForAtHead(t *testing.T) {
	t.Parallel()
	behind := startNode(t, 31337, 90, nil)
	ahead := startNode(t, 31337, 100, nil)
	other := startNode(t, 10, 500, nil)
	p, tr := pool(t, behind, ahead, other)
	(&rpchttp.Prober{Transport: tr}).Round(t.Context())
	if h := health(p, "c"); h.Usable || !strings.Contains(h.Reason, "chain 10") {
		t.Errorf("the wrong-chain endpoint: %+v", h)
	}
	if h := health(p, "a"); h.Head != 90 || h.Lag != 10 {
		t.Errorf("the lagging endpoint: %+v", h)
	}
	before := behind.hits.Load()
	for range 5 {
		if _, err := call(t, rpcpool.AtHead(t.Context(), 95), tr, "eth_getTransactionReceipt"); err != nil {
			t.Fatal(err)
		}
	}
	if behind.hits.Load() != before || other.hits.Load() != 0 {
		t.Errorf("reads at head 95 reached the node at 90 (%d) or the wrong chain (%d)", behind.hits.Load()-before, other.hits.Load())
	}
	if _, err := call(t, rpcpool.On(t.Context(), "a"), tr, "eth_getTransactionByHash"); err != nil || behind.hits.Load() != before+1 {
		t.Errorf("a call pinned to a: %v, hits %d", err, behind.hits.Load()-before)
	}
}

func TestAProbeBringsAHungEndpointBack(t *testing.T) {
	t.Parallel()
	var hang atomic.Bool
	hang.Store(true)
	flaky := startNode(t, 31337, 100, func(w http.ResponseWriter, r *http.Request) bool {
		if hang.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return true
		}
		return false
	})
	flaky.probesToo = true
	good := startNode(t, 31337, 100, nil)
	p, err := rpcpool.New(31337, []rpcpool.Endpoint{{Name: "a", URL: flaky.srv.URL}, {Name: "b", URL: good.srv.URL}}, rpcpool.Options{Cooldown: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := rpchttp.NewTransport(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	prober := &rpchttp.Prober{Transport: tr}
	for range 4 {
		prober.Round(t.Context())
	}
	if health(p, "a").Usable {
		t.Fatal("a failing endpoint stayed in the pool after four failed probes")
	}
	hang.Store(false)
	prober.Round(t.Context())
	if h := health(p, "a"); !h.Usable {
		t.Errorf("after a probe succeeded: %+v, want usable", h)
	}
}

func TestACallAboveTheKnownHeadsLooksAgainBeforeGivingUp(t *testing.T) {
	t.Parallel()
	a, b := startNode(t, 31337, 100, nil), startNode(t, 31337, 100, nil)
	p, tr := pool(t, a, b)
	b.head.Store(101) // a block the pool's last probe has not seen
	if _, err := call(t, rpcpool.AtHead(t.Context(), 101), tr, "eth_getTransactionReceipt"); err != nil {
		t.Fatalf("a read at the new head: %v", err)
	}
	if a.hits.Load() != 0 || b.hits.Load() != 1 || health(p, "b").Head != 101 {
		t.Errorf("hits a %d, b %d, b's head %d: want the read on b, found at 101 by a fresh probe", a.hits.Load(), b.hits.Load(), health(p, "b").Head)
	}
	_, err := call(t, rpcpool.AtHead(t.Context(), 102), tr, "eth_getTransactionReceipt")
	if !errors.Is(err, rpcpool.ErrBehind) {
		t.Errorf("a read above every endpoint's head: %v, want ErrBehind", err)
	}
}
