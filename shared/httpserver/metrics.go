package httpserver

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"time"

	"github.com/txfence/txfence/shared/textmetrics"
)

// Metrics records each request a Server serves and serves the exposition
// on /metrics. Two implementations: TextMetrics, with no metrics library,
// for signerd; prommetrics, with the Prometheus client, for the services
// that export more than a few counters.
type Metrics interface {
	ObserveRequest(route, method string, code int, elapsed time.Duration)
	http.Handler
}

// The per-route request metrics every Metrics exports, whichever library
// writes them, so that rules and dashboards read every service alike.
const (
	RequestsMetric = "txfence_http_requests_total"
	RequestsHelp   = "HTTP requests served, by route pattern, method and status code."
	DurationMetric = "txfence_http_request_duration_seconds"
	DurationHelp   = "Time to serve HTTP requests, by route pattern and method."
)

// DurationBuckets are the request duration histogram's upper bounds.
var DurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// TextMetrics records requests in reg, labelled with the service, and
// serves reg.
func TextMetrics(reg *textmetrics.Registry, service string) Metrics {
	return &textRequestMetrics{
		Registry: reg,
		service:  service,
		requests: reg.Counter(RequestsMetric, RequestsHelp, "service", "route", "method", "code"),
		duration: reg.Histogram(DurationMetric, DurationHelp, DurationBuckets, "service", "route", "method"),
	}
}

type textRequestMetrics struct {
	*textmetrics.Registry
	service  string
	requests *textmetrics.CounterVec
	duration *textmetrics.HistogramVec
}

func (m *textRequestMetrics) ObserveRequest(route, method string, code int, elapsed time.Duration) {
	m.requests.With(m.service, route, method, strconv.Itoa(code)).Inc()
	m.duration.With(m.service, route, method).Observe(elapsed.Seconds())
}

// newID makes a request id: 16 random bytes in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
