// Package postgres is gatewayd's store: its schema lives here as numbered
// migrations, its SQL in query files. No other service reads these tables.
package postgres

import (
	"embed"

	"github.com/txfence/txfence/shared/pg"
)

//go:embed migrations
var migrationFiles embed.FS

// Migrations is gatewayd's schema history, applied by `gatewayd migrate`.
var Migrations = pg.MustLoadMigrations(migrationFiles, "migrations")

//go:embed queries
var queryFiles embed.FS

// Queries are the store's SQL statements: the files in queries/, one per
// Go file of this package that runs SQL, each statement under its name.
// Each Go file asks for the ones it uses in package-level variables below
// its imports, and sends their SQL unchanged.
var Queries = pg.MustLoadQueries(queryFiles, "queries")
