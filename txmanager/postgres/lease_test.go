package postgres_test

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// leaseDB is a migrated schema: its URL, for more pools (more "nodes"),
// and a store on a first pool.
func leaseDB(t *testing.T) (string, *postgres.Store, *pgxpool.Pool) {
	t.Helper()
	url := pgtest.URL(t)
	pool := leasePool(t, url, 4, nil)
	if _, err := postgres.Migrations.Up(t.Context(), pool, nil); err != nil {
		t.Fatal(err)
	}
	return url, postgres.New(pool), pool
}

// leasePool is a pool on url, traced by tracer when not nil.
func leasePool(t *testing.T, url string, maxConns int32, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	// Tests share one database (each its own schema): the name lets a
	// test find its own sessions in pg_stat_activity.
	cfg.ConnConfig.RuntimeParams["application_name"] = testApp(t)
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testApp is the application name of t's sessions.
func testApp(t *testing.T) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return fmt.Sprintf("leasetest-%x", sum[:8])
}

// leaseKey is the i-th test signer on chain 31337.
func leaseKey(i int) txmanager.SignerKey {
	return txmanager.SignerKey{ChainID: 31337, Signer: common.BytesToAddress([]byte{0x5e, byte(i >> 8), byte(i)})}
}

// leaseExec runs test SQL and returns the rows it touched.
func leaseExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	tag, err := pool.Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// leaseLapse puts key's lease in the past, as if its holder had stopped
// renewing it long enough ago.
func leaseLapse(t *testing.T, pool *pgxpool.Pool, key txmanager.SignerKey) {
	t.Helper()
	if leaseExec(t, pool, `UPDATE signer_lease SET expires_at = now() - interval '1 second' WHERE chain_id = $1 AND signer = $2`,
		int64(key.ChainID), key.Signer.Bytes()) != 1 {
		t.Fatalf("no lease row for %s", key)
	}
}

// mustAcquire acquires and fails the test unless the outcome is want.
func mustAcquire(t *testing.T, s *postgres.Store, node string, key txmanager.SignerKey, ttl time.Duration, wantOK bool, wantToken int64) {
	t.Helper()
	token, ok, err := s.Acquire(t.Context(), node, key, ttl)
	if err != nil {
		t.Fatalf("acquire %s by %s: %v", key, node, err)
	}
	if ok != wantOK || token != wantToken {
		t.Fatalf("acquire %s by %s = token %d, ok %t; want token %d, ok %t", key, node, token, ok, wantToken, wantOK)
	}
}

func TestAcquireRenewAndTakeOverALapsedLease(t *testing.T) {
	t.Parallel()
	_, s, pool := leaseDB(t)
	k := leaseKey(1)

	mustAcquire(t, s, "a", k, time.Minute, true, 1) // free: the first token
	mustAcquire(t, s, "a", k, time.Minute, true, 1) // ours: renewed, same token
	mustAcquire(t, s, "b", k, time.Minute, false, 0)

	leaseLapse(t, pool, k)
	mustAcquire(t, s, "b", k, time.Minute, true, 2) // lapsed: another node takes it with the next token
	mustAcquire(t, s, "a", k, time.Minute, false, 0)

	leaseLapse(t, pool, k)
	mustAcquire(t, s, "b", k, time.Minute, true, 3) // our own lapsed lease is a new claim too: its old token may be in use

	// A lease that runs out by the database clock, not by a hand edit.
	k2 := leaseKey(2)
	mustAcquire(t, s, "a", k2, 50*time.Millisecond, true, 1)
	pollLeases(t, s, func(ls []txmanager.Lease) bool {
		i := slices.IndexFunc(ls, func(l txmanager.Lease) bool { return l.Key == k2 })
		return i >= 0 && !ls[i].Held
	})
	mustAcquire(t, s, "b", k2, time.Minute, true, 2)

	ls, err := s.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[txmanager.SignerKey]string)
	for _, l := range ls {
		if !l.Held || l.ExpiresAt.IsZero() || l.AcquiredAt.IsZero() {
			t.Errorf("lease %+v: want held, with times", l)
		}
		got[l.Key] = fmt.Sprintf("%s/%d", l.Owner, l.Token)
	}
	if diff := gocmp.Diff(map[txmanager.SignerKey]string{k: "b/3", k2: "b/2"}, got); diff != "" {
		t.Errorf("leases (-want +got):\n%s", diff)
	}
}

