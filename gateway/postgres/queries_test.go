package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// TestQueries holds the query files to the schema and to the store's
// conventions: every query prepares on the migrated schema, is documented
// and is used (pgtest.RequireQueries); every copy of a row that a scan
// function reads (scanKey, scanSubscription, scanDelivery, scanAdjustment)
// matches the one it copies, column by column, name and type; and the
// parts of statements that the Go code once spliced into several are
// alike in each.
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
		{"Keys", 3},            // key_id, tenant_id, name: scanKey
		{"GetSubscription", 3}, // subscription_id, tenant_id, url: scanSubscription
		{"DeliveryLog", 3},     // delivery_id, subscription_id, event_seq: scanDelivery
		{"GetAdjustment", 3},   // tenant_id, adjustment_id, seq: scanAdjustment
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
	for _, part := range []struct {
		what, from, through string
		copies              int
	}{
		{"a subscription's live secrets", "ARRAY(SELECT w.secret", "w.secret_id)", 2},
		{"the events as a table", "unnest($1::bigint[], $2::text[]", "signer_ref, body)", 2},
		{"a subscription's filters", "(cardinality(s.event_types)", "ANY (s.signers))", 2},
	} {
		requireAlike(t, part.what, part.from, part.through, part.copies)
	}
}

// requireAlike fails unless copies queries hold the text from from
// through through, and all of them the same, but for white space.
func requireAlike(t *testing.T, what, from, through string, copies int) {
	t.Helper()
	var first, firstName string
	n := 0
	for _, q := range postgres.Queries.All() {
		i := strings.Index(q.SQL, from)
		if i < 0 {
			continue
		}
		j := strings.Index(q.SQL[i:], through)
		if j < 0 {
			t.Errorf("query %s: %s starts (%q) but does not end (%q)", q.Name, what, from, through)
			continue
		}
		n++
		got := strings.Join(strings.Fields(q.SQL[i:i+j+len(through)]), " ")
		if first == "" {
			first, firstName = got, q.Name
		} else if got != first {
			t.Errorf("%s differs between query %s:\n%s\nand query %s:\n%s", what, firstName, first, q.Name, got)
		}
	}
	if n != copies {
		t.Errorf("%d queries hold %s (%q); want %d", n, what, from, copies)
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
