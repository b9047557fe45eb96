package lease_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/lease"
	"github.com/txfence/txfence/txmanager/postgres"
)

// fast is the timing of the cluster tests: a lease of two seconds renewed
// five times a second.
var fast = lease.Config{LeaseTTL: 2 * time.Second, RenewEvery: 200 * time.Millisecond, HeartbeatTTL: 2 * time.Second}

// testDB is a migrated schema: its URL, for one pool per node, and a store
// for the test's own reads.
func testDB(t *testing.T) (string, *postgres.Store) {
	t.Helper()
	url := pgtest.URL(t)
	s := postgres.New(testPool(t, url, "test"))
	if _, err := postgres.Migrations.Up(t.Context(), s.Pool(), nil); err != nil {
		t.Fatal(err)
	}
	return url, s
}

func testPool(t *testing.T, url, name string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), url, pg.PoolOptions{MaxConns: 3, Application: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func signers(n int) []txmanager.SignerKey {
	keys := make([]txmanager.SignerKey, n)
	for i := range keys {
		keys[i] = signerKey(i)
	}
	return keys
}

// world is what the handlers of every node were told: which node works on
// which signer. It fails the test the moment two nodes would work on one
// signer, a node loses a signer it was not working on, or a signer comes
// back under a token that is not higher than its last.
type world struct {
	t         *testing.T
	mu        sync.Mutex
	worker    map[txmanager.SignerKey]txmanager.Fence
	lastToken map[txmanager.SignerKey]int64
	events    []event
}

type event struct {
	node     string
	key      txmanager.SignerKey
	acquired bool
	token    int64
	reason   string
}

func (e event) String() string {
	if e.acquired {
		return fmt.Sprintf("%s acquired %s/%d", e.node, e.key, e.token)
	}
	return fmt.Sprintf("%s lost %s (%s)", e.node, e.key, e.reason)
}

func newWorld(t *testing.T) *world {
	return &world{t: t, worker: make(map[txmanager.SignerKey]txmanager.Fence), lastToken: make(map[txmanager.SignerKey]int64)}
}

// handler is one node's Handler in the world.
type handler struct {
	w    *world
	node string
}

func (h handler) Acquired(f txmanager.Fence) {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if f.Node != h.node {
		w.t.Errorf("%s was handed a fence of %s", h.node, f.Node)
	}
	if cur, ok := w.worker[f.Key]; ok {
		w.t.Errorf("%s acquired %s (token %d) while %s works on it (token %d)", h.node, f.Key, f.Token, cur.Node, cur.Token)
	}
	if f.Token <= w.lastToken[f.Key] {
		w.t.Errorf("%s acquired %s with token %d after token %d", h.node, f.Key, f.Token, w.lastToken[f.Key])
	}
	w.worker[f.Key], w.lastToken[f.Key] = f, f.Token
	w.events = append(w.events, event{node: h.node, key: f.Key, acquired: true, token: f.Token})
}

func (h handler) Lost(key txmanager.SignerKey, reason string) {
	w := h.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.worker[key]; !ok || cur.Node != h.node {
		w.t.Errorf("%s lost %s (%s), which it was not working on", h.node, key, reason)
	} else {
		delete(w.worker, key)
	}
	w.events = append(w.events, event{node: h.node, key: key, reason: reason})
}

// workers is a copy of who works on what.
func (w *world) workers() map[txmanager.SignerKey]txmanager.Fence {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.worker)
}

// lastLoss is the reason of the last Lost of key by node, "" if none.
func (w *world) lastLoss(node string, key txmanager.SignerKey) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range slices.Backward(w.events) {
		if e.node == node && e.key == key && !e.acquired {
			return e.reason
		}
	}
	return ""
}

// eventsSince returns the events after the first n, and the new count.
func (w *world) eventsSince(n int) ([]event, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events[n:]), len(w.events)
}

// cuttableStore is a node's store whose connection to the database can be
// cut: every call then fails, as in a network partition.
type cuttableStore struct {
	txmanager.LeaseStore
	cut atomic.Bool
}

var errCut = errors.New("connection to the database cut")

func (s *cuttableStore) Heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	if s.cut.Load() {
		return errCut
	}
	return s.LeaseStore.Heartbeat(ctx, node, ttl)
}

