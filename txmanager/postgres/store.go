package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/batch"
	"github.com/txfence/txfence/txmanager"
)

// Store is txmanagerd's PostgreSQL store. Every node of a deployment
// shares its database, which is the authority for leases, nonces and
// transaction state.
type Store struct {
	pool    *pgxpool.Pool
	creates *batch.Queue[*pendingCreate]
}

var (
	_ txmanager.WorkStore   = (*Store)(nil)
	_ txmanager.FollowStore = (*Store)(nil)
	_ txmanager.APIStore    = (*Store)(nil)
	_ txmanager.LeaseStore  = (*Store)(nil)
)

// New returns a store on pool, whose schema Migrations produced.
func New(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool}
	s.creates = s.newCreateQueue()
	return s
}

// Pool is the store's pool, for tests and status queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
