package ratelimit

import (
	"fmt"
	"hash/maphash"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// t0 is an arbitrary start for the injected clock.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func TestLocalGCRA(t *testing.T) {
	type step struct {
		at   time.Duration // since t0
		key  string        // "" is "k"
		want Decision      // Limit and Source are filled in
	}
	allowed := func(remaining int, reset time.Duration) Decision {
		return Decision{Allowed: true, Remaining: remaining, ResetAfter: reset}
	}
	refused := func(retry, reset time.Duration) Decision {
		return Decision{RetryAfter: retry, ResetAfter: reset}
	}
	third := time.Second / 3 // 333,333,333ns: the interval of 3 per second, truncated
	tests := []struct {
		name  string
		limit Limit
		steps []step
	}{
		{
			name:  "burst then one per interval",
			limit: Limit{Rate: 1, Burst: 3, Period: time.Second},
			steps: []step{
				{at: 0, want: allowed(2, 1*time.Second)},
				{at: 0, want: allowed(1, 2*time.Second)},
				{at: 0, want: allowed(0, 3*time.Second)},
				{at: 0, want: refused(1*time.Second, 3*time.Second)},
				{at: 500 * time.Millisecond, want: refused(500*time.Millisecond, 2500*time.Millisecond)},
				{at: 1 * time.Second, want: allowed(0, 3*time.Second)},
				{at: 1 * time.Second, want: refused(1*time.Second, 3*time.Second)},
				// Two intervals later one is back beyond the one spent.
				{at: 3 * time.Second, want: allowed(1, 2*time.Second)},
				// Long idle: the full burst again, as for a new key.
				{at: time.Minute, want: allowed(2, 1*time.Second)},
			},
		},
		{
			name:  "burst of one spaces requests by the interval",
			limit: Limit{Rate: 10, Burst: 1, Period: time.Second},
			steps: []step{
				{at: 0, want: allowed(0, 100*time.Millisecond)},
				{at: 50 * time.Millisecond, want: refused(50*time.Millisecond, 50*time.Millisecond)},
				{at: 99 * time.Millisecond, want: refused(1*time.Millisecond, 1*time.Millisecond)},
				{at: 100 * time.Millisecond, want: allowed(0, 100*time.Millisecond)},
				{at: 250 * time.Millisecond, want: allowed(0, 100*time.Millisecond)},
			},
		},
		{
			name:  "rate that does not divide the period",
			limit: Limit{Rate: 3, Burst: 2, Period: time.Second},
			steps: []step{
				{at: 0, want: allowed(1, third)},
				{at: 0, want: allowed(0, 2*third)},
				{at: 0, want: refused(third, 2*third)},
				{at: third, want: allowed(0, 2*third)},
			},
		},
		{
			name:  "burst larger than rate",
			limit: Limit{Rate: 100, Burst: 200, Period: time.Second},
			steps: []step{
				{at: 0, want: allowed(199, 10*time.Millisecond)},
				// Half a second of idling refills 50 of the 1 spent, capped at the burst.
				{at: 500 * time.Millisecond, want: allowed(199, 10*time.Millisecond)},
			},
		},
		{
			name:  "keys are independent",
			limit: Limit{Rate: 1, Burst: 1, Period: time.Hour},
			steps: []step{
				{at: 0, key: "a", want: allowed(0, time.Hour)},
				{at: 0, key: "a", want: refused(time.Hour, time.Hour)},
				{at: 0, key: "b", want: allowed(0, time.Hour)},
				{at: time.Minute, key: "a", want: refused(59*time.Minute, 59*time.Minute)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newLocalStore()
			for i, st := range tt.steps {
				key := st.key
				if key == "" {
					key = "k"
				}
				want := st.want
				want.Limit, want.Source = tt.limit, SourceLocal
				got := s.allow(key, tt.limit, t0.Add(st.at))
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("step %d (key %s at +%v): decision mismatch (-want +got):\n%s", i, key, st.at, diff)
				}
			}
		})
	}
}

