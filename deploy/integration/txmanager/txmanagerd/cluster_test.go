package txmanagerd_test

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagerd"
)

// cluster is a txmanagerd deployment for one signer as processes would
// run it: a migrated database, signerd's and mevrouterd's real APIs over
// anvil, and the binary to start nodes with.
type cluster struct {
	pki string
	// stacks are the chains, each an anvil with mevrouterd's routes, all
	// served by one mevrouterd API; stack is the first.
	stacks []*mevroutertest.Stack
	stack  *mevroutertest.Stack
	// from is the signer, the same dev account on every chain.
	from common.Address
	db   string
	bin  string
	env  func(node string) map[string]string
}

// newCluster sets a cluster up; extra settings go to every node.
func newCluster(t testing.TB, extra map[string]string) *cluster {
	t.Helper()
	return newClusterWith(t, extra, []uint64{anvil.DefaultChainID}, urlOf)
}

// urlOf is a chain's read endpoint as the chains file names it: its
// anvil, alone.
func urlOf(node *anvil.Node) string { return fmt.Sprintf(`"rpc": [%q]`, node.URL()) }

// newClusterWith sets a cluster up serving a chain of each of chainIDs,
// each with the signer, whose read endpoints are those rpc gives (the
// chains file's "rpc" member, and any other member of the chain, as JSON)
// for the chain's node.
func newClusterWith(t testing.TB, extra map[string]string, chainIDs []uint64, rpc func(node *anvil.Node) string) *cluster {
	t.Helper()
	c := &cluster{pki: servicetest.PKI(t), from: signertest.DevAddress(0), db: pgtest.URL(t)}
	var chains []string
	for _, id := range chainIDs {
		stack := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}, ChainID: id})
		c.stacks = append(c.stacks, stack)
		chains = append(chains, fmt.Sprintf(`{"chain_id": %d, %s, "signers": [{"address": %q, "in_flight": 2000}]}`,
			stack.Node.ChainID(), rpc(stack.Node), c.from.Hex()))
	}
	c.stack = c.stacks[0]
	routerURL := mevroutertest.ServeChains(t, c.pki, c.stacks...)
	signerd := signertest.StartServer(t, signertest.ServerOptions{PKI: c.pki})
	chainsFile := filepath.Join(t.TempDir(), "chains.json")
	if err := os.WriteFile(chainsFile, []byte(`{"chains": [`+strings.Join(chains, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = func(node string) map[string]string {
		return servicetest.Merge(servicetest.TLSEnv(txmanagerd.Spec.EnvPrefix, c.pki, txmanagerd.Spec.Identity), map[string]string{
			txmanagerd.Spec.EnvPrefix + "DATABASE_URL":  c.db,
			txmanagerd.Spec.EnvPrefix + "CHAINS_FILE":   chainsFile,
			txmanagerd.Spec.EnvPrefix + "SIGNER_URL":    signerd.URL,
			txmanagerd.Spec.EnvPrefix + "MEVROUTER_URL": routerURL,
			txmanagerd.Spec.EnvPrefix + "NODE_ID":       node,
		}, extra)
	}
	c.bin = servicetest.Build(t, "github.com/txfence/txfence/txmanager/cmd/txmanagerd")
	if _, err := servicetest.RunOnce(t, txmanagerd.Run, []string{"migrate"}, c.env("migrate")); err != nil {
		t.Fatal(err)
	}
	return c
}

// node starts a txmanagerd process named name.
func (c *cluster) node(t testing.TB, name string) *servicetest.Process {
	t.Helper()
	return servicetest.StartProcess(t, c.bin, nil, c.env(name), "internal")
}

// TestThreeNodesOneSignerContiguousNonces runs three real txmanagerd
// processes on one database, with signerd's and mevrouterd's real APIs,
// serving two chains (two anvils, chain ids 31337 and 31338) at once,
// and creates 1,000 transactions, 500 for the signer on each chain,
// through all three nodes at once. Exactly one node owns the signer of
// each chain; on each chain every transaction gets a nonce from 0 to
// 499, each once; each anvil mines its chain's, the signer's mined nonce
// ends at 500 on both, and every mined transaction is one of ours.
func TestThreeNodesOneSignerContiguousNonces(t *testing.T) {
	t.Parallel()
	const perChain = 500
	c := newClusterWith(t, nil, []uint64{anvil.DefaultChainID, anvil.DefaultChainID + 1}, urlOf)
	var urls []string
	var nodes []*servicetest.Process
	for i := range 3 {
		nodes = append(nodes, c.node(t, fmt.Sprintf("node-%d", i)))
		urls = append(urls, nodes[i].URL("internal"))
	}
	var creating sync.WaitGroup
	for _, stack := range c.stacks {
		creating.Go(func() { c.create(t, urls, stack, 0, perChain) })
	}
	creating.Wait()
	c.mineUntilConfirmed(t, len(c.stacks)*perChain, func() {
		for i, n := range nodes {
			t.Logf("node-%d:\n%s", i, n.Logs())
		}
	}, nil)
	for _, stack := range c.stacks {
		c.requireEachNonceOnce(t, stack, perChain)
	}
	ctx := context.Background()
	conn := c.connect(t)
	var owners, leases int
	if err := conn.QueryRow(ctx, `SELECT count(DISTINCT (chain_id, owner_node)), count(*) FROM signer_lease WHERE expires_at > now()`).Scan(&owners, &leases); err != nil ||
		owners != len(c.stacks) || leases != len(c.stacks) {
		t.Errorf("%d owners of %d live leases, want one owner of each chain's signer (%v)", owners, leases, err)
	}
}

// connect is a connection to the cluster's database, closed when t ends.
func (c *cluster) connect(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// create makes transfers from to to-1 (their request ids) of the signer
// on stack's chain through the nodes at urls, 20 at a time, spread over
// them.
func (c *cluster) create(t testing.TB, urls []string, stack *mevroutertest.Stack, from, to int) {
	t.Helper()
	client := servicetest.Client(t, c.pki, "gateway", "txmanager")
	var wg sync.WaitGroup
	work := make(chan int)
	for range 20 {
		wg.Go(func() {
			for i := range work {
				body := fmt.Sprintf(`{"chain_id": %d, "from": %q, "request_id": "c-%d", "to": "0x0000000000000000000000000000000000000b0b",
					"value": "1", "route": "public"}`, stack.Node.ChainID(), c.from.Hex(), i)
				resp, err := client.Post(urls[i%len(urls)]+"/internal/v1/tx", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					continue
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("create %d: %d", i, resp.StatusCode)
				}
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// mineUntilConfirmed mines a block at a time on every chain as the
// pipeline goes, until total transactions are CONFIRMED; during, when set, is told the count
// confirmed after each block. The pipeline is judged by whether it moves,
// not by how fast: on a busy machine a thousand transactions take
// minutes, but a minute with nothing newly broadcast or confirmed means it
// is stuck, and the test fails after logs.
func (c *cluster) mineUntilConfirmed(t testing.TB, total int, logs func(), during func(confirmed int)) {
	t.Helper()
	ctx := context.Background()
	conn := c.connect(t)
	const stalled = time.Minute
	lastMove, lastSent, lastConfirmed := time.Now(), -1, -1
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var confirmed, sent int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'CONFIRMED'), count(*) FILTER (WHERE state IN ('BROADCASTED', 'CONFIRMED'))
			FROM tx`).Scan(&confirmed, &sent); err != nil {
			t.Fatal(err)
		}
		if confirmed == total {
			return
		}
		if sent != lastSent || confirmed != lastConfirmed {
			lastMove, lastSent, lastConfirmed = time.Now(), sent, confirmed
		}
		for _, stack := range c.stacks {
			if err := stack.Node.Mine(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
		if during != nil {
			during(confirmed)
		}
		if time.Since(lastMove) > stalled {
			logs()
			t.Fatalf("%d of %d broadcast and %d confirmed, and nothing moved for %s; by chain: %s", sent, total, confirmed, stalled, c.openByChain(t, conn))
		}
		<-tick.C
	}
}

// openByChain describes, for a stalled run, each chain's transactions not
// CONFIRMED: their states, nonces and attempts, and the chain's head and
// the signer's mined nonce there.
func (c *cluster) openByChain(t testing.TB, conn *pgx.Conn) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, stack := range c.stacks {
		var open string
		err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s/%s n=%s attempts=%s', state, coalesce(sub_state, ''), nonce, current_attempt), ', ' ORDER BY nonce), 'none')
			FROM (SELECT * FROM tx WHERE chain_id = $1 AND state <> 'CONFIRMED' ORDER BY nonce LIMIT 20) open`, stack.Node.ChainID()).Scan(&open)
		if err != nil {
			open = err.Error()
		}
		head, _ := stack.Node.BlockNumber(ctx)
		mined, _ := stack.Node.Client().NonceAt(ctx, c.from, nil)
		pending, _ := stack.Node.Client().PendingNonceAt(ctx, c.from)
		out = append(out, fmt.Sprintf("chain %d (head %d, mined nonce %d, pending nonce %d): %s", stack.Node.ChainID(), head, mined, pending, open))
	}
	return strings.Join(out, "; ")
}

// requireEachNonceOnce checks the end of a run of total transactions on
// stack's chain: each has its own nonce, from 0 to total-1; anvil's mined
// nonce of the signer is total; and every transaction mined on the chain
// is one of ours, each once.
func (c *cluster) requireEachNonceOnce(t testing.TB, stack *mevroutertest.Stack, total int) {
	t.Helper()
	ctx := context.Background()
	conn := c.connect(t)
	var count, distinct int
	var lo, hi int64
	node := stack.Node
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT nonce), min(nonce), max(nonce) FROM tx WHERE chain_id = $1`, node.ChainID()).Scan(&count, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if count != total || distinct != total || lo != 0 || hi != int64(total-1) {
		t.Errorf("chain %d: %d transactions, %d distinct nonces from %d to %d; want %d, %d, 0 to %d", node.ChainID(), count, distinct, lo, hi, total, total, total-1)
	}
	mined, err := node.Client().NonceAt(ctx, c.from, nil)
	if err != nil || mined != uint64(total) {
		t.Errorf("chain %d: anvil's mined nonce %d (%v), want %d", node.ChainID(), mined, err, total)
	}
	ours := map[common.Hash]bool{}
	rows, err := conn.Query(ctx, `SELECT a.hash FROM attempt a JOIN tx USING (tx_id) WHERE tx.chain_id = $1`, node.ChainID())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		ours[common.BytesToHash(h)] = true
	}
	rows.Close()
	head, err := node.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	minedOurs := 0
	for n := uint64(1); n <= head; n++ {
		block, err := node.Client().BlockByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range block.Transactions() {
			if !ours[tx.Hash()] {
				t.Errorf("block %d holds %s, not one of ours", n, tx.Hash())
			}
			minedOurs++
		}
	}
	if minedOurs != total {
		t.Errorf("chain %d: %d of our transactions mined, want %d", node.ChainID(), minedOurs, total)
	}
}

// TestAPausedOwnerIsFencedAndNothingIsLost pauses the owner of a signer
// (SIGSTOP) past its lease while transactions keep arriving. The other
// node takes the signer over with a higher token and carries on; the old
// owner, resumed, writes nothing more on the signer. Every transaction is
// broadcast with its own nonce, none lost, none twice.
func TestAPausedOwnerIsFencedAndNothingIsLost(t *testing.T) {
	t.Parallel()
	const total = 200
	c := newCluster(t, map[string]string{
		txmanagerd.Spec.EnvPrefix + "LEASE_TTL":   "2s",
		txmanagerd.Spec.EnvPrefix + "LEASE_RENEW": "400ms",
		// A paused owner's open transaction must not outlive its lease.
		txmanagerd.Spec.EnvPrefix + "DB_IDLE_IN_TX_TIMEOUT": "1s",
	})
	pki, stack, from, db := c.pki, c.stack, c.from, c.db
	nodes := map[string]*servicetest.Process{}
	var urls []string
	for i := range 2 {
		name := fmt.Sprintf("node-%d", i)
		nodes[name] = c.node(t, name)
		urls = append(urls, nodes[name].URL("internal"))
	}
	client := servicetest.Client(t, pki, "gateway", "txmanager")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	lease := func() (owner string, token int64) {
		t.Helper()
		err := conn.QueryRow(ctx, `SELECT coalesce(owner_node, ''), fencing_token FROM signer_lease WHERE expires_at > now()`).Scan(&owner, &token)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		return owner, token
	}
	create := func(from0, to int) {
		for i := from0; i < to; i++ {
			body := fmt.Sprintf(`{"chain_id": %d, "from": %q, "request_id": "p-%d", "to": "0x0000000000000000000000000000000000000b0b",
				"value": "1", "route": "public"}`, stack.Node.ChainID(), signertest.DevAddress(0).Hex(), i)
			resp, err := client.Post(urls[i%2]+"/internal/v1/tx", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
				t.Fatalf("create %d: %d", i, resp.StatusCode)
			}
		}
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within two minutes", what)
			}
			<-tick.C
		}
	}
	broadcast := func() int {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM tx WHERE state = 'BROADCASTED'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	create(0, total/2)
	var owner string
	var token int64
	poll("an owner", func() bool { owner, token = lease(); return owner != "" })
	// The owner freezes; the other node must take over after the lease.
	// Creates go to the node that still answers.
	if err := nodes[owner].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var other string
	for name := range nodes {
		if name != owner {
			other = name
		}
	}
	urls = []string{nodes[other].URL("internal"), nodes[other].URL("internal")}
	var takeover int64
	poll("a takeover", func() bool { o, tok := lease(); takeover = tok; return o == other && tok > token })
	create(total/2, total)
	poll("every transaction broadcast by the new owner", func() bool { return broadcast() == total })

	// The old owner wakes up: it must write nothing on the signer.
	var eventsBefore int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM event`).Scan(&eventsBefore); err != nil {
		t.Fatal(err)
	}
	if err := nodes[owner].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Its next rounds run (a renewal attempt shows in the lease row only
	// as the new owner's); give it a few renew intervals of its own.
	poll("the old owner noticing", func() bool {
		return strings.Contains(nodes[owner].Logs(), "lost") || strings.Contains(nodes[owner].Logs(), "fenced")
	})
	var eventsAfter, count, distinct int
	var lo, hi int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM event`).Scan(&eventsAfter); err != nil {
		t.Fatal(err)
	}
	if eventsAfter != eventsBefore {
		t.Errorf("%d events written after everything was broadcast (the old owner wrote?)", eventsAfter-eventsBefore)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT nonce), min(nonce), max(nonce) FROM tx`).Scan(&count, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if count != total || distinct != total || lo != 0 || hi != total-1 {
		t.Errorf("%d transactions, %d distinct nonces from %d to %d; want %d, %d, 0 to %d", count, distinct, lo, hi, total, total, total-1)
	}
	// The woken node may own the signer again, but only by a takeover of
	// its own (the new owner missing renewals on a loaded machine), with a
	// fencing token above the one that fenced it: never its stale lease.
	if o, tok := lease(); tok < takeover || (o == owner && tok <= takeover) {
		t.Errorf("after the old owner woke: lease %s/%d; want %s at %d or a later takeover above it", o, tok, other, takeover)
	}
	if err := stack.Node.Mine(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if mined, err := stack.Node.Client().NonceAt(ctx, from, nil); err != nil || mined != total {
		t.Errorf("anvil's mined nonce %d (%v), want %d", mined, err, total)
	}
}
