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
	described := pgtest.RequireQueries(t, postgres.Migrations, postgres.Queries)
	if t.Failed() {
		return
	}
	// A copy is found by all of the row's column names, side by side, and
	// must be one of those listed.
	all := func(canonical string) int { return len(described[canonical].Fields) }
	pgtest.RequireRowCopies(t, described,
		pgtest.RowCopy{Canonical: "Account", Start: all("Account"), Copies: []string{"Accounts"}},         // scanAccount
		pgtest.RowCopy{Canonical: "JournalByID", Start: all("JournalByID"), Copies: []string{"Journals"}}, // scanJournal
		pgtest.RowCopy{Canonical: "Transit", Start: all("Transit"),
			Copies: []string{"AlertTransits", "Transits", "TransitsOf", "WalletTransits"}}, // scanTransit
		pgtest.RowCopy{Canonical: "ReconciliationRun", Start: all("ReconciliationRun"),
			Copies: []string{"ChainReconciliationRuns", "NewestCompleteRun", "NewestRun", "ReconciliationRuns"}}, // scanRun
	)
}
