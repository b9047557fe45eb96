// Package pgtest gives each test an isolated schema on a real PostgreSQL
// server, so database tests run in parallel without seeing each other.
//
// The server is, in order: TEST_DATABASE_URL; else a local server on
// 127.0.0.1:5432 (trust auth, user postgres); else a throwaway cluster
// started from the local PostgreSQL binaries in a temporary directory, which
// needs the package's TestMain to call pgtest.Main so that it is stopped.
// When no server can be had the test fails if CI=true or TXFENCE_TEST_STRICT=1
// (set by make test), and is skipped with the reason otherwise.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgcluster"
)

const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=3"

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
	admin      *pgxpool.Pool

	mainUsed  bool
	throwaway *pgcluster.Cluster
)

// Main runs the package's tests and then stops the throwaway cluster if one
// was started. Call it from TestMain in every package with database tests:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	mainUsed = true
	code := m.Run()
	if admin != nil {
		admin.Close()
	}
	if throwaway != nil {
		if err := throwaway.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
		_ = os.RemoveAll(throwaway.Dir)
	}
	os.Exit(code)
}

// server finds or starts the server once per test binary.
func server() (string, error) {
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		serverURL, serverErr = findServer(ctx)
		if serverErr != nil {
			return
		}
		admin, serverErr = pg.Open(ctx, serverURL, pg.PoolOptions{MaxConns: 4, Application: "pgtest"})
	})
	return serverURL, serverErr
}

func findServer(ctx context.Context) (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, pg.Ping(ctx, u) // set on purpose: do not fall back silently
	}
	localErr := pg.Ping(ctx, localURL)
	if localErr == nil {
		return localURL, nil
	}
	if !mainUsed {
		return "", fmt.Errorf("no PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432 (%v), and this package's TestMain does not call pgtest.Main, which a throwaway cluster needs", localErr)
	}
	dir, err := os.MkdirTemp("", "txfence-pgtest-")
	if err != nil {
		return "", err
	}
	var lastErr error
	for range 3 { // a free port can be taken before the server binds it
		port, err := pgcluster.FreePort()
		if err != nil {
			return "", err
		}
		c, err := pgcluster.Start(ctx, dir, port)
		if err == nil {
			throwaway = c
			return c.URL(), nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return "", fmt.Errorf("no PostgreSQL at 127.0.0.1:5432 (%v), and a throwaway cluster failed: %w", localErr, lastErr)
}

// Unavailable ends a test that cannot have a server it needs: it fails under
// CI (CI=true) and make test (TXFENCE_TEST_STRICT=1), where every database
// and chain test must run, and is skipped with the reason when a developer
// runs go test by hand without the servers.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("TXFENCE_TEST_STRICT") == "1" {
		t.Fatalf("%s unavailable (CI or make test, so this fails instead of skipping): %v", what, err)
	}
	t.Skipf("%s unavailable: %v", what, err)
}

// ServerURL is a superuser URL of the test server, for tests that need
// whole databases (the local stack's test). Such tests must name their
// databases uniquely and drop them.
func ServerURL(t testing.TB) string {
	t.Helper()
	u, err := server()
	if err != nil {
		Unavailable(t, "PostgreSQL", err)
	}
	return u
}

// URL creates an empty schema for t, dropped when t ends, and returns a
// connection URL whose search_path is that schema. The URL works for pgx
// and for libpq tools (psql, pg_dump) alike, and can be handed to a
// service's run() as its database URL.
func URL(t testing.TB) string {
	t.Helper()
	base, err := server()
	if err != nil {
		Unavailable(t, "PostgreSQL", err)
	}
	schema := schemaName(t.Name())
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSchema(base, schema)
}

// Pool is URL plus a pool connected to it, closed when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), URL(t), pg.PoolOptions{MaxConns: 8, Application: "pgtest"})
	if err != nil {
		t.Fatalf("connect to test schema: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Migrated is Pool with ms applied: a service's schema, fresh for t. It
// allows 16 connections, enough for the concurrency tests.
func Migrated(t testing.TB, ms *pg.Migrations) *pgxpool.Pool {
	t.Helper()
	pool, err := pg.Open(context.Background(), URL(t), pg.PoolOptions{MaxConns: 16, Application: "pgtest"})
	if err != nil {
		t.Fatalf("connect to test schema: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := ms.Up(context.Background(), pool, nil); err != nil {
		t.Fatalf("migrate the test schema: %v", err)
	}
	return pool
}

// WithSchema returns u with its search_path set to schema, through the
// startup "options" parameter that pgx and libpq both pass to the server.
func WithSchema(u, schema string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		panic(fmt.Sprintf("pgtest: unparsable server URL: %v", err))
	}
	q := parsed.Query()
	q.Set("options", "-csearch_path="+schema) // no space: "+" and "%20" decode differently across clients
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// schemaName makes a readable, unique, valid schema name from a test name.
func schemaName(testName string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := nonIdent.ReplaceAllString(strings.ToLower(testName), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return "t_" + name + "_" + hex.EncodeToString(b[:])
}
