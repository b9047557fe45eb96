// Package ratelimit limits requests per API key for gatewayd. The budget is
// counted in Redis with GCRA (go-redis/redis_rate), so every gateway node
// draws on one shared budget per key. When Redis cannot be reached the
// limiter answers as Options.WhenRedisDown says: from a per-process GCRA
// (each node then limits on its own), by letting everything through, or by
// refusing with an errs.Unavailable error. An outage raises one alert, not
// one per request, and a dead Redis is retried only every
// Options.RetryRedisEvery so that it does not slow every request down.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/shared/errs"
)

// Limit is a GCRA limit: Rate requests per Period on average, and at most
// Burst at once. Limit{Rate: 100, Burst: 200, Period: time.Second} lets a
// quiet key send 200 requests at once, then 100 a second.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// String describes the limit for logs and errors.
func (l Limit) String() string {
	return fmt.Sprintf("%d per %s (burst %d)", l.Rate, l.Period, l.Burst)
}

// interval is GCRA's emission interval: the time one request costs.
func (l Limit) interval() time.Duration {
	return l.Period / time.Duration(l.Rate)
}

// validate rejects limits GCRA cannot count. A bad limit is a bug in the
// gateway's configuration, not the caller's fault, so the error is
// unclassified (an internal error).
func (l Limit) validate() error {
	if l.Rate < 1 || l.Burst < 1 || l.Period <= 0 {
		return fmt.Errorf("ratelimit: invalid limit %v: rate, burst and period must be positive", l)
	}
	t := l.interval()
	if t <= 0 {
		return fmt.Errorf("ratelimit: invalid limit %v: one request would cost less than a nanosecond", l)
	}
	if int64(l.Burst) > math.MaxInt64/int64(t) {
		return fmt.Errorf("ratelimit: invalid limit %v: burst times interval overflows", l)
	}
	return nil
}

// Source says who counted a Decision.
type Source string

// The sources of a Decision.
const (
	SourceRedis Source = "redis" // the budget shared by every gateway node
	SourceLocal Source = "local" // this process's own budget, while Redis is down
	SourceOpen  Source = "open"  // nobody: Redis is down and WhenRedisDown is DownAllow
)

// Decision is the answer for one request.
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Limit is the limit the request was counted against.
	Limit Limit
	// Remaining is how many more requests the key may send at once. It is
	// 0 for an open decision, which counted nothing.
	Remaining int
	// RetryAfter is how long a refused key must wait before its next
	// request is allowed; 0 when allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the key's full burst is available again.
	ResetAfter time.Duration
	// Source says who counted the request.
	Source Source
}

// Err returns nil when d allows the request, and otherwise an error of kind
// errs.RateLimited (429) saying when to retry. The Retry-After header is
// WriteHeaders' job.
func (d Decision) Err() error {
	if d.Allowed {
		return nil
	}
	return errs.Errorf(errs.RateLimited, "rate limit of %d requests per %s exceeded: retry in %d s", d.Limit.Rate, d.Limit.Period, retryAfterSeconds(d.RetryAfter))
}

// Options configures a Limiter. The zero value is usable.
type Options struct {
	// Prefix starts every key the limiter writes, so that tenants and tests
	// can share a Redis. Default "txfence:rl:". redis_rate adds its own
	// "rate:" in front, so a key k is stored as "rate:" + Prefix + k.
	Prefix string
	// WhenRedisDown says how to answer while Redis cannot be reached.
	// Default DownLocal.
	WhenRedisDown DownMode
	// RedisTimeout bounds each call to Redis, so that a hung server cannot
	// stall requests. Default 50ms.
	RedisTimeout time.Duration
	// RetryRedisEvery is how long the limiter answers from its fallback
	// after a failed call before it tries Redis again. Default 1s.
	RetryRedisEvery time.Duration
	// Logger receives the outage alert and the recovery line. Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers them on a fresh
	// registry of their own (tests).
	Registerer prometheus.Registerer
}

// Default option values.
const (
	DefaultPrefix          = "txfence:rl:"
	DefaultRedisTimeout    = 50 * time.Millisecond
	DefaultRetryRedisEvery = time.Second
)

// errRedisDown is the cause of a DownDeny refusal made without calling
// Redis, during the cool-down after a failure.
var errRedisDown = errors.New("redis failed recently; not retried until the cool-down ends")

// Limiter counts requests per key. It is safe for concurrent use.
type Limiter struct {
	rate    *redis_rate.Limiter
	opts    Options
	log     *slog.Logger
	local   *localStore
	metrics *metrics

	// epoch anchors the monotonic nanosecond clock of the fields below.
	epoch time.Time
	// state is a generation count shifted left by one, with the low bit set
	// while Redis is down. A request remembers the state it started in, and
	// only the request whose compare-and-swap moves the state on logs the
	// change: one alert per outage and one recovery line, however many
	// requests fail or succeed at once, and a late answer to a request sent
	// before the outage cannot end it.
	state atomic.Uint64
	// nextTry is when (nanoseconds since epoch) the next request may probe
	// Redis while it is down; the request that moves it on is the only probe.
	nextTry atomic.Int64
	// downSince is when (nanoseconds since epoch) the current outage began.
	downSince atomic.Int64
	// transition serializes the rare state changes, so that the gauge and
	// the log follow the state in order even when Redis flaps.
	transition sync.Mutex
	// calls coalesces concurrent requests of one key (see coalesce.go).
	calls callQueues
}

