package postgres_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// TestQueries holds the query files to the schema and to the store's
// conventions: every query prepares on the migrated schema, is documented
// and is used (pgtest.RequireQueries); and every copy of a row that
// scanAccount, scanJournal, scanTransit or scanRun reads matches the one
// it copies, column by column, name and type. The copies are found by
// their column names, and must be the ones listed: a copy whose columns
// drifted is no longer found, and fails as missing.
func TestQueries(t *testing.T) {
	t.Parallel()
	described := pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries)
	if t.Failed() {
		return
	}
	for _, row := range []struct {
		scan      string // the function that reads the row
		canonical string
		copies    []string
	}{
		{"scanAccount", "Account", []string{"Accounts"}},
		{"scanJournal", "JournalByID", []string{"Journals"}},
		{"scanTransit", "Transit", []string{"AlertTransits", "Transits", "TransitsOf", "WalletTransits"}},
		{"scanRun", "ReconciliationRun", []string{"ChainReconciliationRuns", "NewestCompleteRun", "NewestRun", "ReconciliationRuns"}},
	} {
		want := described[row.canonical].Fields
		var found []string
		for name, d := range described {
			if name == row.canonical || !containsNames(d.Fields, want) {
				continue
			}
			found = append(found, name)
			if diff := fieldsDiff(want, d.Fields); diff != "" {
				t.Errorf("query %s copies the row %s reads from %s, unlike it: %s", name, row.scan, row.canonical, diff)
			}
		}
		slices.Sort(found)
		if !slices.Equal(found, row.copies) {
			t.Errorf("the queries that copy the row %s reads from %s are %v; want %v", row.scan, row.canonical, found, row.copies)
		}
	}
}

// containsNames reports whether the names of want appear in fields, in
// order and side by side.
func containsNames(fields, want []pgconn.FieldDescription) bool {
	for i := 0; i+len(want) <= len(fields); i++ {
		if slices.EqualFunc(fields[i:i+len(want)], want, func(x, y pgconn.FieldDescription) bool { return x.Name == y.Name }) {
			return true
		}
	}
	return false
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
