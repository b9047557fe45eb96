package pgtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgcluster"
)

// RequireSchemaDump migrates a fresh schema with ms, dumps it with pg_dump
// and compares the dump with the committed file, so that every change to a
// service's schema is reviewed as a readable diff of that file. With
// TXFENCE_UPDATE_SCHEMA=1 (make schema) it rewrites the file instead.
func RequireSchemaDump(t *testing.T, ms *pg.Migrations, file string) {
	t.Helper()
	ctx := context.Background()
	u := URL(t)
	pool, err := pg.Open(ctx, u, pg.PoolOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := ms.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	got := dumpSchema(t, u, schema)
	if os.Getenv("TXFENCE_UPDATE_SCHEMA") == "1" {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (create it with: make schema)", err)
	}
	if string(want) != got {
		t.Errorf("%s is stale: the migrations now produce a different schema; run make schema and review the diff.\ngot:\n%s", file, got)
	}
}

var (
	dumpNoise  = regexp.MustCompile(`(?m)^(--.*|SET .*|SELECT pg_catalog\.set_config.*|\\(un)?restrict .*)\n`)
	blankLines = regexp.MustCompile(`\n{3,}`)
)

// dumpSchema is pg_dump's schema-only output for one schema, with the
// noise that varies between runs (comments, session settings, the random
// schema name) taken out.
func dumpSchema(t *testing.T, u, schema string) string {
	t.Helper()
	pgDump := "pg_dump"
	if dir, err := pgcluster.BinDir(); err == nil {
		pgDump = filepath.Join(dir, "pg_dump")
	}
	out, err := exec.Command(pgDump, "--schema-only", "--no-owner", "--no-privileges", "--no-comments",
		"--schema="+schema, "--dbname="+u).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("pg_dump: %v\n%s", err, stderr)
	}
	s := dumpNoise.ReplaceAllString(string(out), "")
	s = strings.ReplaceAll(s, "CREATE SCHEMA "+schema+";\n", "")
	s = strings.ReplaceAll(s, schema+".", "")
	s = blankLines.ReplaceAllString(s, "\n\n")
	return "-- Schema produced by the migrations; regenerate with make schema. Do not edit.\n\n" + strings.TrimSpace(s) + "\n"
}