// pollLeases polls the lease table until cond holds, for at most ten
// seconds.
func pollLeases(t *testing.T, s *postgres.Store, cond func([]txmanager.Lease) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ls, err := s.Leases(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if cond(ls) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition on leases not met; leases: %+v", ls)
		}
		<-time.After(10 * time.Millisecond) // poll interval, within the deadline above
	}
}

func TestAcquireRefusesBadArguments(t *testing.T) {
	t.Parallel()
	_, s, _ := leaseDB(t)
	for _, tc := range []struct {
		node string
		key  txmanager.SignerKey
		ttl  time.Duration
	}{
		{"", leaseKey(1), time.Second},
		{"a", leaseKey(1), 0},
		{"a", txmanager.SignerKey{ChainID: 0, Signer: leaseKey(1).Signer}, time.Second},
		{"a", txmanager.SignerKey{ChainID: 1 << 63, Signer: leaseKey(1).Signer}, time.Second},
	} {
		if _, ok, err := s.Acquire(t.Context(), tc.node, tc.key, tc.ttl); err == nil || ok {
			t.Errorf("Acquire(%q, %v, %v) = ok %t, err %v; want an error", tc.node, tc.key, tc.ttl, ok, err)
		}
	}
}

// statementCounter counts the statements and batches sent on its pool.
type statementCounter struct{ n atomic.Int64 }

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *statementCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func TestRenewAllIsOneStatementAndSkipsLapsedLeases(t *testing.T) {
	t.Parallel()
	url, s, pool := leaseDB(t)
	var counter statementCounter
	traced := postgres.New(leasePool(t, url, 2, &counter))

	want := make(map[txmanager.SignerKey]int64)
	for i := range 100 {
		k := leaseKey(i)
		mustAcquire(t, s, "a", k, time.Minute, true, 1)
		want[k] = 1
	}
	// Three leases lapse (one of them is then taken by b), two others
	// pass to b through a release: none is a's to renew anymore.
	for _, i := range []int{3, 4, 5} {
		leaseLapse(t, pool, leaseKey(i))
		delete(want, leaseKey(i))
	}
	mustAcquire(t, s, "b", leaseKey(5), time.Minute, true, 2)
	if err := s.Release(t.Context(), "a", []txmanager.SignerKey{leaseKey(6), leaseKey(7)}); err != nil {
		t.Fatal(err)
	}
	delete(want, leaseKey(6))
	delete(want, leaseKey(7))
	mustAcquire(t, s, "b", leaseKey(6), time.Minute, true, 2)
	// One lease a renews was taken and given back at a higher token.
	leaseExec(t, pool, `UPDATE signer_lease SET fencing_token = 9 WHERE signer = $1`, leaseKey(8).Signer.Bytes())
	want[leaseKey(8)] = 9

	before := counter.n.Load()
	got, err := traced.RenewAll(t.Context(), "a", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n := counter.n.Load() - before; n != 1 {
		t.Errorf("RenewAll of %d leases sent %d statements; want 1", len(want), n)
	}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("renewed (-want +got):\n%s", diff)
	}
	// Renewed leases run from now by the database clock; lapsed ones
	// stay lapsed.
	var renewed, lapsed int
	if err := pool.QueryRow(t.Context(), `
		SELECT count(*) FILTER (WHERE expires_at BETWEEN now() + interval '29 seconds' AND now() + interval '30 seconds'),
		       count(*) FILTER (WHERE expires_at <= now())
		FROM signer_lease WHERE owner_node = 'a'`).Scan(&renewed, &lapsed); err != nil {
		t.Fatal(err)
	}
	if renewed != len(want) || lapsed != 2 {
		t.Errorf("after RenewAll: %d leases of a run 30s from now, %d lapsed; want %d and 2", renewed, lapsed, len(want))
	}
	// A lapsed lease comes back only through Acquire, with a new token.
	mustAcquire(t, s, "a", leaseKey(3), time.Minute, true, 2)

	if got, err := s.RenewAll(t.Context(), "nobody", time.Second); err != nil || len(got) != 0 {
		t.Errorf("RenewAll of a node without leases = %v, %v; want nothing", got, err)
	}
}

