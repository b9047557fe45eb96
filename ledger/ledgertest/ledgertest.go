// Package ledgertest helps the ledger's tests: a migrated store on a real
// PostgreSQL whose books are checked for conservation when the test ends.
package ledgertest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// Store is a ledger store on a fresh migrated schema; when the test ends,
// RequireConservation checks its books.
func Store(t testing.TB) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.Migrated(t, postgres.Migrations)
	t.Cleanup(func() { RequireConservation(t, pool) })
	return postgres.New(pool, slog.New(slog.DiscardHandler)), pool
}

// RequireConservation checks what must hold after any test: every
// journal sums to zero in each asset, so every asset sums to zero over the
// whole ledger, and every balance is the sum of its account's entries.
func RequireConservation(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var unbalanced, offAssets, offBalances int
	err := pool.QueryRow(ctx, `
		SELECT
			(SELECT count(*) FROM (SELECT 1 FROM entry e JOIN account a USING (account_id)
				GROUP BY e.journal_id, a.asset HAVING sum(e.amount) <> 0) j),
			(SELECT count(*) FROM (SELECT 1 FROM entry e JOIN account a USING (account_id)
				GROUP BY a.chain_id, a.asset HAVING sum(e.amount) <> 0) g),
			(SELECT count(*) FROM account a
				LEFT JOIN balance b USING (account_id)
				LEFT JOIN (SELECT account_id, sum(amount) AS total FROM entry GROUP BY account_id) e USING (account_id)
				WHERE coalesce(b.amount, 0) <> coalesce(e.total, 0))`).Scan(&unbalanced, &offAssets, &offBalances)
	if err != nil {
		t.Errorf("check conservation: %v", err)
		return
	}
	if unbalanced+offAssets+offBalances != 0 {
		t.Errorf("conservation broken: %d journal-assets unbalanced, %d assets not summing to zero, %d balances not the sum of their entries",
			unbalanced, offAssets, offBalances)
	}
}
