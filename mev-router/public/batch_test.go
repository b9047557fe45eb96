package public_test

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/nodeerr"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// batchFront stands in front of a real node and answers what anvil cannot
// be made to answer: a JSON-RPC batch of more than two calls is answered
// as a whole, the way nodes, providers and proxies answer a batch above
// their limits; smaller batches and single calls go to the node, unless
// the front answers everything as a whole. It records what it was sent,
// but for the route's questions of the chain id, which it passes on.
type batchFront struct {
	node string
	// whole answers a batch of more than two calls (every request when
	// always is set), given its calls' ids; ok false passes it on.
	whole  func(ids []json.RawMessage) (status int, body string, ok bool)
	always bool
	// dropLast passes a batch of more than two calls on, and drops the
	// last element of the node's answer.
	dropLast bool

	mu    sync.Mutex
	sizes []int    // the calls in each request, in order
	alone []string // the raw transactions sent in a request of their own
}

type call struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params []string        `json:"params"`
}

// readCalls reads a JSON-RPC request: its body, and its calls (one when
// it is not a batch).
func readCalls(r *http.Request) (body []byte, calls []call, batch bool, err error) {
	if body, err = io.ReadAll(r.Body); err != nil {
		return nil, nil, false, err
	}
	batch = bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
	if batch {
		err = json.Unmarshal(body, &calls)
	} else {
		calls = make([]call, 1)
		err = json.Unmarshal(body, &calls[0])
	}
	return body, calls, batch, err
}

func (f *batchFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, calls, batch, err := readCalls(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !batch && calls[0].Method == "eth_chainId" {
		chaintest.Forward(r.Context(), w, f.node, body)
		return
	}
	f.mu.Lock()
	if !batch {
		f.alone = append(f.alone, strings.Join(calls[0].Params, ""))
	}
	f.sizes = append(f.sizes, len(calls))
	f.mu.Unlock()

	large := batch && len(calls) > 2
	if f.whole != nil && (large || f.always) {
		ids := make([]json.RawMessage, len(calls))
		for i, c := range calls {
			ids[i] = c.ID
		}
		if status, answer, ok := f.whole(ids); ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, answer)
			return
		}
	}
	resp, err := http.Post(f.node, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if f.dropLast && large {
		var elems []json.RawMessage
		if err := json.Unmarshal(answer, &elems); err == nil && len(elems) > 0 {
			answer, _ = json.Marshal(elems[:len(elems)-1])
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func (f *batchFront) seen() (sizes []int, alone []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.sizes...), append([]string(nil), f.alone...)
}

func serveFront(t *testing.T, f *batchFront) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

// publicTo is a public route whose one endpoint, "front", is url.
func publicTo(t *testing.T, url string, breakerThreshold int) (*public.Fanout, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	fanout, err := public.New(public.Endpoints{{Name: "front", URL: url}},
		public.Options{Timeout: 30 * time.Second, BreakerThreshold: breakerThreshold, BreakerCooldown: time.Hour}, metrics.New(reg).Chain(31337))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	return fanout, reg
}

func hashesOf(txs []*types.Transaction) []common.Hash {
	out := make([]common.Hash, len(txs))
	for i, tx := range txs {
		out[i] = tx.Hash()
	}
	return out
}

// TestABatchAnsweredAsAWholeIsSentAgainUntilEachTransactionIsAnswered: an
// endpoint that answers a batch as a whole (one error object, geth's "batch
// too large" under the first call's id, HTTP 413, an HTTP 400 whose error
// reads like a refusal, an array that lacks a call) gives no verdict on
// any transaction in it: the public route sends them again in smaller
// batches, then singly, and every one is accepted by the node behind it.
func TestABatchAnsweredAsAWholeIsSentAgainUntilEachTransactionIsAnswered(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	oneObject := func([]json.RawMessage) (int, string, bool) {
		return http.StatusOK, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}`, true
	}
	tests := []struct {
		name  string
		front *batchFront
	}{
		{"one error object", &batchFront{whole: oneObject}},
		{"geth batch too large", &batchFront{whole: func(ids []json.RawMessage) (int, string, bool) {
			return http.StatusOK, `[{"jsonrpc":"2.0","id":` + string(ids[0]) + `,"error":{"code":-32600,"message":"batch too large"}}]`, true
		}}},
		{"HTTP 413", &batchFront{whole: func([]json.RawMessage) (int, string, bool) {
			return http.StatusRequestEntityTooLarge, "<html><body>413 Request Entity Too Large</body></html>", true
		}}},
		{"HTTP 400 in a refusal's words", &batchFront{whole: func([]json.RawMessage) (int, string, bool) {
			return http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"nonce too low"}}`, true
		}}},
		{"a call missing from the answer", &batchFront{dropLast: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.front.node = node.URL()
			fanout, _ := publicTo(t, serveFront(t, tt.front), 3)
			raws, txs := signedTransfersFrom(t, node, i, 4)
			sent := fanout.Send(ctx(t), raws, hashesOf(txs))
			for j, s := range sent {
				if !s.Accepted || strings.Join(s.AcceptedBy, ",") != "front" {
					t.Errorf("tx %d: %+v (err %v); want accepted by front", j, s, s.Err)
				}
			}
			pool, err := node.TxPoolContent(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			for j, tx := range txs {
				if !pool.Contains(tx.Hash()) {
					t.Errorf("tx %d is not in the node's pool", j)
				}
			}
			if sizes, _ := tt.front.seen(); len(sizes) < 2 || sizes[0] != 4 {
				t.Errorf("the front was sent batches of %v; want the batch of 4, then smaller ones", sizes)
			}
		})
	}
}

