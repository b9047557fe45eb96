package public_test

import (
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/nodeerr"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/logtest"
)

// front stands in front of a real node: it records the methods it is
// called with, passes every call on to its node (which a test may switch
// to another), and while limiting answers eth_sendRawTransaction with HTTP
// 429 and the Retry-After it holds.
type front struct {
	node       atomic.Pointer[string]
	limiting   atomic.Bool
	retryAfter string

	mu      sync.Mutex
	methods []string
}

func newFront(t *testing.T, node *anvil.Node) (*front, string) {
	t.Helper()
	f := &front{}
	f.to(node)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// to sends what the front passes on to node from now on.
func (f *front) to(node *anvil.Node) {
	u := node.URL()
	f.node.Store(&u)
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, calls, _, err := readCalls(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	sends := false
	f.mu.Lock()
	for _, c := range calls {
		f.methods = append(f.methods, c.Method)
		sends = sends || c.Method == "eth_sendRawTransaction"
	}
	f.mu.Unlock()
	if sends && f.limiting.Load() {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		http.Error(w, "Too Many Requests", http.StatusTooManyRequests)
		return
	}
	chaintest.Forward(r.Context(), w, *f.node.Load(), body)
}

// calls is how many times the front was called with method.
func (f *front) calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.methods {
		if m == method {
			n++
		}
	}
	return n
}

// logTo is a JSON logger writing to a buffer the test reads.
func logTo(buf *logtest.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// alerts are the logged records with "alert": true.
func alerts(t *testing.T, buf *logtest.Buffer) []map[string]any {
	t.Helper()
	return buf.Records(t, func(r map[string]any) bool { return r["alert"] == true })
}

func sendsOf(t *testing.T, reg *prometheus.Registry, endpoint, result string) float64 {
	t.Helper()
	return mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_sends_total", map[string]string{"endpoint": endpoint, "result": result})
}

func upOf(t *testing.T, reg *prometheus.Registry, endpoint string) float64 {
	t.Helper()
	return mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_up", map[string]string{"endpoint": endpoint})
}

// TestAnEndpointOnAnotherChainGetsNoSends: beside an endpoint of the
// route's chain, one whose node is of another chain is asked its chain id
// before its first send and never gets eth_sendRawTransaction; the
// transaction is mined on the right chain; the metrics show wrong_chain
// and up 0 for it, and one alert names the endpoint, never its URL.
func TestAnEndpointOnAnotherChainGetsNoSends(t *testing.T) {
	t.Parallel()
	right := chaintest.Anvil(t, anvil.Options{})
	other := chaintest.Anvil(t, anvil.Options{ChainID: 5})
	wrong, wrongURL := newFront(t, other)
	reg := prometheus.NewRegistry()
	m := metrics.New(reg).Chain(right.ChainID())
	var logs logtest.Buffer
	fanout, err := public.New(public.Endpoints{{Name: "right", URL: right.URL()}, {Name: "wrong", URL: wrongURL + "/v3/SECRETKEY"}},
		public.Options{Timeout: 30 * time.Second, Log: logTo(&logs)}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	router := &mevrouter.Router{ChainID: new(big.Int).SetUint64(right.ChainID()), Public: fanout, Auto: mevrouter.NewAutoRule(nil, nil, nil), Metrics: m}

	for round := range 2 {
		raws, txs := signedTransfers(t, right, 1)
		results, err := router.Broadcast(ctx(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePublic})
		if err != nil {
			t.Fatal(err)
		}
		if res := results[0]; !res.Accepted || !slices.Equal(res.AcceptedBy, []string{"right"}) {
			t.Fatalf("round %d: %+v (err %v); want accepted by right alone", round, res, res.Err)
		}
		chaintest.WaitReceipt(t, right, txs[0].Hash())
		// The wrong endpoint's answer (the first round: its chain id) may
		// come after the send's: wait for it to be counted.
		eventually(t, func() bool { return sendsOf(t, reg, "wrong", "wrong_chain") == float64(round+1) })
	}
	if n := wrong.calls("eth_sendRawTransaction"); n != 0 {
		t.Errorf("the endpoint on chain 5 was sent %d transactions", n)
	}
	if n := wrong.calls("eth_chainId"); n != 1 {
		t.Errorf("the endpoint on chain 5 was asked its chain id %d times, want once (before its first send)", n)
	}
	if up := upOf(t, reg, "wrong"); up != 0 {
		t.Errorf("wrong: up %v, want 0", up)
	}
	if up := upOf(t, reg, "right"); up != 1 {
		t.Errorf("right: up %v, want 1", up)
	}
	if got := sendsOf(t, reg, "right", "accepted"); got != 2 {
		t.Errorf("right accepted %v sends, want 2", got)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_broadcasts_total", map[string]string{"result": "accepted"}); got != 2 {
		t.Errorf("%v broadcasts accepted, want 2", got)
	}
	a := alerts(t, &logs)
	if len(a) != 1 || a[0]["endpoint"] != "wrong" || a[0]["reported_chain_id"] != "5" || a[0]["chain_id"] != float64(31337) {
		t.Errorf("alerts %v; want one, naming endpoint wrong on chain 5", a)
	}
	if strings.Contains(logs.String(), "SECRETKEY") || strings.Contains(logs.String(), wrongURL) {
		t.Errorf("the log quotes an endpoint's URL:\n%s", logs.String())
	}
	if err := fanout.Ready(ctx(t)); err != nil {
		t.Errorf("not ready with one endpoint on the chain: %v", err)
	}
}

// TestEveryEndpointOnAnotherChain: when no endpoint is on the route's
// chain, a send reaches none of them and every transaction is transient
// (txmanager sends it again later; it is not refused), with a message
// naming each endpoint's chain, and the route is not ready, saying why.
func TestEveryEndpointOnAnotherChain(t *testing.T) {
	t.Parallel()
	other := chaintest.Anvil(t, anvil.Options{ChainID: 5})
	f1, url1 := newFront(t, other)
	f2, url2 := newFront(t, other)
	reg := prometheus.NewRegistry()
	fanout, err := public.New(public.Endpoints{{Name: "w1", URL: url1}, {Name: "w2", URL: url2}},
		public.Options{Timeout: 30 * time.Second}, metrics.New(reg).Chain(31337))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	// Transactions of chain 5, which the nodes would take: were anything
	// sent, they would be accepted.
	raws, txs := signedTransfers(t, other, 1)

	first := fanout.Send(ctx(t), raws, hashesOf(txs))[0] // both are asked first, and found out
	if first.Accepted || first.Err == nil || first.Err.Category != nodeerr.Transient || !strings.Contains(first.Err.Message, "is on chain 5, not 31337") {
		t.Errorf("first send: %+v (err %v); want transient, on another chain", first, first.Err)
	}
	again := fanout.Send(ctx(t), raws, hashesOf(txs))[0]
	const want = "no public RPC endpoint of chain 31337 can be sent to: w1 is on chain 5; w2 is on chain 5"
	if again.Accepted || again.Err == nil || again.Err.Category != nodeerr.Transient || again.Err.Message != want {
		t.Errorf("second send: %+v (err %v); want transient: %s", again, again.Err, want)
	}
	if !nodeerr.Transient.Retryable() {
		t.Error("transient is not retryable")
	}
	err = fanout.Ready(ctx(t))
	if err == nil || !strings.Contains(err.Error(), "w1 is on chain 5; w2 is on chain 5") {
		t.Errorf("Ready: %v; want it to say that both endpoints are on chain 5", err)
	}
	for name, f := range map[string]*front{"w1": f1, "w2": f2} {
		if n := f.calls("eth_sendRawTransaction"); n != 0 {
			t.Errorf("%s was sent %d transactions", name, n)
		}
		if got := sendsOf(t, reg, name, "wrong_chain"); got != 2 {
			t.Errorf("%s: %v wrong_chain sends, want 2", name, got)
		}
	}
	pool, err := other.TxPoolContent(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if pool.Contains(txs[0].Hash()) {
		t.Error("the transaction reached a node of another chain")
	}
}

// TestAnEndpointThatMovesToAnotherChainIsTakenOutAndBack: the checker asks
// every endpoint its chain id again and again; an endpoint whose node
// becomes one of another chain is taken out (one alert, up 0, sends not
// made) and, once back on the chain, sent to again.
func TestAnEndpointThatMovesToAnotherChainIsTakenOutAndBack(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	other := chaintest.Anvil(t, anvil.Options{ChainID: 5})
	sw, url := newFront(t, node)
	reg := prometheus.NewRegistry()
	var logs logtest.Buffer
	fanout, err := public.New(public.Endpoints{{Name: "sw", URL: url}},
		public.Options{ChainCheckEvery: 20 * time.Millisecond, Timeout: 30 * time.Second, Log: logTo(&logs)},
		metrics.New(reg).Chain(node.ChainID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	send := func() mevrouter.Sent {
		raws, txs := signedTransfers(t, node, 1)
		return fanout.Send(ctx(t), raws, hashesOf(txs))[0]
	}
	if s := send(); !s.Accepted {
		t.Fatalf("on the chain: %v", s.Err)
	}

	sw.to(other)
	eventually(t, func() bool { return upOf(t, reg, "sw") == 0 })
	sent := sw.calls("eth_sendRawTransaction")
	if s := send(); s.Accepted || s.Err.Category != nodeerr.Transient || !strings.Contains(s.Err.Message, "sw is on chain 5") {
		t.Errorf("on chain 5: %+v (err %v); want transient, on another chain", s, s.Err)
	}
	if n := sw.calls("eth_sendRawTransaction"); n != sent {
		t.Errorf("sent %d more transactions to an endpoint on another chain", n-sent)
	}

	sw.to(node)
	eventually(t, func() bool { return upOf(t, reg, "sw") == 1 })
	if s := send(); !s.Accepted {
		t.Errorf("back on the chain: %v", s.Err)
	}
	if a := alerts(t, &logs); len(a) != 1 || a[0]["endpoint"] != "sw" {
		t.Errorf("alerts %v; want one, when sw left the chain", a)
	}
	back := logs.Records(t, func(r map[string]any) bool { return strings.Contains(r["msg"].(string), "on its chain again") })
	if len(back) != 1 {
		t.Errorf("%d records of sw coming back, want 1", len(back))
	}
}
