package metrics_test

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/metrics"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const chain = 31337

var (
	hot = common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	bob = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
)

// The gauges say what the books hold: the feed and scan cursors, a wallet
// below zero, an open transit and the latest reconciliation run, for each
// chain; a chain scanned with none below zero reports 0, and so for the
// feed's backlog. Each chain the process books says whether it halted it,
// and whether its endpoint answers.
func TestTheGaugesReadTheBooks(t *testing.T) {
	t.Parallel()
	store, _ := ledgertest.Store(t)
	ctx := context.Background()
	wallet := ledger.AccountKey{ChainID: chain, Asset: ledger.Native, Kind: ledger.Wallet, Address: hot}
	counterparty := ledger.AccountKey{ChainID: chain, Asset: ledger.Native, Kind: ledger.Counterparty, Address: bob}
	overdrawn := &ledger.Journal{Kind: ledger.Confirmed, Key: "overdrawn", ChainID: chain, Status: "success",
		Legs: []ledger.Leg{{Account: wallet, Amount: big.NewInt(-5)}, {Account: counterparty, Amount: big.NewInt(5)}}}
	for seq := range uint64(3) {
		var journals []*ledger.Journal
		if seq == 0 {
			journals = append(journals, overdrawn)
		}
		var backlog []ledger.BacklogEvent
		if seq == 2 { // an event of chain 10 waits in the backlog
			backlog = append(backlog, ledger.BacklogEvent{Seq: 3, ChainID: 10, TxID: "tx-3", Event: []byte(`{"seq": 3}`),
				EventAt: time.Date(2025, 1, 15, 10, 0, 0, 0, time.UTC), Reason: ledger.BacklogEndpoint})
		}
		if _, err := store.BookFeed(ctx, &ledger.FeedBooking{Feed: "txmanager", From: seq, To: seq + 1, Journals: journals, Backlog: backlog}); err != nil {
			t.Fatal(err)
		}
	}
	opened := ledgertest.BookTransit(t, store, "rb-1", ledgertest.TransitEnd{ChainID: chain, Wallet: hot, Asset: ledger.Native, Amount: 10},
		ledgertest.TransitEnd{ChainID: 10, Wallet: hot, Asset: ledger.Native, Amount: 10}, bob, 1)
	for _, c := range []struct {
		id     uint64
		blocks []ledger.ScannedBlock
	}{{chain, []ledger.ScannedBlock{{Number: 41, Hash: common.HexToHash("0x41")}, {Number: 42, Hash: common.HexToHash("0x42"), Parent: common.HexToHash("0x41")}}},
		{10, []ledger.ScannedBlock{{Number: 7, Hash: common.HexToHash("0x07")}}}} {
		if _, err := store.StartScan(ctx, c.id, c.blocks); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Reconcile(ctx, chain, func(r ledger.ReconcileTx) error {
		id, err := r.NewRunID(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		return r.Save(ctx, &ledger.ReconciliationRun{ID: id, ChainID: chain, Block: ledger.Block{Number: 40, Hash: common.HexToHash("0x40")},
			Trigger: ledger.TriggerRequest, Status: "incomplete", Problem: "deferred", Differences: 2, Deferred: 1, StartedAt: now, FinishedAt: now})
	}); err != nil {
		t.Fatal(err)
	}

	c := &metrics.Collector{Stats: store.Stats, Halted: func() map[uint64]bool { return map[uint64]bool{chain: false, 10: true} },
		Endpoints: func(context.Context) map[uint64]bool { return map[uint64]bool{chain: true, 10: false} }}
	want := `
# HELP txfence_ledger_chain_endpoint_up 1 when the chain's endpoint (CHAIN_RPC) answered this ledgerd's eth_blockNumber at the scrape, 0 when it did not.
# TYPE txfence_ledger_chain_endpoint_up gauge
txfence_ledger_chain_endpoint_up{chain_id="10"} 0
txfence_ledger_chain_endpoint_up{chain_id="31337"} 1
# HELP txfence_ledger_chain_halted 1 when this ledgerd stopped booking the chain: it forked below the blocks the scanner keeps, or its endpoint serves another chain (the alert says which). See the runbook.
# TYPE txfence_ledger_chain_halted gauge
txfence_ledger_chain_halted{chain_id="10"} 1
txfence_ledger_chain_halted{chain_id="31337"} 0
# HELP txfence_ledger_feed_cursor_seq The seq of the last event of the feed the ledger has booked.
# TYPE txfence_ledger_feed_cursor_seq gauge
txfence_ledger_feed_cursor_seq{feed="txmanager"} 4
# HELP txfence_ledger_feed_backlog_events Events of the chain the feed consumer could not book when it reached them (the chain halted, its endpoint down or behind, a wallet not opened yet), waiting in its backlog; the feed goes on for the other chains. See the runbook.
# TYPE txfence_ledger_feed_backlog_events gauge
txfence_ledger_feed_backlog_events{chain_id="10"} 1
txfence_ledger_feed_backlog_events{chain_id="31337"} 0
# HELP txfence_ledger_feed_backlog_oldest_event_timestamp_seconds When txmanager committed the oldest event in the chain's feed backlog (Unix time): time() minus it is how long a settled fact has waited. Absent when the chain has no backlog.
# TYPE txfence_ledger_feed_backlog_oldest_event_timestamp_seconds gauge
txfence_ledger_feed_backlog_oldest_event_timestamp_seconds{chain_id="10"} 1.7369352e+09
# HELP txfence_ledger_negative_wallets Wallet accounts (one per wallet and asset) whose ledger balance is below zero: the chain settled more than the books hold. See the reconciliation runbook.
# TYPE txfence_ledger_negative_wallets gauge
txfence_ledger_negative_wallets{chain_id="10"} 0
txfence_ledger_negative_wallets{chain_id="31337"} 1
# HELP txfence_ledger_open_transits Transfers between chains with one end booked: value in transit.
# TYPE txfence_ledger_open_transits gauge
txfence_ledger_open_transits 1
# HELP txfence_ledger_reconciled_block The block the chain's latest reconciliation run pinned.
# TYPE txfence_ledger_reconciled_block gauge
txfence_ledger_reconciled_block{chain_id="31337"} 40
# HELP txfence_ledger_reconciliation_complete 1 when the chain's latest reconciliation run compared every wallet and asset, 0 when it deferred or could not compare some.
# TYPE txfence_ledger_reconciliation_complete gauge
txfence_ledger_reconciliation_complete{chain_id="31337"} 0
# HELP txfence_ledger_reconciliation_deferred Wallet and asset pairs the latest run did not compare.
# TYPE txfence_ledger_reconciliation_deferred gauge
txfence_ledger_reconciliation_deferred{chain_id="31337"} 1
# HELP txfence_ledger_reconciliation_differences Wallet and asset pairs whose books differed from the chain in the latest run (each booked to suspense).
# TYPE txfence_ledger_reconciliation_differences gauge
txfence_ledger_reconciliation_differences{chain_id="31337"} 2
# HELP txfence_ledger_scanned_block The last block the chain's deposit scanner has booked.
# TYPE txfence_ledger_scanned_block gauge
txfence_ledger_scanned_block{chain_id="10"} 7
txfence_ledger_scanned_block{chain_id="31337"} 42
`
	names := []string{"txfence_ledger_chain_endpoint_up", "txfence_ledger_chain_halted", "txfence_ledger_feed_cursor_seq",
		"txfence_ledger_feed_backlog_events", "txfence_ledger_feed_backlog_oldest_event_timestamp_seconds", "txfence_ledger_negative_wallets", "txfence_ledger_open_transits", "txfence_ledger_reconciled_block",
		"txfence_ledger_reconciliation_complete", "txfence_ledger_reconciliation_deferred", "txfence_ledger_reconciliation_differences", "txfence_ledger_scanned_block"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "txfence_ledger_oldest_open_transit_timestamp_seconds" {
			if got := f.GetMetric()[0].GetGauge().GetValue(); int64(got) != opened.OpenedAt.Unix() {
				t.Errorf("the oldest open transit opened at %v, want %v", got, opened.OpenedAt.Unix())
			}
		}
	}
}

// Stats that cannot be read fail the scrape rather than serve stale
// values; within MaxAge, one read serves every scrape.
func TestStatsAreCachedAndAFailureFailsTheScrape(t *testing.T) {
	t.Parallel()
	reads := 0
	c := &metrics.Collector{MaxAge: time.Hour, Stats: func(context.Context) (ledger.Stats, error) {
		reads++
		return ledger.Stats{OpenTransits: reads}, nil
	}}
	for range 3 {
		if got := testutil.ToFloat64(onlyTransits{c}); got != 1 {
			t.Fatalf("open transits %v, want the first read's 1", got)
		}
	}
	if reads != 1 {
		t.Errorf("%d reads for 3 scrapes within MaxAge", reads)
	}
	c = &metrics.Collector{Stats: func(context.Context) (ledger.Stats, error) { return ledger.Stats{}, errors.New("database down") }}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "database down") {
		t.Errorf("gather with the database down: %v", err)
	}
}

// onlyTransits is c with only its open transits gauge, for ToFloat64.
type onlyTransits struct{ c *metrics.Collector }

func (o onlyTransits) Describe(ch chan<- *prometheus.Desc) { o.c.Describe(ch) }
func (o onlyTransits) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 100)
	o.c.Collect(all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), "txfence_ledger_open_transits") {
			ch <- m
		}
	}
}
