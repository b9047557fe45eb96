package postgres_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

type createOutcome struct {
	in      *txmanager.Intent
	tx      txmanager.Tx
	created bool
	err     error
}

// gather queues the intents as one batch, in order, and returns each
// create's outcome in the same order.
func gather(t *testing.T, s *postgres.Store, intents []*txmanager.Intent) []createOutcome {
	t.Helper()
	queued, release := postgres.HoldCreates(s)
	out := make([]createOutcome, len(intents))
	done := make(chan int, len(intents))
	for i, in := range intents {
		go func() {
			tx, created, err := s.Create(ctx(t), in)
			out[i] = createOutcome{in, tx, created, err}
			done <- i
		}()
		// One at a time, so that the queue keeps the intents' order.
		waitFor(t, fmt.Sprintf("create %d queues", i), func() bool { return queued() == i+1 })
	}
	release()
	for range intents {
		<-done
	}
	return out
}

// waitFor polls cond until it holds, failing t after ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.For(t, 10*time.Second, what, cond)
}

// Creates that share a statement store every field as a lone create
// would, keep one transaction per request id inside the batch (a repeat
// answers with the first, another body is a conflict), and give each
// transaction its one INIT event.
func TestCreatesShareAStatement(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 8)
	parent, _, err := s.Create(ctx(t), intent("parent", 1))
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := s.Create(ctx(t), intent("other-parent", 1))
	if err != nil {
		t.Fatal(err)
	}
	gas, fee, tip := uint64(90_000), big.NewInt(30_000_000_000), big.NewInt(2_000_000_000)
	var intents []*txmanager.Intent
	intents = append(intents, intent("dup", 5))
	for i := range 10 {
		in := intent(fmt.Sprintf("order-%d", i), int64(i))
		switch i % 3 {
		case 0: // a contract creation with every optional field
			in.To, in.Data, in.Gas, in.MaxFeePerGas, in.MaxPriorityFeePerGas = nil, []byte{0x60, 0x80, byte(i)}, &gas, fee, tip
			in.DependsOn, in.Route = dependson.List{other.ID, parent.ID}, txmanager.RoutePrivate
			in.Metadata = json.RawMessage(fmt.Sprintf(`{"n": %d, "big": 123456789012345678901234567890}`, i))
		case 1:
			in.Value = new(big.Int).Lsh(big.NewInt(1), 255)
			in.Metadata = nil
		}
		intents = append(intents, in)
	}
	intents = append(intents, intent("dup", 5), intent("dup", 6), intent("dup", 5))

	out := gather(t, s, intents)
	for i, o := range out[:11] {
		if o.err != nil || !o.created {
			t.Fatalf("create %d (%s): created=%v %v", i, o.in.RequestID, o.created, o.err)
		}
		stored, err := s.Get(ctx(t), o.tx.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(stored, o.tx) {
			t.Errorf("%s: create answered\n%+v\nthe store holds\n%+v", o.in.RequestID, o.tx, stored)
		}
		sameIntent(t, o.in, stored)
	}
	for _, i := range []int{11, 13} {
		if o := out[i]; o.err != nil || o.created || o.tx.ID != out[0].tx.ID {
			t.Errorf("repeat %d of dup: %s created=%v %v; want the first's %s, not created", i, o.tx.ID, o.created, o.err, out[0].tx.ID)
		}
	}
	if o := out[12]; errs.KindOf(o.err) != errs.Conflict {
		t.Errorf("dup with another body: %v, want a conflict", o.err)
	}
	if got := count(t, pool, `SELECT count(*) FROM tx`); got != 13 {
		t.Errorf("%d transactions, want 13 (the parents and 11 created)", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM tx t JOIN event e USING (tx_id) WHERE e.type = 'tx.state_changed'`); got != 13 {
		t.Errorf("%d INIT events, want one per transaction", got)
	}
}

// One bad create spoils a shared statement; it is then retried alone, and
// only it fails, with its own error.
func TestABadCreateFailsAloneInABatch(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 8)
	missing, gone := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	parent, _, err := s.Create(ctx(t), intent("parent", 1))
	if err != nil {
		t.Fatal(err)
	}
	var intents []*txmanager.Intent
	for i := range 6 {
		in := intent(fmt.Sprintf("good-%d", i), int64(i))
		if i == 3 {
			in.RequestID, in.DependsOn = "orphan", dependson.List{parent.ID, missing, gone}
		}
		intents = append(intents, in)
	}
	out := gather(t, s, intents)
	for i, o := range out {
		if i == 3 {
			// Each missing parent is named by its place.
			var e *errs.Error
			if !errors.As(o.err, &e) || e.Kind != errs.Invalid || !reflect.DeepEqual(e.Fields, []errs.FieldError{
				{Pointer: "/depends_on/1", Detail: "no transaction " + missing.String()},
				{Pointer: "/depends_on/2", Detail: "no transaction " + gone.String()}}) {
				t.Errorf("create with unknown parents: %#v, want invalid naming /depends_on/1 and /depends_on/2", o.err)
			}
			continue
		}
		if o.err != nil || !o.created {
			t.Errorf("good create %d beside a bad one: created=%v %v", i, o.created, o.err)
		}
	}
	if got := count(t, pool, `SELECT count(*) FROM tx`); got != 6 {
		t.Errorf("%d transactions, want the parent and the 5 good ones", got)
	}
	if got := count(t, pool, `SELECT count(*) FROM event`); got != 6 {
		t.Errorf("%d events, want 6", got)
	}
}

// sameIntent checks that a stored transaction carries the intent sent:
// every field equal, and the metadata the same JSON, every digit kept.
func sameIntent(t *testing.T, in *txmanager.Intent, got txmanager.Tx) {
	t.Helper()
	want := *in
	if len(want.Metadata) == 0 {
		want.Metadata = json.RawMessage(`{}`)
	}
	if a, b := decodeJSON(t, want.Metadata), decodeJSON(t, got.Metadata); !reflect.DeepEqual(a, b) {
		t.Errorf("%s: metadata %s, want %s", in.RequestID, got.Metadata, want.Metadata)
	}
	stored := got.Intent
	want.Metadata, stored.Metadata = nil, nil
	if !reflect.DeepEqual(want, stored) {
		t.Errorf("%s: stored intent\n%+v\nwant\n%+v", in.RequestID, stored, want)
	}
}

func decodeJSON(t *testing.T, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

// Two nodes whose batches hold the same request ids in opposite orders
// store each request once: neither deadlocks nor duplicates, and every
// create is answered with the one transaction.
func TestTwoNodesBatchTheSameRequestIDs(t *testing.T) {
	t.Parallel()
	a, pool := store(t, 8)
	b := postgres.New(pool)
	const n = 40
	forward, backward := make([]*txmanager.Intent, n), make([]*txmanager.Intent, n)
	for i := range n {
		forward[i] = intent(fmt.Sprintf("shared-%02d", i), int64(i))
		backward[n-1-i] = intent(fmt.Sprintf("shared-%02d", i), int64(i))
	}
	queuedA, releaseA := postgres.HoldCreates(a)
	queuedB, releaseB := postgres.HoldCreates(b)
	results := make(chan createOutcome, 2*n)
	for _, node := range []struct {
		s       *postgres.Store
		intents []*txmanager.Intent
	}{{a, forward}, {b, backward}} {
		go func() {
			for _, r := range node.s.CreateMany(ctx(t), node.intents) {
				results <- createOutcome{tx: r.Tx, created: r.Created, err: r.Err}
			}
		}()
	}
	waitFor(t, "both nodes queue their batch", func() bool { return queuedA() == n && queuedB() == n })
	releaseA()
	releaseB()
	created := map[string]int{}
	ids := map[string]uuid.UUID{}
	for range 2 * n {
		o := <-results
		if o.err != nil {
			t.Fatalf("create: %v", o.err)
		}
		if id, ok := ids[o.tx.RequestID]; ok && id != o.tx.ID {
			t.Errorf("request %s answered %s and %s", o.tx.RequestID, id, o.tx.ID)
		}
		ids[o.tx.RequestID] = o.tx.ID
		if o.created {
			created[o.tx.RequestID]++
		}
	}
	for i := range n {
		if id := fmt.Sprintf("shared-%02d", i); created[id] != 1 {
			t.Errorf("request %s created %d times, want once", id, created[id])
		}
	}
	if got := count(t, pool, `SELECT count(*) FROM tx`); got != n {
		t.Errorf("%d transactions, want %d", got, n)
	}
}

// The INIT event of each create, in a batch or alone, carries what links
// its transaction to others: its dependency, and the transit id its
// metadata names (a transfer between chains, which the ledger books by
// them); a create that names neither carries neither.
func TestTheInitEventLinksATransfer(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 8)
	source := intent("source", 1)
	source.Metadata = json.RawMessage(`{"transit_id": "rebalance:2025-01-15.7", "desk": 7}`)
	src, _, err := s.Create(ctx(t), source)
	if err != nil {
		t.Fatal(err)
	}
	destination := intent("destination", 2)
	other, _, err := s.Create(ctx(t), intent("other", 1))
	if err != nil {
		t.Fatal(err)
	}
	destination.DependsOn, destination.Metadata = dependson.List{src.ID}, json.RawMessage(`{"transit_id": "rebalance:2025-01-15.7"}`)
	plain, dependent := intent("plain", 3), intent("dependent", 4)
	dependent.DependsOn = dependson.List{other.ID, src.ID}
	badID := intent("bad-id", 5)
	badID.Metadata = json.RawMessage(`{"transit_id": "not a transit id"}`)
	// The gateway puts each tenant's transits in a namespace of its own,
	// which the event carries beside the id (and only with one).
	namespaced, nsPlain := intent("namespaced", 6), intent("namespaced-plain", 7)
	namespaced.Metadata, namespaced.TransitNamespace = json.RawMessage(`{"transit_id": "rebalance:2025-01-15.7"}`), "tenant-a"
	nsPlain.TransitNamespace = "tenant-a"
	out := gather(t, s, []*txmanager.Intent{destination, plain, dependent, badID, namespaced, nsPlain})
	for _, o := range out {
		if o.err != nil || !o.created {
			t.Fatalf("create %s: created=%v %v", o.in.RequestID, o.created, o.err)
		}
	}
	srcID := src.ID.String()
	want := map[uuid.UUID]map[string]any{
		src.ID:       {"to_state": "INIT", "transit_id": "rebalance:2025-01-15.7"},
		other.ID:     {"to_state": "INIT"},
		out[0].tx.ID: {"to_state": "INIT", "transit_id": "rebalance:2025-01-15.7", "depends_on": []any{srcID}},
		out[1].tx.ID: {"to_state": "INIT"},
		out[2].tx.ID: {"to_state": "INIT", "depends_on": []any{other.ID.String(), srcID}},
		out[3].tx.ID: {"to_state": "INIT"},
		out[4].tx.ID: {"to_state": "INIT", "transit_id": "rebalance:2025-01-15.7", "transit_namespace": "tenant-a"},
		out[5].tx.ID: {"to_state": "INIT"},
	}
	rows, err := pool.Query(ctx(t), `SELECT tx_id, payload FROM event WHERE type = 'tx.state_changed'`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uuid.UUID]map[string]any{}
	for rows.Next() {
		var id uuid.UUID
		var payload map[string]any
		if err := rows.Scan(&id, &payload); err != nil {
			t.Fatal(err)
		}
		got[id] = payload
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("INIT events\n%v\nwant\n%v", got, want)
	}
}