func (s *cuttableStore) LiveNodes(ctx context.Context) ([]string, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.LeaseStore.LiveNodes(ctx)
}

func (s *cuttableStore) Deregister(ctx context.Context, node string) error {
	if s.cut.Load() {
		return errCut
	}
	return s.LeaseStore.Deregister(ctx, node)
}

func (s *cuttableStore) Acquire(ctx context.Context, node string, key txmanager.SignerKey, ttl time.Duration) (int64, bool, error) {
	if s.cut.Load() {
		return 0, false, errCut
	}
	return s.LeaseStore.Acquire(ctx, node, key, ttl)
}

func (s *cuttableStore) RenewAll(ctx context.Context, node string, ttl time.Duration) (map[txmanager.SignerKey]int64, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.LeaseStore.RenewAll(ctx, node, ttl)
}

func (s *cuttableStore) Release(ctx context.Context, node string, keys []txmanager.SignerKey) error {
	if s.cut.Load() {
		return errCut
	}
	return s.LeaseStore.Release(ctx, node, keys)
}

func (s *cuttableStore) Vacant(ctx context.Context, keys []txmanager.SignerKey) ([]txmanager.SignerKey, error) {
	if s.cut.Load() {
		return nil, errCut
	}
	return s.LeaseStore.Vacant(ctx, keys)
}

func (s *cuttableStore) NextLapse(ctx context.Context, keys []txmanager.SignerKey) (time.Duration, bool, error) {
	if s.cut.Load() {
		return 0, false, errCut
	}
	return s.LeaseStore.NextLapse(ctx, keys)
}

// node is one running Manager with its own pool.
type node struct {
	name   string
	m      *lease.Manager
	reg    *prometheus.Registry
	store  *cuttableStore
	cancel context.CancelFunc
	done   chan error
}

func startNode(t *testing.T, w *world, url, name string, keys []txmanager.SignerKey, cfg lease.Config) *node {
	t.Helper()
	n := &node{name: name, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	n.store = &cuttableStore{LeaseStore: postgres.New(testPool(t, url, name))}
	cfg.Node = name
	cfg.Signers = func() []txmanager.SignerKey { return keys }
	m, err := lease.New(n.store, handler{w, name}, n.reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- m.Run(ctx) }()
	t.Cleanup(n.stop)
	return n
}

// stop cancels the node and waits for Run to return.
func (n *node) stop() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
	n.cancel = nil
}

