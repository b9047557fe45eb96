package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// BenchmarkReplay prints how fast an empty ledger books a feed of 100,000
// events: 12,500 transfers of ten wallets, each with the eight events of
// its way to CONFIRMED, every receipt read from anvil pinned to its block,
// as a ledger started beside a txmanager that has run a while would.
func BenchmarkReplay(b *testing.B) {
	const txs, eventsPerTx = 12_500, 8
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	daemon.TuneGC(os.Getenv)
	r := newRigOn(b, anvil.Options{NoMining: true})
	settled := sendTransfers(b, r, txs)
	seedFeed(b, r, settled)

	for b.Loop() {
		b.StopTimer()
		store, pool := ledgertest.Store(b)
		c := &consumer.Consumer{Store: store, API: r.c.API, Readers: r.c.Readers, Log: slog.New(slog.DiscardHandler), Wait: time.Millisecond}
		ledger := &rig{node: r.node, txm: r.txm, store: store, pool: pool, c: c, start: r.start}
		for _, a := range r.node.Accounts() {
			ledger.open(b, a.Address, 0)
		}
		b.StartTimer()
		start := time.Now()
		ledger.drain(b)
		b.ReportMetric(float64(txs*eventsPerTx)/time.Since(start).Seconds(), "events/s")
	}
}

// settledTransfer is a transfer mined on the rig's node.
type settledTransfer struct {
	from    common.Address
	receipt *types.Receipt
}

// sendTransfers has each of the node's ten accounts send n/10 transfers,
// mined in full blocks.
func sendTransfers(b *testing.B, r *rig, n int) []settledTransfer {
	ctx := context.Background()
	accounts := r.node.Accounts()
	chainID := new(big.Int).SetUint64(r.node.ChainID())
	signer := types.LatestSignerForChainID(chainID)
	var sends []rpc.BatchElem
	var out []settledTransfer
	hashes := make([]common.Hash, 0, n)
	for i := range n {
		from := accounts[i%len(accounts)]
		to := common.BigToAddress(big.NewInt(int64(0xb0b0000 + i%500)))
		tx, err := types.SignNewTx(from.Key, signer, &types.DynamicFeeTx{ChainID: chainID, Nonce: uint64(i / len(accounts)),
			GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei), Gas: params.TxGas, To: &to, Value: big.NewInt(int64(1000 + i))})
		if err != nil {
			b.Fatal(err)
		}
		raw, err := tx.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		sends = append(sends, rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{fmt.Sprintf("%#x", raw)}, Result: new(common.Hash)})
		hashes = append(hashes, tx.Hash())
		out = append(out, settledTransfer{from: from.Address})
	}
	batchCall(b, r.node.RPC(), sends)
	for pending := len(hashes); pending > 0; pending -= 1400 {
		if err := r.node.Mine(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	receipts := make([]rpc.BatchElem, len(hashes))
	for i, h := range hashes {
		out[i].receipt = new(types.Receipt)
		receipts[i] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{h}, Result: out[i].receipt}
	}
	batchCall(b, r.node.RPC(), receipts)
	for i, s := range out {
		if s.receipt.BlockNumber == nil || s.receipt.Status != types.ReceiptStatusSuccessful {
			b.Fatalf("transfer %d was not mined: %+v", i, s.receipt)
		}
	}
	return out
}

// batchCall makes calls in batches of a thousand, failing b on any error.
func batchCall(b *testing.B, client *rpc.Client, calls []rpc.BatchElem) {
	for start := 0; start < len(calls); start += 1000 {
		part := calls[start:min(start+1000, len(calls))]
		if err := client.BatchCallContext(context.Background(), part); err != nil {
			b.Fatal(err)
		}
		for _, c := range part {
			if c.Error != nil {
				b.Fatalf("%s: %v", c.Method, c.Error)
			}
		}
	}
}

// seedFeed makes each transfer a transaction of txmanager's with the
// events of its way from INIT to CONFIRMED, and numbers them.
func seedFeed(b *testing.B, r *rig, settled []settledTransfer) {
	ctx := context.Background()
	intents := make([]*txmanager.Intent, len(settled))
	for i, s := range settled {
		intents[i] = &txmanager.Intent{ChainID: r.node.ChainID(), From: s.from, RequestID: fmt.Sprintf("replay-%d", i),
			To: &common.Address{0xb0}, Value: big.NewInt(1), Data: []byte{}, Route: txmanager.RoutePublic}
	}
	ids := make([]uuid.UUID, len(intents))
	for start := 0; start < len(intents); start += 500 {
		for i, res := range r.txm.Store.CreateMany(ctx, intents[start:min(start+500, len(intents))]) {
			if res.Err != nil {
				b.Fatal(res.Err)
			}
			ids[start+i] = res.Tx.ID
		}
	}
	var events []txmanagertest.Event
	for i, s := range settled {
		events = append(events, txmanagertest.SettlementEvents(ids[i], s.receipt)...)
	}
	r.txm.WriteEvents(b, events...)
}
