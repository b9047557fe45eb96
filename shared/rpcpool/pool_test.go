package rpcpool_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/rpcpool"
)

// clock is a test's time, moved by hand.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }

func newPool(t *testing.T, c *clock, eps ...rpcpool.Endpoint) *rpcpool.Pool {
	t.Helper()
	p, err := rpcpool.New(31337, eps, rpcpool.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		p.ObserveChainID(e.Name, 31337)
		p.ObserveHead(e.Name, 100)
	}
	return p
}

func ep(name string) rpcpool.Endpoint { return rpcpool.Endpoint{Name: name, URL: "http://" + name} }

// picks makes n picks of method at minHead and counts them by endpoint
// ("-" for a refusal).
func picks(p *rpcpool.Pool, n int, method string, minHead uint64) map[string]int {
	out := map[string]int{}
	for range n {
		e, err := p.Pick(rpcpool.Call{Methods: []string{method}, MinHead: minHead})
		if err != nil {
			out["-"]++
			continue
		}
		out[e.Name]++
	}
	return out
}

func TestPickSharesReadsByWeight(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	a, b := ep("a"), ep("b")
	a.Weight, b.Weight = 3, 1
	p := newPool(t, c, a, b)
	if got := picks(p, 400, "eth_call", 0); got["a"] != 300 || got["b"] != 100 {
		t.Errorf("picks %v, want 300 a and 100 b", got)
	}
}

func TestEndpointsLeaveAndReturn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// do acts on endpoint "a" of a pool of a and b, then the test
		// picks 10 reads at once and 10 more after wait.
		do          func(p *rpcpool.Pool)
		minHead     uint64
		now, after  map[string]int
		wait        time.Duration
		wantNoneErr string
	}{
		{name: "healthy", do: func(*rpcpool.Pool) {},
			now: map[string]int{"a": 5, "b": 5}, after: map[string]int{"a": 5, "b": 5}},
		{name: "wrong chain id: out for good", do: func(p *rpcpool.Pool) { p.ObserveChainID("a", 1) },
			now: map[string]int{"b": 10}, wait: time.Hour, after: map[string]int{"b": 10}},
		{name: "429 with Retry-After: out until then",
			do: func(p *rpcpool.Pool) {
				p.Done("a", rpcpool.Result{Outcome: rpcpool.RateLimited, RetryAfter: 30 * time.Second})
			},
			now: map[string]int{"b": 10}, wait: 31 * time.Second, after: map[string]int{"a": 5, "b": 5}},
		{name: "429 without Retry-After: the pool's back-off",
			do:  func(p *rpcpool.Pool) { p.Done("a", rpcpool.Result{Outcome: rpcpool.RateLimited}) },
			now: map[string]int{"b": 10}, wait: 1100 * time.Millisecond, after: map[string]int{"a": 5, "b": 5}},
		{name: "mostly failing: out for the cool-down, then until a health check succeeds",
			do: func(p *rpcpool.Pool) {
				for range 4 {
					p.Done("a", rpcpool.Result{Outcome: rpcpool.Failed})
				}
			},
			now: map[string]int{"b": 10}, wait: 11 * time.Second, after: map[string]int{"b": 10}},
		{name: "a failure among answers keeps it in",
			do: func(p *rpcpool.Pool) {
				for _, o := range []rpcpool.Outcome{rpcpool.OK, rpcpool.Failed, rpcpool.OK, rpcpool.OK, rpcpool.OK} {
					p.Done("a", rpcpool.Result{Outcome: o})
				}
			},
			now: map[string]int{"a": 5, "b": 5}, after: map[string]int{"a": 5, "b": 5}},
		{name: "lagging beyond MaxLag: only when none is closer", do: func(p *rpcpool.Pool) { p.ObserveHead("b", 110) },
			now: map[string]int{"b": 10}, after: map[string]int{"b": 10}},
		{name: "a read that needs a head the endpoint lacks", do: func(p *rpcpool.Pool) { p.ObserveHead("b", 105) }, minHead: 105,
			now: map[string]int{"b": 10}, after: map[string]int{"b": 10}},
		{name: "no endpoint at the head: refused, not sent to a node that would say not found",
			do: func(*rpcpool.Pool) {}, minHead: 101, now: map[string]int{"-": 10}, after: map[string]int{"-": 10},
			wantNoneErr: "a: at head 100, below 101"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{now: time.Unix(1_800_000_000, 0)}
			p := newPool(t, c, ep("a"), ep("b"))
			tc.do(p)
			if got := picks(p, 10, "eth_getTransactionReceipt", tc.minHead); !maps.Equal(got, tc.now) {
				t.Errorf("at once: %v, want %v", got, tc.now)
			}
			c.advance(tc.wait)
			if got := picks(p, 10, "eth_getTransactionReceipt", tc.minHead); !maps.Equal(got, tc.after) {
				t.Errorf("after %v: %v, want %v", tc.wait, got, tc.after)
			}
			if tc.wantNoneErr != "" {
				_, err := p.Pick(rpcpool.Call{Methods: []string{"eth_getTransactionReceipt"}, MinHead: tc.minHead})
				if !errors.Is(err, rpcpool.ErrNoEndpoint) || !strings.Contains(err.Error(), tc.wantNoneErr) {
					t.Errorf("refusal %v, want ErrNoEndpoint saying %q", err, tc.wantNoneErr)
				}
			}
		})
	}
}

