package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/daemon"
)

// BenchmarkPost prints journals booked per second from 32 concurrent
// posters: journals of 2 and of 4 entries, over spread accounts (each
// journal one of 2,000 wallets and counterparties) and on one hot wallet
// (every journal moves the same wallet's balance), with the garbage
// collector set as ledgerd sets it.
func BenchmarkPost(b *testing.B) {
	const accounts = 2000 // wallets, and counterparties
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	daemon.TuneGC(os.Getenv)
	for _, legs := range []int{2, 4} {
		for _, spread := range []bool{true, false} {
			name := fmt.Sprintf("legs=%d/hot", legs)
			if spread {
				name = fmt.Sprintf("legs=%d/spread", legs)
			}
			b.Run(name, func(b *testing.B) {
				s, _ := books(b)
				// The accounts exist already, as in a ledger that has run
				// a while: making one is a one-off, not a posting's cost.
				var warm sync.WaitGroup
				for w := range int64(32) {
					warm.Go(func() {
						for i := w; i < accounts; i += 32 {
							j := transfer(fmt.Sprintf("warm-%d", i), common.BigToAddress(big.NewInt(i)), common.BigToAddress(big.NewInt(1_000_000+i)), 1, 1)
							if _, err := s.Post(context.Background(), j); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				warm.Wait()
				var n atomic.Int64
				b.SetParallelism(16) // 32 posters on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						wallet := hot
						if spread {
							wallet = common.BigToAddress(big.NewInt(i % accounts))
						}
						j := transfer(fmt.Sprintf("bench-%d", i), wallet, common.BigToAddress(big.NewInt(1_000_000+i%accounts)), 7, 1)
						if legs == 2 {
							j = &ledger.Journal{Kind: ledger.Deposit, Key: j.Key, ChainID: chain, Legs: j.Legs[:2]}
						}
						if _, err := s.Post(context.Background(), j); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "postings/s")
			})
		}
	}
}
