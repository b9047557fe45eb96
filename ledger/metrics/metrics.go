// Package metrics exports ledgerd's state as Prometheus gauges, read from
// the books at scrape time (postgres.Store.Stats): how far the feed
// consumer and each chain's scanner have got, the wallets below zero, the
// transfers in transit, and each chain's latest reconciliation. Every node
// reports the same values, since they are the database's; alert on them
// by chain, not by instance. Besides, each node reports the chains it has
// halted and whether each chain's endpoint answers it.
package metrics

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/txfence/txfence/ledger"
)

// Collector reads Stats when scraped, at most once per MaxAge (scrapers
// asking more often get the last answer), and within Timeout.
type Collector struct {
	Stats func(context.Context) (ledger.Stats, error)
	// Halted, when set, reports each chain this ledgerd books and whether
	// it has halted it (txfence_ledger_chain_halted). Unlike the books'
	// state, it is the process's own: each ledgerd finds a halt itself.
	Halted func() map[uint64]bool
	// Endpoints, when set, asks each chain's endpoint whether it answers
	// (txfence_ledger_chain_endpoint_up), within the ctx it is given: the
	// process's own view too, asked at every scrape. One chain's endpoint
	// down is not ledgerd out of service (its /readyz does not check
	// them): this gauge says which.
	Endpoints func(context.Context) map[uint64]bool
	MaxAge    time.Duration
	Timeout   time.Duration
	Log       *slog.Logger

	mu   sync.Mutex
	last ledger.Stats
	at   time.Time
}

// Defaults for a Collector's MaxAge and Timeout.
const (
	DefaultMaxAge  = 10 * time.Second
	DefaultTimeout = 5 * time.Second
)

var (
	feedSeq = prometheus.NewDesc("txfence_ledger_feed_cursor_seq",
		"The seq of the last event of the feed the ledger has booked.", []string{"feed"}, nil)
	feedMoved = prometheus.NewDesc("txfence_ledger_feed_cursor_updated_timestamp_seconds",
		"When the feed cursor last moved (Unix time).", []string{"feed"}, nil)
	scanBlock = prometheus.NewDesc("txfence_ledger_scanned_block",
		"The last block the chain's deposit scanner has booked.", []string{"chain_id"}, nil)
	scanMoved = prometheus.NewDesc("txfence_ledger_scan_cursor_updated_timestamp_seconds",
		"When the chain's scanner cursor last moved (Unix time).", []string{"chain_id"}, nil)
	negativeWallets = prometheus.NewDesc("txfence_ledger_negative_wallets",
		"Wallet accounts (one per wallet and asset) whose ledger balance is below zero: the chain settled more than the books hold. See the reconciliation runbook.",
		[]string{"chain_id"}, nil)
	openTransits = prometheus.NewDesc("txfence_ledger_open_transits",
		"Transfers between chains with one end booked: value in transit.", nil, nil)
	oldestTransit = prometheus.NewDesc("txfence_ledger_oldest_open_transit_timestamp_seconds",
		"When the longest-open transfer between chains opened (Unix time); absent when none is open.", nil, nil)
	reconciledBlock = prometheus.NewDesc("txfence_ledger_reconciled_block",
		"The block the chain's latest reconciliation run pinned.", []string{"chain_id"}, nil)
	reconciledAt = prometheus.NewDesc("txfence_ledger_reconciliation_finished_timestamp_seconds",
		"When the chain's latest reconciliation run finished (Unix time).", []string{"chain_id"}, nil)
	reconcileComplete = prometheus.NewDesc("txfence_ledger_reconciliation_complete",
		"1 when the chain's latest reconciliation run compared every wallet and asset, 0 when it deferred or could not compare some.", []string{"chain_id"}, nil)
	differences = prometheus.NewDesc("txfence_ledger_reconciliation_differences",
		"Wallet and asset pairs whose books differed from the chain in the latest run (each booked to suspense).", []string{"chain_id"}, nil)
	deferred = prometheus.NewDesc("txfence_ledger_reconciliation_deferred",
		"Wallet and asset pairs the latest run did not compare.", []string{"chain_id"}, nil)
	backlogEvents = prometheus.NewDesc("txfence_ledger_feed_backlog_events",
		"Events of the chain the feed consumer could not book when it reached them (the chain halted, its endpoint down or behind, a wallet not opened yet), waiting in its backlog; the feed goes on for the other chains. See the runbook.",
		[]string{"chain_id"}, nil)
	backlogOldest = prometheus.NewDesc("txfence_ledger_feed_backlog_oldest_event_timestamp_seconds",
		"When txmanager committed the oldest event in the chain's feed backlog (Unix time): time() minus it is how long a settled fact has waited. Absent when the chain has no backlog.",
		[]string{"chain_id"}, nil)
	endpointUp = prometheus.NewDesc("txfence_ledger_chain_endpoint_up",
		"1 when the chain's endpoint (CHAIN_RPC) answered this ledgerd's eth_blockNumber at the scrape, 0 when it did not.",
		[]string{"chain_id"}, nil)
	chainHalted = prometheus.NewDesc("txfence_ledger_chain_halted",
		"1 when this ledgerd stopped booking the chain: it forked below the blocks the scanner keeps, or its endpoint serves another chain (the alert says which). See the runbook.",
		[]string{"chain_id"}, nil)
)

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{feedSeq, feedMoved, scanBlock, scanMoved, negativeWallets, openTransits, oldestTransit,
		reconciledBlock, reconciledAt, reconcileComplete, differences, deferred, chainHalted, backlogEvents, backlogOldest, endpointUp} {
		ch <- d
	}
}

