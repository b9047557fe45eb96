// Package prommetrics is the Metrics of an HTTP server (package
// httpserver) in a Prometheus client registry, for the services that
// export metrics of their own through the client: the per-route request
// metrics, the Go and process collectors, and the registry on /metrics.
package prommetrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/txfence/txfence/shared/httpserver"
)

// Metrics implements httpserver.Metrics.
type Metrics struct {
	// Registry is where the service registers its own metrics.
	Registry *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	handler  http.Handler
}

// New makes a registry with the Go and process collectors and the request
// metrics, those labelled with the service ("gateway", "txmanager").
func New(service string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: httpserver.RequestsMetric, Help: httpserver.RequestsHelp},
			[]string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: httpserver.DurationMetric, Help: httpserver.DurationHelp, Buckets: httpserver.DurationBuckets},
			[]string{"route", "method"}),
		handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}),
	}
	prometheus.WrapRegistererWith(prometheus.Labels{"service": service}, reg).MustRegister(m.requests, m.duration)
	return m
}

// ObserveRequest counts one request and its duration.
func (m *Metrics) ObserveRequest(route, method string, code int, elapsed time.Duration) {
	m.requests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route, method).Observe(elapsed.Seconds())
}

// ServeHTTP serves the registry.
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }
