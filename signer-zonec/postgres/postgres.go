// Package postgres is signerd's own store: its schema lives here as
// numbered migrations. Nothing but signerd ever connects to this database.
package postgres

import (
	"embed"

	"github.com/txfence/txfence/shared/pg"
)

//go:embed migrations
var migrationFiles embed.FS

// Migrations is signerd's schema history, applied by `signerd migrate`.
var Migrations = pg.MustLoadMigrations(migrationFiles, "migrations")