func TestReleaseMakesTheLeaseAcquirableAtOnce(t *testing.T) {
	t.Parallel()
	_, s, _ := leaseDB(t)
	k1, k2, k3 := leaseKey(1), leaseKey(2), leaseKey(3)
	mustAcquire(t, s, "a", k1, time.Hour, true, 1)
	mustAcquire(t, s, "a", k2, time.Hour, true, 1)
	mustAcquire(t, s, "b", k3, time.Hour, true, 1)

	// b cannot release a's lease, nor a b's.
	if err := s.Release(t.Context(), "b", []txmanager.SignerKey{k1}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, s, "c", k1, time.Hour, false, 0)

	if err := s.Release(t.Context(), "a", []txmanager.SignerKey{k1, k2, k3}); err != nil {
		t.Fatal(err)
	}
	mustAcquire(t, s, "c", k1, time.Hour, true, 2)
	mustAcquire(t, s, "a", k2, time.Hour, true, 2) // a released it: a new claim, a new token
	mustAcquire(t, s, "c", k3, time.Hour, false, 0)

	if err := s.Release(t.Context(), "c", []txmanager.SignerKey{k1}); err != nil {
		t.Fatal(err)
	}
	ls, err := s.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if l := ls[0]; l.Key != k1 || l.Owner != "" || l.Held || !l.ExpiresAt.IsZero() || l.Token != 2 {
		t.Errorf("released lease = %+v; want no owner, not held, no expiry, token kept", l)
	}
}

func TestNodeRegistry(t *testing.T) {
	t.Parallel()
	_, s, pool := leaseDB(t)
	for _, n := range []string{"node-c", "node-a", "node-b"} {
		if err := s.Heartbeat(t.Context(), n, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	live := func() []string {
		t.Helper()
		nodes, err := s.LiveNodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return nodes
	}
	if diff := gocmp.Diff([]string{"node-a", "node-b", "node-c"}, live()); diff != "" {
		t.Errorf("live nodes (-want +got):\n%s", diff)
	}

	// A node whose heartbeat lapsed is dead, and comes back with a new
	// start time when it beats again.
	leaseExec(t, pool, `UPDATE node SET expires_at = now() - interval '1 second', started_at = now() - interval '1 hour' WHERE node_id = 'node-b'`)
	if diff := gocmp.Diff([]string{"node-a", "node-c"}, live()); diff != "" {
		t.Errorf("live nodes after node-b lapsed (-want +got):\n%s", diff)
	}
	if err := s.Heartbeat(t.Context(), "node-b", time.Minute); err != nil {
		t.Fatal(err)
	}
	var fresh bool
	if err := pool.QueryRow(t.Context(), `SELECT started_at > now() - interval '1 minute' FROM node WHERE node_id = 'node-b'`).Scan(&fresh); err != nil || !fresh {
		t.Errorf("node-b back from the dead: fresh start %t, %v; want a new start time", fresh, err)
	}

	if err := s.Deregister(t.Context(), "node-a"); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]string{"node-b", "node-c"}, live()); diff != "" {
		t.Errorf("live nodes after node-a left (-want +got):\n%s", diff)
	}
	if err := s.Heartbeat(t.Context(), "", time.Minute); err == nil {
		t.Error("heartbeat of an empty node id: want an error")
	}
}

func TestVacantListsSignersNobodyHolds(t *testing.T) {
	t.Parallel()
	_, s, pool := leaseDB(t)
	mustAcquire(t, s, "a", leaseKey(1), time.Hour, true, 1) // held
	mustAcquire(t, s, "a", leaseKey(2), time.Hour, true, 1) // lapsed
	leaseLapse(t, pool, leaseKey(2))
	mustAcquire(t, s, "a", leaseKey(3), time.Hour, true, 1) // released
	if err := s.Release(t.Context(), "a", []txmanager.SignerKey{leaseKey(3)}); err != nil {
		t.Fatal(err)
	}
	// leaseKey(4) was never leased.
	got, err := s.Vacant(t.Context(), []txmanager.SignerKey{leaseKey(1), leaseKey(2), leaseKey(3), leaseKey(4)})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b txmanager.SignerKey) int { return a.Signer.Cmp(b.Signer) })
	if diff := gocmp.Diff([]txmanager.SignerKey{leaseKey(2), leaseKey(3), leaseKey(4)}, got); diff != "" {
		t.Errorf("vacant (-want +got):\n%s", diff)
	}
}

