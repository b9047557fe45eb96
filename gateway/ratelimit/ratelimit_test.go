package ratelimit_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/redistest"
)

// patient is a Redis timeout for tests that check counting, not outages:
// under -race on a busy machine a healthy Redis can take longer than the
// production default, and a fallback would then spoil an exact count.
const patient = 30 * time.Second

// client connects to the Redis at u the way the gateway must: with context
// deadlines honoured.
func client(t testing.TB, u string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// startRedis starts a throwaway redis-server this test owns and may stop.
func startRedis(t *testing.T) string {
	t.Helper()
	u, err := redistest.Start(t)
	if err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	return u
}

// restartRedis starts a new, empty redis-server on the port of u, as a
// Redis that comes back after an outage. It is stopped when t ends.
func restartRedis(t *testing.T, u string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	// The same command line as redistest.Start.
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", parsed.Port(), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("restart redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	poll(t, 10*time.Second, "restarted redis-server answers PING", func() bool { return redistest.Ping(u) == nil })
}

// poll calls cond until it holds, failing t after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	wait.For(t, timeout, what, cond)
}

// prefix is a key prefix of this test's own: unique per run too, since
// limits per hour outlive a run in a shared Redis.
func prefix(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "txfence:rl:test:" + t.Name() + ":" + hex.EncodeToString(b[:]) + ":"
}

// countLogs returns how many logged records match level and, when alert
// is true, carry alert=true.
func countLogs(t *testing.T, logs *logtest.Buffer, level string, alert bool) int {
	t.Helper()
	n := 0
	for _, line := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if rec["level"] == level && (!alert || rec["alert"] == true) {
			n++
		}
	}
	return n
}

// rig is a Limiter with its logs and metrics at hand.
type rig struct {
	*ratelimit.Limiter
	logs *logtest.Buffer
	reg  *prometheus.Registry
}

func newRig(t testing.TB, rdb redis.UniversalClient, opts ratelimit.Options) *rig {
	t.Helper()
	r := &rig{logs: &logtest.Buffer{}, reg: prometheus.NewRegistry()}
	opts.Logger = slog.New(slog.NewJSONHandler(r.logs, nil))
	opts.Registerer = r.reg
	if opts.Prefix == "" {
		opts.Prefix = prefix(t)
	}
	l, err := ratelimit.New(rdb, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	r.Limiter = l
	return r
}

// metric returns the value of the gauge or counter name with labels, or -1
// when there is no such series.
func (r *rig) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

func (r *rig) redisUp(t *testing.T) float64 {
	t.Helper()
	return r.metric(t, "txfence_gateway_ratelimit_redis_up", nil)
}

func (r *rig) decisions(t *testing.T, source, outcome string) float64 {
	t.Helper()
	return r.metric(t, "txfence_gateway_ratelimit_decisions_total", map[string]string{"source": source, "outcome": outcome})
}

type result struct {
	d   ratelimit.Decision
	err error
}

// hammer calls allow from goroutines×calls concurrent callers and returns
// every answer.
func hammer(goroutines, calls int, allow func() (ratelimit.Decision, error)) []result {
	out := make(chan result, goroutines*calls)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range calls {
				d, err := allow()
				out <- result{d, err}
			}
		})
	}
	wg.Wait()
	close(out)
	var rs []result
	for r := range out {
		rs = append(rs, r)
	}
	return rs
}

// tally fails t on any error and counts allowed decisions per source.
func tally(t *testing.T, rs []result) map[ratelimit.Source]int {
	t.Helper()
	allowed := map[ratelimit.Source]int{}
	for _, r := range rs {
		if r.err != nil {
			t.Fatalf("Allow: %v", r.err)
		}
		if r.d.Allowed {
			allowed[r.d.Source]++
		}
	}
	return allowed
}

// redisKeys counts the keys of Redis at rdb that contain p.
func redisKeys(t *testing.T, rdb *redis.Client, p string) int {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "*"+p+"*").Result()
	if err != nil {
		t.Fatalf("KEYS: %v", err)
	}
	return len(keys)
}

