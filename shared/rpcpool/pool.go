// Package rpcpool chooses, for each call to a chain, one of the chain's
// RPC endpoints: several providers, each with a weight, a request budget
// and a health read from what it answers. It holds the rules and the
// bookkeeping only; callers make the calls and report how they went, so
// the rules are tested as tables, without a network.
//
// The rules:
//   - An endpoint takes calls only once it reported the pool's chain id
//     (the prober asks); one that reported another chain id is out until
//     it reports ours.
//   - An endpoint that answered 429 is out until its Retry-After has
//     passed (or the pool's back-off, growing while it keeps refusing).
//   - An endpoint whose recent calls mostly failed is out for a cool-down.
//   - A read that needs a head (a receipt at a block the caller has seen)
//     goes only to an endpoint at or above it, and an endpoint lagging
//     more than MaxLag blocks behind the best head is used only when none
//     is closer: "not found" from a lagging node must never read as "not
//     mined".
//   - An endpoint whose answers take more than SlowFactor times the
//     fastest one's (and over SlowFloor) is, like a lagging one, used only
//     when no faster endpoint can take the call.
//   - Within what remains, smooth weighted round robin by Weight, skipping
//     an endpoint whose request or credit budget is spent for now.
package rpcpool

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// Endpoint is one provider's RPC URL for a chain, with what it may be
// asked.
type Endpoint struct {
	Name string
	URL  string
	// Weight is the endpoint's share of reads against the others'
	// (default 1).
	Weight int
	// RPS caps requests per second (0: no cap), with bursts of up to one
	// second's worth.
	RPS float64
	// Credits, when set, is a paid provider's allowance of credit units
	// per period, each method costing what its table says.
	Credits *Credits
}

// Credits is an allowance of credit units per period, as paid providers
// bill: a method costs Cost[method], or Default when the table does not
// name it.
type Credits struct {
	Units   int64
	Period  time.Duration
	Cost    map[string]int64
	Default int64
}

func (c *Credits) costOf(methods []string) int64 {
	if len(methods) == 0 {
		return c.cost("")
	}
	var n int64
	for _, m := range methods {
		n += c.cost(m)
	}
	return n
}

func (c *Credits) cost(method string) int64 {
	if n, ok := c.Cost[method]; ok {
		return n
	}
	if c.Default > 0 {
		return c.Default
	}
	return 1
}

