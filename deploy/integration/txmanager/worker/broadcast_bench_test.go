package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres/postgrestest"
)

// BenchmarkSignAndBroadcastIntoAnvil measures SYSTEM.md's target "signed +
// broadcast tx/s for one signer into anvil >= 70% of anvil's own rate for
// pre-signed raw transactions, in the same run". Each iteration:
//
//   - anvil's own rate: perTurn transfers, signed beforehand by another
//     dev account, sent straight to anvil with eth_sendRawTransaction in
//     batches of 64;
//   - the worker's: perTurn SIMULATED transactions of one signer taken by
//     its worker through allocation, signerd (real, over mTLS), the stored
//     signatures and mevrouterd's public route (real, over mTLS) into the
//     same anvil, timed from the lease's acquisition to the last
//     BROADCASTED.
//
// anvil does not mine during a turn; a block is mined between turns. The
// worker's turn fails the benchmark unless every transaction is
// BROADCASTED with nonces contiguous from where the signer stood.
func BenchmarkSignAndBroadcastIntoAnvil(b *testing.B) {
	const perTurn = 1024
	e := newEnvWith(b, envOptions{InFlight: 1 << 20})
	node := e.chain.Node
	other := node.Accounts()[1]
	direct, err := rpc.DialContext(context.Background(), node.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	var anvilTime, workerTime time.Duration
	var anvilNonce uint64
	var sent int
	b.ResetTimer()
	for turn := 0; turn < b.N; turn++ {
		b.StopTimer()
		raws := make([][]byte, perTurn)
		for i := range raws {
			tx := chaintest.SignTransfer(b, node, other.Key, common.HexToAddress("0xb0b"), common.Big1, anvilNonce)
			anvilNonce++
			if raws[i], err = tx.MarshalBinary(); err != nil {
				b.Fatal(err)
			}
		}
		token, ok, err := e.store.Acquire(ctx(b), "bench", e.key(), time.Minute)
		if err != nil || !ok {
			b.Fatalf("acquire: %v %v", ok, err)
		}
		f := txmanager.Fence{Node: "bench", Key: e.key(), Token: token}
		ids := postgrestest.Simulated(b, e.store, f, signertest.DevAddress(1), fmt.Sprintf("turn-%d", turn), perTurn)
		b.StartTimer()

		start := time.Now()
		for i := 0; i < len(raws); i += 64 {
			elems := make([]rpc.BatchElem, 0, 64)
			for _, raw := range raws[i:min(i+64, len(raws))] {
				elems = append(elems, rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(raw)}, Result: new(common.Hash)})
			}
			if err := direct.BatchCallContext(context.Background(), elems); err != nil {
				b.Fatal(err)
			}
			for _, el := range elems {
				if el.Error != nil {
					b.Fatalf("anvil refused a pre-signed transfer: %v", el.Error)
				}
			}
		}
		anvilTime += time.Since(start)

		start = time.Now()
		p := e.own(b, "bench")
		eventually(b, "every transaction of the turn broadcast", func() bool {
			return e.states(b)[txmanager.StateBroadcasted] == sent+perTurn
		})
		workerTime += time.Since(start)
		p.Lost(e.key(), "turn over")
		sent += perTurn

		b.StopTimer()
		var distinct, lo, hi int
		if err := e.pool.QueryRow(ctx(b), `SELECT count(DISTINCT nonce), min(nonce), max(nonce) FROM tx WHERE tx_id = ANY($1)`, ids).Scan(&distinct, &lo, &hi); err != nil {
			b.Fatal(err)
		}
		if distinct != perTurn || hi-lo != perTurn-1 || lo != sent-perTurn {
			b.Fatalf("turn %d: %d distinct nonces from %d to %d, want %d from %d", turn, distinct, lo, hi, perTurn, sent-perTurn)
		}
		if err := node.Mine(ctx(b), 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	total := float64(b.N * perTurn)
	anvilRate, workerRate := total/anvilTime.Seconds(), total/workerTime.Seconds()
	b.ReportMetric(anvilRate, "anvil-tx/s")
	b.ReportMetric(workerRate, "worker-tx/s")
	b.ReportMetric(workerRate/anvilRate, "worker/anvil")
	b.ReportMetric(0, "ns/op")
}
