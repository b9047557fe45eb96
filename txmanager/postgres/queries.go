package postgres

import (
	"context"
	"embed"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

//go:embed queries
var queryFiles embed.FS

// Queries are the store's SQL statements: the files in queries/, one per
// Go file of this package that runs SQL, each statement under its name.
// The store asks for every one it uses in a package-level variable below
// its file's imports (query or fenced), and sends its SQL unchanged.
var Queries = pg.MustLoadQueries(queryFiles, "queries")

// fenceClause is how a fenced statement holds the fence: the lease
// function of migration 0010 on the statement's first four parameters,
// as a sub-select so that it runs once per statement (see the migration).
const fenceClause = "(SELECT txfence_holds_lease($1, $2, $3, $4))"

// query is the statement called name, which must not be fenced: a fenced
// statement goes through fenced, which puts the fence in front of its
// arguments.
func query(name string) pg.Query {
	q := Queries.Use(name)
	if strings.Contains(q.SQL, "txfence_holds_lease") {
		panic(fmt.Sprintf("postgres: query %s (%s) holds the fence: ask for it with fenced", name, q.Pos))
	}
	return q
}

// fencedQuery is a statement conditioned on the lease: its parameters $1
// to $4 are the fence, its own follow from $5.
type fencedQuery struct{ pg.Query }

// fenced is the fenced statement called name. It panics unless the
// statement holds the fence in the one way all do (fenceClause), and holds
// no other.
func fenced(name string) fencedQuery {
	q := Queries.Use(name)
	if !strings.Contains(q.SQL, fenceClause) || strings.Count(q.SQL, "txfence_holds_lease") != strings.Count(q.SQL, fenceClause) {
		panic(fmt.Sprintf("postgres: query %s (%s) must hold the fence as %s", name, q.Pos, fenceClause))
	}
	return fencedQuery{q}
}

// querier is a pool or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (q fencedQuery) exec(ctx context.Context, db querier, f txmanager.Fence, args ...any) (pgconn.CommandTag, error) {
	return db.Exec(ctx, q.SQL, fenceArgs(f, args...)...)
}

func (q fencedQuery) query(ctx context.Context, db querier, f txmanager.Fence, args ...any) (pgx.Rows, error) {
	return db.Query(ctx, q.SQL, fenceArgs(f, args...)...)
}

func (q fencedQuery) queryRow(ctx context.Context, db querier, f txmanager.Fence, args ...any) pgx.Row {
	return db.QueryRow(ctx, q.SQL, fenceArgs(f, args...)...)
}

// fenceArgs are a fenced statement's arguments: f as $1 to $4, then args.
func fenceArgs(f txmanager.Fence, args ...any) []any {
	// A chain id beyond int64 matches no lease row (the schema keeps them
	// positive bigints), so -1 fences the write off instead of wrapping.
	chainID := int64(-1)
	if f.Key.ChainID <= math.MaxInt64 {
		chainID = int64(f.Key.ChainID)
	}
	return append([]any{chainID, f.Key.Signer.Bytes(), f.Node, f.Token}, args...)
}