func TestAllowExactBurstUnderConcurrency(t *testing.T) {
	t.Parallel()
	r := newRig(t, client(t, redistest.URL(t)), ratelimit.Options{RedisTimeout: patient})
	limit := ratelimit.Limit{Rate: 1, Burst: 10, Period: time.Hour}
	ctx := context.Background()

	rs := hammer(64, 10, func() (ratelimit.Decision, error) { return r.Allow(ctx, "key", limit) })

	remaining := map[int]bool{}
	for _, res := range rs {
		if res.err != nil {
			t.Fatalf("Allow: %v", res.err)
		}
		d := res.d
		if d.Source != ratelimit.SourceRedis {
			t.Fatalf("decision from %q, want redis: %+v", d.Source, d)
		}
		if d.Limit != limit {
			t.Errorf("decision carries limit %v, want %v", d.Limit, limit)
		}
		rec := httptest.NewRecorder()
		d.WriteHeaders(rec)
		h := rec.Header()
		if got, want := h.Get("RateLimit-Limit"), "10"; got != want {
			t.Errorf("RateLimit-Limit = %q, want %q", got, want)
		}
		if got, want := h.Get("RateLimit-Remaining"), strconv.Itoa(d.Remaining); got != want {
			t.Errorf("RateLimit-Remaining = %q, want %q", got, want)
		}
		reset, err := strconv.Atoi(h.Get("RateLimit-Reset"))
		// The key's budget was spent within this test: full again within
		// at most a burst's worth of hours, and not yet.
		if err != nil || reset < 1 || reset > 10*3600 || time.Duration(reset)*time.Second < d.ResetAfter {
			t.Errorf("RateLimit-Reset = %q for ResetAfter %v: want whole seconds rounded up, within 10h", h.Get("RateLimit-Reset"), d.ResetAfter)
		}
		if d.Allowed {
			if remaining[d.Remaining] {
				t.Errorf("two allowed requests both left %d remaining", d.Remaining)
			}
			remaining[d.Remaining] = true
			if d.RetryAfter != 0 || h.Get("Retry-After") != "" {
				t.Errorf("allowed decision has RetryAfter %v, Retry-After header %q; want neither", d.RetryAfter, h.Get("Retry-After"))
			}
			if err := d.Err(); err != nil {
				t.Errorf("allowed decision: Err() = %v", err)
			}
			continue
		}
		if d.RetryAfter <= 0 || d.RetryAfter > time.Hour || d.Remaining != 0 {
			t.Errorf("refused decision: RetryAfter %v, Remaining %d; want within (0, 1h] and 0", d.RetryAfter, d.Remaining)
		}
		retry, err := strconv.Atoi(h.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 3600 || time.Duration(retry)*time.Second < d.RetryAfter || time.Duration(retry-1)*time.Second >= d.RetryAfter {
			t.Errorf("Retry-After = %q for RetryAfter %v: want it rounded up to whole seconds", h.Get("Retry-After"), d.RetryAfter)
		}
		if !errs.Is(d.Err(), errs.RateLimited) {
			t.Errorf("refused decision: Err() = %v, want kind RateLimited", d.Err())
		}
	}
	if len(remaining) != limit.Burst {
		t.Fatalf("allowed %d of %d requests, want exactly the burst, %d", len(remaining), len(rs), limit.Burst)
	}
	// Each allowed request left one less: 9, 8, ... 0.
	for i := range limit.Burst {
		if !remaining[i] {
			t.Errorf("no allowed request left %d remaining; got %v", i, remaining)
		}
	}
	if got := r.decisions(t, "redis", "allowed"); got != 10 {
		t.Errorf("decisions_total{redis,allowed} = %v, want 10", got)
	}
	if got := r.decisions(t, "redis", "refused"); got != 630 {
		t.Errorf("decisions_total{redis,refused} = %v, want 630", got)
	}
}

func TestNodesShareTheBudget(t *testing.T) {
	t.Parallel()
	u := redistest.URL(t)
	p := prefix(t)
	// Two gateway nodes: their own clients, limiters and metrics, one Redis.
	a := newRig(t, client(t, u), ratelimit.Options{Prefix: p, RedisTimeout: patient})
	b := newRig(t, client(t, u), ratelimit.Options{Prefix: p, RedisTimeout: patient})
	limit := ratelimit.Limit{Rate: 1, Burst: 10, Period: time.Hour}
	ctx := context.Background()

	var ra, rb []result
	var wg sync.WaitGroup
	wg.Go(func() { ra = hammer(32, 10, func() (ratelimit.Decision, error) { return a.Allow(ctx, "key", limit) }) })
	wg.Go(func() { rb = hammer(32, 10, func() (ratelimit.Decision, error) { return b.Allow(ctx, "key", limit) }) })
	wg.Wait()

	na, nb := tally(t, ra), tally(t, rb)
	if total := na[ratelimit.SourceRedis] + nb[ratelimit.SourceRedis]; total != limit.Burst || len(na)+len(nb) > 2 {
		t.Errorf("nodes allowed %v and %v: want exactly %d in total, all from redis", na, nb, limit.Burst)
	}
}

func TestKeysAndPrefixesAreIndependent(t *testing.T) {
	t.Parallel()
	rdb := client(t, redistest.URL(t))
	r := newRig(t, rdb, ratelimit.Options{RedisTimeout: patient})
	limit := ratelimit.Limit{Rate: 1, Burst: 3, Period: time.Hour}
	ctx := context.Background()

	for i := range 3 {
		if d, err := r.Allow(ctx, "a", limit); err != nil || !d.Allowed {
			t.Fatalf("request %d for a: %+v, %v; want allowed", i, d, err)
		}
	}
	if d, err := r.Allow(ctx, "a", limit); err != nil || d.Allowed || d.Source != ratelimit.SourceRedis {
		t.Fatalf("a after its burst: %+v, %v; want refused by redis", d, err)
	}
	if d, err := r.Allow(ctx, "b", limit); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Errorf("b after a's burst: %+v, %v; want allowed with 2 remaining", d, err)
	}

	// Another tenant's limiter on the same Redis counts on its own.
	other := newRig(t, rdb, ratelimit.Options{RedisTimeout: patient})
	if d, err := other.Allow(ctx, "a", limit); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Errorf("a under another prefix: %+v, %v; want allowed with 2 remaining", d, err)
	}

	// The keys live under the prefix.
	p := prefix(t)
	pr := newRig(t, rdb, ratelimit.Options{Prefix: p, RedisTimeout: patient})
	if _, err := pr.Allow(ctx, "c", limit); err != nil {
		t.Fatal(err)
	}
	if n := redisKeys(t, rdb, p); n != 1 {
		t.Errorf("%d Redis keys contain the prefix %q, want 1", n, p)
	}
}

