package pgtest

import (
	"context"
	"fmt"
	"slices"
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
// When every query prepared, it then checks rows, the rows the store's
// scan functions read from several queries (RequireRowCopies): every
// store's TestQueries checks both, and a query that did not prepare would
// only fail the row checks again.
//
// It returns the server's description of each query (parameter types and
// result columns), by name, for the store's own checks.
func RequireQueries(t *testing.T, ms *pg.Migrations, qs *pg.Queries, rows ...RowCopy) map[string]*pgconn.StatementDescription {
	t.Helper()
	ctx := context.Background()
	pool := Migrated(t, ms)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	out := map[string]*pgconn.StatementDescription{}
	prepared := true
	for _, q := range qs.All() {
		// The unnamed statement: each Prepare replaces the one before.
		sd, err := conn.Conn().PgConn().Prepare(ctx, "", q.SQL, nil)
		if err != nil {
			t.Errorf("query %s (%s) does not prepare on the migrated schema: %v", q.Name, q.Pos, err)
			prepared = false
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
	if prepared {
		RequireRowCopies(t, out, rows...)
	}
	return out
}

// RowCopy is a row a store's scan function reads, returned by several of
// its queries: Canonical is the query whose columns the others copy.
type RowCopy struct {
	Canonical string
	// Start is how many of the row's leading column names mark where a
	// copy of it begins among another query's columns; 0 means all of
	// them, for a row whose first columns are too common to mark it.
	Start int
	// Trailing allows a copy to return more columns after the row (read
	// ahead of it); otherwise a copy ends where the row does.
	Trailing bool
	// Copies, when set, are exactly the queries that copy the row: a copy
	// that drifted so far its start no longer matches fails as missing.
	Copies []string
}

// RequireRowCopies checks the rows that a store's queries repeat, as the
// query files write each statement out in full: in every query that
// copies a row (its columns from some point start as the row does), the
// columns from there are the row's, name and type, so that the one scan
// function reading them reads every copy right. described is what
// RequireQueries returned.
func RequireRowCopies(t *testing.T, described map[string]*pgconn.StatementDescription, rows ...RowCopy) {
	t.Helper()
	sameName := func(x, y pgconn.FieldDescription) bool { return x.Name == y.Name }
	for _, row := range rows {
		canonical, ok := described[row.Canonical]
		if !ok {
			t.Errorf("no query %s", row.Canonical)
			continue
		}
		want := canonical.Fields
		start := len(want)
		if row.Start > 0 {
			start = min(row.Start, len(want))
		}
		var found []string
		for name, d := range described {
			if name == row.Canonical {
				continue
			}
			for i := 0; i+start <= len(d.Fields); i++ {
				if !slices.EqualFunc(d.Fields[i:i+start], want[:start], sameName) {
					continue
				}
				found = append(found, name)
				got := d.Fields[i:]
				if row.Trailing {
					got = got[:min(len(got), len(want))]
				}
				if diff := fieldsDiff(want, got); diff != "" {
					t.Errorf("query %s copies the row of %s from its column %d, unlike it: %s", name, row.Canonical, i+1, diff)
				}
				break
			}
		}
		slices.Sort(found)
		switch {
		case len(found) == 0:
			t.Errorf("no query copies the row of %s: is the start of its row still %d columns, or is the check needless?", row.Canonical, start)
		case row.Copies != nil && !slices.Equal(found, slices.Sorted(slices.Values(row.Copies))):
			t.Errorf("the queries that copy the row of %s are %v; want %v", row.Canonical, found, row.Copies)
		}
	}
}

// fieldsDiff says how got differs from want, by name and type.
func fieldsDiff(want, got []pgconn.FieldDescription) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d columns where the row has %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].DataTypeOID != want[i].DataTypeOID {
			return fmt.Sprintf("column %d is %s (type %d), want %s (type %d)", i+1, got[i].Name, got[i].DataTypeOID, want[i].Name, want[i].DataTypeOID)
		}
	}
	return ""
}