func TestALaggingEndpointServesWhenItIsAllThereIs(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := newPool(t, c, ep("a"), ep("b"))
	p.ObserveHead("b", 120)
	p.Done("b", rpcpool.Result{Outcome: rpcpool.RateLimited, RetryAfter: time.Minute})
	if got := picks(p, 4, "eth_blockNumber", 0); got["a"] != 4 {
		t.Errorf("with the fresh endpoint rate limited: %v, want the lagging one", got)
	}
}

func TestBackoffGrowsWhileRefusedAndResetsOnAnAnswer(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := newPool(t, c, ep("a"))
	outFor := func() time.Duration {
		t.Helper()
		var d time.Duration
		for ; d < 10*time.Minute; d += 100 * time.Millisecond {
			if _, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call"}}); err == nil {
				return d
			}
			c.advance(100 * time.Millisecond)
		}
		t.Fatal("never back")
		return 0
	}
	var got []time.Duration
	for range 3 {
		p.Done("a", rpcpool.Result{Outcome: rpcpool.RateLimited})
		got = append(got, outFor())
	}
	p.Done("a", rpcpool.Result{Outcome: rpcpool.OK})
	p.Done("a", rpcpool.Result{Outcome: rpcpool.RateLimited})
	got = append(got, outFor())
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("back-offs %v, want %v", got, want)
	}
}

func TestBudgets(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	capped, paid := ep("capped"), ep("paid")
	capped.RPS = 2
	paid.Credits = &rpcpool.Credits{Units: 100, Period: time.Minute, Cost: map[string]int64{"eth_getLogs": 75}, Default: 10}
	p := newPool(t, c, capped, paid)
	// Within one second: capped takes 2, paid takes 10 (100 credits at
	// 10), then neither takes more.
	if got := picks(p, 15, "eth_call", 0); got["capped"] != 2 || got["paid"] != 10 || got["-"] != 3 {
		t.Errorf("a burst: %v, want 2 capped, 10 paid, 3 refused", got)
	}
	c.advance(time.Second)
	if got := picks(p, 3, "eth_call", 0); got["capped"] != 2 || got["-"] != 1 {
		t.Errorf("the next second: %v, want 2 capped (paid has no credits left this minute)", got)
	}
	c.advance(time.Minute)
	if got := picks(p, 2, "eth_getLogs", 0); got["paid"] != 1 {
		t.Errorf("a new period: %v, want one 75-credit eth_getLogs on paid", got)
	}
	for _, h := range p.Health() {
		if h.Name == "paid" && h.CreditLeft != 25 {
			t.Errorf("paid has %v credits left, want 25", h.CreditLeft)
		}
	}
}

