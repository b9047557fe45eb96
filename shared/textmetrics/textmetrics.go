// Package textmetrics writes metrics in the Prometheus text exposition
// format (version 0.0.4) with nothing but the standard library.
//
// It exists for Zone C. Every package signerd links is attack surface a
// custodian's security team reads, and the Prometheus client with its
// protobuf runtime is 45 of them. The signer exports a handful of counters
// and the per-route HTTP metrics; this package does that, with the same
// names, types and label sets the Prometheus client would write, so that
// rules and dashboards read signerd like every other service. Every other
// service uses the Prometheus client (package prommetrics).
//
// Counters, gauges read at scrape time, and histograms, each with fixed
// label names; a family is registered once, at start, and a mistake there
// (a bad name, a second registration) panics like a bad regexp literal.
package textmetrics

import (
	"bufio"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is what a scraper is told it reads.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds the metric families a process exports.
type Registry struct {
	mu       sync.Mutex
	families []family // in registration order
	names    map[string]bool
}

// NewRegistry is an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

// family is one metric name with its help text and type; write appends
// its samples in the exposition format.
type family interface {
	header() (name, help, kind string)
	write(w *bufio.Writer)
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func (r *Registry) register(f family, labels []string) {
	name, _, _ := f.header()
	if !metricName.MatchString(name) {
		panic(fmt.Sprintf("textmetrics: %q is not a metric name", name))
	}
	for _, l := range labels {
		if !labelName.MatchString(l) || strings.HasPrefix(l, "__") || l == "le" {
			panic(fmt.Sprintf("textmetrics: %s: %q is not a label name this package allows", name, l))
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] {
		panic(fmt.Sprintf("textmetrics: %s is registered twice", name))
	}
	r.names[name] = true
	r.families = append(r.families, f)
}

// ServeHTTP writes every family, in registration order.
func (r *Registry) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", ContentType)
	r.mu.Lock()
	families := slices.Clone(r.families)
	r.mu.Unlock()
	bw := bufio.NewWriter(w)
	for _, f := range families {
		name, help, kind := f.header()
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s %s\n", name, helpEscaper.Replace(help), name, kind)
		f.write(bw)
	}
	_ = bw.Flush()
}

// vec is the set of children of a family with labels, one per distinct
// list of label values.
type vec[T any] struct {
	name, help string
	labels     []string
	byName     []int // label indexes in the order of their names
	newChild   func() *T

	mu       sync.RWMutex
	children map[string]*T
	order    []labelled[T]
}

type labelled[T any] struct {
	values []string
	child  *T
}

func (v *vec[T]) header() (string, string) { return v.name, v.help }

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.labels) {
		panic(fmt.Sprintf("textmetrics: %s takes %d label values (%s), got %d", v.name, len(v.labels), strings.Join(v.labels, ", "), len(values)))
	}
	key := strings.Join(values, "\xff")
	v.mu.RLock()
	c, ok := v.children[key]
	v.mu.RUnlock()
	if ok {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.children[key]; ok {
		return c
	}
	c = v.newChild()
	v.children[key] = c
	v.order = append(v.order, labelled[T]{values: slices.Clone(values), child: c})
	return c
}

// each visits the children ordered by their label values, taken in the
// order of the sorted label names, as the Prometheus client orders them.
func (v *vec[T]) each(fn func(labels string, child *T)) {
	v.mu.RLock()
	order := slices.Clone(v.order)
	v.mu.RUnlock()
	slices.SortFunc(order, func(a, b labelled[T]) int {
		for _, i := range v.byName {
			if c := strings.Compare(a.values[i], b.values[i]); c != 0 {
				return c
			}
		}
		return 0
	})
	for _, l := range order {
		fn(v.labelPairs(l.values), l.child)
	}
}

// Counter counts up.
type Counter struct{ bits atomic.Uint64 }

// Inc adds one.
func (c *Counter) Inc() { c.Add(1) }

// Add adds d, which must not be negative: a counter that went down would
// read as a restart.
func (c *Counter) Add(d float64) {
	if d < 0 {
		panic("textmetrics: a counter cannot go down")
	}
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Value is the count so far.
func (c *Counter) Value() float64 { return math.Float64frombits(c.bits.Load()) }

// CounterVec is a counter family with labels.
type CounterVec struct{ v vec[Counter] }

// Counter registers a counter family with the given label names; without
// labels, With() is its one counter.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	c := &CounterVec{v: newVec(name, help, labels, func() *Counter { return new(Counter) })}
	r.register(c, labels)
	if len(labels) == 0 {
		c.With() // a counter without labels reads 0 before its first event
	}
	return c
}

// With is the counter for the label values, in the order of the names.
func (c *CounterVec) With(values ...string) *Counter { return c.v.with(values) }

func (c *CounterVec) header() (string, string, string) {
	name, help := c.v.header()
	return name, help, "counter"
}

func (c *CounterVec) write(w *bufio.Writer) {
	c.v.each(func(labels string, child *Counter) {
		writeSample(w, c.v.name, labels, child.Value())
	})
}

// Gauge registers a gauge without labels whose value fn reads at each
// scrape.
func (r *Registry) Gauge(name, help string, fn func() float64) {
	r.register(&gaugeFunc{name: name, help: help, kind: "gauge", fn: fn}, nil)
}

// CounterFunc registers a counter without labels whose value fn reads at
// each scrape, for counts kept elsewhere (the runtime's, the kernel's).
func (r *Registry) CounterFunc(name, help string, fn func() float64) {
	r.register(&gaugeFunc{name: name, help: help, kind: "counter", fn: fn}, nil)
}

type gaugeFunc struct {
	name, help, kind string
	fn               func() float64
}

func (g *gaugeFunc) header() (string, string, string) { return g.name, g.help, g.kind }
func (g *gaugeFunc) write(w *bufio.Writer)            { writeSample(w, g.name, "", g.fn()) }

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	upper  []float64 // ascending; +Inf is implicit
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.upper, v) // the first bound >= v
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// HistogramVec is a histogram family with labels.
type HistogramVec struct{ v vec[Histogram] }

