package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// TestTheDependsOnMigrationKeepsEachParent: rows and INIT events stored
// when a transaction had one parent at most come out of the migration
// with that parent as an array of one, and a transaction without one
// with none; the database still refuses an unknown parent afterwards.
func TestTheDependsOnMigrationKeepsEachParent(t *testing.T) {
	t.Parallel()
	pool, version := migratedBefore(t, "depends_on_many")
	parent := oldRow(t, pool, "parent", nil)
	child := oldRow(t, pool, "child", parent)
	lone := oldRow(t, pool, "lone", nil)

	applied, err := postgres.Migrations.Up(ctx(t), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0].Version != version {
		t.Fatalf("applied %v, want the depends_on migration first", applied)
	}
	s := postgres.New(pool)
	for id, want := range map[uuid.UUID]dependson.List{parent: nil, child: {parent}, lone: nil} {
		tx, err := s.Get(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, tx.DependsOn); diff != "" {
			t.Errorf("the parents of %s after the migration (-want +got):\n%s", id, diff)
		}
	}
	var payload map[string]any
	if err := pool.QueryRow(ctx(t), `SELECT payload FROM event WHERE tx_id = $1`, child).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"to_state": "INIT", "depends_on": []any{parent.String()}, "transit_id": "move-1"}, payload); diff != "" {
		t.Errorf("the child's INIT event after the migration (-want +got):\n%s", diff)
	}
	in := intent("after", 1)
	in.DependsOn = dependson.List{child, uuid.Must(uuid.NewV7())}
	if _, _, err := s.Create(ctx(t), in); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "depends_on/1") {
		t.Errorf("an unknown parent after the migration: %v", err)
	}
}

