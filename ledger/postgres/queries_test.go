package postgres_test

import (
	"testing"

	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// TestQueries holds the query files to the schema and to the store's
// conventions: every query prepares on the migrated schema, is documented
// and is used (pgtest.RequireQueries); and every copy of a row that
// scanAccount, scanJournal, scanTransit or scanRun reads matches the one
// it copies, column by column, name and type. The copies are found by
// their column names, and must be the ones listed: a copy whose columns
// drifted is no longer found, and fails as missing.
func TestQueries(t *testing.T) {
	t.Parallel()
	// A copy is found by all of the row's column names, side by side
	// (Start 0), and must be one of those listed.
	pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries,
		pgtest.RowCopy{Canonical: "Account", Copies: []string{"Accounts"}},     // scanAccount
		pgtest.RowCopy{Canonical: "JournalByID", Copies: []string{"Journals"}}, // scanJournal
		pgtest.RowCopy{Canonical: "Transit", // scanTransit
			Copies: []string{"AlertTransits", "Transits", "TransitsOf", "WalletTransits"}},
		pgtest.RowCopy{Canonical: "ReconciliationRun", // scanRun
			Copies: []string{"ChainReconciliationRuns", "NewestCompleteRun", "NewestRun", "ReconciliationRuns"}},
	)
}
