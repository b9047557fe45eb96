// Package metrics is the router's Prometheus metrics: per endpoint (public
// RPC endpoints and private relays alike, labelled by configured name),
// per route and per private outcome, each labelled with its chain id. The
// routing packages count through one chain's view (Chain) and never see a
// Prometheus type.
package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	mevrouter "github.com/txfence/txfence/mev-router"
)

// Metrics are the router's Prometheus metrics, for every chain.
type Metrics struct {
	sends       *prometheus.CounterVec
	batchSplits *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	endpointUp  *prometheus.GaugeVec
	backIn      *backIn
	broadcasts  *prometheus.CounterVec
	private     *prometheus.CounterVec
}

// Chain counts for one chain: every sample it records carries the chain's
// id in the chain_id label.
type Chain struct {
	m     *Metrics
	id    uint64
	chain string
}

var _ mevrouter.BroadcastCounter = (*Chain)(nil)

// Chain is the view of the metrics that counts for chainID.
func (m *Metrics) Chain(chainID uint64) *Chain {
	return &Chain{m: m, id: chainID, chain: strconv.FormatUint(chainID, 10)}
}

// ChainID is the chain the view counts for.
func (c *Chain) ChainID() uint64 { return c.id }

// New registers the metrics with reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_endpoint_sends_total",
			Help: "Transactions sent to one endpoint or relay, by route and result: accepted, an error category (see openapi/mevrouter.yaml ErrorCategory), rate_limited (answered with a rate limit, or not sent while its Retry-After runs), wrong_chain (not sent: the endpoint reports another chain id) or skipped (circuit breaker open).",
		}, []string{"chain_id", "endpoint", "route", "result"}),
		batchSplits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_endpoint_batch_splits_total",
			Help: "JSON-RPC batches a public endpoint answered as a whole (one error object, an HTTP 4xx, calls missing from the answer, errors about the batch) rather than per transaction; their transactions were sent again in smaller batches.",
		}, []string{"chain_id", "endpoint"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "txfence_mevrouter_endpoint_latency_seconds",
			Help:    "Time for one endpoint or relay to answer one send (a batch is one send), by route.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"chain_id", "endpoint", "route"}),
		endpointUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "txfence_mevrouter_endpoint_up",
			Help: "1 while the endpoint is in use: its circuit breaker is closed and it has not reported another chain id; 0 while it is skipped after repeated transient failures (breaker open) or reports another chain id than its chain's.",
		}, []string{"chain_id", "endpoint"}),
		broadcasts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_broadcasts_total",
			Help: "Transactions broadcast, by route taken and result (accepted, or the error category of the answer).",
		}, []string{"chain_id", "route", "result"}),
		private: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_private_outcomes_total",
			Help: "Private sends reaching a state: included, expired, cancelled, failed, fell_back (sent publicly after expiry), late_included (included after expiry, cancel or failure).",
		}, []string{"chain_id", "state"}),
	}
	m.backIn = &backIn{
		desc: prometheus.NewDesc("txfence_mevrouter_endpoint_rate_limited_seconds",
			"Seconds until a rate-limited public endpoint is sent to again: its Retry-After, or the back-off (1s doubling up to 1m) when it gave none; 0 when it is not rate limited.",
			[]string{"chain_id", "endpoint"}, nil),
		fns: map[[2]string]func() time.Duration{},
	}
	reg.MustRegister(m.sends, m.batchSplits, m.latency, m.endpointUp, m.backIn, m.broadcasts, m.private)
	return m
}

// backIn reads each endpoint's time until it is sent to again at the
// scrape, so that the gauge counts down between sends.
type backIn struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	fns  map[[2]string]func() time.Duration // by chain id and endpoint
}

func (b *backIn) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *backIn) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, f := range b.fns {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, max(f(), 0).Seconds(), k[0], k[1])
	}
}

// EndpointSends counts n transactions sent to one endpoint or relay by
// route, with their result: accepted, an error category, or skipped.
func (c *Chain) EndpointSends(endpoint string, route mevrouter.Route, result string, n int) {
	c.m.sends.WithLabelValues(c.chain, endpoint, string(route), result).Add(float64(n))
}

// EndpointLatency records the time one endpoint or relay took to answer
// one send.
func (c *Chain) EndpointLatency(endpoint string, route mevrouter.Route, d time.Duration) {
	c.m.latency.WithLabelValues(c.chain, endpoint, string(route)).Observe(d.Seconds())
}

// EndpointUp records whether an endpoint is in use.
func (c *Chain) EndpointUp(endpoint string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	c.m.endpointUp.WithLabelValues(c.chain, endpoint).Set(v)
}

// EndpointRateLimit makes backIn the source of an endpoint's
// txfence_mevrouter_endpoint_rate_limited_seconds: the time until the
// endpoint is sent to again, zero or less when it is not rate limited.
func (c *Chain) EndpointRateLimit(endpoint string, backIn func() time.Duration) {
	c.m.backIn.mu.Lock()
	defer c.m.backIn.mu.Unlock()
	c.m.backIn.fns[[2]string{c.chain, endpoint}] = backIn
}

// BatchSplit counts a batch an endpoint answered as a whole.
func (c *Chain) BatchSplit(endpoint string) {
	c.m.batchSplits.WithLabelValues(c.chain, endpoint).Inc()
}

// Broadcast counts one transaction broadcast by route taken and result.
func (c *Chain) Broadcast(route mevrouter.Route, result string) {
	c.m.broadcasts.WithLabelValues(c.chain, string(route), result).Inc()
}

// PrivateOutcome counts a private send reaching a state (or fell_back,
// late_included).
func (c *Chain) PrivateOutcome(state string) {
	c.m.private.WithLabelValues(c.chain, state).Inc()
}
