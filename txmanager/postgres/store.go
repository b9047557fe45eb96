package postgres

import "github.com/jackc/pgx/v5/pgxpool"

// Store is txmanagerd's PostgreSQL store. Every node of a deployment
// shares its database, which is the authority for leases, nonces and
// transaction state.
type Store struct {
	pool    *pgxpool.Pool
	creates createQueue
}

// New returns a store on pool, whose schema Migrations produced.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Pool is the store's pool, for tests and status queries.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