// TestLocalGCRAConcurrent checks that the shard lock makes the budget
// exact under contention: a burst of 10 is 10, whatever the interleaving.
func TestLocalGCRAConcurrent(t *testing.T) {
	s := newLocalStore()
	limit := Limit{Rate: 1, Burst: 10, Period: time.Hour}
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 10 {
				if s.allow("k", limit, time.Now()).Allowed {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != limit.Burst {
		t.Errorf("allowed %d of 640 requests, want exactly the burst, %d", allowed, limit.Burst)
	}
}

// keyInShard finds a key that s places in shard i, so that a test can
// reach every shard.
func keyInShard(s *localStore, i int) string {
	for n := 0; ; n++ {
		k := fmt.Sprintf("probe-%d", n)
		if maphash.String(s.seed, k)%localShards == uint64(i) {
			return k
		}
	}
}

func TestLocalEvictsIdleKeys(t *testing.T) {
	s := newLocalStore()
	short := Limit{Rate: 1, Burst: 5, Period: time.Second} // one request: full again after 1s
	long := Limit{Rate: 1, Burst: 5, Period: time.Hour}    // one request: full again after 1h
	const n = 500
	for i := range n {
		s.allow(fmt.Sprintf("short-%d", i), short, t0)
		s.allow(fmt.Sprintf("long-%d", i), long, t0)
	}
	if got := s.len(); got != 2*n {
		t.Fatalf("holding %d keys after %d distinct requests, want %d", got, 2*n, 2*n)
	}

	// A sweep is due on every shard; touching each one runs it.
	later := t0.Add(sweepEvery + time.Second)
	for i := range localShards {
		s.allow(keyInShard(s, i), short, later)
	}
	if got, want := s.len(), n+localShards; got != want {
		t.Errorf("holding %d keys after the sweep, want %d (the long keys, whose budget is not full yet, and one probe per shard)", got, want)
	}
	for i := range n {
		k := fmt.Sprintf("long-%d", i)
		sh := &s.shards[maphash.String(s.seed, k)%localShards]
		if _, ok := sh.tat[k]; !ok {
			t.Fatalf("%s was evicted before its budget was full again", k)
		}
	}
	// Eviction forgets nothing that matters: an evicted key has its full
	// burst, as it would have had anyway.
	if d := s.allow("short-0", short, later); !d.Allowed || d.Remaining != short.Burst-1 {
		t.Errorf("evicted key: got %+v, want allowed with %d remaining", d, short.Burst-1)
	}
	// A long key keeps its count: 4 left of 5, minus this one.
	if d := s.allow("long-0", long, later); !d.Allowed || d.Remaining != 3 {
		t.Errorf("kept key: got %+v, want allowed with 3 remaining", d)
	}
}

func TestLimitValidate(t *testing.T) {
	tests := []struct {
		limit Limit
		ok    bool
	}{
		{Limit{Rate: 100, Burst: 200, Period: time.Second}, true},
		{Limit{Rate: 1, Burst: 1, Period: time.Nanosecond}, true},
		{Limit{}, false},
		{Limit{Rate: 0, Burst: 1, Period: time.Second}, false},
		{Limit{Rate: 1, Burst: 0, Period: time.Second}, false},
		{Limit{Rate: 1, Burst: 1, Period: 0}, false},
		{Limit{Rate: -1, Burst: 1, Period: time.Second}, false},
		{Limit{Rate: 2, Burst: 1, Period: time.Nanosecond}, false},            // interval under 1ns
		{Limit{Rate: 1, Burst: 1 << 40, Period: 24 * time.Hour * 365}, false}, // overflows
	}
	for _, tt := range tests {
		err := tt.limit.validate()
		if (err == nil) != tt.ok {
			t.Errorf("%v: validate() = %v, want ok=%v", tt.limit, err, tt.ok)
		}
	}
}
