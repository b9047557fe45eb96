package pg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// BenchmarkInTxCommit measures committed one-row transactions through InTx
// on the real server, from parallel goroutines: the commit rate every
// durable step of txfence is bounded by.
func BenchmarkInTxCommit(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Pool(b)
	if _, err := pool.Exec(ctx, `CREATE TABLE bench (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := pg.InTx(ctx, pool, pg.TxOptions{}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO bench (v) VALUES (1)`)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}
