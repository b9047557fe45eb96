package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/postgres/postgrestest"
)

// BenchmarkAllocate prints nonces allocated per second for one signer,
// each a SIMULATED → ALLOCATED change with its event and the cursor moved
// past it, committed, in the same run:
//
//   - batched: the real path, Store.Allocate from the signer's one worker,
//     batch nonces per fenced transaction;
//   - naive: the one-at-a-time design SYSTEM.md §5 rejects, each allocation
//     its own transaction that takes the cursor's row lock (SELECT ... FOR
//     UPDATE), from concurrent request handlers competing for that lock.
//
// The naive line also reports batched/naive, the ratio of nonces per
// second of the two designs measured in this run (batch64/naive,
// batch1/naive); with -v a summary line follows. Every run checks afterwards that the nonces it gave are
// unique and contiguous, and fails instead of printing numbers if not.
func BenchmarkAllocate(b *testing.B) {
	rates := map[int]float64{} // nonces/s of the last run of batched/batch=N
	for _, batch := range []int{64, 1} {
		b.Run(fmt.Sprintf("batched/batch=%d", batch), func(b *testing.B) {
			delete(rates, batch)
			rates[batch] = benchBatched(b, batch)
		})
	}
	const handlers = 8
	var naive float64
	b.Run(fmt.Sprintf("naive/goroutines=%d", handlers), func(b *testing.B) {
		naive = 0
		naive = benchNaive(b, handlers)
		for batch, rate := range rates {
			b.ReportMetric(rate/naive, fmt.Sprintf("batch%d/naive", batch))
		}
	})
	if naive > 0 && rates[64] > 0 {
		b.Logf("batched (batch=64) %.0f nonces/s, batched (batch=1) %.0f nonces/s, naive (%d goroutines) %.0f nonces/s: batched/naive %.1fx",
			rates[64], rates[1], handlers, naive, rates[64]/naive)
	}
}

// benchFees are the fees every transaction is allocated with.
var benchFees = txmanager.Fees{MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9)}

// benchBatched allocates b.N pre-simulated transactions through
// Store.Allocate, batch at a time from one goroutine as the signer's
// worker does, and returns nonces per second.
func benchBatched(b *testing.B, batch int) float64 {
	ctx := b.Context()
	s, pool := benchStore(b, 4)
	f := benchLease(b, s)
	ids := postgrestest.Simulated(b, s, f, bob, "bench", b.N)
	first, err := s.NextNonce(ctx, f, nil)
	if err != nil {
		b.Fatal(err)
	}

	fees := make([]txmanager.Fees, batch)
	for i := range fees {
		fees[i] = benchFees
	}

	b.ResetTimer()
	next := first
	for start := 0; start < len(ids); start += batch {
		end := min(start+batch, len(ids))
		got, err := s.Allocate(ctx, f, ids[start:end], fees[:end-start], next)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != end-start {
			b.Fatalf("allocated %d of %d", len(got), end-start)
		}
		next += uint64(len(got))
	}
	b.StopTimer()

	rate := float64(len(ids)) / b.Elapsed().Seconds()
	nonces := requireContiguous(b, pool, ids, first)
	for i, id := range ids { // and in the order given
		if nonces[id] != int64(first)+int64(i) {
			b.Fatalf("transaction %d of the batches got nonce %d, want %d", i, nonces[id], int64(first)+int64(i))
		}
	}
	b.ReportMetric(rate, "nonces/s")
	return rate
}