// Histogram registers a histogram family with the given upper bounds,
// which must ascend, and label names.
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	if len(buckets) == 0 || !slices.IsSorted(buckets) || slices.Contains(buckets, math.Inf(1)) || len(slices.Compact(slices.Clone(buckets))) != len(buckets) {
		panic(fmt.Sprintf("textmetrics: %s: buckets must be finite, distinct and ascending", name))
	}
	upper := slices.Clone(buckets)
	h := &HistogramVec{v: newVec(name, help, labels, func() *Histogram {
		return &Histogram{upper: upper, counts: make([]uint64, len(upper)+1)}
	})}
	r.register(h, labels)
	return h
}

// With is the histogram for the label values, in the order of the names.
func (h *HistogramVec) With(values ...string) *Histogram { return h.v.with(values) }

func (h *HistogramVec) header() (string, string, string) {
	name, help := h.v.header()
	return name, help, "histogram"
}

func (h *HistogramVec) write(w *bufio.Writer) {
	h.v.each(func(labels string, child *Histogram) {
		child.mu.Lock()
		counts, sum, count := slices.Clone(child.counts), child.sum, child.count
		child.mu.Unlock()
		var cumulative uint64
		for i, n := range counts {
			cumulative += n
			le := "+Inf"
			if i < len(child.upper) {
				le = formatFloat(child.upper[i])
			}
			writeSample(w, h.v.name+"_bucket", joinLabels(labels, `le="`+le+`"`), float64(cumulative))
		}
		writeSample(w, h.v.name+"_sum", labels, sum)
		writeSample(w, h.v.name+"_count", labels, float64(count))
	})
}

func writeSample(w *bufio.Writer, name, labels string, v float64) {
	w.WriteString(name)
	if labels != "" {
		w.WriteString("{" + labels + "}")
	}
	w.WriteString(" " + formatFloat(v) + "\n")
}

// labelPairs renders name="value" pairs, escaped as the format requires,
// in the order of the names, as the Prometheus client writes them.
func (v *vec[T]) labelPairs(values []string) string {
	pairs := make([]string, len(v.byName))
	for j, i := range v.byName {
		pairs[j] = v.labels[i] + `="` + labelEscaper.Replace(values[i]) + `"`
	}
	return strings.Join(pairs, ",")
}

func newVec[T any](name, help string, labels []string, newChild func() *T) vec[T] {
	byName := make([]int, len(labels))
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(labels[a], labels[b]) })
	return vec[T]{name: name, help: help, labels: labels, byName: byName, newChild: newChild, children: map[string]*T{}}
}

func joinLabels(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
