package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The signers of txmanagertest's default chain 31337: acme owns the first
// (and the same address on chain 1, where no event ever happens), globex
// the second.
const (
	acmeSigner   = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	globexSigner = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
)

// rig is a real txmanager API (its own database) and the gateway's
// database with two tenants.
type rig struct {
	t            *testing.T
	dbURL        string
	store        *postgres.Store
	pool         *pgxpool.Pool
	tm           *remote.TxManager
	api          *txmanagerapi.ClientWithResponses
	acme, globex uuid.UUID
	requests     atomic.Int64
	// written counts the events transactions has caused: the feed numbers
	// them a moment after they commit, so events waits for all of them.
	written atomic.Int64
}

func newRig(t *testing.T) *rig {
	t.Helper()
	pki := servicetest.PKI(t)
	srv := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	hc := servicetest.Client(t, pki, "gateway", "txmanager")
	tm, err := remote.NewTxManager(srv.URL, hc)
	if err != nil {
		t.Fatal(err)
	}
	// Transactions are made through txmanager's own client: the test needs
	// events, not the gateway's calls.
	api, err := txmanagerapi.NewClientWithResponses(srv.URL, txmanagerapi.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dbURL: pgtest.URL(t), tm: tm, api: api}
	r.pool = r.openPool()
	if _, err := postgres.Migrations.Up(context.Background(), r.pool, nil); err != nil {
		t.Fatal(err)
	}
	r.store = postgres.New(r.pool)
	ctx := context.Background()
	for _, tn := range []struct {
		id      *uuid.UUID
		name    string
		signers []string
	}{{&r.acme, "acme", []string{"31337:" + acmeSigner, "1:" + acmeSigner}}, {&r.globex, "globex", []string{"31337:" + globexSigner}}} {
		tenant, err := r.store.CreateTenant(ctx, tn.name)
		if err != nil {
			t.Fatal(err)
		}
		*tn.id = tenant.ID
		for _, s := range tn.signers {
			if err := r.store.AssignSigner(ctx, tenant.ID, signerRef(t, s)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

func signerRef(t *testing.T, s string) gateway.SignerRef {
	t.Helper()
	chain, addr, _ := strings.Cut(s, ":")
	var id uint64
	if _, err := fmt.Sscan(chain, &id); err != nil {
		t.Fatal(err)
	}
	return gateway.SignerRef{ChainID: id, Address: common.HexToAddress(addr)}
}

// openPool is a pool on the gateway's database, as another node would
// have, closed at the test's end.
func (r *rig) openPool() *pgxpool.Pool {
	r.t.Helper()
	pool, err := pg.Open(context.Background(), r.dbURL, pg.PoolOptions{MaxConns: 12})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(pool.Close)
	return pool
}

// testOptions are small timings, so that retries and dead letters happen
// within a test.
func (r *rig) testOptions(opts webhook.Options) webhook.Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&opts.Timeout, 2*time.Second)
	def(&opts.BackoffBase, 20*time.Millisecond)
	def(&opts.BackoffMax, 200*time.Millisecond)
	def(&opts.PollInterval, 50*time.Millisecond)
	def(&opts.FeedWait, time.Second)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(r.t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return opts
}

// node is one gateway node's dispatcher.
type node struct {
	*webhook.Dispatcher
	registry *prometheus.Registry
	stop     func()
}

// node makes a dispatcher on store (the rig's when nil) without running
// it; insecure URLs are allowed, as the receivers are plain http on
// loopback.
func (r *rig) node(store *postgres.Store, opts webhook.Options) *node {
	r.t.Helper()
	opts.AllowInsecureURLs = true
	return r.nodeAsIs(store, opts)
}

// nodeAsIs is node with opts.AllowInsecureURLs as given.
func (r *rig) nodeAsIs(store *postgres.Store, opts webhook.Options) *node {
	r.t.Helper()
	if store == nil {
		store = r.store
	}
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	d, err := webhook.New(store, r.tm, r.testOptions(opts))
	if err != nil {
		r.t.Fatal(err)
	}
	return &node{Dispatcher: d, registry: reg, stop: func() {}}
}

// run runs n until the test ends or n.stop is called; stop waits for Run
// to return.
func (r *rig) run(n *node) {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				r.t.Errorf("Run: %v", err)
			}
		})
	}
	r.t.Cleanup(n.stop)
}

