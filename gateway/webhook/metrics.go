package webhook

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are what operators watch and alert on: whether deliveries get
// through, how slow receivers are, what lands in the dead letter queue,
// and whether the fan-out keeps up with the feed.
type metrics struct {
	outcomes       *prometheus.CounterVec
	attemptSeconds prometheus.Histogram
	deadLetters    prometheus.Counter
	fanoutCursor   prometheus.Gauge
	fanoutLag      prometheus.Gauge
	fannedOut      prometheus.Counter
	queued         prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_gateway_webhook_deliveries_total",
			Help: "Delivery attempts by outcome: delivered, retry (failed, to be retried), dead (failed past the horizon), lost (the claim was lost meanwhile), unrecorded (the database did not take the result).",
		}, []string{"outcome"}),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "txfence_gateway_webhook_attempt_duration_seconds",
			Help:    "How long one delivery attempt took, from sending to the end of the answer (or the failure).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "txfence_gateway_webhook_dead_letters_total",
			Help: "Deliveries that went to the dead letter queue: retried past the horizon without a 2xx.",
		}),
		fanoutCursor: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "txfence_gateway_webhook_fanout_cursor",
			Help: "The last event feed sequence fanned out into deliveries, as this node last saw it.",
		}),
		fanoutLag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "txfence_gateway_webhook_fanout_lag_events",
			Help: "How far the fan-out is behind the event feed: the feed's head (or the highest sequence this node has read, when the feed does not say) minus the cursor.",
		}),
		fannedOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "txfence_gateway_webhook_fanout_events_total",
			Help: "Feed events this node fanned out (committed with the cursor's move).",
		}),
		queued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "txfence_gateway_webhook_fanout_deliveries_total",
			Help: "Deliveries this node's fan-out queued.",
		}),
	}
	for _, c := range []prometheus.Collector{m.outcomes, m.attemptSeconds, m.deadLetters, m.fanoutCursor, m.fanoutLag, m.fannedOut, m.queued} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("webhook: register metrics: %w", err)
		}
	}
	return m, nil
}
