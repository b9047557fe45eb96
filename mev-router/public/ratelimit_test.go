package public_test

import (
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// TestARateLimitedEndpointIsSkippedUntilItsRetryAfter: two endpoints of
// one node, one behind a front that answers sends with HTTP 429 and
// Retry-After: 2. The other endpoint accepts every transaction; the
// limited one gets no send until its two seconds have passed (on the
// route's clock), then gets the next one; each transaction is counted
// once, however many endpoints took it, and the gauge counts the wait.
func TestARateLimitedEndpointIsSkippedUntilItsRetryAfter(t *testing.T) {
	t.Parallel()
	// Mined by hand, after both endpoints have answered: a transaction
	// mined at once is "nonce too low" to the slower one.
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	limited, url := newFront(t, node)
	limited.retryAfter = "2"
	limited.limiting.Store(true)
	clock := newClock()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg).Chain(node.ChainID())
	fanout, err := public.New(public.Endpoints{{Name: "limited", URL: url}, {Name: "plain", URL: node.URL()}},
		public.Options{Timeout: 30 * time.Second, BreakerThreshold: 1, BreakerCooldown: time.Hour, Now: clock.Now}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	router := &mevrouter.Router{ChainID: new(big.Int).SetUint64(node.ChainID()), Public: fanout, Auto: mevrouter.NewAutoRule(nil, nil, nil), Metrics: m}
	var sent []common.Hash
	broadcast := func(round int) []string {
		t.Helper()
		raws, txs := signedTransfers(t, node, 1)
		results, err := router.Broadcast(ctx(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePublic})
		if err != nil {
			t.Fatal(err)
		}
		if !results[0].Accepted {
			t.Fatalf("round %d: %v", round, results[0].Err)
		}
		sent = append(sent, txs[0].Hash())
		return results[0].AcceptedBy
	}
	backIn := func() float64 {
		return mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_rate_limited_seconds", map[string]string{"endpoint": "limited"})
	}

	// The first send reaches both; the limited endpoint answers 429.
	if by := broadcast(0); !slices.Equal(by, []string{"plain"}) {
		t.Errorf("accepted by %v, want plain alone", by)
	}
	eventually(t, func() bool { return sendsOf(t, reg, "limited", "rate_limited") == 1 })
	if got := backIn(); got != 2 {
		t.Errorf("back in %vs, want 2 (its Retry-After)", got)
	}
	// Until then, it gets nothing: the send is not even made.
	clock.Add(1500 * time.Millisecond)
	if by := broadcast(1); !slices.Equal(by, []string{"plain"}) {
		t.Errorf("accepted by %v, want plain alone", by)
	}
	if n := limited.calls("eth_sendRawTransaction"); n != 1 {
		t.Errorf("the limited endpoint was sent %d requests, want 1 (none during its Retry-After)", n)
	}
	if got := sendsOf(t, reg, "limited", "rate_limited"); got != 2 {
		t.Errorf("%v rate_limited sends, want 2 (one answered 429, one not sent)", got)
	}
	if got := backIn(); got != 0.5 {
		t.Errorf("back in %vs, want 0.5", got)
	}
	// A rate limit is no failure: with a threshold of one, the breaker
	// would be open otherwise.
	if up := upOf(t, reg, "limited"); up != 1 {
		t.Errorf("limited: up %v, want 1", up)
	}

	// Once its Retry-After has passed, it is sent to again.
	clock.Add(500 * time.Millisecond)
	limited.limiting.Store(false)
	if got := backIn(); got != 0 {
		t.Errorf("back in %vs once back, want 0", got)
	}
	broadcast(2)
	eventually(t, func() bool { return sendsOf(t, reg, "limited", "accepted") == 1 })
	if n := limited.calls("eth_sendRawTransaction"); n != 2 {
		t.Errorf("the limited endpoint was sent %d requests, want 2", n)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_broadcasts_total", map[string]string{"result": "accepted"}); got != 3 {
		t.Errorf("%v broadcasts accepted, want 3: one per transaction", got)
	}
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	for _, h := range sent {
		chaintest.WaitReceipt(t, node, h)
	}
}