// Collect sends the metrics of the latest Stats; when they cannot be read,
// it sends an invalid metric, which fails the scrape, rather than stale
// values.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	// The process's own state first: it does not wait on the database.
	booked := map[uint64]bool{} // the chains this process books
	if c.Halted != nil {
		for id, halted := range c.Halted() {
			booked[id] = true
			ch <- prometheus.MustNewConstMetric(chainHalted, prometheus.GaugeValue, one(halted), strconv.FormatUint(id, 10))
		}
	}
	if c.Endpoints != nil {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout())
		up := c.Endpoints(ctx)
		cancel()
		for id, ok := range up {
			ch <- prometheus.MustNewConstMetric(endpointUp, prometheus.GaugeValue, one(ok), strconv.FormatUint(id, 10))
		}
	}
	st, err := c.stats()
	if err != nil {
		if c.Log != nil {
			c.Log.Warn("ledger: metrics: the books' stats could not be read", "err", err)
		}
		ch <- prometheus.NewInvalidMetric(negativeWallets, err)
		return
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	unix := func(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
	chain := func(id uint64) string { return strconv.FormatUint(id, 10) }
	for feed, cur := range st.Feeds {
		gauge(feedSeq, float64(cur.Position), feed)
		gauge(feedMoved, unix(cur.UpdatedAt), feed)
	}
	// Every chain this process books or has scanned reports its negative
	// wallets, zero too, so that an alert on the gauge sees the chain from
	// the start (before its first block is scanned).
	negative := map[uint64]bool{}
	for id := range booked {
		negative[id] = true
	}
	for id, cur := range st.Scans {
		gauge(scanBlock, float64(cur.Position), chain(id))
		gauge(scanMoved, unix(cur.UpdatedAt), chain(id))
		negative[id] = true
	}
	for id := range st.NegativeWallets {
		negative[id] = true
	}
	for id := range negative {
		gauge(negativeWallets, float64(st.NegativeWallets[id]), chain(id))
	}
	gauge(openTransits, float64(st.OpenTransits))
	if st.OldestOpenTransit != nil {
		gauge(oldestTransit, unix(*st.OldestOpenTransit))
	}
	// Every chain scanned or booked here reports its backlog, zero too,
	// so that an alert on the gauge sees the chain.
	for id := range st.Scans {
		booked[id] = true
	}
	for id, b := range st.Backlogs {
		booked[id] = true
		gauge(backlogOldest, unix(b.OldestAt), chain(id))
	}
	for id := range booked {
		gauge(backlogEvents, float64(st.Backlogs[id].Events), chain(id))
	}
	for id, r := range st.Reconciled {
		complete := 0.0
		if r.Complete {
			complete = 1
		}
		gauge(reconciledBlock, float64(r.Block), chain(id))
		gauge(reconciledAt, unix(r.FinishedAt), chain(id))
		gauge(reconcileComplete, complete, chain(id))
		gauge(differences, float64(r.Differences), chain(id))
		gauge(deferred, float64(r.Deferred), chain(id))
	}
}

// stats is the last Stats read, read again once older than MaxAge.
func (c *Collector) stats() (ledger.Stats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	maxAge := c.MaxAge
	if maxAge == 0 {
		maxAge = DefaultMaxAge
	}
	if !c.at.IsZero() && time.Since(c.at) < maxAge {
		return c.last, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout())
	defer cancel()
	st, err := c.Stats(ctx)
	if err != nil {
		return ledger.Stats{}, err
	}
	c.last, c.at = st, time.Now()
	return st, nil
}

func (c *Collector) timeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// one is 1 for true, 0 for false.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