// Options tune the health rules; the zero value takes the defaults.
type Options struct {
	// MaxLag is how many blocks behind the best head an endpoint may be
	// and still serve reads that need no head (default 3).
	MaxLag uint64
	// SlowFactor and SlowFloor: an endpoint whose answer time (weighted
	// over recent calls) is above SlowFloor (default 250ms) and more than
	// SlowFactor (default 5) times the fastest usable endpoint's takes a
	// call only when no faster one can.
	SlowFactor float64
	SlowFloor  time.Duration
	// Window is how many recent calls the error rate is taken over
	// (default 20); ErrorRate the share of failures in it that takes an
	// endpoint out (default 0.5) for Cooldown (default 10s).
	Window    int
	ErrorRate float64
	Cooldown  time.Duration
	// Backoff is how long a 429 without Retry-After keeps an endpoint out
	// the first time (default 1s), doubling while it keeps refusing, up to
	// MaxBackoff (default 1m).
	Backoff, MaxBackoff time.Duration
	// Now is the clock (tests give their own).
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.MaxLag == 0 {
		o.MaxLag = 3
	}
	if o.SlowFactor == 0 {
		o.SlowFactor = 5
	}
	if o.SlowFloor == 0 {
		o.SlowFloor = 250 * time.Millisecond
	}
	if o.Window == 0 {
		o.Window = 20
	}
	if o.ErrorRate == 0 {
		o.ErrorRate = 0.5
	}
	if o.Cooldown == 0 {
		o.Cooldown = 10 * time.Second
	}
	if o.Backoff == 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Outcome is how a call to an endpoint went.
type Outcome int

const (
	// OK: the endpoint answered (a JSON-RPC error about the request, such
	// as a revert, is an answer too).
	OK Outcome = iota
	// Failed: no usable answer (a timeout, a connection refused, a 5xx).
	Failed
	// RateLimited: a 429, or a provider's "too many requests" error.
	RateLimited
)

// Result is what a caller reports after a call: its outcome, the class
// of an error for metrics ("timeout", "connection", "http_5xx", …; ""
// is taken as the outcome's name), how long it took and, for a 429, the
// Retry-After the endpoint asked for (0 when it gave none).
type Result struct {
	Outcome    Outcome
	Class      string
	Latency    time.Duration
	RetryAfter time.Duration
}

func (r Result) class() string {
	if r.Class != "" {
		return r.Class
	}
	switch r.Outcome {
	case OK:
		return "ok"
	case RateLimited:
		return "rate_limited"
	}
	return "failed"
}

// Call is what Pick chooses an endpoint for: the JSON-RPC methods of one
// request (several for a batch, each spending budget), the head the node
// must be at or above (0: any), the endpoint the caller pins it to (""
// for any) and the endpoints already tried for it, which it skips.
type Call struct {
	Methods  []string
	MinHead  uint64
	Endpoint string
	Tried    []string
	// Probe marks the pool's own health check: it goes to the endpoint it
	// names even while that one is cooling down, on probation or on the
	// wrong chain, since its answer is how the endpoint gets back in.
	Probe bool
}

// ErrNoEndpoint is returned by Pick when no endpoint may take the call
// now; the error says why for each.
var ErrNoEndpoint = errors.New("no RPC endpoint can take the call")

// ErrBehind is returned with ErrNoEndpoint when some endpoint would have
// taken the call but for its head, as last reported, being below the
// call's MinHead: a fresh look at the heads may find one that has it.
var ErrBehind = errors.New("no endpoint is known to be at the head asked for")

// Pool is one chain's endpoints. It is safe for concurrent use.
type Pool struct {
	chainID uint64
	opts    Options

	mu       sync.Mutex
	members  []*member
	bestHead uint64
}

type member struct {
	Endpoint
	current int // smooth weighted round robin

	head       uint64
	wrongChain uint64 // the chain id it reported, when not ours
	// verified is set once the endpoint reported our chain id: until
	// then it takes no caller's call, since what it answers may be about
	// another chain.
	verified bool

	// tokens is the request bucket (RPS), refilled at last.
	tokens float64
	last   time.Time
	// spent is the credit units used in the period that began at
	// periodStart.
	spent       int64
	periodStart time.Time

	recent    []bool // the last Window outcomes, true for a failure
	coolUntil time.Time
	// probation is set when an endpoint was cooled down: once the
	// cool-down is over it takes no caller's call until a call (the
	// prober's) has succeeded, so callers do not wait on a node that is
	// still hanging.
	probation bool

	limitedUntil time.Time
	backoff      time.Duration

	latency time.Duration    // exponentially weighted
	calls   map[string]int64 // by Result class
}

// New is the pool of chain chainID's endpoints.
func New(chainID uint64, endpoints []Endpoint, opts Options) (*Pool, error) {
	opts.defaults()
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("chain %d: no RPC endpoint", chainID)
	}
	p := &Pool{chainID: chainID, opts: opts}
	seen := map[string]bool{}
	for _, e := range endpoints {
		switch {
		case e.Name == "" || e.URL == "":
			return nil, fmt.Errorf("chain %d: an endpoint needs a name and a URL", chainID)
		case seen[e.Name]:
			return nil, fmt.Errorf("chain %d: endpoint %q named twice", chainID, e.Name)
		case e.Weight < 0 || e.RPS < 0:
			return nil, fmt.Errorf("chain %d: endpoint %q: weight and rps may not be negative", chainID, e.Name)
		case e.Credits != nil && (e.Credits.Units <= 0 || e.Credits.Period <= 0):
			return nil, fmt.Errorf("chain %d: endpoint %q: credits need units and a period", chainID, e.Name)
		}
		seen[e.Name] = true
		if e.Weight == 0 {
			e.Weight = 1
		}
		now := opts.Now()
		p.members = append(p.members, &member{Endpoint: e, tokens: e.RPS, last: now, periodStart: now, calls: map[string]int64{}})
	}
	return p, nil
}

// ChainID is the pool's chain.
func (p *Pool) ChainID() uint64 { return p.chainID }

// ObserveChainID records the chain id endpoint name reported: another
// chain's endpoint is excluded for good, since what it answers is about
// another chain.
func (p *Pool) ObserveChainID(name string, chainID uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.find(name); m != nil {
		m.wrongChain = 0
		m.verified = chainID == p.chainID
		if !m.verified {
			m.wrongChain = chainID
		}
	}
}

// ObserveHead records the head endpoint name is at.
func (p *Pool) ObserveHead(name string, head uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.find(name)
	if m == nil || m.wrongChain != 0 {
		return
	}
	m.head = head
	p.bestHead = max(p.bestHead, head)
}

// ObserveAtLeast records that endpoint name has block n (it answered
// with it): its head is at least n. A probe's ObserveHead says where it
// is exactly.
func (p *Pool) ObserveAtLeast(name string, n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.find(name)
	if m == nil || m.wrongChain != 0 || n <= m.head {
		return
	}
	m.head = n
	p.bestHead = max(p.bestHead, n)
}

// BestHead is the highest head an endpoint of the chain reported.
func (p *Pool) BestHead() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bestHead
}

