package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
)

// signTransfers signs n transfers of the first dev account at nonces
// 0..n-1 through the real service on store, under the development
// policy, in one batch, and returns the results.
func signTransfers(t *testing.T, store signer.Store, n int) []signer.Result {
	t.Helper()
	return signTransfersFrom(t, store, 0, n, "tx")
}

// signTransfersFrom signs n transfers at nonces from, from+1, …, with tx
// ids txPrefix-NONCE, in one batch.
func signTransfersFrom(t *testing.T, store signer.Store, from, n int, txPrefix string) []signer.Result {
	t.Helper()
	pol, err := policy.Load(signertest.DevelopmentPolicy())
	if err != nil {
		t.Fatal(err)
	}
	svc := &signer.Service{Keys: signertest.NewMemoryKeys(t, signertest.DevKeys...), Policy: pol, Store: store}
	var reqs []*signer.Request
	for i := from; i < from+n; i++ {
		to := signertest.DevAddress(1)
		reqs = append(reqs, &signer.Request{
			TxID: fmt.Sprintf("%s-%d", txPrefix, i), ChainID: 31337, From: signertest.DevAddress(0), Nonce: uint64(i),
			Type: signer.DynamicFee, To: &to, Value: big.NewInt(int64(1000 + i)), Gas: 21000,
			MaxFeePerGas: big.NewInt(30_000_000_000), MaxPriorityFeePerGas: big.NewInt(1_000_000_000),
		})
	}
	results, err := svc.Sign(context.Background(), "txmanager", reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range results {
		if res.Outcome != signer.OutcomeSigned {
			t.Fatalf("%s: %s (%v)", res.Request.TxID, res.Outcome, res.Decision.Reasons)
		}
	}
	return results
}

// sqlState is the SQLSTATE of a PostgreSQL error, "" for anything else.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// TestServingRoleCannotRewriteTheRecord signs through the serving role,
// which is all it needs to do, then tries everything its holder might to
// undo a signature or its audit record: the database refuses each one for
// want of privilege, before any trigger is asked, so that switching the
// triggers off is no way around it either.
func TestServingRoleCannotRewriteTheRecord(t *testing.T) {
	t.Parallel()
	db := signertest.MigratedDatabase(t)
	serve := db.ServePool(t)
	store := postgres.New(serve)
	signTransfers(t, store, 3)

	for _, stmt := range []string{
		`DELETE FROM audit_log WHERE seq = 3`,
		`UPDATE audit_log SET outcome = 'denied' WHERE seq = 1`,
		`TRUNCATE audit_log`,
		`DELETE FROM signature WHERE nonce = 2`,
		`UPDATE signature SET value = 0`,
		`TRUNCATE signature`,
		`ALTER TABLE audit_log DISABLE TRIGGER USER`,
		`ALTER TABLE signature DISABLE TRIGGER ALL`,
		`ALTER TABLE audit_head DISABLE TRIGGER USER`,
		`DROP TRIGGER audit_log_append_only ON audit_log`,
		`DROP TABLE signature`,
		`DELETE FROM audit_head`,
		`INSERT INTO nonce_start (chain_id, signer, nonce) VALUES (31337, '\x0000000000000000000000000000000000000001', 5)`,
		`DELETE FROM signer_lock`,
		`CREATE TABLE shadow (seq bigint)`,
	} {
		_, err := serve.Exec(context.Background(), stmt)
		if code := sqlState(err); code != "42501" || strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s as the serving role: %v (SQLSTATE %q); want it refused for want of privilege (42501)", stmt, err, code)
		}
	}

	// The serving role must move the head to append, so it may update
	// it: but only forward, onto a record of the log.
	for _, stmt := range []string{
		`UPDATE audit_head SET seq = 1, hash = (SELECT hash FROM audit_log WHERE seq = 1)`,
		`UPDATE audit_head SET seq = 7, hash = sha256('forged')`,
	} {
		_, err := serve.Exec(context.Background(), stmt)
		if code := sqlState(err); code != "23000" || !strings.Contains(err.Error(), "audit_head") {
			t.Errorf("%s as the serving role: %v (SQLSTATE %q); want it refused (23000)", stmt, err, code)
		}
	}
	if n, err := store.VerifyAudit(context.Background()); err != nil || n != 3 {
		t.Errorf("after the attempts the log verifies %d records: %v; want the 3 intact", n, err)
	}
}

// TestServeChecksItsDatabaseRole: the serving role as migrate grants it
// passes; the owner, and a serving role holding anything more (or less),
// is named with what is wrong; migrate's grant puts it right again.
func TestServeChecksItsDatabaseRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := signertest.MigratedDatabase(t)
	owner, serve := db.OwnerPool(t), db.ServePool(t)
	if err := postgres.CheckServingRole(ctx, serve); err != nil {
		t.Fatalf("the serving role as migrate grants it: %v", err)
	}
	if err := postgres.CheckServingRole(ctx, owner); err == nil || !strings.Contains(err.Error(), "owns audit_log") {
		t.Errorf("the owner as the serving role: %v; want it refused for owning audit_log", err)
	}

	grant := func(stmt string) {
		t.Helper()
		if _, err := owner.Exec(ctx, fmt.Sprintf(stmt, db.ServeRole)); err != nil {
			t.Fatal(err)
		}
	}
	grant(`GRANT DELETE ON audit_log TO %s`)
	grant(`GRANT UPDATE (value) ON signature TO %s`)
	grant(`REVOKE INSERT ON signature FROM %s`)
	err := postgres.CheckServingRole(ctx, serve)
	for _, want := range []string{"holds DELETE on audit_log", "holds UPDATE on signature", "lacks INSERT on signature"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a serving role with extra and missing privileges: %v; want it to say %q", err, want)
		}
	}

	// migrate grants again: what it gives replaces whatever was there.
	if err := postgres.GrantServing(ctx, owner, db.ServeRole); err != nil {
		t.Fatal(err)
	}
	if err := postgres.CheckServingRole(ctx, serve); err != nil {
		t.Errorf("after granting again: %v", err)
	}
	for _, role := range []string{ownerRole(t, owner), "no_such_role_here"} {
		if err := postgres.GrantServing(ctx, owner, role); err == nil {
			t.Errorf("granting %s as the serving role was accepted", role)
		}
	}
}

func ownerRole(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var role string
	if err := pool.QueryRow(context.Background(), `SELECT current_user`).Scan(&role); err != nil {
		t.Fatal(err)
	}
	return role
}