func TestHealthReports(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := newPool(t, c, ep("a"), ep("b"), ep("c"))
	p.ObserveHead("b", 97)
	p.ObserveChainID("c", 10)
	p.Done("a", rpcpool.Result{Outcome: rpcpool.OK, Latency: 80 * time.Millisecond})
	p.Done("a", rpcpool.Result{Outcome: rpcpool.RateLimited, RetryAfter: time.Second})
	hs := p.Health()
	if a := hs[0]; a.Usable || a.Reason != "rate limited" || a.Latency != 80*time.Millisecond || a.Calls["ok"] != 1 || a.Calls["rate_limited"] != 1 {
		t.Errorf("a: %+v", a)
	}
	if b := hs[1]; !b.Usable || b.Lag != 3 || b.Head != 97 || b.CreditLeft != -1 {
		t.Errorf("b: %+v", b)
	}
	if c := hs[2]; c.Usable || c.Reason != "on chain 10" {
		t.Errorf("c: %+v", c)
	}
}

func TestASlowEndpointServesOnlyWhenNoFasterCan(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := newPool(t, c, ep("quick"), ep("slow"), ep("fair"))
	p.Done("quick", rpcpool.Result{Outcome: rpcpool.OK, Latency: 100 * time.Millisecond})
	p.Done("slow", rpcpool.Result{Outcome: rpcpool.OK, Latency: 3 * time.Second})
	p.Done("fair", rpcpool.Result{Outcome: rpcpool.OK, Latency: 400 * time.Millisecond})
	if got := picks(p, 10, "eth_call", 0); got["slow"] != 0 || got["quick"] != 5 || got["fair"] != 5 {
		t.Errorf("picks %v, want quick and fair (within 5x of quick), never slow", got)
	}
	p.Done("quick", rpcpool.Result{Outcome: rpcpool.RateLimited, RetryAfter: time.Minute})
	p.Done("fair", rpcpool.Result{Outcome: rpcpool.RateLimited, RetryAfter: time.Minute})
	if got := picks(p, 3, "eth_call", 0); got["slow"] != 3 {
		t.Errorf("with the others out: %v, want slow", got)
	}
	// Answer times on loopback are tiny: a few milliseconds against
	// fractions of one is no reason to leave an endpoint out.
	q := newPool(t, c, ep("a"), ep("b"))
	q.Done("a", rpcpool.Result{Outcome: rpcpool.OK, Latency: 200 * time.Microsecond})
	q.Done("b", rpcpool.Result{Outcome: rpcpool.OK, Latency: 20 * time.Millisecond})
	if got := picks(q, 4, "eth_call", 0); got["a"] != 2 || got["b"] != 2 {
		t.Errorf("below the slow floor: %v, want both", got)
	}
}

func TestAProbeBringsAFailedEndpointBack(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := newPool(t, c, ep("a"), ep("b"))
	for range 4 {
		p.Done("a", rpcpool.Result{Outcome: rpcpool.Failed, Class: "timeout"})
	}
	probe := rpcpool.Call{Methods: []string{"eth_blockNumber"}, Endpoint: "a", Probe: true}
	if e, err := p.Pick(probe); err != nil || e.Name != "a" {
		t.Fatalf("a probe while cooling down: %v %v, want endpoint a", e.Name, err)
	}
	c.advance(11 * time.Second)
	if got := picks(p, 4, "eth_call", 0); got["b"] != 4 {
		t.Errorf("after the cool-down, before a probe succeeded: %v, want b only", got)
	}
	p.Done("a", rpcpool.Result{Outcome: rpcpool.OK})
	if got := picks(p, 4, "eth_call", 0); got["a"] != 2 || got["b"] != 2 {
		t.Errorf("after a probe succeeded: %v, want a and b", got)
	}
	if h := p.Health()[0]; h.Calls["timeout"] != 4 || h.Calls["ok"] != 1 {
		t.Errorf("calls by class %v, want 4 timeout and 1 ok", h.Calls)
	}
}