// TestRedisOutage stops Redis under a limiter in each mode, checks the
// fallback, the single alert and the gauge, then brings Redis back on the
// same port and checks that counting returns there with one recovery line.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	limit := ratelimit.Limit{Rate: 1, Burst: 5, Period: time.Hour}
	tests := []struct {
		mode   ratelimit.DownMode
		during func(t *testing.T, r *rig, rs []result)
	}{
		{
			mode: ratelimit.DownLocal,
			during: func(t *testing.T, r *rig, rs []result) {
				allowed := tally(t, rs)
				for _, res := range rs {
					if res.d.Source != ratelimit.SourceLocal {
						t.Fatalf("decision from %q during the outage, want local", res.d.Source)
					}
				}
				// The process starts a budget of its own: the full burst,
				// whatever Redis had counted.
				if allowed[ratelimit.SourceLocal] != limit.Burst {
					t.Errorf("allowed %d of %d while Redis was down, want exactly the burst, %d", allowed[ratelimit.SourceLocal], len(rs), limit.Burst)
				}
				if got := r.decisions(t, "local", "refused"); got != float64(len(rs)-limit.Burst) {
					t.Errorf("decisions_total{local,refused} = %v, want %d", got, len(rs)-limit.Burst)
				}
			},
		},
		{
			mode: ratelimit.DownAllow,
			during: func(t *testing.T, r *rig, rs []result) {
				for _, res := range rs {
					if res.err != nil || !res.d.Allowed || res.d.Source != ratelimit.SourceOpen {
						t.Fatalf("during the outage: %+v, %v; want allowed, open", res.d, res.err)
					}
				}
				rec := httptest.NewRecorder()
				rs[0].d.WriteHeaders(rec)
				if len(rec.Header()) != 0 {
					t.Errorf("an open decision wrote headers %v, want none", rec.Header())
				}
				if got := r.decisions(t, "open", "allowed"); got != float64(len(rs)) {
					t.Errorf("decisions_total{open,allowed} = %v, want %d", got, len(rs))
				}
			},
		},
		{
			mode: ratelimit.DownDeny,
			during: func(t *testing.T, r *rig, rs []result) {
				for _, res := range rs {
					if !errs.Is(res.err, errs.Unavailable) || res.d.Allowed {
						t.Fatalf("during the outage: %+v, %v; want an Unavailable error", res.d, res.err)
					}
				}
				if got := r.decisions(t, "none", "unavailable"); got != float64(len(rs)) {
					t.Errorf("decisions_total{none,unavailable} = %v, want %d", got, len(rs))
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			t.Parallel()
			u := startRedis(t)
			rdb := client(t, u)
			r := newRig(t, rdb, ratelimit.Options{
				WhenRedisDown:   tt.mode,
				RedisTimeout:    patient,
				RetryRedisEvery: 20 * time.Millisecond,
			})
			ctx := context.Background()
			allow := func() (ratelimit.Decision, error) { return r.Allow(ctx, "key", limit) }

			if d, err := allow(); err != nil || !d.Allowed || d.Source != ratelimit.SourceRedis {
				t.Fatalf("before the outage: %+v, %v; want allowed by redis", d, err)
			}
			if up := r.redisUp(t); up != 1 {
				t.Errorf("redis_up = %v before the outage, want 1", up)
			}

			redistest.Stop(t, u)
			tt.during(t, r, hammer(16, 5, allow))
			if n := countLogs(t, r.logs, "ERROR", true); n != 1 {
				t.Errorf("%d alert lines for one outage of 80 requests, want 1; logs:\n%s", n, r.logs)
			}
			if up := r.redisUp(t); up != 0 {
				t.Errorf("redis_up = %v during the outage, want 0", up)
			}
			if n := countLogs(t, r.logs, "INFO", false); n != 0 {
				t.Errorf("%d info lines while Redis is still down, want 0", n)
			}

			restartRedis(t, u)
			// The new server is empty, so a fresh key shows that counting
			// happens there again.
			poll(t, 30*time.Second, "decisions come from Redis again", func() bool {
				d, err := r.Allow(ctx, "after", limit)
				return err == nil && d.Source == ratelimit.SourceRedis
			})
			for range 3 {
				if d, err := r.Allow(ctx, "after", limit); err != nil || d.Source != ratelimit.SourceRedis {
					t.Fatalf("after recovery: %+v, %v; want a decision from redis", d, err)
				}
			}
			if n := redisKeys(t, rdb, "after"); n != 1 {
				t.Errorf("%d keys for 'after' in the restarted Redis, want 1", n)
			}
			if n := countLogs(t, r.logs, "INFO", false); n != 1 {
				t.Errorf("%d info lines after Redis came back, want 1; logs:\n%s", n, r.logs)
			}
			if n := countLogs(t, r.logs, "ERROR", true); n != 1 {
				t.Errorf("%d alert lines in all, want 1", n)
			}
			if up := r.redisUp(t); up != 1 {
				t.Errorf("redis_up = %v after recovery, want 1", up)
			}
		})
	}
}