const downBit = 1

// New returns a Limiter counting in rdb. rdb must respect context
// deadlines (redis.Options.ContextTimeoutEnabled, or
// context_timeout_enabled=true in a Redis URL): without them go-redis
// ignores RedisTimeout and a hung Redis holds every request for the
// client's read timeout, so New refuses such a client.
func New(rdb redis.UniversalClient, opts Options) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("ratelimit: a Redis client is required")
	}
	if !respectsDeadlines(rdb) {
		return nil, errors.New("ratelimit: the Redis client ignores context deadlines, so a hung Redis would stall requests; set ContextTimeoutEnabled")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.RedisTimeout <= 0 {
		opts.RedisTimeout = DefaultRedisTimeout
	}
	if opts.RetryRedisEvery <= 0 {
		opts.RetryRedisEvery = DefaultRetryRedisEvery
	}
	if opts.WhenRedisDown > DownDeny {
		return nil, fmt.Errorf("ratelimit: unknown WhenRedisDown %v", opts.WhenRedisDown)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Limiter{
		rate:    redis_rate.NewLimiter(rdb),
		opts:    opts,
		log:     opts.Logger,
		local:   newLocalStore(),
		metrics: m,
		epoch:   time.Now(),
		calls:   callQueues{byKey: make(map[queueKey]*callQueue)},
	}, nil
}

// respectsDeadlines reports whether rdb passes context deadlines on to its
// sockets. Clients of other types are trusted.
func respectsDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Allow counts one request for key against limit. key identifies the
// caller (an API key's id, never its secret). The error is non-nil when
// limit is invalid, when ctx ends first (which is not a Redis outage), and
// in DownDeny mode while Redis is down, as an errs.Unavailable error the
// caller answers with 503.
func (l *Limiter) Allow(ctx context.Context, key string, limit Limit) (Decision, error) {
	if err := limit.validate(); err != nil {
		return Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, fmt.Errorf("ratelimit: %w", err)
	}
	s := l.state.Load()
	if s&downBit != 0 && !l.claimProbe() {
		return l.fallback(key, limit, errRedisDown)
	}
	d, err := l.allowRedis(ctx, key, limit)
	if err == nil {
		if s&downBit != 0 {
			l.recovered(s)
		}
		l.metrics.count(d)
		return d, nil
	}
	if ctx.Err() != nil {
		// The caller gave up, so the failure says nothing about Redis.
		return Decision{}, fmt.Errorf("ratelimit: %w", ctx.Err())
	}
	l.failed(s, err)
	return l.fallback(key, limit, err)
}

// fallback answers without Redis, as WhenRedisDown says.
func (l *Limiter) fallback(key string, limit Limit, cause error) (Decision, error) {
	switch l.opts.WhenRedisDown {
	case DownAllow:
		d := Decision{Allowed: true, Limit: limit, Source: SourceOpen}
		l.metrics.count(d)
		return d, nil
	case DownDeny:
		l.metrics.unavailable()
		return Decision{}, errs.Wrap(errs.Unavailable, "rate limiting is unavailable; try again later", cause)
	default:
		d := l.local.allow(key, limit, time.Now())
		l.metrics.count(d)
		return d, nil
	}
}

// mono is the limiter's monotonic clock.
func (l *Limiter) mono() int64 {
	return int64(time.Since(l.epoch))
}

// claimProbe reports whether this request may try Redis while it is down:
// once the cool-down has passed, to the one request that moves it on.
func (l *Limiter) claimProbe() bool {
	next := l.nextTry.Load()
	now := l.mono()
	return now >= next && l.nextTry.CompareAndSwap(next, now+int64(l.opts.RetryRedisEvery))
}

// failed records a failed Redis call made in state s.
func (l *Limiter) failed(s uint64, err error) {
	now := l.mono()
	l.nextTry.Store(now + int64(l.opts.RetryRedisEvery))
	if s&downBit != 0 {
		return
	}
	l.transition.Lock()
	defer l.transition.Unlock()
	if !l.state.CompareAndSwap(s, (s>>1+1)<<1|downBit) {
		return
	}
	l.downSince.Store(now)
	l.metrics.redisUp.Set(0)
	l.log.Error("rate limits: Redis is unreachable, answering from the fallback until it is back",
		"alert", true, "when_redis_down", l.opts.WhenRedisDown.String(), "retry_every", l.opts.RetryRedisEvery.String(), "redis_timeout", l.opts.RedisTimeout.String(), "err", err)
}

// recovered records a successful Redis call made in the down state s.
func (l *Limiter) recovered(s uint64) {
	l.transition.Lock()
	defer l.transition.Unlock()
	if !l.state.CompareAndSwap(s, (s>>1+1)<<1) {
		return
	}
	l.metrics.redisUp.Set(1)
	l.log.Info("rate limits: Redis is back, counting there again",
		"down_for", time.Duration(l.mono()-l.downSince.Load()).String())
}
