package pgtest

import (
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/testinfra/pgcluster"
)

// Backup takes a backup of the schema of u (a URL from URL) with pg_dump,
// as an operator would, and returns what restores it with pg_restore: the
// schema dropped with everything in it, then made again from the backup.
// Connections to the schema should be closed before restoring.
func Backup(t testing.TB, u string) (restore func()) {
	t.Helper()
	schema := schemaOf(t, u)
	file := filepath.Join(t.TempDir(), schema+".dump")
	runTool(t, "pg_dump", "--format=custom", "--no-owner", "--no-privileges", "--schema="+schema, "--file="+file, "--dbname="+u)
	return func() {
		t.Helper()
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Fatalf("drop schema %s before the restore: %v", schema, err)
		}
		runTool(t, "pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", "--dbname="+u, file)
	}
}

// schemaOf is the schema a URL from URL puts first on the search path.
func schemaOf(t testing.TB, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	schema, ok := strings.CutPrefix(parsed.Query().Get("options"), "-csearch_path=")
	if !ok || schema == "" {
		t.Fatalf("%s names no schema: make it with pgtest.URL", u)
	}
	return schema
}

// runTool runs one of PostgreSQL's client programs, from the server's
// directory when there is one (matching its version).
func runTool(t testing.TB, name string, args ...string) {
	t.Helper()
	bin := name
	if dir, err := pgcluster.BinDir(); err == nil {
		bin = filepath.Join(dir, name)
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}