// migratedBefore is a pool on a fresh schema migrated up to the
// migration named name, left out, and that migration's version.
func migratedBefore(t *testing.T, name string) (*pgxpool.Pool, int64) {
	t.Helper()
	before := fstest.MapFS{}
	var version int64
	for _, m := range postgres.Migrations.List() {
		if m.Name == name {
			version = m.Version
			break
		}
		before[fmt.Sprintf("%04d_%s.sql", m.Version, m.Name)] = &fstest.MapFile{Data: []byte(m.SQL)}
	}
	if version == 0 {
		t.Fatalf("no migration %s", name)
	}
	old, err := pg.LoadMigrations(before)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pg.Open(ctx(t), pgtest.URL(t), pg.PoolOptions{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := old.Up(ctx(t), pool, nil); err != nil {
		t.Fatal(err)
	}
	return pool, version
}

// created creates intent requestID (1 wei) or fails t.
func created(t *testing.T, s *postgres.Store, requestID string) txmanager.Tx {
	t.Helper()
	tx, _, err := s.Create(ctx(t), intent(requestID, 1))
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// oldRow inserts an INIT transaction of requestID and its INIT event as
// the schema before the depends_on_many migration held them, with one
// parent or none, and returns its id.
func oldRow(t *testing.T, pool *pgxpool.Pool, requestID string, parent any) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	payload := `{"to_state": "INIT"}`
	if parent != nil {
		payload = fmt.Sprintf(`{"to_state": "INIT", "depends_on": "%s", "transit_id": "move-1"}`, parent)
	}
	if _, err := pool.Exec(ctx(t), `
		WITH t AS (INSERT INTO tx (tx_id, chain_id, signer, request_id, request_hash, to_address, value, route, depends_on, state)
			VALUES ($1, 31337, $2, $3::text, sha256(convert_to($3::text, 'UTF8')), $4, 1, 'public', $5::uuid, 'INIT') RETURNING tx_id)
		INSERT INTO event (tx_id, type, payload) SELECT tx_id, 'tx.state_changed', $6::jsonb FROM t`,
		id, alice.Bytes(), requestID, bob.Bytes(), parent, payload); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestParentsAreASet: the parents are one intent in any order (a replay
// with them reordered is the same transaction, kept in the order first
// given), another set under the request id is a conflict, and a replay
// naming the transaction its request id holds among its parents is
// refused naming that element.
func TestParentsAreASet(t *testing.T) {
	t.Parallel()
	s, _ := store(t, 4)
	a, b, c := created(t, s, "a"), created(t, s, "b"), created(t, s, "c")
	child := func(parents ...uuid.UUID) *txmanager.Intent {
		in := intent("child", 2)
		in.DependsOn = parents
		return in
	}
	first, isNew, err := s.Create(ctx(t), child(b.ID, a.ID))
	if err != nil || !isNew {
		t.Fatalf("create: %v %v", isNew, err)
	}
	if diff := cmp.Diff(dependson.List{b.ID, a.ID}, first.DependsOn); diff != "" {
		t.Errorf("the parents as created (-want +got):\n%s", diff)
	}
	again, isNew, err := s.Create(ctx(t), child(a.ID, b.ID))
	if err != nil || isNew || again.ID != first.ID {
		t.Errorf("the same parents in another order: %s created=%v %v, want %s", again.ID, isNew, err, first.ID)
	}
	if diff := cmp.Diff(dependson.List{b.ID, a.ID}, again.DependsOn); diff != "" {
		t.Errorf("the parents on a replay (-want +got):\n%s", diff)
	}
	for name, other := range map[string]*txmanager.Intent{"one fewer": child(a.ID), "none": child(), "one more": child(a.ID, b.ID, c.ID)} {
		if _, _, err := s.Create(ctx(t), other); !errs.Is(err, errs.Conflict) {
			t.Errorf("%s: %v, want a conflict", name, err)
		}
	}
	_, _, err = s.Create(ctx(t), child(a.ID, first.ID))
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Fields) != 1 || e.Fields[0].Pointer != "/depends_on/1" {
		t.Errorf("a replay depending on itself: %#v, want invalid naming /depends_on/1", err)
	}
}

// TestTheStoreRefusesBadParents: a repeated parent or more than 16 are
// refused before any statement, naming the element; the schema refuses
// them too, and a transaction among its own parents, whatever writes.
func TestTheStoreRefusesBadParents(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	a := created(t, s, "a")
	many := make(dependson.List, dependson.Max+1)
	for i := range many {
		many[i] = created(t, s, fmt.Sprintf("p-%d", i)).ID
	}
	for name, tc := range map[string]struct {
		parents dependson.List
		pointer string
	}{
		"a repeat":        {dependson.List{a.ID, many[0], a.ID}, "/depends_on/2"},
		"seventeen":       {many, "/depends_on"},
		"an unknown one":  {dependson.List{many[0], uuid.Must(uuid.NewV7())}, "/depends_on/1"},
		"the nil id only": {dependson.List{uuid.Nil}, "/depends_on/0"},
	} {
		in := intent("bad "+name, 1)
		in.DependsOn = tc.parents
		_, _, err := s.Create(ctx(t), in)
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Fields) == 0 || e.Fields[0].Pointer != tc.pointer {
			t.Errorf("%s: %#v, want invalid naming %s", name, err, tc.pointer)
		}
	}
	if _, _, err := s.Create(ctx(t), func() *txmanager.Intent { in := intent("sixteen", 1); in.DependsOn = many[:16]; return in }()); err != nil {
		t.Errorf("sixteen parents: %v", err)
	}

	// What the schema refuses on its own: its check constraints, and the
	// trigger standing for a foreign key.
	self := uuid.Must(uuid.NewV7())
	for name, tc := range map[string]struct {
		parents    any
		constraint string
	}{
		"empty":      {[]uuid.UUID{}, "tx_depends_on_shape"},
		"a repeat":   {[]uuid.UUID{a.ID, a.ID}, "tx_depends_on_shape"},
		"seventeen":  {[]uuid.UUID(many), "tx_depends_on_shape"},
		"a null":     {[]*uuid.UUID{&a.ID, nil}, "tx_depends_on_shape"},
		"itself":     {[]uuid.UUID{a.ID, self}, "tx_depends_on_self"},
		"an unknown": {[]uuid.UUID{a.ID, uuid.Must(uuid.NewV7())}, "tx_depends_on_fkey"},
	} {
		_, err := pool.Exec(ctx(t), `INSERT INTO tx (tx_id, chain_id, signer, request_id, request_hash, to_address, value, route, depends_on, state)
			VALUES ($1, 31337, $2, $3::text, sha256(convert_to($3::text, 'UTF8')), $4, 1, 'public', $5, 'INIT')`,
			self, alice.Bytes(), "raw "+name, bob.Bytes(), tc.parents)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.ConstraintName != tc.constraint {
			t.Errorf("%s: %v, want a violation of %s", name, err, tc.constraint)
		}
	}
}

// TestParentStatesInOneStatement: the states of any number of
// transactions, each once, from one statement; an unknown id has none.
func TestParentStatesInOneStatement(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	a, b := created(t, s, "a"), created(t, s, "b")
	if _, err := pool.Exec(ctx(t), `UPDATE tx SET state = 'FAILED', reason = 'policy_denied' WHERE tx_id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	unknown := uuid.Must(uuid.NewV7())
	got, err := s.ParentStates(ctx(t), []uuid.UUID{a.ID, b.ID, unknown, a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[uuid.UUID]txmanager.State{a.ID: txmanager.StateInit, b.ID: txmanager.StateFailed}, got); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if got, err := s.ParentStates(ctx(t), nil); err != nil || len(got) != 0 {
		t.Errorf("no ids: %v %v", got, err)
	}
}
