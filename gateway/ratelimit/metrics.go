package ratelimit

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are what operators watch and alert on: whether Redis answers,
// and who decided what.
type metrics struct {
	redisUp   prometheus.Gauge
	decisions *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		redisUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "txfence_gateway_ratelimit_redis_up",
			Help: "1 while rate limits are counted in Redis, 0 while its failure has the limiter answer from the fallback.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_gateway_ratelimit_decisions_total",
			Help: "Rate limit decisions, by source (redis, local, open, or none for a refusal because Redis is down) and outcome (allowed, refused, unavailable).",
		}, []string{"source", "outcome"}),
	}
	// Optimistic until the first call proves otherwise: a limiter that has
	// not yet called Redis has seen no outage to report.
	m.redisUp.Set(1)
	for _, c := range []prometheus.Collector{m.redisUp, m.decisions} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ratelimit: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) count(d Decision) {
	outcome := "refused"
	if d.Allowed {
		outcome = "allowed"
	}
	m.decisions.WithLabelValues(string(d.Source), outcome).Inc()
}

func (m *metrics) unavailable() {
	m.decisions.WithLabelValues("none", "unavailable").Inc()
}
