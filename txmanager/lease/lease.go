// Package lease decides which txmanagerd node works on which signer, and
// keeps that decision safe when nodes join, leave, stall or lose the
// database.
//
// Every node heartbeats a registry row; the live nodes, by the database
// clock, split the configured signers among themselves by rendezvous
// hashing (PreferredNode). A node acquires the leases of the signers it is
// preferred for, renews all it holds in one statement per interval,
// releases a signer at once when another live node becomes preferred (a
// node joined), and takes over signers nobody has held for a while
// (orphans). The database decides every lease; the node's own clock only
// makes it give a lease up early: it reports a signer lost once a
// renewal has been missing for nearly a lease period, before the lease
// can have lapsed in the database and been taken by another node.
//
// A lease carries a fencing token. The Handler is told when a signer is
// acquired, with the fence every write on it must carry, and when it is
// lost; calls for one signer alternate strictly, Acquired then Lost, and
// come from one goroutine.
package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/txmanager"
)

// Handler is the worker layer: it runs one worker per signer this node
// holds. Both methods are called from the Manager's loop; Lost must stop
// the signer's worker promptly (the Manager releases a handed-off lease
// when Lost returns, and renews nothing while Lost runs).
type Handler interface {
	// Acquired starts work on f.Key; every critical write carries f.
	Acquired(f txmanager.Fence)
	// Lost stops work on key at once: the lease is gone or going.
	Lost(key txmanager.SignerKey, reason string)
}

// Reasons given to Handler.Lost, also the reason label of
// txfence_txmanager_lease_lost_total.
const (
	// ReasonExpired: the renewal did not return the lease: it lapsed or
	// another node took it.
	ReasonExpired = "expired"
	// ReasonTokenChanged: the lease is still this node's but under
	// another token, so the fence in use is stale.
	ReasonTokenChanged = "token_changed"
	// ReasonUnrenewed: no renewal has succeeded for nearly a lease period
	// (the database is unreachable or slow); the lease may lapse any
	// moment, so work stops before another node can take it.
	ReasonUnrenewed = "unrenewed"
	// ReasonHandoff: another live node is now preferred; the lease is
	// released for it.
	ReasonHandoff = "handoff"
	// ReasonUnconfigured: the signer left this node's configuration.
	ReasonUnconfigured = "unconfigured"
	// ReasonFenced: a write on the signer was fenced (Manager.Fenced).
	ReasonFenced = "fenced"
	// ReasonShutdown: the node is stopping.
	ReasonShutdown = "shutdown"
)

