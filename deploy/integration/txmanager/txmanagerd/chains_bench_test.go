package txmanagerd_test

import (
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/testinfra/anvil"
)

// BenchmarkTwoChainsBesideOne measures what a second chain costs one
// txmanagerd process, in one run: each iteration creates perChain
// transfers of the signer on the first chain alone and takes them to
// CONFIRMED, then perChain on each of two chains at once, through one
// node, one database, one signerd and one mevrouterd API, mining a block
// on every chain every 100ms.
//
//   - one-chain-tx/s: confirmed transfers per second, the first chain
//     alone;
//   - two-chains-tx/s: the same, both chains at once (2 × perChain);
//   - two/one: the ratio. 2 means the chains do not slow each other (each
//     has its own signer, lease, worker and follower); 1 would mean they
//     share one bottleneck.
//
// Each phase is timed from the first create to the last CONFIRMED. The
// benchmark fails unless every chain's nonces are contiguous and mined
// once.
func BenchmarkTwoChainsBesideOne(b *testing.B) {
	const perChain = 200
	c := newClusterWith(b, nil, []uint64{anvil.DefaultChainID, anvil.DefaultChainID + 1}, urlOf)
	node := c.node(b, "node-0")
	urls := []string{node.URL("internal")}
	logs := func() { b.Logf("node-0:\n%s", node.Logs()) }
	var one, two time.Duration
	created := map[*mevroutertest.Stack]int{}
	confirmed := 0
	run := func(stacks ...*mevroutertest.Stack) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for _, s := range stacks {
			from := created[s]
			wg.Go(func() { c.create(b, urls, s, from, from+perChain) })
			created[s] += perChain
		}
		wg.Wait()
		confirmed += len(stacks) * perChain
		c.mineUntilConfirmed(b, confirmed, logs, nil)
		return time.Since(start)
	}
	for b.Loop() {
		one += run(c.stacks[0])
		two += run(c.stacks...)
	}
	for _, s := range c.stacks {
		c.requireEachNonceOnce(b, s, created[s])
	}
	n := float64(b.N)
	oneRate, twoRate := n*perChain/one.Seconds(), 2*n*perChain/two.Seconds()
	b.ReportMetric(oneRate, "one-chain-tx/s")
	b.ReportMetric(twoRate, "two-chains-tx/s")
	b.ReportMetric(twoRate/oneRate, "two/one")
	b.ReportMetric(0, "ns/op")
}