// TestABatchAboveTheNodesBodyLimitIsSentInHalves: anvil answers a request
// body above its limit (2 MiB for 1.7.1) with one error object ("Invalid
// request", id null), which go-ethereum's client cannot read as a batch's
// answer, and closes the connection, often before it has read what we
// still write. Four transactions of 300 kB each make such a batch; each
// half fits, and every transaction is accepted.
func TestABatchAboveTheNodesBodyLimitIsSentInHalves(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	raws, txs := largeTransfers(t, node, 4)
	fanout, reg := publicTo(t, node.URL(), 3)
	sent := fanout.Send(ctx(t), raws, hashesOf(txs))
	for j, s := range sent {
		if !s.Accepted {
			t.Errorf("tx %d: not accepted: %v", j, s.Err)
		}
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_batch_splits_total", map[string]string{"endpoint": "front"}); got < 1 {
		t.Errorf("%v batches split, want at least 1", got)
	}
}

// TestAnEndpointThatHangsUpOnALargeBodyGetsSmallerBatches: a proxy that
// enforces its body limit by closing the connection, unread and
// unanswered, leaves the client a broken pipe or a reset while it writes.
// That is no verdict on the transactions: the batch is sent again in
// halves, and each transaction, which fits alone, is accepted.
func TestAnEndpointThatHangsUpOnALargeBodyGetsSmallerBatches(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	raws, txs := largeTransfers(t, node, 4)
	var hangups atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 1<<20 {
			hangups.Add(1)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		(&batchFront{node: node.URL()}).ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	fanout, _ := publicTo(t, front.URL, 10)
	sent := fanout.Send(ctx(t), raws, hashesOf(txs))
	for j, s := range sent {
		if !s.Accepted {
			t.Errorf("tx %d: not accepted: %v", j, s.Err)
		}
	}
	if got := hangups.Load(); got < 1 {
		t.Errorf("the front hung up on %d requests; want the batch of 4 refused so", got)
	}
}

// largeTransfers signs n transfers of 300 kB of call data each (600 kB
// as hex) from the node's first account, at its next nonces.
func largeTransfers(t *testing.T, node *anvil.Node, n int) ([][]byte, []*types.Transaction) {
	t.Helper()
	acct := node.Accounts()[0]
	nonce, err := node.Client().PendingNonceAt(ctx(t), acct.Address)
	if err != nil {
		t.Fatal(err)
	}
	to := common.HexToAddress("0xb0b")
	var raws [][]byte
	var txs []*types.Transaction
	for j := range n {
		// Zero bytes cost the EIP-7623 floor, 10 gas each.
		tx := chaintest.SignCall(t, node, acct.Key, chaintest.Call{To: &to, Value: big.NewInt(1), Data: make([]byte, 300_000), Gas: 3_100_000}, nonce+uint64(j))
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		raws, txs = append(raws, raw), append(txs, tx)
	}
	return raws, txs
}

// TestAnEndpointThatNeverAnswersATransactionGivesNoVerdict: an endpoint
// that answers every request as a whole, batch or single call, never
// judges a transaction: each is sent alone before the route gives up, and
// each is transient, never fatal.
func TestAnEndpointThatNeverAnswersATransactionGivesNoVerdict(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	front := &batchFront{node: node.URL(), always: true, whole: func([]json.RawMessage) (int, string, bool) {
		return http.StatusOK, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request"}}`, true
	}}
	fanout, _ := publicTo(t, serveFront(t, front), 3)
	raws, txs := signedTransfers(t, node, 4)
	sent := fanout.Send(ctx(t), raws, hashesOf(txs))
	var got []nodeerr.Category
	for _, s := range sent {
		if s.Accepted || s.Err == nil {
			t.Fatalf("%+v: accepted by an endpoint that answers nothing", s)
		}
		got = append(got, s.Err.Category)
	}
	want := []nodeerr.Category{nodeerr.Transient, nodeerr.Transient, nodeerr.Transient, nodeerr.Transient}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("categories (-want +got):\n%s", diff)
	}
	_, alone := front.seen()
	sentAlone := map[string]bool{}
	for _, p := range alone {
		sentAlone[p] = true
	}
	for j, raw := range raws {
		if !sentAlone[hexOf(raw)] {
			t.Errorf("tx %d was never sent alone", j)
		}
	}
}