// Config tunes a Manager.
type Config struct {
	// Node identifies this process among the nodes sharing the database.
	// Two running processes must never share one; a restarted process may
	// reuse its id (leases left by the previous run are released, then
	// acquired again under new tokens).
	Node string
	// LeaseTTL is how long a lease lasts without renewal (default 10s).
	LeaseTTL time.Duration
	// RenewEvery is the period of the loop: renewal, heartbeat,
	// rebalancing (default 3s). It must be below half of LeaseTTL.
	RenewEvery time.Duration
	// HeartbeatTTL is how long the node counts as live without a
	// heartbeat (default 10s).
	HeartbeatTTL time.Duration
	// OrphanAfter is how long a signer must stay unheld, although its
	// preferred node is live, before another node takes it over
	// (default LeaseTTL). It covers a preferred node that does not serve
	// the signer (its configuration differs) or cannot acquire.
	OrphanAfter time.Duration
	// Signers lists the signers this node may work on; it is called
	// every round, so it may change.
	Signers func() []txmanager.SignerKey
	// Logger, default none.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Node == "" {
		return errors.New("lease: node id required")
	}
	if c.Signers == nil {
		return errors.New("lease: signer list required")
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 10 * time.Second
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = 3 * time.Second
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = 10 * time.Second
	}
	if c.OrphanAfter == 0 {
		c.OrphanAfter = c.LeaseTTL
	}
	if c.LeaseTTL < 0 || c.RenewEvery <= 0 || c.HeartbeatTTL < c.RenewEvery || c.OrphanAfter < 0 {
		return fmt.Errorf("lease: invalid durations (lease %v, renew every %v, heartbeat %v, orphan after %v)",
			c.LeaseTTL, c.RenewEvery, c.HeartbeatTTL, c.OrphanAfter)
	}
	if 2*c.RenewEvery >= c.LeaseTTL {
		return fmt.Errorf("lease: renew every %v must be below half the lease period %v, so that a failed renewal can be retried", c.RenewEvery, c.LeaseTTL)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Manager runs one node's side of ownership. Create it with New, run it
// with Run; the worker layer reports fenced writes with Fenced.
type Manager struct {
	store   txmanager.LeaseStore
	cfg     Config
	handler Handler
	log     *slog.Logger
	running atomic.Bool
	wake    chan struct{} // a fenced signer to report

	// Set by tests before Run.
	ticks  <-chan time.Time
	rounds chan<- struct{}

	mu     sync.Mutex
	held   map[txmanager.SignerKey]*held
	fenced []txmanager.SignerKey // dropped by Fenced, Lost not yet reported

	// Loop-only: when a signer preferred elsewhere was first seen unheld,
	// and when the first lease held elsewhere lapses (zero: none before
	// the next tick; hand-driven tests ignore it).
	vacantSince map[txmanager.SignerKey]time.Time
	lapseAt     time.Time

	fencedTotal   *prometheus.CounterVec
	lostTotal     *prometheus.CounterVec
	acquiredTotal prometheus.Counter
	owned         prometheus.Gauge
}

// held is a lease this node holds.
type held struct {
	token int64
	// validUntil is when, by this node's monotonic clock, the node stops
	// counting on the lease unless a renewal succeeds: a renew interval
	// before the lease period, counted from before the renewal was sent,
	// so earlier than the database's expiry in real time.
	validUntil time.Time
	// orphanOf is the preferred node when this one took the lease over as
	// an orphan, "" when this node was preferred. The lease is not handed
	// back to that node (it left the signer alone), only to another one
	// that becomes preferred when the live nodes change.
	orphanOf string
}

type lostKey struct {
	key    txmanager.SignerKey
	reason string
}

// New makes a Manager for cfg.Node. Its metrics are registered on reg
// when not nil: txfence_txmanager_fenced_total{chain_id},
// txfence_txmanager_leases_owned, txfence_txmanager_lease_lost_total{reason}
// and txfence_txmanager_lease_acquired_total.
func New(store txmanager.LeaseStore, h Handler, reg prometheus.Registerer, cfg Config) (*Manager, error) {
	if store == nil || h == nil {
		return nil, errors.New("lease: store and handler required")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		store:       store,
		cfg:         cfg,
		handler:     h,
		log:         cfg.Logger.With("node_id", cfg.Node),
		wake:        make(chan struct{}, 1),
		held:        make(map[txmanager.SignerKey]*held),
		vacantSince: make(map[txmanager.SignerKey]time.Time),
		fencedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_fenced_total",
			Help: "Writes refused by the fence: the writer's lease on the signer was no longer current.",
		}, []string{"chain_id"}),
		lostTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_lease_lost_total",
			Help: "Signer leases this node stopped working on, by reason.",
		}, []string{"reason"}),
		acquiredTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "txfence_txmanager_lease_acquired_total",
			Help: "Signer leases this node acquired.",
		}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "txfence_txmanager_leases_owned",
			Help: "Signer leases this node holds.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.fencedTotal, m.lostTotal, m.acquiredTotal, m.owned} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("lease: register metrics: %w", err)
			}
		}
	}
	return m, nil
}

// Run works until ctx ends: a round at once and every RenewEvery after,
// each renewing the leases held, heartbeating, and acquiring or releasing
// signers as the live nodes and the configuration say. When ctx ends it
// reports every signer lost, deregisters the node and releases its leases
// (bounded by LeaseTTL), so that the other nodes take them over at once.
// Database errors are logged and retried next round; Run returns nil
// once stopped, or an error when it is already running.
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("lease: manager already running")
	}
	defer m.running.Store(false)
	ticks := m.ticks
	if ticks == nil {
		t := time.NewTicker(m.cfg.RenewEvery)
		defer t.Stop()
		ticks = t.C
	}
	defer m.shutdown(ctx)

	m.round(ctx)
	for {
		// Wake up when the first lease runs out locally, even when no
		// tick comes (the loop never blocks in a store call past it
		// either: see round).
		var (
			timer, lapseTimer *time.Timer
			expiry, lapse     <-chan time.Time
		)
		if until, ok := m.earliestValidity(); ok {
			timer = time.NewTimer(time.Until(until))
			expiry = timer.C
		}
		// Another node's lease that lapses before the next tick: a round
		// right after it takes the signer over without waiting for the
		// tick (a failover costs the lease period, not up to a period
		// more).
		if !m.lapseAt.IsZero() && m.ticks == nil {
			lapseTimer = time.NewTimer(time.Until(m.lapseAt))
			lapse = lapseTimer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticks:
			m.round(ctx)
		case <-lapse:
			m.round(ctx)
		case <-m.wake:
			m.reportFenced()
		case <-expiry:
			m.expireLocally(time.Now())
		}
		for _, t := range []*time.Timer{timer, lapseTimer} {
			if t != nil {
				t.Stop()
			}
		}
	}
}

