package prommetrics_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/prommetrics"
	"github.com/txfence/txfence/shared/textmetrics"
)

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, rec.Body.String())
	}
	return families
}

// TestTextMetricsWriteWhatThePrometheusClientWrites: signerd writes its
// exposition without the Prometheus client. Given the same requests, its
// request metrics read exactly as the client's do (names, help, types,
// labels, buckets, values), and each runtime and process metric it
// exports is one the client's collectors export, with the same type, so
// that rules and dashboards read signerd like any other service.
func TestTextMetricsWriteWhatThePrometheusClientWrites(t *testing.T) {
	prom := prommetrics.New("signer")
	reg := textmetrics.NewRegistry()
	reg.RegisterProcess()
	text := httpserver.TextMetrics(reg, "signer")
	for _, m := range []httpserver.Metrics{prom, text} {
		m.ObserveRequest("/v1/sign", "POST", 200, 3*time.Millisecond)
		m.ObserveRequest("/v1/sign", "POST", 200, 40*time.Millisecond)
		m.ObserveRequest("/v1/sign", "POST", 409, 700*time.Microsecond)
		m.ObserveRequest("unmatched", "GET", 404, 20*time.Second)
	}
	want, got := scrape(t, prom), scrape(t, text)
	for _, name := range []string{httpserver.RequestsMetric, httpserver.DurationMetric} {
		if want[name] == nil {
			t.Fatalf("the Prometheus client wrote no %s", name)
		}
		if diff := cmp.Diff(want[name], got[name], protocmp.Transform()); diff != "" {
			t.Errorf("%s differs from the Prometheus client's (-client +text):\n%s", name, diff)
		}
	}
	for name, f := range got {
		if strings.HasPrefix(name, "txfence_http_") {
			continue
		}
		if want[name] == nil {
			t.Errorf("%s is not a metric the Prometheus client's collectors export", name)
		} else if want[name].GetType() != f.GetType() {
			t.Errorf("%s is a %v, the client's is a %v", name, f.GetType(), want[name].GetType())
		}
		for _, m := range f.GetMetric() {
			if v := m.GetGauge().GetValue() + m.GetCounter().GetValue(); v < 0 {
				t.Errorf("%s reads %v", name, v)
			}
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds"} {
		if f := got[name]; f == nil || f.GetMetric()[0].GetGauge().GetValue() <= 0 {
			t.Errorf("%s missing or not positive: %v", name, f)
		}
	}
}
