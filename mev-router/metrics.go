package mevrouter

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the router's Prometheus metrics: per endpoint (public RPC
// endpoints and private relays alike, labelled by configured name) and per
// route.
type Metrics struct {
	sends       *prometheus.CounterVec
	batchSplits *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	endpointUp  *prometheus.GaugeVec
	broadcasts  *prometheus.CounterVec
	private     *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_endpoint_sends_total",
			Help: "Transactions sent to one endpoint or relay, by route and result: accepted, an error category (see openapi/mevrouter.yaml ErrorCategory), or skipped (circuit breaker open).",
		}, []string{"endpoint", "route", "result"}),
		batchSplits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_endpoint_batch_splits_total",
			Help: "JSON-RPC batches a public endpoint answered as a whole (one error object, an HTTP 4xx, calls missing from the answer, errors about the batch) rather than per transaction; their transactions were sent again in smaller batches.",
		}, []string{"endpoint"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "txfence_mevrouter_endpoint_latency_seconds",
			Help:    "Time for one endpoint or relay to answer one send (a batch is one send), by route.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint", "route"}),
		endpointUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "txfence_mevrouter_endpoint_up",
			Help: "1 while the endpoint's circuit breaker is closed (in use), 0 while it is open (skipped after repeated transient failures).",
		}, []string{"endpoint"}),
		broadcasts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_broadcasts_total",
			Help: "Transactions broadcast, by route taken and result (accepted, or the error category of the answer).",
		}, []string{"route", "result"}),
		private: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_mevrouter_private_outcomes_total",
			Help: "Private sends reaching a state: included, expired, cancelled, failed, fell_back (sent publicly after expiry), late_included (included after expiry, cancel or failure).",
		}, []string{"state"}),
	}
	reg.MustRegister(m.sends, m.batchSplits, m.latency, m.endpointUp, m.broadcasts, m.private)
	return m
}
