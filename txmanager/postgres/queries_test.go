package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// TestQueries holds the query files to the schema and to the store's
// conventions: every query prepares on the migrated schema, is documented
// and is used (pgtest.RequireQueries); every fenced query takes the fence
// as $1 to $4 with the lease function's types, and runs the function once,
// as an InitPlan, never as a filter evaluated row by row; and every copy
// of a row that scanTx, scanAction or sentRow reads matches the one it
// copies, column by column, name and type.
func TestQueries(t *testing.T) {
	t.Parallel()
	described := pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries,
		pgtest.RowCopy{Canonical: "GetTx", Start: 4},                        // tx_id, chain_id, signer, request_id: scanTx
		pgtest.RowCopy{Canonical: "ActionByID", Start: 2},                   // action_id, tx_id: scanAction
		pgtest.RowCopy{Canonical: "AcceptedLate", Start: 2, Trailing: true}, // e_id, e_attempt: sentRow, others read after it
	)
	if t.Failed() {
		return
	}

	fence := []uint32{pgtype.Int8OID, pgtype.ByteaOID, pgtype.TextOID, pgtype.Int8OID}
	var fencedNames []string
	for _, q := range postgres.Queries.All() {
		if !strings.Contains(q.SQL, "txfence_holds_lease") {
			continue
		}
		fencedNames = append(fencedNames, q.Name)
		if got := described[q.Name].ParamOIDs; len(got) < 4 || !slices.Equal(got[:4], fence) {
			t.Errorf("fenced query %s takes %v as its first parameters; want the fence's types %v", q.Name, got, fence)
		}
	}
	if len(fencedNames) == 0 {
		t.Error("no fenced query found")
	}
	requireFenceInitPlans(t, fencedNames, described)
}

// requireFenceInitPlans explains the generic plan of each fenced query and
// fails when txfence_holds_lease sits in a filter: a volatile function
// called there runs once per row, where the sub-select form runs once per
// statement, before any row is read, as the EXISTS it replaced did.
func requireFenceInitPlans(t *testing.T, names []string, described map[string]*pgconn.StatementDescription) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres.Migrations)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		q, _ := postgres.Queries.Lookup(name)
		stmt := fmt.Sprintf("fenced_%d", i)
		if _, err := conn.Conn().Prepare(ctx, stmt, q.SQL); err != nil {
			t.Errorf("prepare %s: %v", name, err)
			continue
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(described[name].ParamOIDs)), ", ")
		rows, err := conn.Query(ctx, "EXPLAIN (VERBOSE, COSTS OFF) EXECUTE "+stmt+"("+nulls+")", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			t.Errorf("explain %s: %v", name, err)
			continue
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Errorf("explain %s: %v", name, err)
			continue
		}
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "InitPlan") || !strings.Contains(text, "txfence_holds_lease($1, $2, $3, $4)") {
			t.Errorf("query %s: the fence is not an InitPlan:\n%s", name, text)
		}
		for _, line := range plan {
			if strings.Contains(line, "Filter:") && strings.Contains(line, "txfence_holds_lease") {
				t.Errorf("query %s runs the fence as a filter, row by row: %s\n%s", name, strings.TrimSpace(line), text)
			}
		}
	}
}

// lookup is a query of the store, for a test that runs it by hand.
func lookup(t *testing.T, name string) pg.Query {
	t.Helper()
	q, ok := postgres.Queries.Lookup(name)
	if !ok {
		t.Fatalf("no query %s", name)
	}
	return q
}

// withFence are a fenced query's arguments by the store's convention: the
// fence as $1 to $4, then the query's own.
func withFence(f txmanager.Fence, args ...any) []any {
	return append([]any{int64(f.Key.ChainID), f.Key.Signer.Bytes(), f.Node, f.Token}, args...)
}

// TestTakeoverWaitsForAStoreMoveInFlight is
// TestTakeoverWaitsForAFencedTransactionInFlight with one of the store's
// own statements: a move of the query files, holding the fence through
// txfence_holds_lease, run by node a in a transaction it leaves open. The
// lease row lock the function takes is a's transaction's: the takeover of
// the lapsed lease waits until a commits, a's renewals do not, and once
// the lease changed hands a's move touches nothing.
func TestTakeoverWaitsForAStoreMoveInFlight(t *testing.T) {
	t.Parallel()
	s, sB, pool, k := leaseHeldByA(t)
	fenceA := txmanager.Fence{Node: "a", Key: k, Token: 1}
	to := leaseKey(2).Signer
	var ids []uuid.UUID
	for i := range 2 {
		created, _, err := s.Create(t.Context(), &txmanager.Intent{ChainID: k.ChainID, From: k.Signer, RequestID: fmt.Sprintf("move-%d", i),
			To: &to, Value: big.NewInt(1), Route: txmanager.RoutePublic})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, created.ID)
	}
	move := lookup(t, "MoveToSimulated")
	moveArgs := func(f txmanager.Fence, id uuid.UUID) []any {
		return withFence(f, id, []string{string(txmanager.StateInit)}, string(txmanager.StateSimulated), int64(21000))
	}

	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if tag, err := tx.Exec(t.Context(), move.SQL, moveArgs(fenceA, ids[0])...); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("a's move = %v, %v; want 1 row", tag, err)
	}
	if got, err := s.RenewAll(t.Context(), "a", time.Hour); err != nil || got[k] != 1 {
		t.Fatalf("renew during a's move = %v, %v", got, err)
	}

	takeoverWaitsFor(t, pool, sB, k, tx)
	if tag, err := pool.Exec(t.Context(), move.SQL, moveArgs(fenceA, ids[1])...); err != nil || tag.RowsAffected() != 0 {
		t.Errorf("a's move after the takeover = %v, %v; want 0 rows", tag, err)
	}
	if tag, err := pool.Exec(t.Context(), move.SQL, moveArgs(txmanager.Fence{Node: "b", Key: k, Token: 2}, ids[1])...); err != nil || tag.RowsAffected() != 1 {
		t.Errorf("b's move = %v, %v; want 1 row", tag, err)
	}
}

// TestAStoreWriteWaitingOnATakeoverTouchesNothing is
// TestAFencedWriteWaitingOnATakeoverTouchesNothing with one of the store's
// own statements (AdvanceNonceCursor): a stale owner whose transaction
// began while its lease was current writes while another node's takeover
// is under way; the write waits for the takeover, re-reads the lease and
// touches nothing.
func TestAStoreWriteWaitingOnATakeoverTouchesNothing(t *testing.T) {
	t.Parallel()
	_, sB, pool, k := leaseHeldByA(t)
	// The cursor exists, so the write is an update that no foreign key
	// check locks the lease row for: the fence alone must.
	leaseExec(t, pool, `INSERT INTO nonce_cursor VALUES ($1, $2, 0)`, int64(k.ChainID), k.Signer.Bytes())
	advance := lookup(t, "AdvanceNonceCursor")
	txA := staleWriteDuringTakeover(t, pool, sB, k, func(ctx context.Context, txA pgx.Tx) (int64, error) {
		tag, err := txA.Exec(ctx, advance.SQL, withFence(txmanager.Fence{Node: "a", Key: k, Token: 1}, int64(7))...)
		return tag.RowsAffected(), err
	})
	if err := txA.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := leaseExec(t, pool, `SELECT 1 FROM nonce_cursor WHERE next_nonce = 0`); n != 1 {
		t.Errorf("nonce cursor moved by the stale owner")
	}
}
