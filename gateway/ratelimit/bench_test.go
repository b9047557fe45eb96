package ratelimit_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/testinfra/redistest"
)

// BenchmarkAllow measures one decision: "redis" counts in a real Redis
// (one round trip running the GCRA script), "local" in the in-process
// fallback while Redis is down. Each goroutine has a key of its own, and
// the limit is high enough that most requests are allowed, as in normal
// traffic.
func BenchmarkAllow(b *testing.B) {
	limit := ratelimit.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
	run := func(b *testing.B, l *ratelimit.Limiter, want ratelimit.Source) {
		var next atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			key := "bench-" + strconv.FormatInt(next.Add(1), 10)
			ctx := context.Background()
			for pb.Next() {
				d, err := l.Allow(ctx, key, limit)
				if err != nil || d.Source != want {
					b.Fatalf("Allow: %+v, %v; want a decision from %s", d, err, want)
				}
			}
		})
	}
	quiet := slog.New(slog.DiscardHandler)

	b.Run("redis", func(b *testing.B) {
		l, err := ratelimit.New(client(b, redistest.URL(b)), ratelimit.Options{Prefix: prefix(b), Logger: quiet, RedisTimeout: patient})
		if err != nil {
			b.Fatal(err)
		}
		run(b, l, ratelimit.SourceRedis)
	})

	b.Run("local", func(b *testing.B) {
		u, err := redistest.Start(b)
		if err != nil {
			b.Fatal(err)
		}
		l, err := ratelimit.New(client(b, u), ratelimit.Options{Logger: quiet, RetryRedisEvery: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		redistest.Stop(b, u)
		// The first request finds Redis gone; the rest stay local for the hour.
		if d, err := l.Allow(context.Background(), "warm-up", limit); err != nil || d.Source != ratelimit.SourceLocal {
			b.Fatalf("after stopping Redis: %+v, %v; want a local decision", d, err)
		}
		run(b, l, ratelimit.SourceLocal)
	})
}
