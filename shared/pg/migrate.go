package pg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Migration is one numbered schema change.
type Migration struct {
	Version  int64
	Name     string
	SQL      string
	Checksum string // sha256 of SQL; an applied migration must never change
}

// Migrations is a service's ordered list of migrations.
type Migrations struct {
	list []Migration
}

var migrationFile = regexp.MustCompile(`^(\d{4,})_([a-z0-9_]+)\.sql$`)

// LoadMigrations reads files named NNNN_name.sql from the root of fsys
// (usually an embed.FS). Versions must run 1, 2, 3… with no gap or
// duplicate, so that two branches adding the same number fail loudly.
// Other files (a README) are ignored.
func LoadMigrations(fsys fs.FS) (*Migrations, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var list []Migration
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			if path.Ext(e.Name()) == ".sql" {
				return nil, fmt.Errorf("migration %s: name must be NNNN_lower_snake.sql", e.Name())
			}
			continue
		}
		version, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		list = append(list, Migration{Version: version, Name: m[2], SQL: string(body), Checksum: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(list, func(a, b Migration) int { return int(a.Version - b.Version) })
	for i, m := range list {
		if m.Version != int64(i+1) {
			return nil, fmt.Errorf("migration %04d_%s: expected version %d (versions must be 1, 2, 3… without gaps or duplicates)", m.Version, m.Name, i+1)
		}
	}
	return &Migrations{list: list}, nil
}

// List returns the migrations in order.
func (ms *Migrations) List() []Migration { return slices.Clone(ms.list) }

// Latest is the highest version, 0 when there are none.
func (ms *Migrations) Latest() int64 { return int64(len(ms.list)) }

const createHistory = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    bigint PRIMARY KEY,
	name       text NOT NULL,
	checksum   text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// Up applies every pending migration, each in its own transaction, in the
// schema the connection's search_path names. Concurrent runners against the
// same schema are serialized by an advisory lock, so a second runner waits
// and then finds nothing to do. It refuses to run when an applied migration
// was edited since, or when the database has versions this build does not
// know (a newer release migrated it).
func (ms *Migrations) Up(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (applied []Migration, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()

	// The lock key is per schema, so that tests in parallel schemas never
	// wait on each other.
	const lockKey = `hashtextextended('txfence.migrate.' || current_schema(), 0)`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	defer func() {
		_, unlockErr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+lockKey+`)`)
		if unlockErr != nil && err == nil {
			err = fmt.Errorf("migrate: release lock: %w", unlockErr)
		}
	}()

	if _, err := conn.Exec(ctx, createHistory); err != nil {
		return nil, fmt.Errorf("migrate: create history table: %w", err)
	}
	pending, err := ms.pending(ctx, conn.Conn())
	if err != nil {
		return nil, err
	}
	for _, m := range pending {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)`,
				m.Version, m.Name, m.Checksum)
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		log.Info("migration applied", "version", m.Version, "name", m.Name)
		applied = append(applied, m)
	}
	return applied, nil
}

// Check reports whether the database is exactly at this build's schema:
// every migration applied, none edited, none unknown. Services use it in
// their readiness check, since they never migrate as a side effect of
// serving.
func (ms *Migrations) Check(ctx context.Context, db Querier) error {
	var exists bool
	if err := db.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("schema check: %w", err)
	}
	if !exists {
		if ms.Latest() == 0 {
			return nil
		}
		return fmt.Errorf("schema not migrated: run the migrate command (want version %d)", ms.Latest())
	}
	pending, err := ms.pending(ctx, db)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return fmt.Errorf("schema has %d pending migrations: run the migrate command (want version %d)", len(pending), ms.Latest())
	}
	return nil
}

// Querier is what Check reads through: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pending compares the history table with the list.
func (ms *Migrations) pending(ctx context.Context, db Querier) ([]Migration, error) {
	rows, err := db.Query(ctx, `SELECT version, name, checksum FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("read migration history: %w", err)
	}
	type record struct {
		version        int64
		name, checksum string
	}
	history, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (record, error) {
		var r record
		return r, row.Scan(&r.version, &r.name, &r.checksum)
	})
	if err != nil {
		return nil, fmt.Errorf("read migration history: %w", err)
	}
	for i, h := range history {
		if h.version > ms.Latest() {
			return nil, fmt.Errorf("database has migration %04d_%s, which this build does not know: it was migrated by a newer release", h.version, h.name)
		}
		if h.version != int64(i+1) {
			return nil, fmt.Errorf("migration history is not contiguous at version %d: it was changed by hand", h.version)
		}
		if m := ms.list[h.version-1]; m.Checksum != h.checksum {
			return nil, fmt.Errorf("migration %04d_%s was edited after it was applied; add a new migration instead", m.Version, m.Name)
		}
	}
	return ms.list[len(history):], nil
}

// MustLoadMigrations loads the migrations in dir of an embedded file
// system, for a service's package-level Migrations variable. A malformed
// set is a build defect, so it panics; every service's tests load it.
func MustLoadMigrations(fsys fs.FS, dir string) *Migrations {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	ms, err := LoadMigrations(sub)
	if err != nil {
		panic(err)
	}
	return ms
}