// Fenced reports that a write carrying f touched nothing because the
// lease is no longer f's: the worker layer calls it on
// txmanager.ErrFenced. When f is still the fence this node holds, the
// signer is dropped at once and Lost follows (ReasonFenced) from the
// loop; a fence already replaced by a newer lease only counts. Safe for
// concurrent use; it does not wait for the loop.
func (m *Manager) Fenced(f txmanager.Fence) {
	m.fencedTotal.WithLabelValues(strconv.FormatUint(f.Key.ChainID, 10)).Inc()
	m.mu.Lock()
	h, ok := m.held[f.Key]
	current := ok && h.token == f.Token && f.Node == m.cfg.Node
	if current {
		delete(m.held, f.Key)
		m.fenced = append(m.fenced, f.Key)
		m.owned.Set(float64(len(m.held)))
	}
	m.mu.Unlock()
	m.log.Warn("write fenced: lease no longer current",
		"chain_id", f.Key.ChainID, "signer", f.Key.Signer, "fencing_token", f.Token, "held", current)
	if current {
		select {
		case m.wake <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Fences lists the leases this node holds, by chain and signer.
func (m *Manager) Fences() []txmanager.Fence {
	m.mu.Lock()
	fences := make([]txmanager.Fence, 0, len(m.held))
	for k, h := range m.held {
		fences = append(fences, txmanager.Fence{Node: m.cfg.Node, Key: k, Token: h.token})
	}
	m.mu.Unlock()
	slices.SortFunc(fences, func(a, b txmanager.Fence) int { return compareKeys(a.Key, b.Key) })
	return fences
}

// round is one period of the loop. Its store calls end by the next tick
// and before the first lease's local validity, so that a stalled database
// never keeps the loop from giving leases up in time.
func (m *Manager) round(parent context.Context) {
	start := time.Now()
	m.reportFenced()
	m.expireLocally(start)
	deadline := start.Add(m.cfg.RenewEvery)
	if until, ok := m.earliestValidity(); ok && until.Before(deadline) {
		deadline = until
	}
	ctx, cancel := context.WithDeadline(parent, deadline)
	defer cancel()

	if err := m.renew(ctx); err != nil && parent.Err() == nil {
		m.log.Warn("lease renewal failed", "err", err)
	}
	live, err := m.liveNodes(ctx)
	switch {
	case parent.Err() != nil: // stopping
	case err != nil:
		// Without a view of the live nodes, hold what we have and
		// move nothing.
		m.log.Warn("node heartbeat failed", "err", err)
	default:
		m.rebalance(ctx, start, live)
	}
	if m.rounds != nil {
		m.rounds <- struct{}{}
	}
}

// renew renews every lease of the node in one statement and reconciles:
// a lease missing from the answer, or under another token, is lost; a
// lease the database gives this node but the loop does not know (left by
// a previous run of the node, or dropped by Fenced) is released, to be
// acquired again under a new token.
func (m *Manager) renew(ctx context.Context) error {
	sent := time.Now()
	renewed, err := m.store.RenewAll(ctx, m.cfg.Node, m.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	var lost []lostKey
	m.mu.Lock()
	for k, h := range m.held {
		switch token, ok := renewed[k]; {
		case !ok:
			lost = append(lost, lostKey{k, ReasonExpired})
			delete(m.held, k)
		case token != h.token:
			lost = append(lost, lostKey{k, ReasonTokenChanged})
			delete(m.held, k)
		default:
			h.validUntil = m.validUntil(sent)
		}
	}
	var unknown []txmanager.SignerKey
	for k := range renewed {
		if _, ok := m.held[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	m.mu.Unlock()
	m.reportLost(lost)
	if len(unknown) > 0 {
		m.log.Info("releasing leases this run does not hold", "count", len(unknown))
		if err := m.store.Release(ctx, m.cfg.Node, unknown); err != nil {
			return err
		}
	}
	return nil
}

// liveNodes heartbeats and lists the live nodes, this one included.
func (m *Manager) liveNodes(ctx context.Context) ([]string, error) {
	if err := m.store.Heartbeat(ctx, m.cfg.Node, m.cfg.HeartbeatTTL); err != nil {
		return nil, err
	}
	live, err := m.store.LiveNodes(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(live, m.cfg.Node) {
		live = append(live, m.cfg.Node)
	}
	return live, nil
}

// rebalance hands off the signers another live node is now preferred for,
// then acquires those this node is preferred for and the orphans.
func (m *Manager) rebalance(ctx context.Context, start time.Time, live []string) {
	configured := make(map[txmanager.SignerKey]bool)
	var keys []txmanager.SignerKey
	for _, k := range m.cfg.Signers() {
		if !configured[k] {
			configured[k] = true
			keys = append(keys, k)
		}
	}

	var (
		lost    []lostKey
		handoff []txmanager.SignerKey
	)
	m.mu.Lock()
	for k, h := range m.held {
		reason := ""
		if !configured[k] {
			reason = ReasonUnconfigured
		} else if p := PreferredNode(k, live); p != m.cfg.Node && p != h.orphanOf {
			reason = ReasonHandoff
		}
		if reason != "" {
			delete(m.held, k)
			lost = append(lost, lostKey{k, reason})
			handoff = append(handoff, k)
		}
	}
	var mine, elsewhere []txmanager.SignerKey
	preferred := make(map[txmanager.SignerKey]string)
	for _, k := range keys {
		if _, ok := m.held[k]; ok {
			continue
		}
		p := PreferredNode(k, live)
		if p == m.cfg.Node {
			mine = append(mine, k)
		} else {
			elsewhere = append(elsewhere, k)
			preferred[k] = p
		}
	}
	m.mu.Unlock()

	// Workers stop (Lost) before the leases go, so that the next owner
	// never overlaps with a worker still running here.
	m.reportLost(lost)
	if len(handoff) > 0 {
		if err := m.store.Release(ctx, m.cfg.Node, handoff); err != nil {
			// The leases stay this node's until they lapse or the next
			// round releases them as unknown.
			m.log.Warn("releasing leases failed", "count", len(handoff), "err", err)
		}
	}

	orphans, err := m.orphans(ctx, elsewhere)
	if err != nil {
		m.log.Warn("looking for orphaned leases failed", "err", err)
	}
	m.lapseAt = time.Time{}
	if wait, ok, err := m.store.NextLapse(ctx, elsewhere); err != nil {
		m.log.Warn("looking for lapsing leases failed", "err", err)
	} else if ok && wait < m.cfg.RenewEvery {
		m.lapseAt = time.Now().Add(wait + lapseMargin)
	}

	// Acquisitions are one statement each: many at once (a start, a
	// failover) spread over rounds rather than hold up the next renewal.
	budget := start.Add(m.cfg.RenewEvery / 2)
	for _, k := range append(mine, orphans...) {
		if time.Now().After(budget) || ctx.Err() != nil {
			break
		}
		orphanOf := preferred[k] // "" for mine
		sent := time.Now()
		token, ok, err := m.store.Acquire(ctx, m.cfg.Node, k, m.cfg.LeaseTTL)
		if err != nil {
			m.log.Warn("acquiring lease failed", "chain_id", k.ChainID, "signer", k.Signer, "err", err)
			continue
		}
		if !ok {
			continue
		}
		delete(m.vacantSince, k)
		m.mu.Lock()
		m.held[k] = &held{token: token, validUntil: m.validUntil(sent), orphanOf: orphanOf}
		m.owned.Set(float64(len(m.held)))
		m.mu.Unlock()
		m.acquiredTotal.Inc()
		m.log.Info("lease acquired", "chain_id", k.ChainID, "signer", k.Signer, "fencing_token", token, "orphan_of", orphanOf)
		m.handler.Acquired(txmanager.Fence{Node: m.cfg.Node, Key: k, Token: token})
	}
}

// lapseMargin is how long after a lease's lapse by the database clock a
// contender looks again: clocks and the round trip are not exact.
const lapseMargin = 50 * time.Millisecond

// orphans are those of candidates (signers preferred by another node)
// that nobody has held for OrphanAfter, as seen by this node's rounds.
func (m *Manager) orphans(ctx context.Context, candidates []txmanager.SignerKey) ([]txmanager.SignerKey, error) {
	if len(candidates) == 0 {
		clear(m.vacantSince)
		return nil, nil
	}
	vacant, err := m.store.Vacant(ctx, candidates)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	isVacant := make(map[txmanager.SignerKey]bool, len(vacant))
	var orphans []txmanager.SignerKey
	for _, k := range vacant {
		isVacant[k] = true
		since, seen := m.vacantSince[k]
		switch {
		case !seen:
			m.vacantSince[k] = now
		case now.Sub(since) >= m.cfg.OrphanAfter:
			orphans = append(orphans, k)
		}
	}
	for k := range m.vacantSince {
		if !isVacant[k] {
			delete(m.vacantSince, k)
		}
	}
	return orphans, nil
}

// validUntil is the local validity of a lease whose acquisition or
// renewal was sent at sent.
func (m *Manager) validUntil(sent time.Time) time.Time {
	return sent.Add(m.cfg.LeaseTTL - m.cfg.RenewEvery)
}

func (m *Manager) earliestValidity() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var first time.Time
	for _, h := range m.held {
		if first.IsZero() || h.validUntil.Before(first) {
			first = h.validUntil
		}
	}
	return first, !first.IsZero()
}

// expireLocally drops the leases whose local validity has passed.
func (m *Manager) expireLocally(now time.Time) {
	var lost []lostKey
	m.mu.Lock()
	for k, h := range m.held {
		if !now.Before(h.validUntil) {
			lost = append(lost, lostKey{k, ReasonUnrenewed})
			delete(m.held, k)
		}
	}
	m.mu.Unlock()
	m.reportLost(lost)
}

func (m *Manager) reportFenced() {
	m.mu.Lock()
	keys := m.fenced
	m.fenced = nil
	m.mu.Unlock()
	lost := make([]lostKey, len(keys))
	for i, k := range keys {
		lost[i] = lostKey{k, ReasonFenced}
	}
	m.reportLost(lost)
}

// reportLost tells the handler, in a stable order.
func (m *Manager) reportLost(lost []lostKey) {
	if len(lost) == 0 {
		return
	}
	slices.SortFunc(lost, func(a, b lostKey) int { return compareKeys(a.key, b.key) })
	m.mu.Lock()
	m.owned.Set(float64(len(m.held)))
	m.mu.Unlock()
	for _, l := range lost {
		m.lostTotal.WithLabelValues(l.reason).Inc()
		m.log.Info("lease lost", "chain_id", l.key.ChainID, "signer", l.key.Signer, "reason", l.reason)
		m.handler.Lost(l.key, l.reason)
	}
}

// shutdown gives everything up when Run ends.
func (m *Manager) shutdown(parent context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), m.cfg.LeaseTTL)
	defer cancel()
	m.reportFenced()
	var (
		lost []lostKey
		keys []txmanager.SignerKey
	)
	m.mu.Lock()
	for k := range m.held {
		lost = append(lost, lostKey{k, ReasonShutdown})
		keys = append(keys, k)
	}
	clear(m.held)
	m.mu.Unlock()
	m.reportLost(lost)
	// Deregister first: by the time the leases are free, the other nodes
	// already count this one out and prefer themselves.
	if err := m.store.Deregister(ctx, m.cfg.Node); err != nil {
		m.log.Warn("deregistering node failed", "err", err)
	}
	if err := m.store.Release(ctx, m.cfg.Node, keys); err != nil {
		m.log.Warn("releasing leases at shutdown failed; they lapse after the lease period", "count", len(keys), "err", err)
	}
}

func compareKeys(a, b txmanager.SignerKey) int {
	if a.ChainID != b.ChainID {
		if a.ChainID < b.ChainID {
			return -1
		}
		return 1
	}
	return a.Signer.Cmp(b.Signer)
}
