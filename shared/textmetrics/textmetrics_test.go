package textmetrics_test

import (
	"fmt"
	"math"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/txfence/txfence/shared/textmetrics"
)

// scrape serves reg once and parses the answer with the Prometheus
// project's own text parser, as a scraper would.
func scrape(t *testing.T, reg *textmetrics.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	reg.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if got := rec.Header().Get("Content-Type"); got != textmetrics.ContentType {
		t.Errorf("Content-Type %q, want %q", got, textmetrics.ContentType)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, rec.Body.String())
	}
	return families
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, p := range m.GetLabel() {
		out[p.GetName()] = p.GetValue()
	}
	return out
}

// TestTheExpositionParsesWithEveryValueItWasGiven: label values that need
// escaping, counters with and without labels, help with a newline, and a
// histogram's cumulative buckets, sum and count all read back as written.
func TestTheExpositionParsesWithEveryValueItWasGiven(t *testing.T) {
	reg := textmetrics.NewRegistry()
	decisions := reg.Counter("decisions_total", "Decisions,\nby outcome and \\rule.", "outcome", "rule")
	alone := reg.Counter("refused_total", "Refusals.").With()
	idle := reg.Counter("idle_total", "Never counted.")
	_ = idle
	tricky := `a "quoted" \ back` + "\nslash"
	decisions.With("signed", tricky).Add(2.5)
	decisions.With("denied", "r1").Inc()
	alone.Inc()
	hist := reg.Histogram("latency_seconds", "Latency.", []float64{0.1, 1, 10}, "route")
	for _, v := range []float64{0.05, 0.1, 0.5, 5, 50, 0} {
		hist.With("/sign").Observe(v)
	}
	reg.Gauge("temperature", "A gauge read at scrape time.", func() float64 { return -3.25 })

	got := scrape(t, reg)
	if f := got["decisions_total"]; f.GetType() != dto.MetricType_COUNTER || f.GetHelp() != "Decisions,\nby outcome and \\rule." || len(f.GetMetric()) != 2 {
		t.Fatalf("decisions_total: %v", f)
	}
	for _, m := range got["decisions_total"].GetMetric() {
		l := labels(m)
		want := map[string]float64{"signed": 2.5, "denied": 1}[l["outcome"]]
		if m.GetCounter().GetValue() != want {
			t.Errorf("decisions_total%v = %v, want %v", l, m.GetCounter().GetValue(), want)
		}
		if l["outcome"] == "signed" && l["rule"] != tricky {
			t.Errorf("rule label read back as %q, want %q", l["rule"], tricky)
		}
	}
	if v := got["refused_total"].GetMetric()[0].GetCounter().GetValue(); v != 1 {
		t.Errorf("refused_total = %v", v)
	}
	if m := got["idle_total"].GetMetric(); len(m) != 1 || m[0].GetCounter().GetValue() != 0 {
		t.Errorf("a counter without labels must read 0 before its first event: %v", m)
	}
	if v := got["temperature"].GetMetric()[0].GetGauge().GetValue(); v != -3.25 {
		t.Errorf("temperature = %v", v)
	}
	h := got["latency_seconds"].GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != 6 || math.Abs(h.GetSampleSum()-55.65) > 1e-9 {
		t.Errorf("latency count %d sum %v, want 6 and 55.65", h.GetSampleCount(), h.GetSampleSum())
	}
	var cumulative []uint64
	for _, b := range h.GetBucket() {
		cumulative = append(cumulative, b.GetCumulativeCount())
	}
	// 0, 0.05 and 0.1 are at most 0.1 (a bound is inclusive); 0.5; 5; 50 only in +Inf.
	if fmt.Sprint(cumulative) != "[3 4 5 6]" {
		t.Errorf("cumulative buckets %v, want [3 4 5 6]", cumulative)
	}
}

// TestCountsAddUpUnderConcurrency: counters and histograms hit from many
// goroutines lose nothing (run with -race).
func TestCountsAddUpUnderConcurrency(t *testing.T) {
	reg := textmetrics.NewRegistry()
	c := reg.Counter("hits_total", "Hits.", "worker")
	h := reg.Histogram("sizes", "Sizes.", []float64{1, 2}, "worker")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				c.With(fmt.Sprint(w % 2)).Inc()
				h.With(fmt.Sprint(w % 2)).Observe(float64(i % 3))
			}
		})
		// Scrapes while the counts move must parse too.
		scrape(t, reg)
	}
	wg.Wait()
	got := scrape(t, reg)
	var total float64
	for _, m := range got["hits_total"].GetMetric() {
		total += m.GetCounter().GetValue()
	}
	var observed uint64
	for _, m := range got["sizes"].GetMetric() {
		observed += m.GetHistogram().GetSampleCount()
	}
	if total != 8000 || observed != 8000 {
		t.Errorf("counted %v and observed %d, want 8000 each", total, observed)
	}
}

// TestMistakesAtRegistrationPanic: a name the format cannot carry, a
// family registered twice, a reserved label, buckets out of order, or the
// wrong number of label values is a programming error found at start.
func TestMistakesAtRegistrationPanic(t *testing.T) {
	for name, fn := range map[string]func(*textmetrics.Registry){
		"bad metric name":    func(r *textmetrics.Registry) { r.Counter("9lives", "") },
		"registered twice":   func(r *textmetrics.Registry) { r.Counter("a_total", ""); r.Gauge("a_total", "", nil) },
		"reserved label":     func(r *textmetrics.Registry) { r.Histogram("h", "", []float64{1}, "le") },
		"bad label name":     func(r *textmetrics.Registry) { r.Counter("b_total", "", "a-b") },
		"unsorted buckets":   func(r *textmetrics.Registry) { r.Histogram("h", "", []float64{2, 1}) },
		"no buckets":         func(r *textmetrics.Registry) { r.Histogram("h", "", nil) },
		"label values count": func(r *textmetrics.Registry) { r.Counter("c_total", "", "x").With("1", "2") },
		"counter going down": func(r *textmetrics.Registry) { r.Counter("d_total", "").With().Add(-1) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			fn(textmetrics.NewRegistry())
		})
	}
}