func TestPinnedAndRetriedCalls(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	p := newPool(t, c, ep("a"), ep("b"), ep("c"))
	for range 3 {
		if e, err := p.Pick(rpcpool.Call{Methods: []string{"eth_getTransactionByHash"}, Endpoint: "c"}); err != nil || e.Name != "c" {
			t.Fatalf("pinned to c: %v %v", e.Name, err)
		}
	}
	if e, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call"}, Tried: []string{"a", "b"}}); err != nil || e.Name != "c" {
		t.Errorf("a and b tried: %v %v, want c", e.Name, err)
	}
	_, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call"}, Tried: []string{"a", "b", "c"}})
	if !errors.Is(err, rpcpool.ErrNoEndpoint) || !strings.Contains(err.Error(), "c: tried already") {
		t.Errorf("all tried: %v, want ErrNoEndpoint naming each", err)
	}
	p.ObserveChainID("b", 5)
	if _, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call"}, Endpoint: "b"}); err == nil {
		t.Error("a call pinned to an endpoint on the wrong chain was not refused")
	}
}

func TestABatchSpendsABudgetPerCall(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Unix(1_800_000_000, 0)}
	e := ep("a")
	e.RPS = 10
	e.Credits = &rpcpool.Credits{Units: 1000, Period: time.Hour, Default: 10, Cost: map[string]int64{"eth_getLogs": 75}}
	p := newPool(t, c, e)
	batch := rpcpool.Call{Methods: slices.Repeat([]string{"eth_getTransactionReceipt"}, 30)}
	if _, err := p.Pick(batch); err != nil {
		t.Fatalf("a batch of 30 on a full bucket of 10: %v (it may overdraw)", err)
	}
	if _, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call"}}); err == nil {
		t.Error("a call right after an overdrawing batch was not refused")
	}
	c.advance(2 * time.Second) // 20 tokens back: the bucket is still 0 (-20 + 20)
	if _, err := p.Pick(rpcpool.Call{Methods: []string{"eth_call"}}); err == nil {
		t.Error("the overdraft was not paid back before the next call")
	}
	c.advance(200 * time.Millisecond)
	if _, err := p.Pick(rpcpool.Call{Methods: []string{"eth_getLogs"}}); err != nil {
		t.Errorf("after the overdraft was paid back: %v", err)
	}
	if h := p.Health()[0]; h.CreditLeft != 1000-300-75 {
		t.Errorf("credits left %v, want %d", h.CreditLeft, 1000-300-75)
	}
}

func TestContextCarriesTheCall(t *testing.T) {
	t.Parallel()
	ctx := rpcpool.On(rpcpool.AtHead(context.Background(), 42), "b")
	got := rpcpool.CallOf(ctx, []string{"eth_call"})
	if got.MinHead != 42 || got.Endpoint != "b" || !slices.Equal(got.Methods, []string{"eth_call"}) {
		t.Errorf("CallOf = %+v", got)
	}
}

func TestNewRefusesABadPool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		eps  []rpcpool.Endpoint
		want string
	}{
		{nil, "no RPC endpoint"},
		{[]rpcpool.Endpoint{{Name: "a"}}, "a name and a URL"},
		{[]rpcpool.Endpoint{ep("a"), ep("a")}, `"a" named twice`},
		{[]rpcpool.Endpoint{{Name: "a", URL: "http://a", Weight: -1}}, "may not be negative"},
		{[]rpcpool.Endpoint{{Name: "a", URL: "http://a", Credits: &rpcpool.Credits{Units: 10}}}, "units and a period"},
	} {
		if _, err := rpcpool.New(1, tc.eps, rpcpool.Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error saying %q", tc.eps, err, tc.want)
		}
	}
}
