package signer_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/signertest"
)

// BenchmarkSign measures signatures per second as signerd gives them: the
// development policy evaluated, each transaction signed, and its
// double-sign record and hash-chained audit record committed to a real
// PostgreSQL before Sign returns. batch=1 is one request per call (one
// transaction each); larger batches share one transaction; parallel runs
// single requests from several goroutines over three signing keys, as
// txmanager's workers would.
func BenchmarkSign(b *testing.B) {
	pol, err := policy.Load("testdata/policy/development.json")
	if err != nil {
		b.Fatal(err)
	}
	const chainID = 31337
	for _, batch := range []int{1, 16, signer.MaxBatch} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			pool, _ := migratedPool(b)
			svc := newService(b, pool, signertest.NewMemoryKeys(b, devKeyHex), pol)
			var nonce uint64
			reqs := make([]*signer.Request, batch)
			calls := 0
			for b.Loop() {
				for i := range reqs {
					reqs[i] = devRequest(fmt.Sprintf("bench-%d", nonce), chainID, nonce, signer.DynamicFee, 1, gwei(30))
					nonce++
				}
				requireSigned(b, svc, reqs)
				calls++
			}
			b.ReportMetric(float64(calls*batch)/b.Elapsed().Seconds(), "sigs/s")
		})
	}
	b.Run("parallel", func(b *testing.B) {
		pool, _ := migratedPool(b)
		svc := newService(b, pool, signertest.NewMemoryKeys(b, signertest.DevKeys...), pol)
		var goroutines, signed atomic.Int64
		nonces := make([]atomic.Uint64, len(signertest.DevKeys))
		b.SetParallelism(2)
		b.RunParallel(func(pb *testing.PB) {
			key := int(goroutines.Add(1)-1) % len(signertest.DevKeys)
			for pb.Next() {
				nonce := nonces[key].Add(1)
				r := devRequest(fmt.Sprintf("bench-%d-%d", key, nonce), chainID, nonce, signer.DynamicFee, 1, gwei(30))
				r.From = signertest.DevAddress(key)
				requireSigned(b, svc, []*signer.Request{r})
				signed.Add(1)
			}
		})
		b.ReportMetric(float64(signed.Load())/b.Elapsed().Seconds(), "sigs/s")
	})
}

func requireSigned(b *testing.B, svc *signer.Service, reqs []*signer.Request) {
	res, err := svc.Sign(context.Background(), "txmanager", reqs)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range res {
		if r.Outcome != signer.OutcomeSigned {
			b.Fatalf("%s: %s %s %v", r.Request.TxID, r.Outcome, r.Decision.RuleID, r.Decision.Reasons)
		}
	}
}
