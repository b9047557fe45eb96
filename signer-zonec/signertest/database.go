package signertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// Database is signerd's store for one test, with the two roles a
// deployment has: an owner, which migrates (and which tests use to tamper
// with the store as its owner could), and a serving role, which signerd
// serves with and which holds only what postgres.GrantServing gives it.
type Database struct {
	// OwnerURL connects as the role that owns the schema and its tables.
	OwnerURL string
	// ServeURL connects as the serving role.
	ServeURL string
	// ServeRole is the serving role's name.
	ServeRole string
}

// NewDatabase makes an empty schema for t (pgtest.URL) owned by a new
// role, and a serving role beside it. Both roles are the test's own and
// are dropped when it ends. Nothing is migrated: Migrate does that, or
// signerd migrate with Env.
func NewDatabase(t testing.TB) *Database {
	t.Helper()
	ctx := context.Background()
	superURL := pgtest.URL(t)
	suffix := randomHex(t, 4)
	owner, serve := "t_signer_owner_"+suffix, "t_signer_serve_"+suffix
	ownerPassword, servePassword := randomHex(t, 16), randomHex(t, 16)

	conn, err := pgx.Connect(ctx, superURL)
	if err != nil {
		t.Fatalf("connect as the test server's superuser: %v", err)
	}
	defer conn.Close(ctx)
	for _, role := range []struct{ name, password string }{{owner, ownerPassword}, {serve, servePassword}} {
		// format() quotes the name and the password on the server.
		if err := execFormatted(ctx, conn, `SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)`, role.name, role.password); err != nil {
			t.Fatalf("create role %s: %v", role.name, err)
		}
	}
	t.Cleanup(func() { dropRoles(t, superURL, owner, serve) })
	if err := execFormatted(ctx, conn, `SELECT format('ALTER SCHEMA %I OWNER TO %I', current_schema(), $1::text)`, owner); err != nil {
		t.Fatalf("give the test schema to %s: %v", owner, err)
	}
	return &Database{
		OwnerURL:  withUser(t, superURL, owner, ownerPassword),
		ServeURL:  withUser(t, superURL, serve, servePassword),
		ServeRole: serve,
	}
}

// MigratedDatabase is NewDatabase migrated and granted, as signerd
// migrate leaves a database.
func MigratedDatabase(t testing.TB) *Database {
	t.Helper()
	d := NewDatabase(t)
	d.Migrate(t)
	return d
}

// Migrate applies signerd's migrations as the owner and grants the
// serving role its privileges, as signerd migrate does.
func (d *Database) Migrate(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	// Closed at once: the owner has no business in the test after this.
	pool, err := pg.Open(ctx, d.OwnerURL, pg.PoolOptions{MaxConns: 2, Application: "signertest migrate"})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := postgres.Migrations.Up(ctx, pool, nil); err != nil {
		t.Fatalf("migrate as the owner: %v", err)
	}
	if err := postgres.GrantServing(ctx, pool, d.ServeRole); err != nil {
		t.Fatalf("grant the serving role: %v", err)
	}
}

// OwnerPool is a pool connected as the owner, closed when t ends.
func (d *Database) OwnerPool(t testing.TB) *pgxpool.Pool { return openPool(t, d.OwnerURL) }

// ServePool is a pool connected as the serving role, closed when t ends.
func (d *Database) ServePool(t testing.TB) *pgxpool.Pool { return openPool(t, d.ServeURL) }

// Env is signerd's database settings for this database: the owner for
// migrate, the serving role for serve.
func (d *Database) Env(prefix string) map[string]string {
	return map[string]string{
		prefix + "OWNER_DATABASE_URL": d.OwnerURL,
		prefix + "DATABASE_URL":       d.ServeURL,
		prefix + "SERVE_ROLE":         d.ServeRole,
	}
}

func openPool(t testing.TB, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), u, pg.PoolOptions{MaxConns: 8, Application: "signertest"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// execFormatted runs the statement that query, a format() call, returns:
// utility statements take no parameters, so the server quotes them in.
func execFormatted(ctx context.Context, conn *pgx.Conn, query string, args ...any) error {
	var stmt string
	if err := conn.QueryRow(ctx, query, args...).Scan(&stmt); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, stmt)
	return err
}

// dropRoles runs before pgtest drops the schema (cleanups run last first):
// the schema and its tables go back to the superuser, which pgtest then
// drops, and the roles lose every privilege in this database, so that
// they can be dropped.
func dropRoles(t testing.TB, superURL, owner, serve string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, superURL)
	if err != nil {
		t.Errorf("drop the test's roles: %v", err)
		return
	}
	defer conn.Close(ctx)
	for _, stmt := range []string{
		`SELECT format('REASSIGN OWNED BY %I, %I TO CURRENT_USER', $1::text, $2::text)`,
		`SELECT format('DROP OWNED BY %I, %I', $1::text, $2::text)`,
		`SELECT format('DROP ROLE %I, %I', $1::text, $2::text)`,
	} {
		if err := execFormatted(ctx, conn, stmt, owner, serve); err != nil {
			t.Errorf("drop the roles %s and %s: %v", owner, serve, err)
			return
		}
	}
}

func withUser(t testing.TB, u, user, password string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	parsed.User = url.UserPassword(user, password)
	return parsed.String()
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
