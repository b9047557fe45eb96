package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

const (
	signer2 = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
	bob     = "0x0000000000000000000000000000000000000b0b"
	// batchBytes mirrors createbatch.go's bound on the bodies of one batch.
	batchBytes = 4 << 20
)

// intent is a create body.
type intent struct {
	ChainID   uint64 `json:"chain_id"`
	From      string `json:"from"`
	RequestID string `json:"request_id"`
	To        string `json:"to"`
	Value     string `json:"value"`
	Data      string `json:"data,omitempty"`
}

func newIntent(requestID, value string) intent {
	return intent{ChainID: 31337, From: signer, RequestID: requestID, To: bob, Value: value}
}

func (in intent) body(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func bodies(t *testing.T, ins []intent) [][]byte {
	t.Helper()
	out := make([][]byte, len(ins))
	for i, in := range ins {
		out[i] = in.body(t)
	}
	return out
}

// answer is what one Create returned.
type answer struct {
	tx      remote.Tx
	created bool
	err     error
}

// checkTx fails unless a is in's own transaction: a batch must not hand an
// item the answer of another.
func checkTx(t *testing.T, in intent, a answer) {
	t.Helper()
	if a.err != nil {
		t.Errorf("%s: %v", in.RequestID, a.err)
		return
	}
	var got struct {
		RequestID string `json:"request_id"`
		Value     string `json:"value"`
		Data      string `json:"data"`
	}
	if err := json.Unmarshal(a.tx.JSON, &got); err != nil {
		t.Errorf("%s: the answer's JSON: %v", in.RequestID, err)
		return
	}
	if got.RequestID != in.RequestID || got.Value != in.Value || a.tx.From != common.HexToAddress(in.From) ||
		(in.Data != "" && got.Data != in.Data) {
		t.Errorf("%s (value %s, from %s) was answered with request %s, value %s, from %s", in.RequestID, in.Value, in.From,
			got.RequestID, got.Value, a.tx.From)
	}
}

// counter counts events and lets the test wait for the nth without polling.
type counter struct {
	mu      sync.Mutex
	n       int
	changed chan struct{} // closed at the next count
}

func (c *counter) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// wait returns once n events were counted; it fails the test if ctx ends first.
func (c *counter) wait(ctx context.Context, t *testing.T, n int, what string) {
	t.Helper()
	for {
		c.mu.Lock()
		if c.n >= n {
			c.mu.Unlock()
			return
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s: %d of %d: %v", what, c.count(), n, ctx.Err())
		}
	}
}

// queuedCtx counts the creates Create has queued: it asks for Done only
// to wait for the answer, once its create is in the queue. (The batch
// sends with context.WithoutCancel, which never asks.)
type queuedCtx struct {
	context.Context
	queued *counter
}

func (c queuedCtx) Done() <-chan struct{} {
	c.queued.add()
	return c.Context.Done()
}

// launch calls Create once per body, all at once; the channel gives the
// answers, in the bodies' order, once all came back.
func launch(ctx context.Context, m *remote.TxManager, creates [][]byte, queued *counter) <-chan []answer {
	out := make([]answer, len(creates))
	var wg sync.WaitGroup
	for i, b := range creates {
		wg.Go(func() {
			a := &out[i]
			a.tx, a.created, a.err = m.Create(queuedCtx{ctx, queued}, b)
		})
	}
	done := make(chan []answer, 1)
	go func() {
		wg.Wait()
		done <- out
	}()
	return done
}

// collect waits for launched creates, failing the test rather than
// hanging if they are not answered in ctx's time.
func collect(ctx context.Context, t *testing.T, answers <-chan []answer) []answer {
	t.Helper()
	select {
	case a := <-answers:
		return a
	case <-ctx.Done():
		t.Fatalf("creates unanswered: %v", ctx.Err())
		return nil
	}
}

// bounded is the test's context, cut off so that a stuck create fails the
// test instead of hanging it.
func bounded(t *testing.T) context.Context {
	// Only a guard against a hang: TestLargeCreatesSplitByBytes takes
	// about 11 s under the race detector on a loaded 2-core machine, and
	// hit a 30 s bound with a heavier load beside it.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// seenBatch is one request to /internal/v1/tx/batch.
type seenBatch struct {
	bytes int
	items []intent
}

// spy stands before txmanager's API: it sees every create that reaches it,
// alone or in a batch, and can hold batches until released.
type spy struct {
	arrived counter // batch requests
	mu      sync.Mutex
	singles int // POST /internal/v1/tx
	batches []seenBatch
	gate    chan struct{} // when set, batches wait until it is closed
}

func (s *spy) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/internal/v1/tx" {
			s.mu.Lock()
			s.singles++
			s.mu.Unlock()
		}
		if r.Method != http.MethodPost || r.URL.Path != "/internal/v1/tx/batch" {
			next.ServeHTTP(w, r)
			return
		}
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		var batch struct {
			Items []intent `json:"items"`
		}
		_ = json.Unmarshal(raw, &batch) // one that does not decode is seen without items, which the tests catch
		s.mu.Lock()
		s.batches = append(s.batches, seenBatch{bytes: len(raw), items: batch.Items})
		gate := s.gate
		s.mu.Unlock()
		s.arrived.add()
		if gate != nil {
			<-gate
		}
		next.ServeHTTP(w, r)
	})
}