// Endpoints is the pool's endpoints, in configuration order.
func (p *Pool) Endpoints() []Endpoint {
	out := make([]Endpoint, len(p.members))
	for i, m := range p.members {
		out[i] = m.Endpoint
	}
	return out
}

// Pick chooses the endpoint for c and takes its budget. The caller
// reports the call's result with Done.
func (p *Pool) Pick(c Call) (Endpoint, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Now()
	var fresh, lagging []*member
	var why []string
	behind := false
	for _, m := range p.members {
		if reason, belowHead := p.excluded(m, c, now); reason != "" {
			why = append(why, m.Name+": "+reason)
			behind = behind || belowHead
			continue
		}
		if p.bestHead > m.head+p.opts.MaxLag && c.Endpoint == "" {
			lagging = append(lagging, m)
			continue
		}
		fresh = append(fresh, m)
	}
	fast, slow := p.bySpeed(fresh)
	candidates := fast
	if len(candidates) == 0 {
		candidates = slow
	}
	if len(candidates) == 0 {
		// Only lagging nodes: better than none for a read whose head they
		// have (MinHead is checked above), and the caller asked for no more.
		candidates = lagging
	}
	if len(candidates) == 0 {
		err := fmt.Errorf("%w: chain %d, %s (head %d): %s", ErrNoEndpoint, p.chainID, describeMethods(c.Methods), c.MinHead, strings.Join(why, "; "))
		if behind {
			err = fmt.Errorf("%w (%w)", err, ErrBehind)
		}
		return Endpoint{}, err
	}
	chosen := smoothWeighted(candidates)
	p.spend(chosen, c.Methods)
	return chosen.Endpoint, nil
}

// bySpeed splits ms into those answering within SlowFactor times the
// fastest one's answer time (or within SlowFloor), and the slower rest.
// An endpoint not measured yet counts as fast.
func (p *Pool) bySpeed(ms []*member) (fast, slow []*member) {
	var fastest time.Duration
	for _, m := range ms {
		if m.latency > 0 && (fastest == 0 || m.latency < fastest) {
			fastest = m.latency
		}
	}
	limit := max(p.opts.SlowFloor, time.Duration(float64(fastest)*p.opts.SlowFactor))
	for _, m := range ms {
		if m.latency > limit {
			slow = append(slow, m)
		} else {
			fast = append(fast, m)
		}
	}
	return fast, slow
}

func describeMethods(methods []string) string {
	switch len(methods) {
	case 0:
		return "(no method)"
	case 1:
		return methods[0]
	}
	return fmt.Sprintf("batch of %d (%s, …)", len(methods), methods[0])
}

// excluded says why m may not take c now ("" when it may), and whether
// the reason is only its head being below c.MinHead.
func (p *Pool) excluded(m *member, c Call, now time.Time) (reason string, belowHead bool) {
	switch {
	case c.Endpoint != "" && m.Name != c.Endpoint:
		return "not the endpoint asked for", false
	case slices.Contains(c.Tried, m.Name):
		return "tried already", false
	case now.Before(m.limitedUntil):
		return fmt.Sprintf("rate limited for %v more", m.limitedUntil.Sub(now).Round(time.Millisecond)), false
	case c.Probe:
	case m.wrongChain != 0:
		return fmt.Sprintf("on chain %d, not %d", m.wrongChain, p.chainID), false
	case !m.verified:
		return "chain id not confirmed yet", false
	case now.Before(m.coolUntil):
		return "failing; cooling down", false
	case m.probation:
		return "failing; waiting for a health check to succeed", false
	}
	p.refill(m, now)
	if m.RPS > 0 && m.tokens < 1 {
		return "request budget spent for this second", false
	}
	if cr := m.Credits; cr != nil && m.spent+cr.costOf(c.Methods) > cr.Units {
		return fmt.Sprintf("credits spent until %s", m.periodStart.Add(cr.Period).Format(time.RFC3339)), false
	}
	if !c.Probe && c.MinHead > 0 && m.head < c.MinHead {
		return fmt.Sprintf("at head %d, below %d", m.head, c.MinHead), true
	}
	return "", false
}

func (p *Pool) refill(m *member, now time.Time) {
	if m.RPS > 0 {
		m.tokens = math.Min(m.RPS, m.tokens+now.Sub(m.last).Seconds()*m.RPS)
		m.last = now
	}
	if c := m.Credits; c != nil && now.Sub(m.periodStart) >= c.Period {
		periods := now.Sub(m.periodStart) / c.Period
		m.periodStart = m.periodStart.Add(periods * c.Period)
		m.spent = 0
	}
}

