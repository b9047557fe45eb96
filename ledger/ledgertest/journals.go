package ledgertest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
)

// Querier is a pool, a connection or a transaction (a snapshot).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// BookedJournal is how many journals of Kind the books hold for the
// transaction Hash (nil for journals of no transaction).
type BookedJournal struct {
	Kind  ledger.JournalKind
	Hash  []byte
	Count int
}

// BookedJournals lists the books' journals but the openings, counted by
// kind and transaction: what a crash or backlog test compares with what
// the feed settled.
func BookedJournals(t testing.TB, db Querier) []BookedJournal {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT kind, tx_hash, count(*) FROM journal WHERE kind <> 'opening' GROUP BY kind, tx_hash`)
	if err != nil {
		t.Fatal(err)
	}
	booked, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BookedJournal])
	if err != nil {
		t.Fatal(err)
	}
	return booked
}
