package postgres_test

import (
	"strings"
	"testing"

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
	pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries,
		pgtest.RowCopy{Canonical: "Keys", Start: 3},            // key_id, tenant_id, name: scanKey
		pgtest.RowCopy{Canonical: "GetSubscription", Start: 3}, // subscription_id, tenant_id, url: scanSubscription
		pgtest.RowCopy{Canonical: "DeliveryLog", Start: 3},     // delivery_id, subscription_id, event_seq: scanDelivery
		pgtest.RowCopy{Canonical: "GetAdjustment", Start: 3},   // tenant_id, adjustment_id, seq: scanAdjustment
	)
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
