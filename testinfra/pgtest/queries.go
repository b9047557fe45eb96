package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/shared/pg"
)

// RequireQueries checks a store's query files against its migrations, as
// sqlc checks queries when it generates code: on a fresh schema migrated
// with ms, every query of qs must prepare (the server parses it, finds its
// tables, columns and functions, and gives every parameter a type). Every
// query must also have a doc comment and be used: asked for with qs.Use,
// which a store does in package-level variables, so that once the test
// binary has initialized the store's package a query nobody asks for is
// dead SQL.
//
// It returns the server's description of each query (parameter types and
// result columns), by name, for the store's own checks.
func RequireQueries(t *testing.T, ms *pg.Migrations, qs *pg.Queries) map[string]*pgconn.StatementDescription {
	t.Helper()
	ctx := context.Background()
	pool := Migrated(t, ms)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	out := map[string]*pgconn.StatementDescription{}
	for _, q := range qs.All() {
		// The unnamed statement: each Prepare replaces the one before.
		sd, err := conn.Conn().PgConn().Prepare(ctx, "", q.SQL, nil)
		if err != nil {
			t.Errorf("query %s (%s) does not prepare on the migrated schema: %v", q.Name, q.Pos, err)
			continue
		}
		out[q.Name] = sd
		if q.Doc == "" {
			t.Errorf("query %s (%s) has no doc comment under its name line: say what it does and, where it matters, why", q.Name, q.Pos)
		}
	}
	for _, name := range qs.Unused() {
		q, _ := qs.Lookup(name)
		t.Errorf("query %s (%s) is used by no code: delete it, or Use it", name, q.Pos)
	}
	return out
}
