package follow_test

import (
	"context"
	"testing"
	"time"

	"github.com/txfence/txfence/txmanager/follow"
)

// BenchmarkFollow measures the chain follower with 10,000 transactions
// tracked for one signer (broadcast as far as the store knows, never
// mined), on anvil and a real store:
//
//   - blocks: new empty blocks processed per second, and the RPC calls
//     each cost (from the follower's own counter);
//   - catch-up: a follower starting fresh (a restart after kill -9, a
//     takeover) until all 10,000 are tracked again, their receipts asked
//     for in batches: catchup-s.
func BenchmarkFollow(b *testing.B) {
	const tracked = 10_000
	r := newRig(b, 3)
	r.trackMany(b, tracked, 0)
	r.step(b)

	b.Run("blocks", func(b *testing.B) {
		clear(r.calls)
		var stepping time.Duration
		for b.Loop() {
			if err := r.node.Mine(context.Background(), 1); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			r.step(b)
			stepping += time.Since(start)
		}
		calls := 0
		for _, c := range r.calls {
			calls += c
		}
		b.ReportMetric(float64(b.N)/stepping.Seconds(), "blocks/s")
		b.ReportMetric(float64(calls)/float64(b.N), "rpc/block")
		b.ReportMetric(tracked, "tracked")
	})

	b.Run("catch-up", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			fresh := follow.New(r.cfg)
			start := time.Now()
			if err := fresh.Step(context.Background()); err != nil {
				b.Fatal(err)
			}
			total += time.Since(start)
		}
		b.ReportMetric(total.Seconds()/float64(b.N), "catchup-s")
		b.ReportMetric(tracked, "tracked")
	})
}