func (s *spy) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate == nil {
		s.gate = make(chan struct{})
	}
}

func (s *spy) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

func (s *spy) seen() (singles int, batches []seenBatch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.singles, slices.Clone(s.batches)
}

// serve starts txmanager's API behind a spy, and a client of it as the
// gateway.
func serve(t *testing.T) (*remote.TxManager, *txmanagertest.Server, *spy) {
	t.Helper()
	pki := servicetest.PKI(t)
	s := &spy{}
	srv := txmanagertest.Serve(t, pki, txmanagertest.Options{Wrap: s.wrap})
	t.Cleanup(s.release) // before the server's Close, which waits for held requests
	m, err := remote.NewTxManager(srv.URL, servicetest.Client(t, pki, "gateway", "txmanager"))
	if err != nil {
		t.Fatal(err)
	}
	return m, srv, s
}

// occupy holds batches and sends each plug as a batch of its own, one
// after the other, so that both of the client's batch senders are busy and
// what is created next queues behind them.
func occupy(ctx context.Context, t *testing.T, m *remote.TxManager, s *spy, plugs ...intent) []<-chan []answer {
	t.Helper()
	s.hold()
	out := make([]<-chan []answer, len(plugs))
	for i, p := range plugs {
		n := s.arrived.count()
		out[i] = launch(ctx, m, [][]byte{p.body(t)}, &counter{})
		s.arrived.wait(ctx, t, n+1, "plug batches")
	}
	return out
}