// TestABatchLevelRateLimitKeepsTheEndpointOut: a batch answered with HTTP
// 429 is the endpoint asking for less: no smaller batches are sent at
// once, the transactions are transient, and the endpoint is out of the
// sends for the back-off (it gave no Retry-After), not failing: its
// circuit breaker does not count it, and the route stays ready.
func TestABatchLevelRateLimitKeepsTheEndpointOut(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	front := &batchFront{node: node.URL(), whole: func([]json.RawMessage) (int, string, bool) {
		return http.StatusTooManyRequests, `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"nonce too low"}}`, true
	}}
	clock := newClock()
	reg := prometheus.NewRegistry()
	fanout, err := public.New(public.Endpoints{{Name: "front", URL: serveFront(t, front)}},
		public.Options{Timeout: 30 * time.Second, BreakerThreshold: 1, BreakerCooldown: time.Hour, Now: clock.Now},
		metrics.New(reg).Chain(node.ChainID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	raws, txs := signedTransfers(t, node, 4)
	for round := range 2 {
		for j, s := range fanout.Send(ctx(t), raws, hashesOf(txs)) {
			if s.Accepted || s.Err == nil || s.Err.Category != nodeerr.Transient {
				t.Errorf("round %d tx %d: %+v (err %v); want transient", round, j, s, s.Err)
			}
		}
	}
	if sizes, _ := front.seen(); !cmp.Equal(sizes, []int{4}) {
		t.Errorf("the front was sent batches of %v; want the one batch of 4, then nothing while it is out", sizes)
	}
	if err := fanout.Ready(ctx(t)); err != nil {
		t.Errorf("not ready after a rate-limited batch: %v; a rate limit is no failure", err)
	}
	rateLimited := map[string]string{"endpoint": "front", "result": "rate_limited"}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_sends_total", rateLimited); got != 8 {
		t.Errorf("%v rate-limited sends recorded, want 8 (4 answered 429, 4 not sent)", got)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_rate_limited_seconds", map[string]string{"endpoint": "front"}); got != 1 {
		t.Errorf("back in %vs, want 1 (the first back-off)", got)
	}

	// Once the back-off has passed, the endpoint is sent to again; a
	// second 429 doubles the back-off.
	clock.Add(time.Second)
	fanout.Send(ctx(t), raws, hashesOf(txs))
	if sizes, _ := front.seen(); !cmp.Equal(sizes, []int{4, 4}) {
		t.Errorf("the front was sent batches of %v; want a second batch of 4 once back", sizes)
	}
	if got := mevroutertest.Counter(t, reg, "txfence_mevrouter_endpoint_rate_limited_seconds", map[string]string{"endpoint": "front"}); got != 2 {
		t.Errorf("back in %vs, want 2 (the back-off doubled)", got)
	}
}

// clock is a test's clock, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func hexOf(b []byte) string { return "0x" + common.Bytes2Hex(b) }