// metric is the value of a counter or gauge of the node's registry, 0 when
// it has not been set.
func (n *node) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := n.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
				}
				if !found {
					continue next
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// waitMetric waits until the metric reads want: metrics move just after
// the database does, so a test that saw the database change may read them
// a moment early.
func waitMetric(t *testing.T, want float64, read func() float64) {
	t.Helper()
	var got float64
	deadline := time.Now().Add(10 * time.Second)
	for got = read(); got != want; got = read() {
		if time.Now().After(deadline) {
			t.Errorf("metric %v, want %v", got, want)
			return
		}
		<-time.After(10 * time.Millisecond)
	}
}

// transactions creates n transactions from signer and cancels each, so
// that each has two events: INIT, then CANCELLED.
func (r *rig) transactions(signer string, n int) {
	r.t.Helper()
	ctx := context.Background()
	to, value := "0x0000000000000000000000000000000000000b0b", "1"
	var ids []uuid.UUID
	for range n {
		resp, err := r.api.CreateTxWithResponse(ctx, txmanagerapi.CreateTxRequest{ChainId: 31337, From: signer,
			RequestId: fmt.Sprint("r-", r.requests.Add(1)), To: &to, Value: &value})
		if err != nil || resp.JSON201 == nil {
			r.t.Fatalf("create: %v %s", err, resp.Body)
		}
		ids = append(ids, resp.JSON201.TxId)
	}
	for _, id := range ids {
		resp, err := r.api.CancelTxWithResponse(ctx, id)
		if err != nil || resp.JSON200 == nil || resp.JSON200.State != components.StateCancelled {
			r.t.Fatalf("cancel: %v %s", err, resp.Body)
		}
	}
	r.written.Add(int64(2 * n)) // created, then cancelled
}

// events is the whole feed once every event transactions caused is in
// it: the sequencer numbers events asynchronously, and on a busy machine
// it may not have run yet.
func (r *rig) events() []components.Event {
	r.t.Helper()
	var all []components.Event
	waitFor(r.t, "the feed to number every event written", func() bool {
		page, err := r.tm.EventsAfter(context.Background(), uint64(len(all)), 1000, 0)
		if err != nil {
			r.t.Fatal(err)
		}
		all = append(all, page...)
		return int64(len(all)) >= r.written.Load()
	})
	return all
}

// eventsOf is the feed's events of signer.
func eventsOf(all []components.Event, signer string) []components.Event {
	var out []components.Event
	for _, e := range all {
		if strings.EqualFold(e.Signer, signer) {
			out = append(out, e)
		}
	}
	return out
}

// subscribe makes a subscription to rc for tenant and gives rc its secret
// under the name "initial".
func (r *rig) subscribe(d *node, tenant uuid.UUID, rc *receiver, in webhook.NewSubscription) webhook.Subscription {
	r.t.Helper()
	in.URL = rc.url()
	created, err := d.CreateSubscription(context.Background(), tenant, in)
	if err != nil {
		r.t.Fatal(err)
	}
	rc.trust("initial", created.Secret)
	return created.Subscription
}

// waitFor polls cond until it holds, failing the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.For(t, time.Minute, what, cond)
}

// Answers a receiver can give.
const (
	hang = -1 // no answer until the sender gives up
)

// request is one delivery attempt a receiver saw.
type request struct {
	id     string
	body   []byte
	header http.Header
	// verified says, per secret the receiver holds, whether the signature
	// verified with it (the Standard Webhooks library's check).
	verified map[string]bool
	// answer is the status sent back, or hang.
	answer int
}

// accepted reports whether the receiver acknowledged it (2xx).
func (q request) accepted() bool { return q.answer >= 200 && q.answer < 300 }

// event decodes the body.
func (q request) event(t *testing.T) components.Event {
	t.Helper()
	var e components.Event
	if err := json.Unmarshal(q.body, &e); err != nil {
		t.Fatalf("body %s: %v", q.body, err)
	}
	return e
}

// receiver is a real HTTP server that verifies every signature with the
// secrets it holds and answers as its script says: it acknowledges only
// deliveries that verify with at least one secret.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	secrets map[string]*standardwebhooks.Webhook
	script  func(n int) int // the answer to the n-th request (1, 2, …)
	seen    []request
	closed  chan struct{}
}

func newReceiver(t *testing.T, script func(n int) int) *receiver {
	t.Helper()
	rc := &receiver{t: t, secrets: map[string]*standardwebhooks.Webhook{}, script: script, closed: make(chan struct{})}
	if rc.script == nil {
		rc.script = func(int) int { return http.StatusOK }
	}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(func() {
		close(rc.closed)
		rc.srv.Close()
	})
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hooks/txfence" }

// trust gives the receiver a secret under name.
func (rc *receiver) trust(name string, secret webhook.Secret) {
	rc.t.Helper()
	wh, err := standardwebhooks.NewWebhook(string(secret))
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets[name] = wh
}

// set replaces the script.
func (rc *receiver) set(script func(n int) int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.script = script
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rc.mu.Lock()
	q := request{id: r.Header.Get("webhook-id"), body: body, header: r.Header.Clone(), verified: map[string]bool{}}
	anyValid := false
	for name, wh := range rc.secrets {
		q.verified[name] = wh.Verify(body, r.Header) == nil
		anyValid = anyValid || q.verified[name]
	}
	q.answer = rc.script(len(rc.seen) + 1)
	if !anyValid {
		q.answer = http.StatusUnauthorized
	}
	rc.seen = append(rc.seen, q)
	rc.mu.Unlock()
	if q.answer == hang {
		select {
		case <-r.Context().Done(): // the sender gave up
		case <-rc.closed:
		}
		return
	}
	w.WriteHeader(q.answer)
	fmt.Fprintln(w, http.StatusText(q.answer))
}

// requests is every request so far, in arrival order.
func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.seen...)
}

// acceptedIDs is the distinct event ids acknowledged, in order of first
// acknowledgement.
func (rc *receiver) acceptedIDs() []string {
	var ids []string
	seen := map[string]bool{}
	for _, q := range rc.requests() {
		if q.accepted() && !seen[q.id] {
			seen[q.id] = true
			ids = append(ids, q.id)
		}
	}
	return ids
}

// waitAccepted waits until every event of want has been acknowledged.
func (rc *receiver) waitAccepted(want []components.Event) {
	rc.t.Helper()
	waitFor(rc.t, fmt.Sprintf("%d events at %s", len(want), rc.url()), func() bool {
		got := map[string]bool{}
		for _, id := range rc.acceptedIDs() {
			got[id] = true
		}
		for _, e := range want {
			if !got[e.Id] {
				return false
			}
		}
		return true
	})
}
