package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

var (
	alice = common.HexToAddress("0x00000000000000000000000000000000000a11ce")
	bob   = common.HexToAddress("0x0000000000000000000000000000000000000b0b")
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// store is a migrated store on an isolated schema, with a pool of maxConns.
func store(t *testing.T, maxConns int32) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := pg.Open(context.Background(), pgtest.URL(t), pg.PoolOptions{MaxConns: maxConns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(context.Background(), pool, nil); err != nil {
		t.Fatal(err)
	}
	return postgres.New(pool), pool
}

func intent(requestID string, value int64) *txmanager.Intent {
	to := bob
	return &txmanager.Intent{ChainID: 31337, From: alice, RequestID: requestID, To: &to, Value: big.NewInt(value),
		Data: []byte{}, Route: txmanager.RoutePublic, Metadata: json.RawMessage(`{"order": "A-1", "desk": 7}`)}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOneRequestIDIsOneTransaction: 100 concurrent creates of one request
// give exactly one transaction and one event; the same intent spelled
// differently is the same request; another body under the id is a
// conflict, and stores nothing.
func TestOneRequestIDIsOneTransaction(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 20)
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, 100)
	created := make([]bool, 100)
	errors := make([]error, 100)
	for i := range 100 {
		wg.Go(func() {
			tx, c, err := s.Create(ctx(t), intent("order-1", 1000))
			ids[i], created[i], errors[i] = tx.ID, c, err
		})
	}
	wg.Wait()
	n := 0
	for i := range 100 {
		if errors[i] != nil {
			t.Fatalf("create %d: %v", i, errors[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("create %d answered %s, create 0 %s", i, ids[i], ids[0])
		}
		if created[i] {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d creates say they created the transaction, want 1", n)
	}
	if got := count(t, pool, `SELECT count(*) FROM tx`); got != 1 {
		t.Errorf("%d transactions stored, want 1", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM event`); got != 1 {
		t.Errorf("%d events, want 1", got)
	}

	respelled := intent("order-1", 1000)
	respelled.Metadata = json.RawMessage(`{ "desk":7,"order":"A-1" }`)
	if tx, c, err := s.Create(ctx(t), respelled); err != nil || c || tx.ID != ids[0] {
		t.Errorf("the same intent, metadata respelled: %s created=%v %v", tx.ID, c, err)
	}
	for name, other := range map[string]*txmanager.Intent{
		"another value": intent("order-1", 1001),
		"another metadata": func() *txmanager.Intent {
			in := intent("order-1", 1000)
			in.Metadata = json.RawMessage(`{"order": "A-2"}`)
			return in
		}(),
		"another route": func() *txmanager.Intent { in := intent("order-1", 1000); in.Route = txmanager.RoutePrivate; return in }(),
	} {
		_, _, err := s.Create(ctx(t), other)
		if errs.KindOf(err) != errs.Conflict {
			t.Errorf("%s under a used request id: %v, want a conflict", name, err)
		}
	}
	if got := count(t, pool, `SELECT count(*) FROM tx`); got != 1 {
		t.Errorf("%d transactions after the conflicts, want 1", got)
	}
}

func TestCreateRefusesBadIntentsAndStoresNothing(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	missing := uuid.Must(uuid.NewV7())
	tooBig := new(big.Int).Lsh(big.NewInt(1), 256)
	tests := map[string]func(*txmanager.Intent){
		"no request id":           func(in *txmanager.Intent) { in.RequestID = "" },
		"a value over uint256":    func(in *txmanager.Intent) { in.Value = tooBig },
		"a negative value":        func(in *txmanager.Intent) { in.Value = big.NewInt(-1) },
		"a creation without data": func(in *txmanager.Intent) { in.To = nil },
		"a bad route":             func(in *txmanager.Intent) { in.Route = "fast" },
		"metadata not an object":  func(in *txmanager.Intent) { in.Metadata = json.RawMessage(`[1]`) },
		"tip above fee cap": func(in *txmanager.Intent) {
			in.MaxFeePerGas, in.MaxPriorityFeePerGas = big.NewInt(1), big.NewInt(2)
		},
		"an unknown dependency": func(in *txmanager.Intent) { in.DependsOn = dependson.List{missing} },
	}
	for name, spoil := range tests {
		in := intent("bad-"+name, 1)
		spoil(in)
		if _, _, err := s.Create(ctx(t), in); errs.KindOf(err) != errs.Invalid {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	if got := count(t, pool, `SELECT count(*) FROM tx`) + count(t, pool, `SELECT count(*) FROM event`); got != 0 {
		t.Errorf("%d rows stored by refused creates", got)
	}
}

func TestGetListAndPaginate(t *testing.T) {
	t.Parallel()
	s, _ := store(t, 4)
	var want []uuid.UUID
	for i := range 25 {
		tx, _, err := s.Create(ctx(t), intent(fmt.Sprintf("list-%02d", i), int64(i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append([]uuid.UUID{tx.ID}, want...) // newest first
	}
	got, err := s.Get(ctx(t), want[0])
	if err != nil || got.RequestID != "list-24" || got.Value.Int64() != 24 || got.State != txmanager.StateInit || string(got.Metadata) == "" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := s.Get(ctx(t), uuid.Must(uuid.NewV7())); errs.KindOf(err) != errs.NotFound {
		t.Errorf("get of an unknown id: %v", err)
	}

	var seen []uuid.UUID
	cursor := ""
	for page := 0; ; page++ {
		txs, next, err := s.List(ctx(t), txmanager.TxFilter{ChainID: 31337, Signer: &alice, State: txmanager.StateInit}, cursor, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range txs {
			seen = append(seen, tx.ID)
		}
		if next == "" {
			break
		}
		cursor = next
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("pages gave %d transactions in another order than newest first", len(seen))
	}
	if txs, _, err := s.List(ctx(t), txmanager.TxFilter{State: txmanager.StateFailed}, "", 10); err != nil || len(txs) != 0 {
		t.Errorf("FAILED filter: %d, %v", len(txs), err)
	}
	if _, _, err := s.List(ctx(t), txmanager.TxFilter{}, "garbage", 10); errs.KindOf(err) != errs.Invalid {
		t.Errorf("a bad cursor: %v", err)
	}
}

func TestCancelOnlyWithoutANonce(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	tx, _, err := s.Create(ctx(t), intent("cancel-me", 1))
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Cancel(ctx(t), tx.ID)
	if err != nil || c.State != txmanager.StateCancelled || c.Reason != txmanager.ReasonCancelRequested {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if again, err := s.Cancel(ctx(t), tx.ID); err != nil || again.State != txmanager.StateCancelled {
		t.Errorf("cancel twice: %+v %v", again, err)
	}
	if got := count(t, pool, `SELECT count(*) FROM event WHERE tx_id = $1`, tx.ID); got != 2 {
		t.Errorf("%d events, want INIT and CANCELLED", got)
	}

	allocated, _, err := s.Create(ctx(t), intent("has-a-nonce", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), `UPDATE tx SET state = 'ALLOCATED', nonce = 0, gas_limit = 21000 WHERE tx_id = $1`, allocated.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx(t), allocated.ID); errs.KindOf(err) != errs.Conflict {
		t.Errorf("cancel with a nonce: %v, want a conflict", err)
	}
}

// TestTheSchemaRefusesImpossibleRows: the constraints tie fields to states
// and keep one transaction per nonce, whatever code writes.
func TestTheSchemaRefusesImpossibleRows(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	a, _, _ := s.Create(ctx(t), intent("a", 1))
	b, _, _ := s.Create(ctx(t), intent("b", 1))
	for name, sql := range map[string]string{
		"INIT with a nonce":           `UPDATE tx SET nonce = 3 WHERE tx_id = '` + a.ID.String() + `'`,
		"ALLOCATED without a nonce":   `UPDATE tx SET state = 'ALLOCATED', gas_limit = 21000 WHERE tx_id = '` + a.ID.String() + `'`,
		"SIGNED without an attempt":   `UPDATE tx SET state = 'SIGNED', nonce = 1, gas_limit = 21000 WHERE tx_id = '` + a.ID.String() + `'`,
		"SIMULATED without gas limit": `UPDATE tx SET state = 'SIMULATED' WHERE tx_id = '` + a.ID.String() + `'`,
		"two transactions at one nonce": `UPDATE tx SET state = 'ALLOCATED', nonce = 5, gas_limit = 21000
			WHERE tx_id IN ('` + a.ID.String() + `', '` + b.ID.String() + `')`,
		"an unknown state": `UPDATE tx SET state = 'LOST' WHERE tx_id = '` + a.ID.String() + `'`,
	} {
		if _, err := pool.Exec(ctx(t), sql); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestTheFeedIsGapFreeWhileWritersOverlap: an event written by a
// transaction still open holds the numbering back, so a reader following
// the feed by seq never skips one; once it ends, everything is numbered in
// the order it was written.
func TestTheFeedIsGapFreeWhileWritersOverlap(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 30)
	early, _, err := s.Create(ctx(t), intent("early", 1))
	if err != nil {
		t.Fatal(err)
	}
	// A writer that stays open with its event written, as a state change
	// does (holding the event barrier shared).
	slow, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(context.Background())
	if _, err := slow.Exec(ctx(t), `INSERT INTO event (tx_id, type, payload)
		SELECT $1, 'tx.state_changed', '{"to_state": "SIMULATED"}' FROM (SELECT pg_advisory_xact_lock_shared($2)) AS writing`,
		early.ID, int64(postgres.EventBarrier)); err != nil {
		t.Fatal(err)
	}
	late, _, err := s.Create(ctx(t), intent("late", 1))
	if err != nil {
		t.Fatal(err)
	}
	// One try while the writer is open: it may not number past it.
	if n, err := s.Sequence(ctx(t)); err != nil || n != 0 {
		t.Fatalf("numbered %d (%v) while a writer is open; want none", n, err)
	}
	if err := slow.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// Sequence's 0 may also mean that other writers were in flight (every
	// test of the database shares the barrier): SequenceAll is the call
	// that numbers whatever was committed before it, however busy.
	if n, err := s.SequenceAll(ctx(t)); err != nil || n != 3 {
		t.Fatalf("numbered %d (%v) once the writer ended; want 3", n, err)
	}
	evs, err := s.EventsAfter(ctx(t), 0, 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("feed: %d events, %v", len(evs), err)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.ChainID != 31337 || e.Type != txmanager.EventStateChanged {
			t.Errorf("event %d: %+v", i, e)
		}
	}
	if evs[0].TxID != early.ID || evs[1].TxID != early.ID || evs[2].TxID != late.ID {
		t.Errorf("feed order %s %s %s; want early, early, late", evs[0].TxID, evs[1].TxID, evs[2].TxID)
	}

	// Many writers and a sequencer racing, a reader following the feed:
	// every event exactly once, seq contiguous.
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if _, _, err := s.Create(ctx(t), intent(fmt.Sprintf("race-%d", i), int64(i))); err != nil {
				t.Error(err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[uuid.UUID]int{}
	var after uint64 = 3
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		if _, err := s.Sequence(ctx(t)); err != nil {
			t.Fatal(err)
		}
		evs, err := s.EventsAfter(ctx(t), after, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Seq != after+1 {
				t.Fatalf("feed jumped from %d to %d", after, e.Seq)
			}
			after = e.Seq
			seen[e.TxID]++
		}
		if finished && len(evs) == 0 && count(t, pool, `SELECT count(*) FROM event WHERE seq IS NULL`) == 0 {
			break
		}
	}
	if len(seen) != 200 || after != 203 {
		t.Errorf("the reader saw %d transactions' events up to seq %d; want 200 up to 203", len(seen), after)
	}
}