// insertAssigned stores a transaction of key holding nonce, as the
// allocation step leaves it.
func insertAssigned(t *testing.T, pool *pgxpool.Pool, key txmanager.SignerKey, nonce int64) {
	t.Helper()
	leaseExec(t, pool, `
		INSERT INTO tx (tx_id, chain_id, signer, request_id, request_hash, to_address, value, route, state, nonce, gas_limit)
		VALUES (gen_random_uuid(), $1, $2, $3, sha256(convert_to($3, 'UTF8')), $2, 0, 'public', 'ALLOCATED', $4, 21000)`,
		int64(key.ChainID), key.Signer.Bytes(), fmt.Sprintf("req-%d", nonce), nonce)
}

func TestNextNonceTakesTheHighestOfCursorAssignedAndChain(t *testing.T) {
	t.Parallel()
	ptr := func(v uint64) *uint64 { return &v }
	tests := []struct {
		name     string
		cursor   *int64 // stored cursor, nil: none yet
		assigned []int64
		pending  *uint64
		want     uint64
	}{
		{name: "a new signer starts at zero", want: 0},
		{name: "a new signer already used on chain", pending: ptr(7), want: 7},
		{name: "the cursor leads", cursor: new(int64(12)), assigned: []int64{3, 4}, pending: ptr(5), want: 12},
		{name: "assigned nonces lead the cursor", cursor: new(int64(2)), assigned: []int64{0, 1, 2, 3, 9}, pending: ptr(4), want: 10},
		{name: "the chain leads (the key was used elsewhere)", cursor: new(int64(4)), assigned: []int64{2, 3}, pending: ptr(40), want: 40},
		{name: "without the chain term", cursor: new(int64(4)), assigned: []int64{5}, want: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, s, pool := leaseDB(t)
			k := leaseKey(1)
			mustAcquire(t, s, "a", k, time.Hour, true, 1)
			// Another signer's nonces never count.
			insertAssigned(t, pool, leaseKey(2), 1000)
			if tc.cursor != nil {
				leaseExec(t, pool, `INSERT INTO nonce_cursor VALUES ($1, $2, $3)`, int64(k.ChainID), k.Signer.Bytes(), *tc.cursor)
			}
			for _, n := range tc.assigned {
				insertAssigned(t, pool, k, n)
			}
			got, err := s.NextNonce(t.Context(), txmanager.Fence{Node: "a", Key: k, Token: 1}, tc.pending)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("next nonce = %d; want %d", got, tc.want)
			}
			var stored uint64
			if err := pool.QueryRow(t.Context(), `SELECT next_nonce FROM nonce_cursor WHERE signer = $1`, k.Signer.Bytes()).Scan(&stored); err != nil || stored != tc.want {
				t.Errorf("stored cursor = %d, %v; want %d", stored, err, tc.want)
			}
		})
	}
}