// rows counts the transactions stored, of one request id or of all ("").
func rows(ctx context.Context, t *testing.T, srv *txmanagertest.Server, requestID string) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(ctx, `SELECT count(*) FROM tx WHERE $1 = '' OR request_id = $1`, requestID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// call is one create and the answer it must get: its own transaction when
// ok, else an error of kind fail.
type call struct {
	in   intent
	ok   bool
	fail errs.Kind
}

// TestConcurrentCreatesShareBatches: creates made at once go to txmanager
// in few batches, and each caller gets its own answer: created once per
// request id, the stored transaction for a repeat, a conflict for a reused
// id, invalid for a bad intent.
func TestConcurrentCreatesShareBatches(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	m, srv, s := serve(t)

	// A request id taken beforehand, for a repeat and a conflicting reuse.
	taken := newIntent("taken", "1")
	first, created, err := m.Create(ctx, taken.body(t))
	if err != nil || !created {
		t.Fatalf("create %s: %v %v", taken.RequestID, created, err)
	}
	var calls []call
	for i := range 168 {
		in := newIntent(fmt.Sprintf("r-%03d", i), strconv.Itoa(1000+i))
		if i%2 == 1 {
			in.From = signer2
		}
		calls = append(calls, call{in: in, ok: true})
	}
	calls = append(calls, calls[:20]...) // repeats, same bodies
	other := taken
	other.Value = "2"
	calls = append(calls, call{in: taken, ok: true}, call{in: other, fail: errs.Conflict})
	for i := range 5 {
		badChain := newIntent(fmt.Sprintf("bad-chain-%d", i), "3")
		badChain.ChainID = 5
		badFrom := newIntent(fmt.Sprintf("bad-from-%d", i), "4")
		badFrom.From = "0x00000000000000000000000000000000000000aa"
		calls = append(calls, call{in: badChain, fail: errs.Invalid}, call{in: badFrom, fail: errs.Invalid})
	}
	rand.Shuffle(len(calls), func(i, j int) { calls[i], calls[j] = calls[j], calls[i] })
	ins := make([]intent, len(calls))
	for i, c := range calls {
		ins[i] = c.in
	}

	// All queue behind held batches, so that the later batches must share.
	s.hold()
	queued := &counter{}
	answers := launch(ctx, m, bodies(t, ins), queued)
	queued.wait(ctx, t, len(calls), "queued creates")
	s.release()
	got := collect(ctx, t, answers)

	createdOf, idOf := map[string]int{}, map[string]uuid.UUID{}
	for i, c := range calls {
		a := got[i]
		if !c.ok {
			if !errs.Is(a.err, c.fail) {
				t.Errorf("%s (value %s): %+v %v, want %v", c.in.RequestID, c.in.Value, a.tx, a.err, c.fail)
			}
			continue
		}
		checkTx(t, c.in, a)
		if a.err != nil {
			continue
		}
		if a.created {
			createdOf[c.in.RequestID]++
		}
		if id, ok := idOf[c.in.RequestID]; ok && id != a.tx.ID {
			t.Errorf("%s answered as %s and as %s", c.in.RequestID, id, a.tx.ID)
		}
		idOf[c.in.RequestID] = a.tx.ID
	}
	for requestID, id := range idOf {
		switch {
		case requestID == taken.RequestID && (createdOf[requestID] != 0 || id != first.ID):
			t.Errorf("the repeat of %s: tx %s, created %d times; want tx %s, not created", requestID, id, createdOf[requestID], first.ID)
		case requestID != taken.RequestID && createdOf[requestID] != 1:
			t.Errorf("%s created %d times, want once", requestID, createdOf[requestID])
		}
	}
	if n := rows(ctx, t, srv, ""); n != len(idOf) {
		t.Errorf("%d transactions stored, want %d: one per valid request id", n, len(idOf))
	}

	singles, batches := s.seen()
	items, most := 0, 0
	for _, b := range batches {
		items += len(b.items)
		most = max(most, len(b.items))
	}
	// +1: the create of "taken" beforehand.
	if singles != 0 || items != len(calls)+1 || len(batches) >= len(calls) || most < 2 {
		t.Errorf("%d creates: %d alone, %d items in %d batches of at most %d; want all in fewer, shared batches",
			len(calls)+1, singles, items, len(batches), most)
	}
}

// TestBatchAnswersKeepTheirItems: in one batch of valid and invalid items
// alternating, each item gets its own answer.
func TestBatchAnswersKeepTheirItems(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	m, _, s := serve(t)
	plugs := occupy(ctx, t, m, s, newIntent("plug-1", "1"), newIntent("plug-2", "2"))

	// Queued one at a time, so the batch holds them in this order.
	var ins []intent
	var answers []<-chan []answer
	queued := &counter{}
	for i := range 20 {
		in := newIntent(fmt.Sprintf("item-%02d", i), strconv.Itoa(100+i))
		if i%2 == 1 {
			in.ChainID = 5
		}
		ins = append(ins, in)
		answers = append(answers, launch(ctx, m, [][]byte{in.body(t)}, queued))
		queued.wait(ctx, t, i+1, "queued creates")
	}
	s.release()
	for i, p := range plugs {
		if a := collect(ctx, t, p)[0]; a.err != nil || !a.created {
			t.Errorf("plug %d: %v %v", i+1, a.created, a.err)
		}
	}
	for i, in := range ins {
		a := collect(ctx, t, answers[i])[0]
		if in.ChainID == 5 {
			if !errs.Is(a.err, errs.Invalid) {
				t.Errorf("%s on chain 5: %+v %v, want invalid", in.RequestID, a.tx, a.err)
			}
			continue
		}
		checkTx(t, in, a)
		if !a.created {
			t.Errorf("%s not created", in.RequestID)
		}
	}

	_, batches := s.seen()
	if len(batches) != 3 {
		t.Fatalf("%d batches, want the two plugs and one of the %d items", len(batches), len(ins))
	}
	var order []string
	for _, in := range batches[2].items {
		order = append(order, in.RequestID)
	}
	var want []string
	for _, in := range ins {
		want = append(want, in.RequestID)
	}
	if !slices.Equal(order, want) {
		t.Errorf("the batch held %v, want %v", order, want)
	}
}

// TestBatchFailureFailsEveryCreate: when the batch gets no answer, or is
// refused whole, every create in it fails with that error, at once.
func TestBatchFailureFailsEveryCreate(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(refusing.Close)
	for _, tc := range []struct {
		name  string
		url   string
		cause func(error) bool
	}{
		{"txmanager is down", gone.URL, func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }},
		{"txmanager refuses the batch", refusing.URL, func(err error) bool { return strings.Contains(err.Error(), "overloaded") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := bounded(t)
			m, err := remote.NewTxManager(tc.url, &http.Client{Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ins := make([]intent, 50)
			for i := range ins {
				ins[i] = newIntent(fmt.Sprintf("r-%d", i), "1")
			}
			for i, a := range collect(ctx, t, launch(ctx, m, bodies(t, ins), &counter{})) {
				if !errs.Is(a.err, errs.Unavailable) || !tc.cause(a.err) {
					t.Errorf("create %d: %v, want unavailable from the batch's failure", i, a.err)
				}
			}
			// Answers forced by the test's deadline would also be unavailable.
			if ctx.Err() != nil {
				t.Errorf("answered only at the test's deadline: %v", ctx.Err())
			}
		})
	}
}

// TestCallerLeavingWhileQueued: a caller whose context ends while its
// create waits behind held batches is answered at once; the held batches
// still answer theirs, and the client goes on working.
func TestCallerLeavingWhileQueued(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	m, srv, s := serve(t)
	plugA, plugB := newIntent("plug-a", "1"), newIntent("plug-b", "2")
	plugs := occupy(ctx, t, m, s, plugA, plugB)

	leaving := newIntent("leaving", "3")
	leaveCtx, leave := context.WithCancel(ctx)
	queued := &counter{}
	answers := launch(leaveCtx, m, [][]byte{leaving.body(t)}, queued)
	queued.wait(ctx, t, 1, "queued create")
	leave()
	// Answered while the batches are still held: it did not wait for them.
	if a := collect(ctx, t, answers)[0]; !errs.Is(a.err, errs.Unavailable) || !errors.Is(a.err, context.Canceled) {
		t.Errorf("the caller who left: %+v %v, want unavailable, cancelled", a.tx, a.err)
	}

	s.release()
	for i, in := range []intent{plugA, plugB} {
		a := collect(ctx, t, plugs[i])[0]
		checkTx(t, in, a)
		if !a.created {
			t.Errorf("%s not created", in.RequestID)
		}
	}
	later := newIntent("later", "4")
	a := answer{}
	a.tx, a.created, a.err = m.Create(ctx, later.body(t))
	checkTx(t, later, a)
	if !a.created {
		t.Errorf("%s not created", later.RequestID)
	}
	// The create left behind may have been sent; its retry is safe all the same.
	a.tx, a.created, a.err = m.Create(ctx, leaving.body(t))
	checkTx(t, leaving, a)
	if n := rows(ctx, t, srv, leaving.RequestID); n != 1 {
		t.Errorf("%d transactions of %s, want 1", n, leaving.RequestID)
	}
}

// TestLargeCreatesSplitByBytes: creates with large call data are batched
// up to the byte bound, never over it, and all succeed.
func TestLargeCreatesSplitByBytes(t *testing.T) {
	t.Parallel()
	ctx := bounded(t)
	m, _, s := serve(t)
	data := "0x" + strings.Repeat("ab", 100<<10) // 100 KiB of call data
	ins := make([]intent, 40)
	for i := range ins {
		ins[i] = newIntent(fmt.Sprintf("big-%02d", i), strconv.Itoa(i+1))
		ins[i].Data = data
	}
	all := bodies(t, ins)

	// All queue first: together they are about twice the bound.
	s.hold()
	queued := &counter{}
	answers := launch(ctx, m, all, queued)
	queued.wait(ctx, t, len(ins), "queued creates")
	s.release()
	for i, a := range collect(ctx, t, answers) {
		checkTx(t, ins[i], a)
		if a.err == nil && !a.created {
			t.Errorf("%s not created", ins[i].RequestID)
		}
	}

	_, batches := s.seen()
	items, largest := 0, 0
	for _, b := range batches {
		items += len(b.items)
		largest = max(largest, b.bytes)
		// 1 KiB: the envelope, `{"items":[`, `]}` and the commas.
		if b.bytes > batchBytes+1<<10 {
			t.Errorf("a batch of %d items is %d bytes, over the bound of %d", len(b.items), b.bytes, batchBytes)
		}
	}
	// At most two were sent before all had queued; the bound alone splits
	// the rest, about twice its size, in two.
	if items != len(ins) || len(batches) > 4 || largest <= len(all[0])+1<<10 {
		t.Errorf("%d items in %d batches, the largest %d bytes; want %d in at most 4 shared batches",
			items, len(batches), largest, len(ins))
	}
}

// A body that is not JSON is refused before it joins a batch, where it
// would spoil every other create's answer.
func TestABodyNotJSONNeverJoinsABatch(t *testing.T) {
	t.Parallel()
	m, _, s := serve(t)
	ctx := bounded(t)
	if _, _, err := m.Create(ctx, []byte(`{"chain_id": 31337,`)); !errs.Is(err, errs.Invalid) {
		t.Fatalf("a body cut short: %v, want invalid", err)
	}
	if singles, batches := s.seen(); singles != 0 || len(batches) != 0 {
		t.Errorf("txmanager was called: %d creates, %d batches", singles, len(batches))
	}
	in := newIntent("after", "3")
	tx, created, err := m.Create(ctx, in.body(t))
	if err != nil || !created {
		t.Fatalf("a good create afterwards: %v", err)
	}
	checkTx(t, in, answer{tx: tx, created: created})
}
