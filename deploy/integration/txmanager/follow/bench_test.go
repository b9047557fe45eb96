package follow_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/chaintest"
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
			r.pendingBlock(b)
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

// BenchmarkFollowTwoChainsThreeEndpoints measures what the followers of
// two chains cost in RPC calls per block, with 10,000 transactions
// tracked across them (5,000 for one signer on each) and each chain read
// through a pool of three endpoints (its anvil through the test's log,
// and two fronts before the same anvil, as three providers of one chain).
// Each iteration mines a block on both chains, with one pending send
// each, and steps both followers:
//
//   - rpc/block/chain: the follower's calls per block per chain (each
//     call of a batch counts), from its own counter;
//   - endpoint-share-%: the share of those calls the busiest endpoint
//     took (the pool spreads reads by weight; 33 is even);
//   - probe-calls/s: the pools' health probes (eth_chainId and
//     eth_blockNumber of every endpoint every probe interval, 2s), per
//     second of the run, which a chain pays whatever its traffic.
func BenchmarkFollowTwoChainsThreeEndpoints(b *testing.B) {
	const perChain = 5_000
	type chainRig struct {
		r      *rig
		fronts []*chaintest.Front
	}
	var chains []chainRig
	for range 2 {
		r := newRig(b, 3)
		fronts := []*chaintest.Front{chaintest.NewFront(b, r.node.URL()), chaintest.NewFront(b, r.node.URL())}
		r.readThrough(b, r.log.url, fronts[0].URL, fronts[1].URL)
		r.trackMany(b, perChain, 0)
		r.step(b)
		chains = append(chains, chainRig{r: r, fronts: fronts})
	}
	for _, c := range chains {
		clear(c.r.calls)
		c.r.log.take()
	}
	probesBefore := 0
	for _, c := range chains {
		for _, f := range c.fronts {
			probesBefore += f.Calls()["eth_chainId"] + f.Calls()["eth_blockNumber"]
		}
	}
	start := time.Now()
	for b.Loop() {
		for _, c := range chains {
			c.r.pendingBlock(b)
			c.r.step(b)
		}
	}
	elapsed := time.Since(start)
	calls, busiest, probes := 0, 0, -probesBefore
	for _, c := range chains {
		perEndpoint := []int{0}
		for _, req := range c.r.log.take() {
			perEndpoint[0] += len(req)
		}
		for _, f := range c.fronts {
			got := f.Calls()
			probes += got["eth_chainId"] + got["eth_blockNumber"]
			perEndpoint = append(perEndpoint, f.Total()-got["eth_chainId"]-got["eth_blockNumber"])
		}
		for _, n := range c.r.calls {
			calls += n
		}
		all := 0
		for _, n := range perEndpoint {
			all += n
		}
		if all > 0 {
			busiest = max(busiest, 100*slices.Max(perEndpoint)/all)
		}
	}
	b.ReportMetric(float64(calls)/float64(2*b.N), "rpc/block/chain")
	b.ReportMetric(float64(busiest), "endpoint-share-%")
	b.ReportMetric(float64(probes)/elapsed.Seconds(), "probe-calls/s")
	b.ReportMetric(2*perChain, "tracked")
}

// pendingBlock sends the signer's transfer at the nonce after its next
// (past a gap: pooled, never mined), records it as broadcast, and mines a
// block: each block's drop lookup then holds the sends of the last
// drop_check_blocks blocks.
func (r *rig) pendingBlock(b *testing.B) {
	b.Helper()
	nonce, err := r.store.NextNonce(context.Background(), r.fence, nil)
	if err != nil {
		b.Fatal(err)
	}
	pending := r.transfer(b)(nonce + 1)
	if err := r.node.Client().SendTransaction(context.Background(), pending); err != nil {
		b.Fatal(err)
	}
	r.record(b, fmt.Sprintf("pending-%d", nonce), nonce+1, pending)
	if err := r.node.Mine(context.Background(), 1); err != nil {
		b.Fatal(err)
	}
}
