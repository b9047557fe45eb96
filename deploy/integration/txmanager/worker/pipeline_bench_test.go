package worker_test

import (
	"context"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/postgres/postgrestest"
	"github.com/txfence/txfence/txmanager/remote"
)

// BenchmarkAllocateSignPersist prints transactions per second through the
// owner's send path for one signer, batch at a time as its one worker
// runs it: SIMULATED transactions given nonces (Store.Allocate, one
// fenced commit), signed by a real signerd over mutual TLS (development
// policy, its double-sign and audit records committed before it answers),
// and the signatures stored (Store.Signed, one fenced commit). ns/op is
// per transaction. Fee lookups and broadcasts, which need a chain, are
// left out. alloc_us/tx, sign_us/tx and store_us/tx split the time by
// step. Every run checks afterwards that the stored signatures carry
// unique, contiguous nonces, and fails instead of printing numbers if not.
func BenchmarkAllocateSignPersist(b *testing.B) {
	for _, batch := range []int{16, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			p := newPipeline(b)
			ids := postgrestest.Simulated(b, p.store, p.fence, signertest.DevAddress(1), "bench", b.N)
			ctx := b.Context()
			first, err := p.store.NextNonce(ctx, p.fence, nil)
			if err != nil {
				b.Fatal(err)
			}

			fees := make([]txmanager.Fees, batch)
			for i := range fees {
				fees[i] = pipelineFees
			}
			var alloc, sign, store time.Duration
			b.ResetTimer()
			next := first
			for start := 0; start < len(ids); start += batch {
				end := min(start+batch, len(ids))
				t0 := time.Now()
				allocated, err := p.store.Allocate(ctx, p.fence, ids[start:end], fees[:end-start], next)
				if err != nil {
					b.Fatal(err)
				}
				if len(allocated) != end-start {
					b.Fatalf("allocated %d of %d", len(allocated), end-start)
				}
				next += uint64(len(allocated))
				t1 := time.Now()
				toSign := make([]remote.ToSign, len(allocated))
				for i := range allocated {
					t := &allocated[i]
					if t.SigningFees == nil {
						b.Fatalf("%s allocated without its signing fees", t.ID)
					}
					toSign[i] = remote.ToSign{Tx: t, Nonce: t.Nonce, GasLimit: *t.GasLimit, Fees: remote.Fees(*t.SigningFees)}
				}
				results, err := p.signer.SignBatch(ctx, toSign)
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				attempts := make([]txmanager.Attempt, len(results))
				for i, r := range results {
					if r.Outcome != remote.OutcomeSigned {
						b.Fatalf("%s: signerd answered %s (%s %v)", r.TxID, r.Outcome, r.Decision.RuleID, r.Decision.Reasons)
					}
					fee := toSign[i].Fees
					attempts[i] = txmanager.Attempt{TxID: r.TxID, Raw: r.RawTx, Hash: r.Hash,
						MaxFeePerGas: fee.MaxFeePerGas, MaxPriorityFeePerGas: fee.MaxPriorityFeePerGas, GasPrice: fee.GasPrice}
				}
				signed, err := p.store.Signed(ctx, p.fence, attempts)
				if err != nil {
					b.Fatal(err)
				}
				if len(signed) != len(attempts) {
					b.Fatalf("stored %d of %d signatures", len(signed), len(attempts))
				}
				alloc, sign, store = alloc+t1.Sub(t0), sign+t2.Sub(t1), store+time.Since(t2)
			}
			b.StopTimer()

			rate := float64(len(ids)) / b.Elapsed().Seconds()
			p.requireSignedContiguous(b, ids, first)
			perTx := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(ids)) }
			b.ReportMetric(rate, "tx/s")
			b.ReportMetric(perTx(alloc), "alloc_us/tx")
			b.ReportMetric(perTx(sign), "sign_us/tx")
			b.ReportMetric(perTx(store), "store_us/tx")
		})
	}
}

// pipelineFees are EIP-1559 caps the development policy allows, fixed
// at allocation and signed with.
var pipelineFees = txmanager.Fees{MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9)}

// pipeline is one run's store, lease and signerd, on schemas of its own:
// signerd's double-sign records start empty with the store's nonces.
type pipeline struct {
	store  *postgres.Store
	pool   *pgxpool.Pool
	signer *remote.Signer
	fence  txmanager.Fence
}

func newPipeline(b *testing.B) *pipeline {
	b.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.URL(b), pg.PoolOptions{MaxConns: 4, Application: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(ctx, pool, nil); err != nil {
		b.Fatal(err)
	}
	pki := servicetest.PKI(b)
	srv := signertest.StartServer(b, signertest.ServerOptions{PKI: pki})
	signer, err := remote.NewSigner(srv.URL, servicetest.Client(b, pki, "txmanager", "signer"))
	if err != nil {
		b.Fatal(err)
	}
	store := postgres.New(pool)
	key := txmanager.SignerKey{ChainID: 31337, Signer: signertest.DevAddress(0)}
	token, ok, err := store.Acquire(ctx, "bench", key, time.Hour)
	if err != nil || !ok {
		b.Fatalf("acquire: ok=%v %v", ok, err)
	}
	return &pipeline{store: store, pool: pool, signer: signer, fence: txmanager.Fence{Node: "bench", Key: key, Token: token}}
}

// requireSignedContiguous fails b unless ids are SIGNED with the nonces
// first..first+len(ids)-1 in the order given, and each stored attempt is
// a transaction signed by the signer at its transaction's nonce, with
// the stored hash.
func (p *pipeline) requireSignedContiguous(b *testing.B, ids []uuid.UUID, first uint64) {
	b.Helper()
	rows, err := p.pool.Query(context.Background(), `
		SELECT t.tx_id, t.state, t.nonce, a.nonce, a.hash, a.raw
		FROM tx t JOIN attempt a ON a.tx_id = t.tx_id AND a.attempt = t.current_attempt
		WHERE t.tx_id = ANY($1)`, ids)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close() // before any Fatal: the pool's cleanup waits for the connection
	type stored struct {
		nonce int64
		hash  common.Hash
		raw   []byte
	}
	got := map[uuid.UUID]stored{}
	for rows.Next() {
		var id uuid.UUID
		var state string
		var txNonce, attemptNonce int64
		var s stored
		var hash []byte
		if err := rows.Scan(&id, &state, &txNonce, &attemptNonce, &hash, &s.raw); err != nil {
			b.Fatal(err)
		}
		if state != string(txmanager.StateSigned) || txNonce != attemptNonce {
			b.Fatalf("%s is %s with nonce %d, its attempt's %d", id, state, txNonce, attemptNonce)
		}
		s.nonce, s.hash = txNonce, common.BytesToHash(hash)
		got[id] = s
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if len(got) != len(ids) {
		b.Fatalf("%d transactions signed and stored, want %d", len(got), len(ids))
	}
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(p.fence.Key.ChainID))
	for i, id := range ids {
		s := got[id]
		want := int64(first) + int64(i) // unique and contiguous, in the order given
		var tx types.Transaction
		if err := tx.UnmarshalBinary(s.raw); err != nil {
			b.Fatalf("%s: %v", id, err)
		}
		from, err := types.Sender(signer, &tx)
		if s.nonce != want || tx.Nonce() != uint64(want) || tx.Hash() != s.hash || err != nil || from != p.fence.Key.Signer {
			b.Fatalf("%s: nonce %d (signed %d), want %d; hash %s stored %s; sender %s (%v)",
				id, s.nonce, tx.Nonce(), want, tx.Hash(), s.hash, from, err)
		}
	}
}
