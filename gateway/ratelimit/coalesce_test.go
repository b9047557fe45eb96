package ratelimit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/testinfra/redistest"
)

// scriptCalls counts the rate scripts Redis ran, and holds the first one
// until release is closed.
type scriptCalls struct {
	ran     atomic.Int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (h *scriptCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		h.once.Do(func() {
			close(h.entered)
			<-h.release
		})
		err := next(ctx, cmd)
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			h.ran.Add(1) // a script that ran, not go-redis loading it
		}
		return err
	}
}

var _ redis.Hook = (*scriptCalls)(nil)

// queueBehindHeldCall starts one request of key and holds its Redis call,
// then sends n more of key and waits until all of them queue behind it.
// Once hook.release is closed, results yields the n+1 answers.
func queueBehindHeldCall(t *testing.T, key string, limit ratelimit.Limit, n int) (r *rig, hook *scriptCalls, results <-chan result) {
	t.Helper()
	rdb := client(t, redistest.URL(t))
	hook = &scriptCalls{entered: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	r = newRig(t, rdb, ratelimit.Options{Prefix: prefix(t), RedisTimeout: patient})
	out := make(chan result, n+1)
	send := func() {
		d, err := r.Allow(context.Background(), key, limit)
		out <- result{d, err}
	}
	go send()
	<-hook.entered
	for range n {
		go send()
	}
	poll(t, 10*time.Second, "every request queues behind the first call", func() bool {
		return ratelimit.QueuedBehind(r.Limiter, key, limit) == n
	})
	return r, hook, out
}

// The requests of one key that arrive while its call is in flight share
// one call after it, get a token each, and learn distinct remainders.
func TestRequestsOfOneKeyShareCalls(t *testing.T) {
	t.Parallel()
	limit := ratelimit.Limit{Rate: 1, Burst: 100, Period: time.Hour}
	const queued = 20
	r, hook, results := queueBehindHeldCall(t, "busy", limit, queued)
	close(hook.release)

	remaining := map[int]bool{}
	for range queued + 1 {
		res := <-results
		if res.err != nil || !res.d.Allowed || res.d.Source != ratelimit.SourceRedis {
			t.Fatalf("Allow: %+v, %v; want allowed by Redis", res.d, res.err)
		}
		if remaining[res.d.Remaining] {
			t.Errorf("two requests both left %d remaining", res.d.Remaining)
		}
		remaining[res.d.Remaining] = true
	}
	for i := 100 - queued - 1; i < 100; i++ {
		if !remaining[i] {
			t.Errorf("no request left %d remaining; got %v", i, remaining)
		}
	}
	if got := hook.ran.Load(); got != 2 {
		t.Errorf("Redis ran %d scripts for %d requests, want 2: the first alone, the queued together", got, queued+1)
	}
	if got := ratelimit.QueuedBehind(r.Limiter, "busy", limit); got != 0 {
		t.Errorf("%d requests still queued after every answer", got)
	}
}

// When fewer tokens are left than requests queued, the earliest get them
// and the rest are refused with a time to retry; the budget is never
// overdrawn.
func TestSharedCallNeverOverdraws(t *testing.T) {
	t.Parallel()
	limit := ratelimit.Limit{Rate: 1, Burst: 5, Period: time.Hour}
	const queued = 12
	_, hook, results := queueBehindHeldCall(t, "edge", limit, queued)
	close(hook.release)

	allowed := 0
	for range queued + 1 {
		res := <-results
		if res.err != nil {
			t.Fatalf("Allow: %v", res.err)
		}
		if res.d.Allowed {
			allowed++
			continue
		}
		if res.d.RetryAfter <= 0 || res.d.RetryAfter > time.Hour {
			t.Errorf("refused with RetryAfter %v, want within (0, 1h]", res.d.RetryAfter)
		}
	}
	if allowed != limit.Burst {
		t.Errorf("allowed %d of %d, want exactly the burst, %d", allowed, queued+1, limit.Burst)
	}
}

// A request whose caller gives up while queued answers at once with the
// caller's error, and the call it waited on still serves the others.
func TestQueuedCallerGivingUp(t *testing.T) {
	t.Parallel()
	rdb := client(t, redistest.URL(t))
	hook := &scriptCalls{entered: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hook)
	r := newRig(t, rdb, ratelimit.Options{Prefix: prefix(t), RedisTimeout: patient})
	limit := ratelimit.Limit{Rate: 1000, Burst: 1000, Period: time.Second}

	first := make(chan result, 1)
	go func() {
		d, err := r.Allow(context.Background(), "k", limit)
		first <- result{d, err}
	}()
	<-hook.entered
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := r.Allow(ctx, "k", limit)
		gaveUp <- err
	}()
	poll(t, 10*time.Second, "the second request queues", func() bool { return ratelimit.QueuedBehind(r.Limiter, "k", limit) == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued request whose caller gave up: err %v, want the context's error", err)
	}
	close(hook.release)
	if res := <-first; res.err != nil || !res.d.Allowed {
		t.Fatalf("first request: %+v, %v", res.d, res.err)
	}
	if d, err := r.Allow(context.Background(), "k", limit); err != nil || !d.Allowed {
		t.Fatalf("a later request: %+v, %v", d, err)
	}
}