// spend takes a request's budget: a token per call (a batch of n is n
// requests to a provider, and may overdraw the bucket, which the
// following seconds pay back) and the calls' credits.
func (p *Pool) spend(m *member, methods []string) {
	if m.RPS > 0 {
		m.tokens -= float64(max(len(methods), 1))
	}
	if m.Credits != nil {
		m.spent += m.Credits.costOf(methods)
	}
}

// smoothWeighted is nginx's smooth weighted round robin: over a cycle each
// member is chosen Weight times, spread out, and the choice depends only
// on the members' state, so tests can predict it.
func smoothWeighted(ms []*member) *member {
	total := 0
	var best *member
	for _, m := range ms {
		m.current += m.Weight
		total += m.Weight
		if best == nil || m.current > best.current {
			best = m
		}
	}
	best.current -= total
	return best
}

// Done records the result of a call Pick sent to endpoint name.
func (p *Pool) Done(name string, r Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.find(name)
	if m == nil {
		return
	}
	now := p.opts.Now()
	m.calls[r.class()]++
	if r.Latency > 0 {
		if m.latency == 0 {
			m.latency = r.Latency
		} else {
			m.latency = (m.latency*7 + r.Latency) / 8
		}
	}
	switch r.Outcome {
	case RateLimited:
		wait := r.RetryAfter
		if wait <= 0 {
			m.backoff = min(max(2*m.backoff, p.opts.Backoff), p.opts.MaxBackoff)
			wait = m.backoff
		}
		m.limitedUntil = now.Add(wait)
		return // a refusal says nothing about the node's health
	case OK:
		m.backoff = 0
		m.probation = false
	}
	m.recent = append(m.recent, r.Outcome == Failed)
	if len(m.recent) > p.opts.Window {
		m.recent = m.recent[len(m.recent)-p.opts.Window:]
	}
	if failures := countTrue(m.recent); len(m.recent) >= min(p.opts.Window, 4) && float64(failures) >= p.opts.ErrorRate*float64(len(m.recent)) {
		m.coolUntil = now.Add(p.opts.Cooldown)
		m.probation = true
		m.recent = m.recent[:0] // after the cool-down, it starts afresh
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func (p *Pool) find(name string) *member {
	i := slices.IndexFunc(p.members, func(m *member) bool { return m.Name == name })
	if i < 0 {
		return nil
	}
	return p.members[i]
}

// Health is one endpoint's state, for metrics and operators.
type Health struct {
	Name string
	// Usable is false while the endpoint may take no call at all: on the
	// wrong chain, rate limited or cooling down.
	Usable  bool
	Reason  string
	Head    uint64
	Lag     uint64 // behind the best head
	Latency time.Duration
	// Calls counts the calls made, by Result class.
	Calls map[string]int64
	// CreditLeft is the credit units left in the period, -1 without a
	// credit budget; RequestsLeft the request tokens left now, -1
	// without a request budget.
	CreditLeft, RequestsLeft float64
}

// Health is every endpoint's state now, in configuration order.
func (p *Pool) Health() []Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Now()
	out := make([]Health, 0, len(p.members))
	for _, m := range p.members {
		h := Health{Name: m.Name, Head: m.head, Latency: m.latency, Calls: maps.Clone(m.calls), CreditLeft: -1, RequestsLeft: -1}
		if p.bestHead > m.head {
			h.Lag = p.bestHead - m.head
		}
		switch {
		case m.wrongChain != 0:
			h.Reason = fmt.Sprintf("on chain %d", m.wrongChain)
		case !m.verified:
			h.Reason = "chain id not confirmed yet"
		case now.Before(m.limitedUntil):
			h.Reason = "rate limited"
		case now.Before(m.coolUntil), m.probation:
			h.Reason = "failing"
		default:
			h.Usable = true
		}
		p.refill(m, now)
		if m.Credits != nil {
			h.CreditLeft = float64(m.Credits.Units - m.spent)
		}
		if m.RPS > 0 {
			h.RequestsLeft = max(m.tokens, 0)
		}
		out = append(out, h)
	}
	return out
}

type ctxKey int

const (
	headKey ctxKey = iota
	endpointKey
)

// AtHead returns ctx asking that the calls made with it go only to an
// endpoint at head or above: a read about a block the caller has seen
// must not go to a node that has not, whose "not found" would be a lie.
func AtHead(ctx context.Context, head uint64) context.Context {
	return context.WithValue(ctx, headKey, head)
}

// On returns ctx pinning the calls made with it to endpoint name, for a
// question every endpoint must answer for itself (is this transaction in
// your pool?).
func On(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, endpointKey, name)
}

// CallOf is the Call ctx asks for with methods: its AtHead and On.
func CallOf(ctx context.Context, methods []string) Call {
	head, _ := ctx.Value(headKey).(uint64)
	name, _ := ctx.Value(endpointKey).(string)
	return Call{Methods: methods, MinHead: head, Endpoint: name}
}