func TestNextNonceWithAStaleFenceChangesNothing(t *testing.T) {
	t.Parallel()
	_, s, pool := leaseDB(t)
	k := leaseKey(1)
	mustAcquire(t, s, "a", k, time.Hour, true, 1)
	fenceA := txmanager.Fence{Node: "a", Key: k, Token: 1}
	if n, err := s.NextNonce(t.Context(), fenceA, nil); err != nil || n != 0 {
		t.Fatalf("next nonce = %d, %v", n, err)
	}
	leaseExec(t, pool, `UPDATE nonce_cursor SET next_nonce = 5`)
	leaseLapse(t, pool, k)
	mustAcquire(t, s, "b", k, time.Hour, true, 2)

	ptr := func(v uint64) *uint64 { return &v }
	for _, f := range []txmanager.Fence{
		fenceA,                                  // taken over
		{Node: "b", Key: k, Token: 1},           // the owner, an old token
		{Node: "a", Key: k, Token: 2},           // the token, another node
		{Node: "b", Key: leaseKey(9), Token: 2}, // no lease at all
	} {
		_, err := s.NextNonce(t.Context(), f, ptr(50))
		var fe *txmanager.FencedError
		if !errors.Is(err, txmanager.ErrFenced) || !errors.As(err, &fe) || fe.Fence != f {
			t.Errorf("NextNonce(%+v) = %v; want a FencedError naming the fence", f, err)
		}
	}
	// An expired lease fences its own holder too.
	leaseLapse(t, pool, k)
	if _, err := s.NextNonce(t.Context(), txmanager.Fence{Node: "b", Key: k, Token: 2}, ptr(50)); !errors.Is(err, txmanager.ErrFenced) {
		t.Errorf("NextNonce on a lapsed lease = %v; want ErrFenced", err)
	}
	var rows, next int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), max(next_nonce) FROM nonce_cursor`).Scan(&rows, &next); err != nil || rows != 1 || next != 5 {
		t.Errorf("nonce cursors: %d rows, max %d, %v; want the one cursor untouched at 5", rows, next, err)
	}
}

// waitForLockWait polls until one of this test's sessions waits on a lock
// while running a statement that contains query.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, query string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(t.Context(), `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $2
			  AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%'`,
			query, testApp(t)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no statement with %q waits on a lock", query)
		}
		<-time.After(10 * time.Millisecond) // poll interval, within the deadline above
	}
}

// takeoverWaitsFor lets k's lease lapse while tx, a fenced transaction of
// its owner, is open; starts node b's takeover and requires it to wait for
// tx; commits tx and requires b to win with token 2. On failure the
// takeover stops before the caller rolls tx back.
func takeoverWaitsFor(t *testing.T, pool *pgxpool.Pool, sB *postgres.Store, k txmanager.SignerKey, tx pgx.Tx) {
	t.Helper()
	leaseLapse(t, pool, k)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	done := startTakeover(ctx, t, &wg, pool, sB, k)
	select {
	case r := <-done:
		t.Fatalf("takeover decided while a fenced transaction was open: %+v", r)
	default:
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.ok || r.token != 2 {
		t.Fatalf("takeover after the transaction ended = %+v; want token 2", r)
	}
}

// leaseHeldByA is the lease database with node a holding leaseKey(1) at
// token 1 through s, and node b's store sB on a pool of its own: the start
// of every test of a takeover racing a's writes.
func leaseHeldByA(t *testing.T) (s, sB *postgres.Store, pool *pgxpool.Pool, k txmanager.SignerKey) {
	t.Helper()
	url, s, pool := leaseDB(t)
	k = leaseKey(1)
	mustAcquire(t, s, "a", k, time.Hour, true, 1)
	return s, postgres.New(leasePool(t, url, 2, nil)), pool, k
}

// startTakeover starts node b's takeover of k in wg and returns once it
// waits on a lock (the lease row a's transaction holds); its result comes
// on the channel.
func startTakeover(ctx context.Context, t *testing.T, wg *sync.WaitGroup, pool *pgxpool.Pool, sB *postgres.Store, k txmanager.SignerKey) <-chan acquired {
	t.Helper()
	done := make(chan acquired, 1)
	wg.Go(func() {
		token, ok, err := sB.Acquire(ctx, "b", k, time.Hour)
		done <- acquired{token, ok, err}
	})
	waitForLockWait(t, pool, "INSERT INTO signer_lease")
	return done
}

// staleWriteDuringTakeover races a stale owner's write against a
// takeover, for the tests that check a write waiting on a takeover
// touches nothing: a (token 1 on k) begins a transaction while its lease
// is current, so its now() still sees the lease unexpired; the lease then
// lapses and node b's takeover starts, paused before it commits by a
// trigger waiting on a gate. a then writes with write, in its
// transaction; the write must wait for the takeover, b must win with
// token 2 once the gate opens, and the write must touch no row. a's
// transaction is returned still open, for the caller's own checks.
func staleWriteDuringTakeover(t *testing.T, pool *pgxpool.Pool, sB *postgres.Store, k txmanager.SignerKey, write func(context.Context, pgx.Tx) (int64, error)) pgx.Tx {
	t.Helper()
	leaseExec(t, pool, `
		CREATE FUNCTION pause_takeover() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NEW; END $$;
		CREATE TRIGGER pause_takeover BEFORE UPDATE ON signer_lease
			FOR EACH ROW WHEN (NEW.owner_node = 'b') EXECUTE FUNCTION pause_takeover()`)

	txA, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { txA.Rollback(context.Background()) })
	if _, err := txA.Exec(t.Context(), `SELECT now()`); err != nil { // a's now() is fixed here, lease current
		t.Fatal(err)
	}
	leaseExec(t, pool, `UPDATE signer_lease SET expires_at = clock_timestamp()`) // lapses after a's now()

	gate, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Release()
	if _, err := gate.Exec(t.Context(), `SELECT pg_advisory_lock(4242)`); err != nil {
		t.Fatal(err)
	}
	defer gate.Exec(context.Background(), `SELECT pg_advisory_unlock_all()`)
	// On failure, stop both statements before unlocking and rolling back.
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	done := startTakeover(ctx, t, &wg, pool, sB, k)

	wrote := make(chan int64, 1)
	wg.Go(func() {
		n, err := write(ctx, txA)
		if err != nil {
			t.Error(err)
		}
		wrote <- n
	})
	// The write waits for the takeover (a stale write that went ahead
	// would land now, and fail the check below).
	waitForLockWait(t, pool, "INSERT INTO nonce_cursor")
	if _, err := gate.Exec(t.Context(), `SELECT pg_advisory_unlock(4242)`); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || !r.ok || r.token != 2 {
		t.Fatalf("takeover = %+v; want token 2", r)
	}
	if n := <-wrote; n != 0 {
		t.Errorf("stale owner's write landed after the takeover: %d rows", n)
	}
	return txA
}

