package follow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/txfence/txfence/txmanager/follow"
)

// BenchmarkFollow measures the chain follower with 10,000 transactions
// tracked for one signer (broadcast as far as the store knows, never
// mined), on anvil and a real store:
//
//   - blocks: new blocks processed per second, and what each cost: RPC
//     calls (rpc/block, from the follower's own counter: each call of a
//     batch counts) and HTTP requests to the node (requests/block: a batch
//     is one). One transaction the node keeps pending (past a nonce gap)
//     is sent before each block, so each block's drop lookup holds the
//     sends of the last drop_check_blocks blocks, in one request;
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
		requests := 0
		for b.Loop() {
			nonce, err := r.store.NextNonce(context.Background(), r.fence, nil)
			if err != nil {
				b.Fatal(err)
			}
			pending := r.transfer(b)(nonce + 1) // past a gap: pooled, never mined
			if err := r.node.Client().SendTransaction(context.Background(), pending); err != nil {
				b.Fatal(err)
			}
			r.record(b, fmt.Sprintf("pending-%d", nonce), nonce+1, pending)
			if err := r.node.Mine(context.Background(), 1); err != nil {
				b.Fatal(err)
			}
			r.log.take()
			start := time.Now()
			r.step(b)
			stepping += time.Since(start)
			requests += len(r.log.take())
		}
		calls := 0
		for _, c := range r.calls {
			calls += c
		}
		b.ReportMetric(float64(b.N)/stepping.Seconds(), "blocks/s")
		b.ReportMetric(float64(calls)/float64(b.N), "rpc/block")
		b.ReportMetric(float64(requests)/float64(b.N), "requests/block")
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
