package postgres_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/shared/pgtest"
)

// TestQueries holds the query files to the schema and to the store's
// conventions: every query prepares on the migrated schema, is documented
// and is used (pgtest.RequireQueries); and every copy of a row that a scan
// function reads (scanKey) matches the one it copies, column by column,
// name and type.
func TestQueries(t *testing.T) {
	t.Parallel()
	described := pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries)
	if t.Failed() {
		return
	}
	for _, row := range []struct {
		canonical string
		start     int // how many leading column names mark a copy
	}{
		{"Keys", 3}, // key_id, tenant_id, name: scanKey
	} {
		want := described[row.canonical].Fields
		copies := 0
		for name, d := range described {
			for i := 0; name != row.canonical && i+row.start <= len(d.Fields); i++ {
				if !sameNames(d.Fields[i:i+row.start], want[:row.start]) {
					continue
				}
				copies++
				if diff := fieldsDiff(want, d.Fields[i:]); diff != "" {
					t.Errorf("query %s copies the row of %s from its column %d, unlike it: %s", name, row.canonical, i+1, diff)
				}
				break
			}
		}
		if copies == 0 {
			t.Errorf("no query copies the row of %s: is the start of its row still %d columns?", row.canonical, row.start)
		}
	}
}

func sameNames(a, b []pgconn.FieldDescription) bool {
	return slices.EqualFunc(a, b, func(x, y pgconn.FieldDescription) bool { return x.Name == y.Name })
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
