// Package poolmetrics exports RPC provider pools' health (package
// rpcpool) as Prometheus metrics, read from the pools at each scrape, per
// chain and endpoint:
//
//	txfence_rpc_endpoint_calls_total{class}    calls by outcome: ok, timeout, connection, http_5xx, rate_limited, behind, …
//	txfence_rpc_endpoint_up                    1 while the endpoint takes calls
//	txfence_rpc_endpoint_head                  the block it last reported
//	txfence_rpc_endpoint_head_lag_blocks       behind the best head of the chain's endpoints
//	txfence_rpc_endpoint_latency_seconds       answer time, exponentially weighted
//	txfence_rpc_endpoint_requests_left         request tokens left now (only with an rps budget)
//	txfence_rpc_endpoint_credits_left          credit units left this period (only with a credit budget)
package poolmetrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/shared/rpcpool"
)

var (
	labels   = []string{"chain_id", "endpoint"}
	calls    = prometheus.NewDesc("txfence_rpc_endpoint_calls_total", "JSON-RPC requests sent to an endpoint (a batch counts once), by class: ok, timeout, connection, http_5xx, http_error, rate_limited, behind.", append(labels, "class"), nil)
	up       = prometheus.NewDesc("txfence_rpc_endpoint_up", "1 while the endpoint takes calls; 0 while it is on the wrong chain, rate limited, or failing.", labels, nil)
	head     = prometheus.NewDesc("txfence_rpc_endpoint_head", "The latest block the endpoint reported.", labels, nil)
	lag      = prometheus.NewDesc("txfence_rpc_endpoint_head_lag_blocks", "Blocks the endpoint is behind the best head of the chain's endpoints.", labels, nil)
	latency  = prometheus.NewDesc("txfence_rpc_endpoint_latency_seconds", "The endpoint's answer time, exponentially weighted over recent calls.", labels, nil)
	requests = prometheus.NewDesc("txfence_rpc_endpoint_requests_left", "Request tokens left in the endpoint's per-second budget (absent without one).", labels, nil)
	credits  = prometheus.NewDesc("txfence_rpc_endpoint_credits_left", "Credit units left in the endpoint's budget this period (absent without one).", labels, nil)
)

// Collector is the pools a daemon reads through. Add pools as they are
// made; register the Collector once.
type Collector struct {
	mu    sync.Mutex
	pools []*rpcpool.Pool
}

// Add makes pool's endpoints part of what is exported.
func (c *Collector) Add(pool *rpcpool.Pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pools = append(c.pools, pool)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{calls, up, head, lag, latency, requests, credits} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	pools := append([]*rpcpool.Pool(nil), c.pools...)
	c.mu.Unlock()
	for _, p := range pools {
		chain := strconv.FormatUint(p.ChainID(), 10)
		for _, h := range p.Health() {
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, chain, h.Name)
			}
			for class, n := range h.Calls {
				ch <- prometheus.MustNewConstMetric(calls, prometheus.CounterValue, float64(n), chain, h.Name, class)
			}
			gauge(up, boolValue(h.Usable))
			gauge(head, float64(h.Head))
			gauge(lag, float64(h.Lag))
			gauge(latency, h.Latency.Seconds())
			if h.RequestsLeft >= 0 {
				gauge(requests, h.RequestsLeft)
			}
			if h.CreditLeft >= 0 {
				gauge(credits, h.CreditLeft)
			}
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
