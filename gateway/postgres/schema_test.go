package postgres_test

import (
	"testing"

	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestSchemaDumpIsCurrent(t *testing.T) {
	t.Parallel()
	pgtest.RequireSchemaDump(t, postgres.Migrations, "schema.sql")
}
