package pg_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func queryFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, body := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(body)}
	}
	return fsys
}

func TestLoadQueries(t *testing.T) {
	t.Parallel()
	qs, err := pg.LoadQueries(queryFS(map[string]string{
		"b_lease.sql": `-- Leases: the file's own comment.

-- name: AcquireLease
-- Takes a lease.
-- Two doc lines.
INSERT INTO lease VALUES ($1)
	-- an inner comment stays
	ON CONFLICT DO NOTHING;

-- name: Leases
SELECT * FROM lease
`,
		"a_node.sql": "-- name: LiveNodes\r\n-- Lists nodes.\r\n\r\nSELECT node_id FROM node;\r\n-- a comment that belongs to no query\r\n",
		"README.md":  "not SQL, ignored",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []pg.Query{
		{Name: "LiveNodes", Doc: "Lists nodes.", SQL: "-- name: LiveNodes\nSELECT node_id FROM node", Pos: "a_node.sql:1"},
		{Name: "AcquireLease", Doc: "Takes a lease.\nTwo doc lines.", Pos: "b_lease.sql:3",
			SQL: "-- name: AcquireLease\nINSERT INTO lease VALUES ($1)\n\t-- an inner comment stays\n\tON CONFLICT DO NOTHING"},
		{Name: "Leases", SQL: "-- name: Leases\nSELECT * FROM lease", Pos: "b_lease.sql:10"},
	}
	if diff := cmp.Diff(want, qs.All()); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
	if q, ok := qs.Lookup("Leases"); !ok || q.Name != "Leases" {
		t.Errorf("Lookup(Leases) = %+v, %v", q, ok)
	}
	if _, ok := qs.Lookup("Nope"); ok {
		t.Error("Lookup found a query that is not there")
	}
}

func TestLoadQueriesRefusesMalformedFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"empty name", map[string]string{"a.sql": "-- name:\nSELECT 1;"}, "a.sql:1: a name line without a name"},
		{"blank name", map[string]string{"a.sql": "-- name:   \nSELECT 1;"}, "a.sql:1: a name line without a name"},
		{"not an identifier", map[string]string{"a.sql": "-- name: Get Lease\nSELECT 1;"}, `query name "Get Lease" is not an identifier`},
		{"duplicate in a file", map[string]string{"a.sql": "-- name: Q\nSELECT 1;\n-- name: Q\nSELECT 2;"}, "a.sql:3: query Q is already defined at a.sql:1"},
		{"duplicate across files", map[string]string{"a.sql": "-- name: Q\nSELECT 1;", "b.sql": "-- name: Q\nSELECT 2;"}, "b.sql:1: query Q is already defined at a.sql:1"},
		{"no statement", map[string]string{"a.sql": "-- name: Q\n-- Does nothing.\n\n-- name: R\nSELECT 1"}, "query Q (a.sql:1) has no statement"},
		{"only a semicolon", map[string]string{"a.sql": "-- name: Q\n;\n"}, "query Q (a.sql:1) has no statement"},
		{"SQL without a name", map[string]string{"a.sql": "-- header\nSELECT 1;\n-- name: Q\nSELECT 2;"}, "a.sql:2: SQL above the file's first -- name: line"},
		{"no files", map[string]string{"README.md": "-- name: Q\nSELECT 1"}, "no .sql file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := pg.LoadQueries(queryFS(tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadQueries = %v; want an error with %q", err, tc.want)
			}
		})
	}
}

func TestMustLoadQueriesPanicsOnAMalformedFile(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("MustLoadQueries did not panic on an empty query name")
		}
	}()
	pg.MustLoadQueries(queryFS(map[string]string{"q/a.sql": "-- name:\nSELECT 1"}), "q")
}

func TestUseMarksQueriesUsed(t *testing.T) {
	t.Parallel()
	qs := pg.MustLoadQueries(queryFS(map[string]string{"q/a.sql": "-- name: A\nSELECT 1;\n-- name: B\nSELECT 2;\n-- name: C\nSELECT 3;"}), "q")
	if diff := cmp.Diff([]string{"A", "B", "C"}, qs.Unused()); diff != "" {
		t.Errorf("unused before any Use (-want +got):\n%s", diff)
	}
	if q := qs.Use("B"); q.SQL != "-- name: B\nSELECT 2" {
		t.Errorf("Use(B).SQL = %q", q.SQL)
	}
	qs.Lookup("C") // a lookup is not a use
	if diff := cmp.Diff([]string{"A", "C"}, qs.Unused()); diff != "" {
		t.Errorf("unused after Use(B) (-want +got):\n%s", diff)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `"Nope"`) {
			t.Errorf("Use of an unknown name: recovered %v; want a panic naming it", r)
		}
	}()
	qs.Use("Nope")
}

func TestRequireQueriesDescribesEveryQuery(t *testing.T) {
	t.Parallel()
	qs := pg.MustLoadQueries(queryFS(map[string]string{"q/account.sql": `
-- name: AccountByName
-- Reads one account.
SELECT id, balance::text FROM account WHERE name = $1;

-- name: Credit
-- Credits an account, optionally only above a balance.
UPDATE account SET balance = balance + $2 WHERE id = $1 AND ($3::numeric IS NULL OR balance >= $3);
`}), "q")
	qs.Use("AccountByName")
	qs.Use("Credit")
	got := pgtest.RequireQueries(t, loadGood(t), qs)
	if len(got) != 2 {
		t.Fatalf("descriptions of %d queries, want 2", len(got))
	}
	if d := got["AccountByName"]; len(d.ParamOIDs) != 1 || len(d.Fields) != 2 || d.Fields[1].Name != "balance" {
		t.Errorf("AccountByName: params %v, fields %+v", d.ParamOIDs, d.Fields)
	}
	if d := got["Credit"]; len(d.ParamOIDs) != 3 || len(d.Fields) != 0 {
		t.Errorf("Credit: params %v, fields %+v", d.ParamOIDs, d.Fields)
	}
}
