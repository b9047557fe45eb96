package transit_test

import (
	"context"
	"log/slog"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/transit"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Run raises the alert of a transit open past the age once, however often
// it looks, and stops when its context ends.
func TestRunAlertsOnceAndStops(t *testing.T) {
	t.Parallel()
	store, _ := ledgertest.Store(t)
	ctx := context.Background()
	wallet := common.HexToAddress("0x00000000000000000000000000000000000a11ce")
	w := ledger.AccountKey{ChainID: 1, Asset: ledger.Native, Kind: ledger.Wallet, Address: wallet}
	it := w
	it.Kind = ledger.InTransit
	tx, block := common.HexToHash("0x5a"), common.HexToHash("0x5b")
	sent := &ledger.Journal{Kind: ledger.TransitOut, Key: ledger.TxKey(1, tx, block), ChainID: 1, TxHash: &tx, Block: &ledger.Block{Number: 3, Hash: block},
		Status: "success", Legs: []ledger.Leg{{Account: w, Amount: big.NewInt(-5)}, {Account: it, Amount: big.NewInt(5)}}}
	bridge := common.HexToAddress("0x00000000000000000000000000000000b81d9e00")
	open := ledger.TransitWrite{Transit: ledger.Transit{ID: "rb-1", Status: ledger.TransitOpen, Bridge: &bridge,
		Source: ledger.TransitEnd{TxID: uuid.New(), ChainID: 1, Wallet: wallet, TxHash: &tx, BlockHash: &block, Asset: ledger.Native, Amount: big.NewInt(5)}},
		SourceJournal: sent}
	if _, err := store.BookFeed(ctx, &ledger.FeedBooking{Feed: "txmanager", To: 1, Journals: []*ledger.Journal{sent}, Transits: []ledger.TransitWrite{open}}); err != nil {
		t.Fatal(err)
	}

	sink := &logtest.Buffer{}
	watch := &transit.Watch{Store: store, Age: time.Minute, Every: time.Millisecond, Log: slog.New(slog.NewJSONHandler(sink, nil)),
		Now: func() time.Time { return time.Now().Add(time.Hour) }}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- watch.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for len(sink.Alerts(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no alert within ten seconds")
		}
		<-tick.C
	}
	if n, err := watch.Check(ctx); err != nil || n != 0 {
		t.Errorf("a check after the alert: %d alerts, %v", n, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if n := len(sink.Alerts(t)); n != 1 {
		t.Errorf("%d alerts, want 1", n)
	}
}
