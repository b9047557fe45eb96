package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// TestQueries holds the query files to the schema and to the store's
// conventions: every query prepares on the migrated schema, is documented
// and is used (pgtest.RequireQueries); and every copy of a row that a scan
// function reads (scanSigned, readHead's, scanNonceStart) matches the one
// it copies, column by column, name and type.
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
		{"Signed", 4},      // chain_id, signer, nonce, tx_id: scanSigned
		{"AuditHead", 2},   // seq, hash: readHead, and Append on the head it locks
		{"NonceStarts", 4}, // chain_id, signer, nonce, set_at: scanNonceStart
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

// ownerOnly are the queries only the tables' owner runs (signerd migrate,
// signerctl as the owner): the serving role must be refused each of them.
var ownerOnly = map[string]bool{
	"GrantServingRole":  true, // signerd migrate: grant_serving_role is not the public's to execute
	"LockNonceStart":    true, // signerctl nonces start: the serving role only reads nonce_start
	"DeclareNonceStart": true,
}

// TestQueriesAsTheServingRole checks the queries on the schema as signerd
// migrate leaves it, migrated by the owner and granted: the serving role
// holds every privilege the queries signerd serves with need (a missing
// grant would only show when a statement ran), and none of those the
// owner's queries need. EXPLAIN checks a statement's privileges without
// running it.
func TestQueriesAsTheServingRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := signertest.MigratedDatabase(t)
	conn, err := db.ServePool(t).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// As the signing transaction plans them (beginTx).
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for i, q := range postgres.Queries.All() {
		stmt := fmt.Sprintf("serving_%d", i)
		sd, err := conn.Conn().Prepare(ctx, stmt, q.SQL)
		if err != nil {
			t.Errorf("query %s does not prepare as the serving role: %v", q.Name, err)
			continue
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(sd.ParamOIDs)), ", ")
		explain := "EXPLAIN EXECUTE " + stmt
		if nulls != "" {
			explain += "(" + nulls + ")"
		}
		_, err = conn.Exec(ctx, explain, pgx.QueryExecModeSimpleProtocol)
		switch {
		case ownerOnly[q.Name] && sqlState(err) != "42501":
			t.Errorf("query %s, the owner's, as the serving role: %v (SQLSTATE %q); want it refused for want of privilege (42501)", q.Name, err, sqlState(err))
		case !ownerOnly[q.Name] && err != nil:
			t.Errorf("query %s as the serving role: %v", q.Name, err)
		}
	}
	for name := range ownerOnly {
		if _, ok := postgres.Queries.Lookup(name); !ok {
			t.Errorf("no query %s, which ownerOnly names", name)
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