// fencedBump is a fenced write as the transaction code makes them: it
// moves key's nonce cursor up by one, only under f.
func fencedBump(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, f txmanager.Fence) (int64, error) {
	fence, args := postgres.FenceSQL(f, 0)
	tag, err := db.Exec(ctx, `
		INSERT INTO nonce_cursor AS c (chain_id, signer, next_nonce)
		SELECT $1::bigint, $2::bytea, 1 WHERE `+fence+`
		ON CONFLICT (chain_id, signer) DO UPDATE SET next_nonce = c.next_nonce + 1`, args...)
	return tag.RowsAffected(), err
}

type acquired struct {
	token int64
	ok    bool
	err   error
}

// TestTakeoverWaitsForAFencedTransactionInFlight: a node paused inside a
// fenced transaction keeps its lease row share-locked, so another node's
// takeover of the lapsed lease waits for that transaction to end instead
// of deciding while a stale write may still commit. Renewals do not wait.
func TestTakeoverWaitsForAFencedTransactionInFlight(t *testing.T) {
	t.Parallel()
	s, sB, pool, k := leaseHeldByA(t)
	fenceA := txmanager.Fence{Node: "a", Key: k, Token: 1}
	// The cursor exists, so the write below is an update that no foreign
	// key check locks for it: the fence alone must.
	leaseExec(t, pool, `INSERT INTO nonce_cursor VALUES ($1, $2, 0)`, int64(k.ChainID), k.Signer.Bytes())

	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if n, err := fencedBump(t.Context(), tx, fenceA); err != nil || n != 1 {
		t.Fatalf("fenced write = %d rows, %v; want 1", n, err)
	}
	// The owner's renewal does not queue behind its own writes.
	if got, err := s.RenewAll(t.Context(), "a", time.Hour); err != nil || got[k] != 1 {
		t.Fatalf("renew during a fenced transaction = %v, %v", got, err)
	}

	takeoverWaitsFor(t, pool, sB, k, tx) // a stops renewing, its transaction still open
	// From now on a's writes touch nothing.
	if n, err := fencedBump(t.Context(), pool, fenceA); err != nil || n != 0 {
		t.Errorf("stale write after takeover = %d rows, %v; want 0", n, err)
	}
	if n, err := fencedBump(t.Context(), pool, txmanager.Fence{Node: "b", Key: k, Token: 2}); err != nil || n != 1 {
		t.Errorf("new owner's write = %d rows, %v; want 1", n, err)
	}
}