// countEvals is a go-redis hook counting the rate limit script's calls.
type countEvals struct{ n atomic.Int64 }

func (c *countEvals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *countEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "eval" || name == "evalsha" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *countEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestDeadRedisIsNotCalledDuringCoolDown(t *testing.T) {
	t.Parallel()
	u := startRedis(t)
	rdb := client(t, u)
	evals := &countEvals{}
	rdb.AddHook(evals)
	r := newRig(t, rdb, ratelimit.Options{RetryRedisEvery: time.Hour})
	limit := ratelimit.Limit{Rate: 1, Burst: 5, Period: time.Hour}
	ctx := context.Background()
	redistest.Stop(t, u)

	if d, err := r.Allow(ctx, "key", limit); err != nil || d.Source != ratelimit.SourceLocal {
		t.Fatalf("first request after the stop: %+v, %v; want a local decision", d, err)
	}
	tried := evals.n.Load()
	if tried == 0 {
		t.Fatal("the first request did not try Redis")
	}
	rs := hammer(8, 25, func() (ratelimit.Decision, error) { return r.Allow(ctx, "key", limit) })
	if got := tally(t, rs)[ratelimit.SourceLocal]; got != limit.Burst-1 {
		t.Errorf("allowed %d during the cool-down, want the rest of the burst, %d", got, limit.Burst-1)
	}
	if got := evals.n.Load(); got != tried {
		t.Errorf("%d calls to Redis during the cool-down after the first failure, want none", got-tried)
	}
}

// hungRedis listens on loopback and accepts connections that never answer.
func hungRedis(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan struct{}, 1)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case acc <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), acc
}