// benchNaive allocates b.N pre-simulated transactions through
// naiveAllocate from handlers goroutines, as concurrent request handlers
// of a one-at-a-time design would, and returns nonces per second.
func benchNaive(b *testing.B, handlers int) float64 {
	ctx := b.Context()
	s, pool := benchStore(b, int32(handlers)+2)
	f := benchLease(b, s)
	ids := postgrestest.Simulated(b, s, f, bob, "bench", b.N)
	first, err := s.NextNonce(ctx, f, nil) // the cursor row the handlers lock
	if err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	var taken atomic.Int64
	var wg sync.WaitGroup
	for range handlers {
		wg.Go(func() {
			for {
				i := int(taken.Add(1) - 1)
				if i >= len(ids) {
					return
				}
				if err := naiveAllocate(ctx, pool, f, ids[i]); err != nil {
					b.Errorf("naive allocation of %s: %v", ids[i], err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if b.Failed() {
		b.FailNow()
	}

	rate := float64(len(ids)) / b.Elapsed().Seconds()
	requireContiguous(b, pool, ids, first)
	b.ReportMetric(rate, "nonces/s")
	return rate
}

// naiveAllocate is the comparison design, NOT production code: one
// transaction per nonce that locks the signer's cursor row, reads the
// next nonce, gives it to the transaction with its signing fees (fenced,
// as the real path) and writes its event, moves the cursor on and
// commits, releasing the lock. It
// writes the same tables as Store.Allocate does per nonce with no more
// statements (the real path also locks and returns each row), so the
// ratio measures the batching and the lock, not extra work on this side.
func naiveAllocate(ctx context.Context, pool *pgxpool.Pool, f txmanager.Fence, id uuid.UUID) error {
	chainID, signer := int64(f.Key.ChainID), f.Key.Signer.Bytes()
	return pg.InTx(ctx, pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		var n int64
		err := tx.QueryRow(ctx, `SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2 FOR UPDATE`,
			chainID, signer).Scan(&n)
		if err != nil {
			return fmt.Errorf("lock the cursor: %w", err)
		}
		args := []any{id, n, chainID, signer, benchFees.MaxFeePerGas.String(), benchFees.MaxPriorityFeePerGas.String()}
		fence, fenceArgs := postgres.FenceSQL(f, len(args))
		tag, err := tx.Exec(ctx, `
			UPDATE tx SET state = 'ALLOCATED', nonce = $2, updated_at = now(),
				signing_max_fee_per_gas = $5::numeric, signing_max_priority_fee_per_gas = $6::numeric, signing_gas_price = NULL
			WHERE tx_id = $1 AND state = 'SIMULATED' AND chain_id = $3 AND signer = $4 AND `+fence,
			append(args, fenceArgs...)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errors.New("fenced, or not SIMULATED")
		}
		nonce := uint64(n)
		payload, err := json.Marshal(txmanager.StateChanged{FromState: txmanager.StateSimulated, ToState: txmanager.StateAllocated, Nonce: &nonce})
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO event (tx_id, type, payload)
			SELECT $1, $2, $3 FROM (SELECT pg_advisory_xact_lock_shared($4)) AS writing`,
			id, txmanager.EventStateChanged, payload, int64(postgres.EventBarrier)); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE nonce_cursor SET next_nonce = $3 WHERE chain_id = $1 AND signer = $2`, chainID, signer, n+1)
		return err
	})
}

// requireContiguous fails b unless ids are ALLOCATED with the nonces
// first..first+len(ids)-1, each once, with one ALLOCATED event each and
// the cursor just past them; it returns their nonces.
func requireContiguous(b *testing.B, pool *pgxpool.Pool, ids []uuid.UUID, first uint64) map[uuid.UUID]int64 {
	b.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT tx_id, state, nonce FROM tx WHERE tx_id = ANY($1)`, ids)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close() // before any Fatal: the pool's cleanup waits for the connection
	nonces := map[uuid.UUID]int64{}
	seen := map[int64]bool{}
	for rows.Next() {
		var id uuid.UUID
		var state string
		var nonce *int64
		if err := rows.Scan(&id, &state, &nonce); err != nil {
			b.Fatal(err)
		}
		switch {
		case state != string(txmanager.StateAllocated) || nonce == nil:
			b.Fatalf("%s is %s with nonce %v after allocation", id, state, nonce)
		case seen[*nonce]:
			b.Fatalf("nonce %d given twice", *nonce)
		case *nonce < int64(first) || *nonce >= int64(first)+int64(len(ids)):
			b.Fatalf("nonce %d outside %d..%d", *nonce, first, int(first)+len(ids)-1)
		}
		seen[*nonce], nonces[id] = true, *nonce
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if len(nonces) != len(ids) { // distinct and in range: contiguous
		b.Fatalf("%d transactions allocated, want %d", len(nonces), len(ids))
	}
	var events int
	var cursor int64
	err = pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM event WHERE tx_id = ANY($1) AND payload->>'to_state' = 'ALLOCATED'),
		(SELECT next_nonce FROM nonce_cursor)`, ids).Scan(&events, &cursor)
	if err != nil {
		b.Fatal(err)
	}
	if events != len(ids) || cursor != int64(first)+int64(len(ids)) {
		b.Fatalf("%d ALLOCATED events and cursor %d, want %d and %d", events, cursor, len(ids), int(first)+len(ids))
	}
	return nonces
}

// benchStore is a migrated store on a schema of its own for one run of b.
func benchStore(b *testing.B, maxConns int32) (*postgres.Store, *pgxpool.Pool) {
	b.Helper()
	pool, err := pg.Open(context.Background(), pgtest.URL(b), pg.PoolOptions{MaxConns: maxConns, Application: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(context.Background(), pool, nil); err != nil {
		b.Fatal(err)
	}
	return postgres.New(pool), pool
}

// benchLease takes alice's lease for the whole run.
func benchLease(b *testing.B, s *postgres.Store) txmanager.Fence {
	b.Helper()
	token, ok, err := s.Acquire(b.Context(), "bench", aliceKey, time.Hour)
	if err != nil || !ok {
		b.Fatalf("acquire: ok=%v %v", ok, err)
	}
	return txmanager.Fence{Node: "bench", Key: aliceKey, Token: token}
}
