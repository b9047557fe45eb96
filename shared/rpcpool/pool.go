// Package rpcpool chooses, for each call to a chain, one of the chain's
// RPC endpoints: several providers, each with a weight, a request budget
// and a health read from what it answers. It holds the rules and the
// bookkeeping only; callers make the calls and report how they went, so
// the rules are tested as tables, without a network.
//
// The rules:
//   - An endpoint that reported another chain id is out for good.
//   - An endpoint that answered 429 is out until its Retry-After has
//     passed (or the pool's back-off, growing while it keeps refusing).
//   - An endpoint whose recent calls mostly failed is out for a cool-down.
//   - A read that needs a head (a receipt at a block the caller has seen)
//     goes only to an endpoint at or above it, and an endpoint lagging
//     more than MaxLag blocks behind the best head is used only when none
//     is closer: "not found" from a lagging node must never read as "not
//     mined".
//   - Within what remains, smooth weighted round robin by Weight, skipping
//     an endpoint whose request or credit budget is spent for now.
package rpcpool

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

// Result is what a caller reports after a call: its outcome, how long it
// took and, for a 429, the Retry-After the endpoint asked for (0 when it
// gave none).
type Result struct {
	Outcome    Outcome
	Latency    time.Duration
	RetryAfter time.Duration
}

// ErrNoEndpoint is returned by Pick when no endpoint may take the call
// now; the error says why for each.
var ErrNoEndpoint = errors.New("no RPC endpoint can take the call")

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

	// tokens is the request bucket (RPS), refilled at last.
	tokens float64
	last   time.Time
	// spent is the credit units used in the period that began at
	// periodStart.
	spent       int64
	periodStart time.Time

	recent    []bool // the last Window outcomes, true for a failure
	coolUntil time.Time

	limitedUntil time.Time
	backoff      time.Duration

	latency time.Duration // exponentially weighted
	calls   map[Outcome]int64
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
		p.members = append(p.members, &member{Endpoint: e, tokens: e.RPS, last: now, periodStart: now, calls: map[Outcome]int64{}})
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
		if chainID != p.chainID {
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

// BestHead is the highest head an endpoint of the chain reported.
func (p *Pool) BestHead() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bestHead
}

// Pick chooses the endpoint for one call of method that needs the node to
// be at minHead or above (0: any head), and takes its budget. The caller
// reports the call's result with Done.
func (p *Pool) Pick(method string, minHead uint64) (Endpoint, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Now()
	var fresh, lagging []*member
	var why []string
	for _, m := range p.members {
		if reason := p.excluded(m, method, minHead, now); reason != "" {
			why = append(why, m.Name+": "+reason)
			continue
		}
		if p.bestHead > m.head+p.opts.MaxLag {
			lagging = append(lagging, m)
			continue
		}
		fresh = append(fresh, m)
	}
	candidates := fresh
	if len(candidates) == 0 {
		// Only lagging nodes: better than none for a read whose head they
		// have (minHead is checked above), and the caller asked for no more.
		candidates = lagging
	}
	if len(candidates) == 0 {
		return Endpoint{}, fmt.Errorf("%w: chain %d, %s (head %d): %v", ErrNoEndpoint, p.chainID, method, minHead, why)
	}
	chosen := smoothWeighted(candidates)
	p.spend(chosen, method)
	return chosen.Endpoint, nil
}

// excluded says why m may not take the call now ("" when it may).
func (p *Pool) excluded(m *member, method string, minHead uint64, now time.Time) string {
	switch {
	case m.wrongChain != 0:
		return fmt.Sprintf("on chain %d, not %d", m.wrongChain, p.chainID)
	case now.Before(m.limitedUntil):
		return fmt.Sprintf("rate limited for %v more", m.limitedUntil.Sub(now).Round(time.Millisecond))
	case now.Before(m.coolUntil):
		return "failing; cooling down"
	case minHead > 0 && m.head < minHead:
		return fmt.Sprintf("at head %d, below %d", m.head, minHead)
	}
	p.refill(m, now)
	if m.RPS > 0 && m.tokens < 1 {
		return "request budget spent for this second"
	}
	if c := m.Credits; c != nil && m.spent+c.cost(method) > c.Units {
		return fmt.Sprintf("credits spent until %s", m.periodStart.Add(c.Period).Format(time.RFC3339))
	}
	return ""
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

func (p *Pool) spend(m *member, method string) {
	if m.RPS > 0 {
		m.tokens--
	}
	if m.Credits != nil {
		m.spent += m.Credits.cost(method)
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
	m.calls[r.Outcome]++
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
	}
	m.recent = append(m.recent, r.Outcome == Failed)
	if len(m.recent) > p.opts.Window {
		m.recent = m.recent[len(m.recent)-p.opts.Window:]
	}
	if failures := countTrue(m.recent); len(m.recent) >= min(p.opts.Window, 4) && float64(failures) >= p.opts.ErrorRate*float64(len(m.recent)) {
		m.coolUntil = now.Add(p.opts.Cooldown)
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
	Usable     bool
	Reason     string
	Head       uint64
	Lag        uint64 // behind the best head
	Latency    time.Duration
	Calls      map[Outcome]int64
	CreditLeft int64 // -1 without a credit budget
}

// Health is every endpoint's state now, in configuration order.
func (p *Pool) Health() []Health {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Now()
	out := make([]Health, 0, len(p.members))
	for _, m := range p.members {
		h := Health{Name: m.Name, Head: m.head, Latency: m.latency, Calls: map[Outcome]int64{}, CreditLeft: -1}
		for k, v := range m.calls {
			h.Calls[k] = v
		}
		if p.bestHead > m.head {
			h.Lag = p.bestHead - m.head
		}
		switch {
		case m.wrongChain != 0:
			h.Reason = fmt.Sprintf("on chain %d", m.wrongChain)
		case now.Before(m.limitedUntil):
			h.Reason = "rate limited"
		case now.Before(m.coolUntil):
			h.Reason = "failing"
		default:
			h.Usable = true
		}
		p.refill(m, now)
		if m.Credits != nil {
			h.CreditLeft = m.Credits.Units - m.spent
		}
		out = append(out, h)
	}
	return out
}
