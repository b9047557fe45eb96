package public_test

import (
	"context"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
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

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// closedURL is an http URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

// heldProxy forwards JSON-RPC to target, but only once release is closed:
// an endpoint that is up and slow.
func heldProxy(t *testing.T, target string, release <-chan struct{}) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		chaintest.Forward(r.Context(), w, target, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// signedTransfers signs n transfers from the node's first dev account,
// from its pending nonce on.
func signedTransfers(t *testing.T, node *anvil.Node, n int) ([][]byte, []*types.Transaction) {
	t.Helper()
	return signedTransfersFrom(t, node, 0, n)
}

// signedTransfersFrom signs n transfers from the node's dev account i.
func signedTransfersFrom(t *testing.T, node *anvil.Node, i, n int) ([][]byte, []*types.Transaction) {
	t.Helper()
	acct := node.Accounts()[i]
	nonce, err := node.Client().PendingNonceAt(ctx(t), acct.Address)
	if err != nil {
		t.Fatal(err)
	}
	var raws [][]byte
	var txs []*types.Transaction
	for j := range n {
		tx := chaintest.SignTransfer(t, node, acct.Key, common.HexToAddress("0xb0b"), big.NewInt(1), nonce+uint64(j))
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		raws, txs = append(raws, raw), append(txs, tx)
	}
	return raws, txs
}

// TestOneDownOneSlowTheSendStillAnswersAtOnce: with three public endpoints,
// one refusing connections and one holding every request, a broadcast is
// answered by the healthy one while the slow one still holds the request;
// the down endpoint's breaker opens and later sends skip it; the metrics
// show all of it.
func TestOneDownOneSlowTheSendStillAnswersAtOnce(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	release := make(chan struct{})
	endpoints := public.Endpoints{
		{Name: "down", URL: closedURL(t)},
		{Name: "slow", URL: heldProxy(t, node.URL(), release)},
		{Name: "anvil", URL: node.URL()},
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg).Chain(node.ChainID())
	fanout, err := public.New(endpoints, public.Options{Timeout: 30 * time.Second, BreakerThreshold: 2, BreakerCooldown: time.Hour}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	router := &mevrouter.Router{ChainID: new(big.Int).SetUint64(node.ChainID()), Public: fanout, Auto: mevrouter.NewAutoRule(nil, nil, nil), Metrics: m}

	labels := func(endpoint, result string) map[string]string {
		return map[string]string{"chain_id": "31337", "endpoint": endpoint, "route": "public", "result": result}
	}
	for round := range 3 {
		raws, txs := signedTransfers(t, node, 2)
		results, err := router.Broadcast(ctx(t), mevrouter.Request{Raw: raws, Route: mevrouter.RoutePublic})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, res := range results {
			if !res.Accepted || res.Hash != txs[i].Hash() || strings.Join(res.AcceptedBy, ",") != "anvil" || res.Route != mevrouter.RoutePublic {
				t.Fatalf("round %d tx %d: %+v (err %v); want accepted by anvil alone while slow is held", round, i, res, res.Err)
			}
		}
		for _, tx := range txs {
			chaintest.WaitReceipt(t, node, tx.Hash())
		}
		if round < 2 {
			// The down endpoint's refusals are recorded by its own send,
			// which may finish after the answer: wait for them, so that
			// the breaker's count is known.
			want := float64(2 * (round + 1))
			eventually(t, func() bool {
				return mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_sends_total", labels("down", string(nodeerr.Transient))) == want
			})
		}
	}
	close(release) // the slow endpoint answers now: already known, or nonce too low

	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_sends_total", labels("anvil", "accepted")); got != 6 {
		t.Errorf("anvil accepted %v sends, want 6", got)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_sends_total", labels("down", string(nodeerr.Transient))); got != 4 {
		t.Errorf("down: %v transient failures, want 4 (two rounds of two, then its breaker opened)", got)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_sends_total", labels("down", "skipped")); got != 2 {
		t.Errorf("down: %v skipped sends, want 2", got)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_up", map[string]string{"endpoint": "down"}); got != 0 {
		t.Errorf("down is up=%v, want 0", got)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_broadcasts_total", map[string]string{"route": "public", "result": "accepted"}); got != 6 {
		t.Errorf("%v broadcasts accepted, want 6", got)
	}
	if err := fanout.Ready(ctx(t)); err != nil {
		t.Errorf("ready with two endpoints up: %v", err)
	}
}

// eventually polls cond until it holds, failing the test after ten seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	wait.For(t, 10*time.Second, "the condition", cond)
}

// TestEveryEndpointRefusingGivesTheMostTellingCategory: a node's verdict
// (nonce too low) wins over a connection error.
func TestEveryEndpointRefusingGivesTheMostTellingCategory(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	raws, txs := signedTransfers(t, node, 1)
	if err := node.Client().SendTransaction(ctx(t), txs[0]); err != nil {
		t.Fatal(err)
	}
	chaintest.WaitReceipt(t, node, txs[0].Hash())
	fanout, err := public.New(public.Endpoints{{Name: "down", URL: closedURL(t)}, {Name: "anvil", URL: node.URL()}},
		public.Options{Timeout: 10 * time.Second}, metrics.New(prometheus.NewRegistry()).Chain(node.ChainID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	sent := fanout.Send(ctx(t), raws, []common.Hash{txs[0].Hash()})[0]
	if sent.Accepted || sent.Err == nil || sent.Err.Category != nodeerr.NonceTooLow || sent.Err.Endpoint != "anvil" {
		t.Fatalf("resend of a mined tx: %+v (%v); want nonce_too_low from anvil", sent, sent.Err)
	}
}

// TestAnEndpointsURLIsNeitherLoggedNorAnswered: net/http's errors quote
// the URL of the request, which carries the provider's key; the answer
// and the log name the endpoint and its host only.
func TestAnEndpointsURLIsNeitherLoggedNorAnswered(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	raws, txs := signedTransfers(t, node, 1)
	var logs logtest.Buffer
	fanout, err := public.New(public.Endpoints{{Name: "down", URL: closedURL(t) + "/v3/SECRETKEY"}},
		public.Options{Timeout: 10 * time.Second, Log: logTo(&logs)}, metrics.New(prometheus.NewRegistry()).Chain(node.ChainID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	sent := fanout.Send(ctx(t), raws, hashesOf(txs))[0]
	if sent.Err == nil || sent.Err.Category != nodeerr.Transient || !strings.Contains(sent.Err.Message, "connection refused") {
		t.Fatalf("%+v (%v); want transient, connection refused", sent, sent.Err)
	}
	if strings.Contains(sent.Err.Message, "SECRETKEY") {
		t.Errorf("the answer quotes the URL: %s", sent.Err.Message)
	}
	if strings.Contains(logs.String(), "SECRETKEY") || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("the log quotes the URL, or says nothing of the failure:\n%s", logs.String())
	}
}
