package postgres

import (
	"embed"

	"github.com/txfence/txfence/shared/pg"
)

//go:embed queries
var queryFiles embed.FS

// Queries are the store's SQL statements: the files in queries/, one per
// Go file of this package that runs SQL, each statement under its name.
// The store asks for every one it uses with Queries.Use in a package-level
// variable below its file's imports, and sends its SQL unchanged.
var Queries = pg.MustLoadQueries(queryFiles, "queries")
