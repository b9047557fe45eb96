package ledgerd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// twoChains is two anvil chains, A (31337) and B (31338), whose dev
// accounts are wallets opened at genesis; a real txmanager feed of
// transactions settled on both, their events interleaved; ledgerd's
// environment but for its chain endpoints, migrated; and the ledger's
// database as the test reads it.
type twoChains struct {
	a, b  *anvil.Node
	pki   string
	env   map[string]string
	txm   *txmanagertest.Server
	pool  *pgxpool.Pool
	store *postgres.Store
	// settled are the feed's settlements, by transaction hash.
	settled map[common.Hash]chainSettlement
	// onA counts A's settlements; last is the feed's last seq.
	onA  int
	last uint64
}

// chainSettlement is a settlement event of the feed: its chain, seq, and
// the journal it books.
type chainSettlement struct {
	chainID uint64
	seq     uint64
	kind    ledger.JournalKind
}

func newTwoChains(t *testing.T, onA, onB int) *twoChains {
	t.Helper()
	ctx := context.Background()
	r := &twoChains{a: chaintest.Anvil(t, anvil.Options{}), b: chaintest.Anvil(t, anvil.Options{ChainID: 31338}), pki: servicetest.PKI(t),
		settled: map[common.Hash]chainSettlement{}, onA: onA}
	r.txm = txmanagertest.Serve(t, r.pki, txmanagertest.Options{})
	r.env = servicetest.Merge(servicetest.TLSEnv(ledgerd.Spec.EnvPrefix, r.pki, ledgerd.Spec.Identity), map[string]string{
		ledgerd.Spec.EnvPrefix + "DATABASE_URL":  pgtest.URL(t),
		ledgerd.Spec.EnvPrefix + "TXMANAGER_URL": r.txm.URL,
		ledgerd.Spec.EnvPrefix + "OPS_ADDR":      "127.0.0.1:0",
	})
	if logs, err := servicetest.RunOnce(t, ledgerd.Run, []string{daemon.Migrate}, r.with(r.a.URL(), r.b.URL())); err != nil {
		t.Fatalf("migrate: %v\n%s", err, logs)
	}
	pool, err := pg.Open(ctx, r.env[ledgerd.Spec.EnvPrefix+"DATABASE_URL"], pg.PoolOptions{MaxConns: 4, Application: "backlog_test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.pool, r.store = pool, postgres.New(pool, slog.New(slog.DiscardHandler))
	for _, node := range []*anvil.Node{r.a, r.b} {
		for _, a := range node.Accounts() {
			openAtGenesis(t, r.pool, r.store, node, a.Address)
		}
	}

	// Each chain's transactions become txmanager's, and their events go
	// into the feed interleaved: B's spread among A's.
	sent := map[*anvil.Node][]killSent{r.a: settleOn(t, r.a, onA), r.b: settleOn(t, r.b, onB)}
	events := map[*anvil.Node][][]txmanagertest.Event{}
	for node, txs := range sent {
		intents := make([]*txmanager.Intent, len(txs))
		for i, s := range txs {
			gas := s.gas
			intents[i] = &txmanager.Intent{ChainID: node.ChainID(), From: s.from, RequestID: fmt.Sprintf("%d-%d", node.ChainID(), i),
				To: &s.to, Value: s.value, Data: []byte{}, Gas: &gas, Route: txmanager.RoutePublic}
		}
		for i, res := range r.txm.Store.CreateMany(ctx, intents) {
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			events[node] = append(events[node], txmanagertest.SettlementEvents(res.Tx.ID, txs[i].receipt))
		}
	}
	var feed []txmanagertest.Event
	for ia, ib := 0, 0; ia < onA || ib < onB; {
		if ib < onB && (ia == onA || ib*onA <= ia*onB) {
			feed, ib = append(feed, events[r.b][ib]...), ib+1
		} else {
			feed, ia = append(feed, events[r.a][ia]...), ia+1
		}
	}
	r.txm.WriteEvents(t, feed...)

	chainOf := map[common.Hash]uint64{}
	for node, txs := range sent {
		for _, s := range txs {
			chainOf[s.receipt.TxHash] = node.ChainID()
		}
	}
	var settled map[common.Hash]killSettlement
	r.last, settled = settlementsInFeed(t, r.txm.Pool)
	for h, s := range settled {
		r.settled[h] = chainSettlement{chainID: chainOf[h], seq: s.seq, kind: s.kind}
	}
	if len(r.settled) != onA+onB || r.last != uint64(8*(onA+onB)) {
		t.Fatalf("the feed holds %d settlements and %d events, want %d and %d", len(r.settled), r.last, onA+onB, 8*(onA+onB))
	}
	return r
}

// with is ledgerd's environment with chain A's endpoint at a and B's at b.
func (r *twoChains) with(a, b string) map[string]string {
	return servicetest.Merge(r.env, map[string]string{
		ledgerd.Spec.EnvPrefix + "CHAIN_RPC": fmt.Sprintf("%d=%s,%d=%s", r.a.ChainID(), a, r.b.ChainID(), b)})
}

// requireBooked reads the feed's cursor and backlog and fails t unless
// every settlement at or before the cursor is booked once (a journal of
// its kind) or waits in the backlog, not both, and none after the cursor
// is either; the backlog holds settlements alone. It returns the cursor
// and the backlog's size by chain.
func (r *twoChains) requireBooked(t *testing.T, when string) (uint64, map[uint64]int) {
	t.Helper()
	ctx := context.Background()
	// One snapshot for the cursor, the backlog and the journals: ledgerd
	// books while this reads, and three reads at three moments would see
	// bookings past the cursor they read.
	snap, err := r.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = snap.Rollback(ctx) }() // read-only: nothing to keep
	var cursor uint64
	if err := snap.QueryRow(ctx, `SELECT coalesce((SELECT seq FROM feed_cursor WHERE feed = $1), 0)`, consumer.Feed).Scan(&cursor); err != nil {
		t.Fatal(err)
	}
	backlog := map[uint64]uint64{} // seq -> chain
	rows, err := snap.Query(ctx, `SELECT seq, chain_id FROM feed_backlog WHERE feed = $1`, consumer.Feed)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var seq, chain uint64
		if err := rows.Scan(&seq, &chain); err != nil {
			t.Fatal(err)
		}
		backlog[seq] = chain
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	booked := map[common.Hash]int{}
	var problems []string
	for _, j := range ledgertest.BookedJournals(t, snap) {
		h := common.BytesToHash(j.Hash)
		if s, ok := r.settled[h]; !ok || j.Kind != s.kind {
			problems = append(problems, fmt.Sprintf("%d %s journals of %x, which the feed did not settle so", j.Count, j.Kind, j.Hash))
		}
		booked[h] += j.Count
	}
	settlementAt := map[uint64]bool{}
	byChain := map[uint64]int{}
	for h, s := range r.settled {
		settlementAt[s.seq] = true
		chain, waiting := backlog[s.seq]
		if waiting {
			byChain[chain]++
		}
		switch {
		case s.seq > cursor && (booked[h] > 0 || waiting):
			problems = append(problems, fmt.Sprintf("chain %d's %s (seq %d), past the cursor %d: booked %d times, in the backlog %v", s.chainID, h, s.seq, cursor, booked[h], waiting))
		case s.seq <= cursor && booked[h]+btoi(waiting) != 1:
			problems = append(problems, fmt.Sprintf("chain %d's %s (seq %d): booked %d times, in the backlog %v; want one or the other", s.chainID, h, s.seq, booked[h], waiting))
		case waiting && chain != s.chainID:
			problems = append(problems, fmt.Sprintf("chain %d's %s (seq %d) is in chain %d's backlog", s.chainID, h, s.seq, chain))
		}
	}
	for seq := range backlog {
		if !settlementAt[seq] {
			problems = append(problems, fmt.Sprintf("event %d, no settlement, is in the backlog", seq))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%s (cursor %d): %d problems, first: %s", when, cursor, len(problems), strings.Join(problems[:min(len(problems), 10)], "; "))
	}
	return cursor, byChain
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// requireTiesOut fails t unless every wallet of both chains holds in the
// books what it holds on its chain, to the wei.
func (r *twoChains) requireTiesOut(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, node := range []*anvil.Node{r.a, r.b} {
		for _, a := range node.Accounts() {
			held, err := node.Client().BalanceAt(ctx, a.Address, nil)
			if err != nil {
				t.Fatal(err)
			}
			booked, err := r.store.Balance(ctx, ledger.AccountKey{ChainID: node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: a.Address})
			if err != nil {
				t.Fatalf("wallet %s of chain %d: %v", a.Address, node.ChainID(), err)
			}
			if booked.Cmp(held) != 0 {
				t.Errorf("wallet %s of chain %d: the chain holds %s wei, the books %s", a.Address, node.ChainID(), held, booked)
			}
		}
	}
	ledgertest.RequireConservation(t, r.pool)
}

// gauge reads metric from /metrics at ops, by chain id.
func gauge(t *testing.T, ops, metric string) map[uint64]string {
	t.Helper()
	resp, err := http.Get(ops + "/metrics")
	if err != nil {
		t.Fatalf("ledgerd's /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[uint64]string{}
	for line := range strings.SplitSeq(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, metric+`{chain_id="`)
		if !ok {
			continue
		}
		id, value, _ := strings.Cut(rest, `"} `)
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			t.Fatalf("/metrics: %q", line)
		}
		out[n] = value
	}
	return out
}

// TestAChainWhoseEndpointIsDownHoldsNothingElse runs ledgerd on chains A
// and B with A's endpoint down, over a feed of their settlements
// interleaved. B's are booked, and A's wait in the backlog, the cursor at
// the feed's head; ledgerd stays ready (its /readyz does not check chain
// endpoints), and its gauges say A's endpoint is down and how much waits.
// Once A's endpoint is back, A's backlog is booked, and both chains' books
// tie out with them. Before the change, the feed stopped at A's first
// settlement, B's with it, and /readyz failed.
func TestAChainWhoseEndpointIsDownHoldsNothingElse(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, 40, 40)
	endA := ledgertest.NewEndpoint(t, r.a.URL())
	endA.Down()
	svc := servicetest.Start(t, ledgerd.Run, nil, r.with(endA.URL, r.b.URL()), "internal", "ops")
	ops := svc.URL("ops")

	waitFor(t, svc, "B's settlements booked, A's in the backlog", func() bool {
		cursor, backlog := r.requireBooked(t, "A's endpoint down")
		return cursor == r.last && backlog[r.a.ChainID()] == r.onA
	})
	resp, err := http.Get(ops + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz with chain A's endpoint down: %d %s, want 200", resp.StatusCode, body)
	}
	if up := gauge(t, ops, "txfence_ledger_chain_endpoint_up"); up[r.a.ChainID()] != "0" || up[r.b.ChainID()] != "1" {
		t.Errorf("txfence_ledger_chain_endpoint_up %v, want A 0 and B 1", up)
	}
	// The books' gauges are read at most every 10 s.
	waitFor(t, svc, "the backlog gauge", func() bool {
		g := gauge(t, ops, "txfence_ledger_feed_backlog_events")
		return g[r.a.ChainID()] == strconv.Itoa(r.onA) && g[r.b.ChainID()] == "0"
	})
	if g := gauge(t, ops, "txfence_ledger_feed_backlog_oldest_event_timestamp_seconds"); g[r.a.ChainID()] == "" || g[r.b.ChainID()] != "" {
		t.Errorf("the oldest backlog event's time %v, want A's alone", g)
	}

	endA.Up()
	waitFor(t, svc, "A's backlog booked", func() bool {
		cursor, backlog := r.requireBooked(t, "A's endpoint back")
		return cursor == r.last && len(backlog) == 0
	})
	r.requireTiesOut(t)
	if !strings.Contains(svc.Logs(), "the chain follows the feed again") {
		t.Errorf("no line saying chain A follows the feed again\n%s", svc.Logs())
	}
}

const (
	// haltOnA and haltOnB are how many transactions settle on each chain:
	// A's more than a page (500), so that its backlog is booked in two
	// runs, with a kill between them.
	haltOnA = 600
	haltOnB = 100
	// haltKills is how many processes each phase kills at random.
	haltKills = 4
)

// TestKill9WhileAChainIsHaltedLosesNothing books a feed of settlements on
// chains A and B, interleaved, with ledgerd processes that die by SIGKILL.
// First A's endpoint serves chain B: ledgerd halts A, books B's
// settlements and moves A's to the backlog; each process dies right after
// a page's commit, then at random moments. Then A's endpoint is mended,
// which a restart needs to lift the halt: a process dies right after the
// commit that books the first part of A's backlog, others at random. After
// every death each settlement up to the cursor is booked once or waits in
// the backlog, never both, and none after it is either; in the end all
// are booked once, the backlog is empty, and both chains' wallets tie out
// to the wei. Before the change, the feed stopped at A's first settlement:
// B's after it were never booked.
func TestKill9WhileAChainIsHaltedLosesNothing(t *testing.T) {
	t.Parallel()
	r := newTwoChains(t, haltOnA, haltOnB)
	bin := servicetest.Build(t, "github.com/txfence/txfence/ledger/cmd/ledgerd")
	crashing := func(env map[string]string) map[string]string {
		return servicetest.Merge(env, map[string]string{ledgerd.Spec.EnvPrefix + "TEST_CRASH_AFTER": "booked"})
	}
	seed := *killSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("random kills: seed %d (rerun with -kill-seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	killRandomly := func(env map[string]string, within time.Duration, phase string) {
		for kill := range haltKills {
			delay := time.Duration(rng.Int64N(int64(within)))
			p := servicetest.StartKilled(t, bin, env)
			select {
			case <-p.Done():
				t.Fatalf("%s: ledgerd exited on its own before kill %d: %v\n%s", phase, kill+1, p.Err(), p.Output())
			case <-time.After(delay):
			}
			p.Kill()
			p.WaitKilled(t, 10*time.Second)
			cursor, backlog := r.requireBooked(t, fmt.Sprintf("%s, kill %d", phase, kill+1))
			t.Logf("%s: kill %d after %s: cursor %d, backlog %v", phase, kill+1, delay.Round(time.Millisecond), cursor, backlog)
		}
	}
	// runUntil runs a process until cond holds, then stops it (SIGTERM).
	runUntil := func(env map[string]string, what string, cond func(cursor uint64, backlog map[uint64]int) bool) {
		p := servicetest.StartProcess(t, bin, nil, env, "internal")
		deadline := time.After(time.Minute)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			cursor, backlog := r.requireBooked(t, what)
			if cond(cursor, backlog) {
				break
			}
			select {
			case <-deadline:
				t.Fatalf("%s: not within a minute: cursor %d, backlog %v\n%s", what, cursor, backlog, p.Logs())
			case <-tick.C:
			}
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := p.Wait(30 * time.Second); err != nil {
			t.Fatalf("%s: ledgerd at SIGTERM: %v\n%s", what, err, p.Logs())
		}
	}

	// Phase 1: A halted.
	halted := r.with(r.b.URL(), r.b.URL())
	var cursor uint64
	var pageRun time.Duration
	for run := range 2 {
		start := time.Now()
		p := servicetest.StartKilled(t, bin, crashing(halted))
		p.WaitKilled(t, 30*time.Second)
		pageRun = max(pageRun, time.Since(start))
		now, backlog := r.requireBooked(t, fmt.Sprintf("halted, crash run %d", run+1))
		if want := min(cursor+500, r.last); now != want {
			t.Fatalf("halted, crash run %d moved the cursor from %d to %d, want one page, to %d\n%s", run+1, cursor, now, want, p.Output())
		}
		t.Logf("halted, crash run %d: cursor %d, backlog %v", run+1, now, backlog)
		cursor = now
	}
	killRandomly(halted, 3*pageRun, "halted")
	runUntil(halted, "halted, the feed booked to its head", func(cursor uint64, _ map[uint64]int) bool { return cursor == r.last })
	if _, backlog := r.requireBooked(t, "halted, at the head"); backlog[r.a.ChainID()] != haltOnA || len(backlog) != 1 {
		t.Fatalf("halted, at the head: backlog %v, want chain A's %d settlements alone", backlog, haltOnA)
	}

	// Phase 2: A's endpoint mended; a restart lifts the halt.
	mended := r.with(r.a.URL(), r.b.URL())
	p := servicetest.StartKilled(t, bin, crashing(mended))
	p.WaitKilled(t, 30*time.Second)
	if _, backlog := r.requireBooked(t, "mended, crash run"); backlog[r.a.ChainID()] == 0 || backlog[r.a.ChainID()] >= haltOnA {
		t.Fatalf("mended, the crash run left a backlog of %v: want part of A's %d booked, the rest waiting\n%s", backlog, haltOnA, p.Output())
	} else {
		t.Logf("mended, crash run: backlog %v", backlog)
	}
	killRandomly(mended, 3*pageRun, "mended")
	runUntil(mended, "mended, the backlog booked", func(cursor uint64, backlog map[uint64]int) bool { return cursor == r.last && len(backlog) == 0 })
	r.requireTiesOut(t)
}