// TestAFencedWriteWaitingOnATakeoverTouchesNothing: a stale owner whose
// transaction began before its lease lapsed (so its now() still sees the
// lease as unexpired) writes while another node's takeover is under way
// but not committed (paused by a trigger here). The write waits for the
// takeover, re-reads the lease and touches nothing.
func TestAFencedWriteWaitingOnATakeoverTouchesNothing(t *testing.T) {
	t.Parallel()
	_, sB, pool, k := leaseHeldByA(t)
	txA := staleWriteDuringTakeover(t, pool, sB, k, func(ctx context.Context, txA pgx.Tx) (int64, error) {
		return fencedBump(ctx, txA, txmanager.Fence{Node: "a", Key: k, Token: 1})
	})
	if err := txA.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := leaseExec(t, pool, `SELECT 1 FROM nonce_cursor`); n != 0 {
		t.Errorf("nonce cursor written by the stale owner")
	}
}

// TestAcquireRaceKeepsOneHolderAndRisingTokens: 20 goroutines on three
// pools, as three nodes, acquire, renew and release one signer's lease
// while it lapses every few milliseconds, and write under their fences. A
// trigger records every version of the lease row, in one sequence with
// the fenced writes. Then: every change of holder happened on a free or
// expired lease and raised the token by one, so no two nodes ever held an
// unexpired lease at once; one token never had two holders; and every
// fenced write landed while its token was the current one.
func TestAcquireRaceKeepsOneHolderAndRisingTokens(t *testing.T) {
	t.Parallel()
	url, _, pool := leaseDB(t)
	leaseExec(t, pool, `
		CREATE SEQUENCE race_seq;
		CREATE TABLE lease_audit (
			seq bigint, at timestamptz,
			old_owner text, old_token bigint, old_expires timestamptz,
			new_owner text, new_token bigint, new_expires timestamptz, new_acquired timestamptz);
		CREATE FUNCTION lease_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO lease_audit VALUES (nextval('race_seq'), now(),
				OLD.owner_node, OLD.fencing_token, OLD.expires_at,
				NEW.owner_node, NEW.fencing_token, NEW.expires_at, NEW.acquired_at);
			RETURN NEW;
		END $$;
		CREATE TRIGGER lease_audit AFTER INSERT OR UPDATE ON signer_lease FOR EACH ROW EXECUTE FUNCTION lease_audit();
		CREATE TABLE fenced_write (seq bigint, node text, token bigint)`)

	nodes := []string{"a", "b", "c"}
	var pools []*pgxpool.Pool
	for range nodes {
		pools = append(pools, leasePool(t, url, 8, nil))
	}
	k := leaseKey(1)
	ttls := []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

	type win struct {
		node  string
		token int64
	}
	var (
		mu   sync.Mutex
		wins []win
		wg   sync.WaitGroup
	)
	for g := range 20 {
		node, p := nodes[g%3], pools[g%3]
		s := postgres.New(p)
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		wg.Go(func() {
			ctx := t.Context()
			var last int64
			for range 100 {
				token, ok, err := s.Acquire(ctx, node, k, ttls[rng.IntN(len(ttls))])
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				if token < last {
					t.Errorf("%s got token %d after %d", node, token, last)
				}
				last = token
				mu.Lock()
				wins = append(wins, win{node, token})
				mu.Unlock()
				f := txmanager.Fence{Node: node, Key: k, Token: token}
				switch rng.IntN(5) {
				case 0:
					err = s.Release(ctx, node, []txmanager.SignerKey{k})
				case 1:
					_, err = s.RenewAll(ctx, node, ttls[rng.IntN(len(ttls))])
				default:
					// A fenced transaction of two writes, as an
					// allocation batch is.
					fence, args := postgres.FenceSQL(f, 0)
					err = pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
						for range 2 {
							if _, err := tx.Exec(ctx, `INSERT INTO fenced_write SELECT nextval('race_seq'), $3, $4 WHERE `+fence, args...); err != nil {
								return err
							}
						}
						return nil
					})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	holder := make(map[int64]string)
	for _, w := range wins {
		if h, seen := holder[w.token]; seen && h != w.node {
			t.Errorf("token %d held by both %s and %s", w.token, h, w.node)
		}
		holder[w.token] = w.node
	}

	type version struct {
		seq, oldToken, newToken     int64
		at, oldExpires, newAcquired time.Time
		oldOwner, newOwner          *string
		isInsert                    bool
	}
	rows, err := pool.Query(t.Context(), `
		SELECT seq, at, old_owner, coalesce(old_token, 0), coalesce(old_expires, '-infinity'), old_token IS NULL,
			new_owner, new_token, new_acquired
		FROM lease_audit ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (version, error) {
		var v version
		var oldExpires pgtype.Timestamptz
		err := row.Scan(&v.seq, &v.at, &v.oldOwner, &v.oldToken, &oldExpires, &v.isInsert, &v.newOwner, &v.newToken, &v.newAcquired)
		if oldExpires.InfinityModifier == pgtype.Finite {
			v.oldExpires = oldExpires.Time
		}
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	introducedBy := make(map[int64]string) // token -> the node that took it
	takeovers := 0
	for _, v := range versions {
		switch {
		case v.isInsert:
			if v.newToken != 1 || v.newOwner == nil {
				t.Errorf("seq %d: first lease with token %d, owner %v", v.seq, v.newToken, v.newOwner)
			}
			introducedBy[v.newToken] = *v.newOwner
		case v.newToken == v.oldToken+1:
			// A change of holder: only on a free or expired lease.
			if v.newOwner == nil || !(v.oldOwner == nil || !v.oldExpires.After(v.at)) || !v.newAcquired.Equal(v.at) {
				t.Errorf("seq %d: token %d -> %d taken by %v from %v whose lease ran to %v, at %v",
					v.seq, v.oldToken, v.newToken, v.newOwner, v.oldOwner, v.oldExpires, v.at)
				continue
			}
			introducedBy[v.newToken] = *v.newOwner
			takeovers++
		case v.newToken == v.oldToken:
			// A renewal by the holder of an unexpired lease, or a release.
			if v.newOwner != nil && (v.oldOwner == nil || *v.oldOwner != *v.newOwner || !v.oldExpires.After(v.at)) {
				t.Errorf("seq %d: token %d kept by %v over %v's lease that ran to %v, at %v", v.seq, v.newToken, *v.newOwner, v.oldOwner, v.oldExpires, v.at)
			}
		default:
			t.Errorf("seq %d: token %d -> %d", v.seq, v.oldToken, v.newToken)
		}
	}
	for token, node := range holder {
		if introducedBy[token] != node {
			t.Errorf("token %d: acquired by %s, recorded for %s", token, node, introducedBy[token])
		}
	}

	rows, err = pool.Query(t.Context(), `SELECT seq, node, token FROM fenced_write ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	type write struct {
		Seq   int64
		Node  string
		Token int64
	}
	writes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[write])
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		// The lease version current when the write ran: the last one
		// recorded before it in the shared sequence.
		i, _ := slices.BinarySearchFunc(versions, w.Seq, func(v version, seq int64) int { return cmp.Compare(v.seq, seq) })
		if i == 0 {
			t.Errorf("write %+v before any lease", w)
			continue
		}
		if cur := versions[i-1]; cur.newToken != w.Token || introducedBy[w.Token] != w.Node {
			t.Errorf("write %+v landed while token %d (of %s) was current", w, cur.newToken, introducedBy[cur.newToken])
		}
	}
	// The race must have raced.
	if takeovers < 10 || len(writes) < 10 {
		t.Errorf("only %d changes of holder and %d fenced writes: the race did not exercise the lease", takeovers, len(writes))
	}
	t.Logf("%d acquisitions, %d changes of holder, %d fenced writes", len(wins), takeovers, len(writes))
}
