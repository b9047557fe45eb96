package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

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
	pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries,
		pgtest.RowCopy{Canonical: "Signed", Start: 4},      // chain_id, signer, nonce, tx_id: scanSigned
		pgtest.RowCopy{Canonical: "AuditHead", Start: 2},   // seq, hash: readHead, and Append on the head it locks
		pgtest.RowCopy{Canonical: "NonceStarts", Start: 4}, // chain_id, signer, nonce, set_at: scanNonceStart
	)
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