// metric reads a metric of the node: the one without labels, or the one
// whose label named label[0] has the value label[1].
func (n *node) metric(t *testing.T, name string, label ...string) float64 {
	t.Helper()
	families, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			matches := len(label) == 0
			for _, l := range m.GetLabel() {
				if len(label) == 2 && l.GetName() == label[0] && l.GetValue() == label[1] {
					matches = true
				}
			}
			if !matches {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// converge polls, for at most 30 seconds, until every signer is held by
// its preferred node among live, in the database and in the world alike,
// and returns the tokens.
func converge(t *testing.T, s *postgres.Store, w *world, live []string, keys []txmanager.SignerKey) map[txmanager.SignerKey]int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		problems := convergence(t, s, w, live, keys)
		if len(problems) == 0 {
			leases, err := s.Leases(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			tokens := make(map[txmanager.SignerKey]int64)
			for _, l := range leases {
				tokens[l.Key] = l.Token
			}
			return tokens
		}
		if time.Now().After(deadline) {
			t.Fatalf("signers not spread over %v:\n%s", live, strings.Join(problems, "\n"))
		}
		<-time.After(20 * time.Millisecond) // poll interval, within the deadline above
	}
}

func convergence(t *testing.T, s *postgres.Store, w *world, live []string, keys []txmanager.SignerKey) []string {
	t.Helper()
	leases, err := s.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byKey := make(map[txmanager.SignerKey]txmanager.Lease)
	for _, l := range leases {
		byKey[l.Key] = l
	}
	workers := w.workers()
	var problems []string
	for _, k := range keys {
		want := lease.PreferredNode(k, live)
		l, worker := byKey[k], workers[k]
		if !l.Held || l.Owner != want || worker.Node != want || worker.Token != l.Token {
			problems = append(problems, fmt.Sprintf("%s: want %s; lease %s/%d held %t; worker %s/%d", k, want, l.Owner, l.Token, l.Held, worker.Node, worker.Token))
		}
	}
	if len(workers) != len(keys) {
		problems = append(problems, fmt.Sprintf("%d signers worked on; want %d", len(workers), len(keys)))
	}
	return problems
}

// owners counts the signers per node.
func owners(w *world) map[string]int {
	count := make(map[string]int)
	for _, f := range w.workers() {
		count[f.Node]++
	}
	return count
}

// TestSignersFollowTheLiveNodes: three nodes split 30 signers by
// rendezvous; one stops and its signers go to the other two at once (it
// released them), and only its; a fourth joins and receives its share by
// graceful release, and only that moves.
func TestSignersFollowTheLiveNodes(t *testing.T) {
	t.Parallel()
	url, s := testDB(t)
	w := newWorld(t)
	keys := signers(30)
	a := startNode(t, w, url, "node-a", keys, fast)
	b := startNode(t, w, url, "node-b", keys, fast)
	c := startNode(t, w, url, "node-c", keys, fast)

	tokens := converge(t, s, w, []string{"node-a", "node-b", "node-c"}, keys)
	spread := owners(w)
	t.Logf("signers per node: %v", spread)
	for _, n := range []*node{a, b, c} {
		if spread[n.name] == 0 {
			t.Errorf("%s owns no signer", n.name)
		}
		if got := len(n.m.Fences()); float64(got) != n.metric(t, "txfence_txmanager_leases_owned") || got != spread[n.name] {
			t.Errorf("%s: %d fences, gauge %v, world %d", n.name, got, n.metric(t, "txfence_txmanager_leases_owned"), spread[n.name])
		}
	}

	// b stops: it deregisters and releases, so the others need not wait
	// for its leases to lapse.
	fromB := make(map[txmanager.SignerKey]bool)
	for _, f := range b.m.Fences() {
		fromB[f.Key] = true
	}
	b.stop()
	for k := range fromB {
		if r := w.lastLoss("node-b", k); r != lease.ReasonShutdown {
			t.Errorf("node-b lost %s for %q; want %q", k, r, lease.ReasonShutdown)
		}
	}
	if live, err := s.LiveNodes(t.Context()); err != nil || slices.Contains(live, "node-b") {
		t.Errorf("live nodes after node-b stopped: %v, %v", live, err)
	}
	after := converge(t, s, w, []string{"node-a", "node-c"}, keys)
	for _, k := range keys {
		want := tokens[k]
		if fromB[k] {
			want++ // released, then one new owner
		}
		if after[k] != want {
			t.Errorf("%s: token %d -> %d; want %d (moved: %t)", k, tokens[k], after[k], want, fromB[k])
		}
	}

	// d joins: a and c hand it its share.
	handoffs := func() float64 {
		return a.metric(t, "txfence_txmanager_lease_lost_total", "reason", lease.ReasonHandoff) +
			c.metric(t, "txfence_txmanager_lease_lost_total", "reason", lease.ReasonHandoff)
	}
	handoffsBefore := handoffs() // nodes starting one after another handed off too
	d := startNode(t, w, url, "node-d", keys, fast)
	final := converge(t, s, w, []string{"node-a", "node-c", "node-d"}, keys)
	toD := 0
	for _, f := range d.m.Fences() {
		toD++
		prev := lease.PreferredNode(f.Key, []string{"node-a", "node-c"})
		if r := w.lastLoss(prev, f.Key); r != lease.ReasonHandoff {
			t.Errorf("%s went from %s to node-d after %q; want %q", f.Key, prev, r, lease.ReasonHandoff)
		}
		if final[f.Key] != after[f.Key]+1 {
			t.Errorf("%s: token %d -> %d on handoff; want one more", f.Key, after[f.Key], final[f.Key])
		}
	}
	if toD == 0 {
		t.Error("node-d received no signer")
	}
	for _, k := range keys {
		if lease.PreferredNode(k, []string{"node-a", "node-c", "node-d"}) != "node-d" && final[k] != after[k] {
			t.Errorf("%s moved although node-d is not its owner: token %d -> %d", k, after[k], final[k])
		}
	}
	if got := handoffs() - handoffsBefore; got != float64(toD) {
		t.Errorf("handoffs counted by node-a and node-c: %v; want %d", got, toD)
	}
}

// TestANodeCutOffStopsBeforeOthersTakeOver: a node loses the database. It
// stops working on its signers on its own, before their leases can lapse
// (the world fails the test if another node starts on one first); the
// others take them over once the leases lapse. When the node is back, it
// gets its share again under new tokens.
func TestANodeCutOffStopsBeforeOthersTakeOver(t *testing.T) {
	t.Parallel()
	url, s := testDB(t)
	w := newWorld(t)
	keys := signers(30)
	a := startNode(t, w, url, "node-a", keys, fast)
	startNode(t, w, url, "node-b", keys, fast)
	startNode(t, w, url, "node-c", keys, fast)
	all := []string{"node-a", "node-b", "node-c"}
	before := converge(t, s, w, all, keys)
	held := a.m.Fences()
	if len(held) == 0 {
		t.Fatal("node-a owns no signer")
	}

	a.store.cut.Store(true)
	during := converge(t, s, w, []string{"node-b", "node-c"}, keys)
	if n := len(a.m.Fences()); n != 0 {
		t.Errorf("node-a, cut off, still counts on %d leases", n)
	}
	for _, f := range held {
		if r := w.lastLoss("node-a", f.Key); r != lease.ReasonUnrenewed {
			t.Errorf("node-a lost %s for %q; want %q", f.Key, r, lease.ReasonUnrenewed)
		}
		if during[f.Key] != before[f.Key]+1 {
			t.Errorf("%s: token %d -> %d on takeover; want one more", f.Key, before[f.Key], during[f.Key])
		}
		// A write node-a could still try with its old fence is refused.
		if _, err := s.NextNonce(t.Context(), f, nil); !errors.Is(err, txmanager.ErrFenced) {
			t.Errorf("write with node-a's old fence on %s: %v; want ErrFenced", f.Key, err)
		}
	}

	a.store.cut.Store(false)
	after := converge(t, s, w, all, keys)
	for _, f := range held {
		if after[f.Key] <= during[f.Key] {
			t.Errorf("%s back on node-a under token %d, not above %d", f.Key, after[f.Key], during[f.Key])
		}
	}
}

// TestLostAtTheFirstRenewalAfterTheLeaseIsTakenAway drives one node round
// by round: whatever happens to a lease behind the node's back (a new
// token, another owner, a lapse) is reported lost in the very next round,
// a fenced write drops the signer at once, and a restart does not trust
// leases a previous run left.
func TestLostAtTheFirstRenewalAfterTheLeaseIsTakenAway(t *testing.T) {
	t.Parallel()
	url, s := testDB(t)
	w := newWorld(t)
	keys := signers(4)
	k0, k1, k2, k3 := keys[0], keys[1], keys[2], keys[3]

	// A previous run of node-a left k0's lease behind.
	if _, ok, err := s.Acquire(t.Context(), "node-a", k0, time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}

	cfg := lease.Config{Node: "node-a", LeaseTTL: time.Minute, RenewEvery: 10 * time.Second, Signers: func() []txmanager.SignerKey { return keys }}
	reg := prometheus.NewRegistry()
	m, err := lease.New(postgres.New(testPool(t, url, "node-a")), handler{w, "node-a"}, reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{name: "node-a", m: m, reg: reg}
	ticks, rounds := make(chan time.Time), make(chan struct{})
	lease.DriveByHand(m, ticks, rounds)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	round := func() {
		t.Helper()
		ticks <- time.Now()
		<-rounds
	}
	<-rounds // the first round runs at once

	seen := 0
	expect := func(want ...event) {
		t.Helper()
		var got []event
		got, seen = w.eventsSince(seen)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events:\n got %v\nwant %v", got, want)
		}
	}
	acq := func(k txmanager.SignerKey, token int64) event {
		return event{node: "node-a", key: k, acquired: true, token: token}
	}
	lost := func(k txmanager.SignerKey, reason string) event {
		return event{node: "node-a", key: k, reason: reason}
	}
	// k0 was released and taken again: the old run's token is not reused.
	expect(acq(k0, 2), acq(k1, 1), acq(k2, 1), acq(k3, 1))

	pool := s.Pool()
	for _, stmt := range []struct {
		sql string
		key txmanager.SignerKey
	}{
		{`UPDATE signer_lease SET fencing_token = fencing_token + 1 WHERE signer = $1`, k0},
		{`UPDATE signer_lease SET owner_node = 'node-z' WHERE signer = $1`, k1},
		{`UPDATE signer_lease SET expires_at = now() - interval '1 second' WHERE signer = $1`, k2},
	} {
		if _, err := pool.Exec(t.Context(), stmt.sql, stmt.key.Signer.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	round()
	// Lost first, in one batch, by chain and signer; then k0 (still node-a's in the database,
	// under a token this run never had) is released and acquired anew,
	// k2 acquired after its lapse; node-z keeps k1.
	expect(lost(k0, lease.ReasonTokenChanged), lost(k2, lease.ReasonExpired), lost(k1, lease.ReasonExpired), acq(k0, 4), acq(k2, 2))

	// A fenced write: the signer is dropped before Fenced returns, Lost
	// follows without waiting for a round.
	m.Fenced(txmanager.Fence{Node: "node-a", Key: k3, Token: 1})
	if slices.ContainsFunc(m.Fences(), func(f txmanager.Fence) bool { return f.Key == k3 }) {
		t.Error("k3 still held after a fenced write")
	}
	deadline := time.Now().Add(10 * time.Second)
	for w.lastLoss("node-a", k3) != lease.ReasonFenced && time.Now().Before(deadline) {
		<-time.After(5 * time.Millisecond) // poll interval, within the deadline above
	}
	expect(lost(k3, lease.ReasonFenced))
	// A fence already replaced only counts.
	m.Fenced(txmanager.Fence{Node: "node-a", Key: k0, Token: 2})
	for _, chain := range []string{"1", "31337"} { // k0 is on chain 1, k3 on 31337
		if got := n.metric(t, "txfence_txmanager_fenced_total", "chain_id", chain); got != 1 {
			t.Errorf("fenced_total{chain_id=%s} = %v; want 1", chain, got)
		}
	}
	round()
	// k3's lease was still node-a's: released, and acquired under a new
	// token for a new worker.
	expect(acq(k3, 2))
	if got := n.metric(t, "txfence_txmanager_leases_owned"); got != 3 {
		t.Errorf("leases owned = %v; want 3", got)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	expect(lost(k0, lease.ReasonShutdown), lost(k2, lease.ReasonShutdown), lost(k3, lease.ReasonShutdown))
	leases, err := s.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.Owner == "node-a" {
			t.Errorf("after shutdown: %+v", l)
		}
	}
	if live, err := s.LiveNodes(t.Context()); err != nil || len(live) != 0 {
		t.Errorf("live nodes after shutdown: %v, %v", live, err)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	some := func() []txmanager.SignerKey { return nil }
	for _, cfg := range []lease.Config{
		{Signers: some},
		{Node: "a"},
		{Node: "a", Signers: some, LeaseTTL: time.Second, RenewEvery: 500 * time.Millisecond},
		{Node: "a", Signers: some, RenewEvery: -time.Second},
		{Node: "a", Signers: some, HeartbeatTTL: time.Second},
	} {
		if _, err := lease.New(postgres.New(nil), handler{}, nil, cfg); err == nil {
			t.Errorf("New with %+v: want an error", cfg)
		}
	}
	if _, err := lease.New(postgres.New(nil), handler{}, nil, lease.Config{Node: "a", Signers: some}); err != nil {
		t.Errorf("defaults: %v", err)
	}
	reg := prometheus.NewRegistry()
	if _, err := lease.New(postgres.New(nil), handler{}, reg, lease.Config{Node: "a", Signers: some}); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.New(postgres.New(nil), handler{}, reg, lease.Config{Node: "b", Signers: some}); err == nil {
		t.Error("two managers on one registry: want an error")
	}
}

// manualNode is a node whose rounds the test runs one by one.
type manualNode struct {
	name   string
	m      *lease.Manager
	ticks  chan time.Time
	rounds chan struct{}
	keys   atomic.Pointer[[]txmanager.SignerKey]
}

func startManual(t *testing.T, w *world, url, name string, keys []txmanager.SignerKey) *manualNode {
	t.Helper()
	n := &manualNode{name: name, ticks: make(chan time.Time), rounds: make(chan struct{})}
	n.keys.Store(&keys)
	cfg := lease.Config{Node: name, LeaseTTL: time.Minute, RenewEvery: 10 * time.Second, HeartbeatTTL: time.Minute,
		OrphanAfter: time.Nanosecond, Signers: func() []txmanager.SignerKey { return *n.keys.Load() }}
	m, err := lease.New(postgres.New(testPool(t, url, name)), handler{w, name}, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.m = m
	lease.DriveByHand(m, n.ticks, n.rounds)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-n.rounds // the first round runs at once
	return n
}

func (n *manualNode) round() {
	n.ticks <- time.Now()
	<-n.rounds
}

// TestOrphansAreTakenOverAndKeptFromTheNodeThatLeftThem: node-b is live
// but not configured for any signer (a configuration mismatch during a
// rolling deploy, say). The signers it is preferred for stay unheld, so
// node-a takes them over, and does not hand them back to node-b, which
// would leave them unheld again. When node-c joins, everything node-c is
// preferred for goes to it, orphans included. A signer removed from
// node-a's configuration is given up.
func TestOrphansAreTakenOverAndKeptFromTheNodeThatLeftThem(t *testing.T) {
	t.Parallel()
	url, s := testDB(t)
	w := newWorld(t)
	keys := signers(30)
	ab, abc := []string{"node-a", "node-b"}, []string{"node-a", "node-b", "node-c"}
	var ofB, ofBThenC []txmanager.SignerKey
	for _, k := range keys {
		if lease.PreferredNode(k, ab) == "node-b" {
			ofB = append(ofB, k)
			if lease.PreferredNode(k, abc) == "node-c" {
				ofBThenC = append(ofBThenC, k)
			}
		}
	}
	if len(ofB) == 0 || len(ofBThenC) == 0 || len(ofBThenC) == len(ofB) {
		t.Fatalf("the test needs signers of node-b that stay and that go to node-c: %d, %d", len(ofB), len(ofBThenC))
	}
	holders := func() map[txmanager.SignerKey]string {
		got := make(map[txmanager.SignerKey]string)
		for k, f := range w.workers() {
			got[k] = f.Node
		}
		return got
	}

	startManual(t, w, url, "node-b", nil)
	a := startManual(t, w, url, "node-a", keys)
	for _, k := range ofB {
		if h, ok := holders()[k]; ok {
			t.Errorf("%s held by %s at once; want it left to node-b first", k, h)
		}
	}
	a.round() // node-b's signers stayed unheld: orphans
	got := holders()
	for _, k := range keys {
		if got[k] != "node-a" {
			t.Errorf("%s held by %q; want node-a", k, got[k])
		}
	}
	_, seen := w.eventsSince(0)
	a.round()
	if events, _ := w.eventsSince(seen); len(events) != 0 {
		t.Errorf("node-a handed orphans back to node-b, which left them: %v", events)
	}

	c := startManual(t, w, url, "node-c", keys)
	a.round()
	c.round()
	got = holders()
	for _, k := range keys {
		want := "node-a"
		if lease.PreferredNode(k, abc) == "node-c" {
			want = "node-c"
			if r := w.lastLoss("node-a", k); r != lease.ReasonHandoff {
				t.Errorf("%s left node-a for %q; want %q", k, r, lease.ReasonHandoff)
			}
		}
		if got[k] != want {
			t.Errorf("%s held by %q; want %s", k, got[k], want)
		}
	}

	// node-a stops serving one of its signers.
	gone := slices.IndexFunc(keys, func(k txmanager.SignerKey) bool { return got[k] == "node-a" })
	fewer := slices.Delete(slices.Clone(keys), gone, gone+1)
	a.keys.Store(&fewer)
	a.round()
	if r := w.lastLoss("node-a", keys[gone]); r != lease.ReasonUnconfigured {
		t.Errorf("%s dropped from node-a's configuration: lost for %q; want %q", keys[gone], r, lease.ReasonUnconfigured)
	}
	if vacant, err := s.Vacant(t.Context(), keys[gone:gone+1]); err != nil || len(vacant) != 1 {
		t.Errorf("lease of the dropped signer not released: %v, %v", vacant, err)
	}
}
