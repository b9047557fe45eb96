package pg_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func loadGood(t *testing.T) *pg.Migrations {
	t.Helper()
	ms, err := pg.LoadMigrations(os.DirFS("testdata/migrations/good"))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestMigrationsApplyTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	ms := loadGood(t)
	if err := ms.Check(ctx, pool); err == nil {
		t.Error("Check passed on an unmigrated schema")
	}
	applied, err := ms.Up(ctx, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 2 {
		t.Fatalf("first run applied %d migrations, want 2", len(applied))
	}
	applied, err = ms.Up(ctx, pool, nil)
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if len(applied) != 0 {
		t.Errorf("second run applied %d migrations, want none", len(applied))
	}
	if err := ms.Check(ctx, pool); err != nil {
		t.Errorf("Check after migrating: %v", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO account (name, balance) VALUES ('a', 1)`); err != nil {
		t.Errorf("the migrated table is not usable: %v", err)
	}
}

func TestConcurrentRunnersApplyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	ms := loadGood(t)
	var total atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 6)
	for range 6 {
		wg.Go(func() {
			applied, err := ms.Up(ctx, pool, nil)
			total.Add(int64(len(applied)))
			errc <- err
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Error(err)
		}
	}
	if total.Load() != 2 {
		t.Errorf("six concurrent runners applied %d migrations in all, want 2", total.Load())
	}
}

func TestMigrationsRefuseDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := loadGood(t).Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}

	edited, err := pg.LoadMigrations(fstest.MapFS{
		"0001_accounts.sql": {Data: []byte("CREATE TABLE account (id bigint);")},
		"0002_balance.sql":  {Data: []byte("SELECT 1;")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := edited.Up(ctx, pool, nil); err == nil || !strings.Contains(err.Error(), "edited after it was applied") {
		t.Errorf("an edited migration: %v", err)
	}

	older, err := pg.LoadMigrations(fstest.MapFS{
		"0001_accounts.sql": {Data: mustRead(t, "testdata/migrations/good/0001_accounts.sql")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := older.Check(ctx, pool); err == nil || !strings.Contains(err.Error(), "newer release") {
		t.Errorf("a database ahead of the build: %v", err)
	}
}

func TestFailedMigrationLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	ms, err := pg.LoadMigrations(fstest.MapFS{
		"0001_ok.sql":     {Data: []byte("CREATE TABLE a (id int);")},
		"0002_broken.sql": {Data: []byte("CREATE TABLE b (id int); SELECT no_such_function();")},
	})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := ms.Up(ctx, pool, nil)
	if err == nil || !strings.Contains(err.Error(), "0002_broken") {
		t.Fatalf("got %v; want the broken migration named", err)
	}
	if len(applied) != 1 {
		t.Errorf("applied %d before the failure, want 1", len(applied))
	}
	var b *string
	if err := pool.QueryRow(ctx, `SELECT to_regclass('b')::text`).Scan(&b); err != nil || b != nil {
		t.Errorf("table b of the failed migration exists (%v, %v)", b, err)
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	t.Parallel()
	if _, err := pg.LoadMigrations(os.DirFS("testdata/migrations/gap")); err == nil {
		t.Error("a gap in versions was accepted")
	}
	if _, err := pg.LoadMigrations(fstest.MapFS{"1_Bad Name.sql": {}}); err == nil {
		t.Error("a badly named migration was accepted")
	}
	ms, err := pg.LoadMigrations(fstest.MapFS{"README.md": {}})
	if err != nil || ms.Latest() != 0 {
		t.Errorf("an empty set: %v, latest %d", err, ms.Latest())
	}
}

// TestInTxRetriesSerializationFailures makes two serializable transactions
// collide on purpose: each reads the sum, then writes, so one of them must
// fail with 40001 and be retried.
func TestInTxRetriesSerializationFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := loadGood(t).Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 10
	var tries atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				err := pg.InTx(ctx, pool, pg.TxOptions{TxOptions: pgx.TxOptions{IsoLevel: pgx.Serializable}, Attempts: 50},
					func(tx pgx.Tx) error {
						tries.Add(1)
						var n int64
						if err := tx.QueryRow(ctx, `SELECT count(*) FROM account`).Scan(&n); err != nil {
							return err
						}
						_, err := tx.Exec(ctx, `INSERT INTO account (name, balance) VALUES ($1, $2)`,
							string(rune('a'+w))+"-"+string(rune('a'+i)), n)
						return err
					})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var rows int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM account`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != workers*each {
		t.Errorf("%d rows, want %d", rows, workers*each)
	}
	// Serializable reads of a count: each row's balance is a distinct count.
	var distinct int64
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT balance) FROM account`).Scan(&distinct); err != nil {
		t.Fatal(err)
	}
	if distinct != rows {
		t.Errorf("%d distinct counts for %d rows: transactions were not serialized", distinct, rows)
	}
	if tries.Load() == rows {
		t.Log("no serialization failure happened this run; retries were not exercised")
	}
}

func TestInTxGivesUpAsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	var tries int
	err := pg.InTx(ctx, pool, pg.TxOptions{Attempts: 3}, func(tx pgx.Tx) error {
		tries++
		_, err := tx.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'contention' USING ERRCODE = '40P01'; END $$`)
		return err
	})
	if tries != 3 {
		t.Errorf("tried %d times, want 3", tries)
	}
	if !errs.Is(err, errs.Unavailable) || pg.Code(err) != pg.CodeDeadlockDetected {
		t.Errorf("got %v (code %q); want unavailable wrapping 40P01", err, pg.Code(err))
	}
}

func TestInTxRollsBackOnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := loadGood(t).Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	var tries int
	err := pg.InTx(ctx, pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		tries++
		if _, err := tx.Exec(ctx, `INSERT INTO account (name) VALUES ('x')`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || tries != 1 {
		t.Errorf("got %v after %d tries; want boom after one", err, tries)
	}
	if n := count(t, pool); n != 0 {
		t.Errorf("%d rows survived a rolled back transaction", n)
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM account`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
