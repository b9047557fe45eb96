// Package postgres is gatewayd's store: its schema lives here as numbered
// migrations. No other service reads these tables.
package postgres

import (
	"embed"

	"github.com/txfence/txfence/shared/pg"
)

//go:embed migrations
var migrationFiles embed.FS

// Migrations is gatewayd's schema history, applied by `gatewayd migrate`.
var Migrations = pg.MustLoadMigrations(migrationFiles, "migrations")
