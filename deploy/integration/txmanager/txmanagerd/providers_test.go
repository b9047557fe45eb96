package txmanagerd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/wait"
)

// TestProvidersFailAndTransactionsFlow runs a txmanagerd process whose
// chain has six read endpoints, as an exchange's chain has several
// providers, and makes them fail the ways providers fail while
// transactions flow: one is killed, one hangs (a paused node), one lags
// ten blocks behind from the start, one answers 429 with Retry-After and
// has a small credit budget it runs out of, and one is a real anvil of
// another chain. Every transaction is CONFIRMED with its own nonce and
// mined once; none is declared dropped or stuck because an endpoint lied
// or lagged; the lagging endpoint never answers a read that needs the
// head and the wrong-chain one answers nothing but probes; and the
// budgeted endpoint stays within its credits.
//
// The five providers of the chain are Fronts before one anvil: separate
// anvils are separate histories, so only Fronts can be several providers
// of one chain. The wrong-chain endpoint is a real anvil of chain 999.
func TestProvidersFailAndTransactionsFlow(t *testing.T) {
	t.Parallel()
	const total = 150
	const credits = 600
	var killed, paused, lagging, limited, wrong *chaintest.Front
	c := newClusterWith(t, nil, []uint64{anvil.DefaultChainID}, func(node *anvil.Node) string {
		killed, paused, lagging, limited = chaintest.NewFront(t, node.URL()), chaintest.NewFront(t, node.URL()),
			chaintest.NewFront(t, node.URL()), chaintest.NewFront(t, node.URL())
		wrong = chaintest.NewFront(t, chaintest.Anvil(t, anvil.Options{ChainID: 999}).URL())
		// The lagging node is ten blocks behind from the start.
		if err := node.Mine(context.Background(), 12); err != nil {
			t.Fatal(err)
		}
		lagging.Lag(10)
		return fmt.Sprintf(`"rpc": [
			{"name": "direct", "url": %q},
			{"name": "killed", "url": %q},
			{"name": "paused", "url": %q},
			{"name": "lagging", "url": %q},
			{"name": "limited", "url": %q, "rps": 20, "credits": {"units": %d, "period": "1h", "default": 1, "cost": {"eth_getTransactionReceipt": 2}}},
			{"name": "wrong", "url": %q}],
		"rpc_pool": {"timeout": "1s", "probe_every": "500ms", "cooldown": "2s"},
		"confirmations": 2`, node.URL(), killed.URL, paused.URL, lagging.URL, limited.URL, credits, wrong.URL)
	})
	node := c.node(t, "node-0")
	urls := []string{node.URL("internal")}
	// outOfThePool reports whether the node logged endpoint name out of
	// its pool.
	outOfThePool := func(name string) bool {
		for line := range strings.Lines(node.Logs()) {
			var rec struct{ Msg, Endpoint string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "RPC endpoint out of the pool" && rec.Endpoint == name {
				return true
			}
		}
		return false
	}
	logs := func() { t.Logf("node-0:\n%s", node.Logs()) }
	// Four rounds of transfers, each sent once the next failure is in
	// effect and the node has seen it: the wrong chain and the lag from the
	// start, then a kill, a hang, and 429s.
	rounds := []struct {
		name string
		fail func()
	}{
		{"wrong", func() {}},
		{"killed", killed.Kill},
		{"paused", paused.Hang},
		{"limited", func() { limited.RateLimit(2 * time.Second) }},
	}
	for i, r := range rounds {
		r.fail()
		wait.ForDescribed(t, time.Minute, func() bool { return outOfThePool(r.name) }, func() string { return "the node to see " + r.name + " fail" })
		c.create(t, urls, c.stack, i*total/len(rounds), (i+1)*total/len(rounds))
		c.mineUntilConfirmed(t, (i+1)*total/len(rounds), logs, nil)
	}
	c.requireEachNonceOnce(t, c.stack, total)

	ctx := context.Background()
	conn := c.connect(t)
	var drops, stuck int
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(drops), 0) FROM attempt`).Scan(&drops); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM event WHERE type = 'tx.state_changed' AND payload->>'sub_state' = 'stuck'`).Scan(&stuck); err != nil {
		t.Fatal(err)
	}
	if drops != 0 || stuck != 0 {
		t.Errorf("%d drops and %d stuck marks: an endpoint's failure or lag was taken for the chain's word\n%s", drops, stuck, node.Logs())
	}

	// The other chain's endpoint answered nothing but the probes. The
	// lagging one answered no read that needs the head (a receipt, a
	// block's receipts, a block by hash: its "not found" would be a lie);
	// it may take a read that needs none (a gas estimate, the latest
	// block's fees) while every closer endpoint is out, as one is when a
	// loaded machine makes the good one time out, and it takes the lookups
	// of recent sends asked of every endpoint.
	probes := map[string]bool{"eth_chainId": true, "eth_blockNumber": true}
	needsTheHead := map[string]bool{"eth_getTransactionReceipt": true, "eth_getBlockReceipts": true, "eth_getBlockByHash": true}
	for method, n := range wrong.Calls() {
		if !probes[method] {
			t.Errorf("the wrong-chain endpoint answered %d %s calls: %v", n, method, slices.Sorted(maps.Keys(wrong.Calls())))
		}
	}
	for method, n := range lagging.Calls() {
		if needsTheHead[method] {
			t.Errorf("the lagging endpoint answered %d %s calls: %v", n, method, slices.Sorted(maps.Keys(lagging.Calls())))
		}
	}
	// Within budget: the credit-limited endpoint took calls, and never
	// more than its credits (each call costs at least one).
	if n := limited.Total(); n == 0 || n > credits {
		t.Errorf("the budgeted endpoint took %d calls; want some, and at most %d", n, credits)
	}
	if most := limited.MostIn(time.Second); most > 20+total {
		t.Errorf("the budgeted endpoint took %d calls within a second, over its 20 rps and one batch", most)
	}
	head, err := c.stack.Node.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := 0
	for _, f := range []*chaintest.Front{killed, paused, lagging, limited, wrong} {
		all += f.Total()
	}
	t.Logf("%d blocks; calls through the fronts: killed %d, paused %d, lagging %d, limited %d, wrong %d (%.1f per block, the direct endpoint's not counted)",
		head, killed.Total(), paused.Total(), lagging.Total(), limited.Total(), wrong.Total(), float64(all)/float64(head))
}
