// Package postgrestest prepares txmanager rows for tests and benchmarks
// of the layers above the store.
package postgrestest

import (
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// Simulated creates n transfers of 1 wei from f's signer to `to`, with
// request ids prefix-0 to prefix-(n-1), and simulates them (21,000 gas)
// under f, from a few goroutines so that a large benchmark sets up fast.
// It returns their ids in request id order, ready for Allocate.
//
// It then analyzes the tx table: a deployed one has statistics, a fresh
// one none, and without them the planner may look rows up the slow way,
// which would make numbers depend on n.
func Simulated(tb testing.TB, s *postgres.Store, f txmanager.Fence, to common.Address, prefix string, n int) []uuid.UUID {
	tb.Helper()
	ctx := tb.Context()
	ids := make([]uuid.UUID, n)
	var taken atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Go(func() {
			for {
				i := int(taken.Add(1) - 1)
				if i >= n {
					return
				}
				tx, _, err := s.Create(ctx, &txmanager.Intent{ChainID: f.Key.ChainID, From: f.Key.Signer,
					RequestID: fmt.Sprintf("%s-%d", prefix, i), To: &to, Value: big.NewInt(1), Route: txmanager.RoutePublic})
				if err == nil {
					_, err = s.Simulated(ctx, f, tx.ID, 21000)
				}
				if err != nil {
					errs[g] = err
					return
				}
				ids[i] = tx.ID
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `ANALYZE tx`); err != nil {
		tb.Fatal(err)
	}
	return ids
}