// hungClient connects to a hung Redis with socket timeouts of an hour, so
// that only the context can end a call in time.
func hungClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  addr,
		DialTimeout:           time.Hour,
		ReadTimeout:           time.Hour,
		WriteTimeout:          time.Hour,
		PoolTimeout:           time.Hour,
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func TestHungRedisFallsBack(t *testing.T) {
	t.Parallel()
	addr, _ := hungRedis(t)
	// The default RedisTimeout: were it not applied, the call would wait
	// for the client's hour and the test binary's timeout would end it.
	r := newRig(t, hungClient(t, addr), ratelimit.Options{})
	limit := ratelimit.Limit{Rate: 1, Burst: 5, Period: time.Hour}

	d, err := r.Allow(context.Background(), "key", limit)
	if err != nil || !d.Allowed || d.Source != ratelimit.SourceLocal || d.Remaining != 4 {
		t.Fatalf("against a hung Redis: %+v, %v; want allowed by the local fallback, 4 remaining", d, err)
	}
	if n := countLogs(t, r.logs, "ERROR", true); n != 1 {
		t.Errorf("%d alert lines, want 1; logs:\n%s", n, r.logs)
	}
	if up := r.redisUp(t); up != 0 {
		t.Errorf("redis_up = %v, want 0", up)
	}
}

func TestCallerGivingUpIsNotAnOutage(t *testing.T) {
	t.Parallel()
	addr, accepted := hungRedis(t)
	// Redis's own timeout is long; the caller's deadline is what ends the call.
	r := newRig(t, hungClient(t, addr), ratelimit.Options{RedisTimeout: time.Hour})
	limit := ratelimit.Limit{Rate: 1, Burst: 5, Period: time.Hour}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := r.Allow(ctx, "key", limit)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Allow with the caller's deadline passed: %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-accepted:
	default:
		t.Fatal("the limiter never reached the hung Redis, so the test proved nothing")
	}

	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := r.Allow(cancelled, "key", limit); !errors.Is(err, context.Canceled) {
		t.Errorf("Allow with a cancelled context: %v, want context.Canceled", err)
	}

	if n := countLogs(t, r.logs, "ERROR", false); n != 0 {
		t.Errorf("%d error lines, want none: the caller gave up, Redis did not fail; logs:\n%s", n, r.logs)
	}
	if up := r.redisUp(t); up != 1 {
		t.Errorf("redis_up = %v, want 1", up)
	}
	for _, src := range []string{"redis", "local", "open", "none"} {
		for _, outcome := range []string{"allowed", "refused", "unavailable"} {
			if got := r.decisions(t, src, outcome); got > 0 {
				t.Errorf("decisions_total{%s,%s} = %v, want no decision counted", src, outcome, got)
			}
		}
	}
}

func TestNewRefusesClientIgnoringDeadlines(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := ratelimit.New(rdb, ratelimit.Options{}); err == nil {
		t.Error("New accepted a client without ContextTimeoutEnabled")
	}
	if _, err := ratelimit.New(nil, ratelimit.Options{}); err == nil {
		t.Error("New accepted a nil client")
	}
}

func TestNewRegistersMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rdb := client(t, "redis://127.0.0.1:1/0")
	if _, err := ratelimit.New(rdb, ratelimit.Options{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	// A second limiter on the same registry is a wiring mistake New reports.
	if _, err := ratelimit.New(rdb, ratelimit.Options{Registerer: reg}); err == nil {
		t.Error("a second limiter registered the same metrics without error")
	}
}

func TestInvalidLimit(t *testing.T) {
	rdb := client(t, "redis://127.0.0.1:1/0")
	r := newRig(t, rdb, ratelimit.Options{})
	_, err := r.Allow(context.Background(), "key", ratelimit.Limit{Rate: 0, Burst: 1, Period: time.Second})
	if err == nil || errs.KindOf(err) != errs.Internal || !strings.Contains(err.Error(), "invalid limit") {
		t.Errorf("Allow with a zero rate: %v, want an internal error naming the invalid limit", err)
	}
}

func TestParseDownMode(t *testing.T) {
	tests := []struct {
		in   string
		want ratelimit.DownMode
		ok   bool
	}{
		{"", ratelimit.DownLocal, true},
		{"local", ratelimit.DownLocal, true},
		{"allow", ratelimit.DownAllow, true},
		{"deny", ratelimit.DownDeny, true},
		{"Deny", 0, false},
		{"open", 0, false},
	}
	for _, tt := range tests {
		var m ratelimit.DownMode
		err := m.UnmarshalText([]byte(tt.in))
		if (err == nil) != tt.ok || (tt.ok && m != tt.want) {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v, ok=%v", tt.in, m, err, tt.want, tt.ok)
		}
		if tt.ok && tt.in != "" {
			text, err := m.MarshalText()
			if err != nil || string(text) != tt.in {
				t.Errorf("MarshalText(%v) = %q, %v; want %q", m, text, err, tt.in)
			}
		}
	}
	if _, err := ratelimit.DownMode(7).MarshalText(); err == nil {
		t.Error("MarshalText of an unknown mode succeeded")
	}
}
