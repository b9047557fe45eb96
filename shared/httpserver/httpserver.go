// Package httpserver is the HTTP stack every txfence service serves: a chi
// router with request ids, an access log, panic recovery, per-route
// metrics, the caller's trace context, /healthz, /readyz and /metrics, and
// listeners that shut down gracefully within a bound.
//
// It links no tracing library: a service that carries trace context on to
// the services it calls passes Options.TraceContext (package tracing, with
// OpenTelemetry); without it the caller's trace id is only logged. signerd,
// which calls no service, does without, and so without OpenTelemetry.
// Nor does it link the Prometheus client: a service passes its Metrics
// (package prommetrics for most; TextMetrics for signerd).
package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/shared/textmetrics"
)

// Check is one readiness check: a dependency the service cannot work
// without (its database, the signer, the chain).
type Check struct {
	Name string
	Fn   func(context.Context) error
}

// Options configure New.
type Options struct {
	// Service names the service in metrics and logs ("signer", "gateway").
	Service string
	Logger  *slog.Logger
	// Metrics records the requests and is served on /metrics. Nil means
	// TextMetrics in a registry of its own with the process's gauges.
	Metrics Metrics
	// Ready lists the checks /readyz runs.
	Ready []Check
	// CheckTimeout bounds each readiness check; zero means two seconds.
	CheckTimeout time.Duration
	// TraceContext, when set, is the middleware that takes the caller's
	// trace context into the request's context, so that calls made with
	// it carry the trace on, and adds trace_id to the request's logger
	// (WithLogger): tracing.Middleware. Nil: the trace id of a valid W3C
	// traceparent header is logged, and the trace goes no further.
	TraceContext func(http.Handler) http.Handler
}

// Server is a service's HTTP handler: mount API routes on Router.
type Server struct {
	// Router serves the service's API behind the common middleware.
	Router chi.Router

	opts Options
	log  *slog.Logger
	ops  chi.Router

	ready struct {
		sync.Mutex
		results map[string]CheckResult
		at      time.Time
	}
}

// New builds the router with the common middleware and the operational
// endpoints.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		reg := textmetrics.NewRegistry()
		reg.RegisterProcess()
		opts.Metrics = TextMetrics(reg, opts.Service)
	}
	if opts.CheckTimeout == 0 {
		opts.CheckTimeout = 2 * time.Second
	}
	s := &Server{opts: opts, log: opts.Logger}

	s.Router = s.newRouter(true)
	// The ops router serves only the operational endpoints, for a plain
	// HTTP listener that probes and scrapers reach without a certificate.
	s.ops = chi.NewRouter()
	s.ops.Use(s.requestID, s.observe, s.recoverer)
	s.mountOps(s.ops, true)
	return s
}

// PublicRouter is a router for a listener that faces clients: the same
// middleware, /healthz, and a /readyz that says ready or not and nothing
// of its checks (their errors name internal addresses); no /metrics, which
// stays on the internal and ops listeners.
func (s *Server) PublicRouter() chi.Router { return s.newRouter(false) }

// newRouter builds a router; internal ones serve /metrics and the checks'
// details on /readyz.
func (s *Server) newRouter(internal bool) chi.Router {
	r := chi.NewRouter()
	traceContext := s.opts.TraceContext
	if traceContext == nil {
		traceContext = logTraceID
	}
	r.Use(s.requestID, traceContext, s.observe, s.recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, errs.Errorf(errs.NotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, errs.Errorf(errs.Invalid, "method %s is not allowed on %s", r.Method, r.URL.Path))
	})
	s.mountOps(r, internal)
	return r
}

func (s *Server) mountOps(r chi.Router, internal bool) {
	r.Get("/healthz", s.healthz)
	if internal {
		r.Get("/readyz", s.readyz)
		r.Handle("/metrics", s.opts.Metrics)
	} else {
		r.Get("/readyz", s.publicReadyz)
	}
}

// AddReadyCheck adds a readiness check. Call it before serving.
func (s *Server) AddReadyCheck(c Check) { s.opts.Ready = append(s.opts.Ready, c) }

// ServeHTTP serves the full router.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.Router.ServeHTTP(w, r) }

// Ops is the handler of the operational endpoints alone.
func (s *Server) Ops() http.Handler { return s.ops }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "service": s.opts.Service})
}

// CheckResult is one readiness check's outcome in /readyz.
type CheckResult struct {
	Status string `json:"status"` // "ok" or "failing"
	Error  string `json:"error,omitempty"`
}

// readyFor is how long readiness results are reused: however often
// probes and clients ask, the checks (a database ping, a call to another
// service) run at most once per readyFor per process.
const readyFor = time.Second

// readiness runs the checks, or reuses results younger than readyFor;
// concurrent callers wait for one run.
func (s *Server) readiness(ctx context.Context) map[string]CheckResult {
	s.ready.Lock()
	defer s.ready.Unlock()
	if s.ready.results != nil && time.Since(s.ready.at) < readyFor {
		return s.ready.results
	}
	results := make(map[string]CheckResult, len(s.opts.Ready))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range s.opts.Ready {
		wg.Go(func() {
			// Not the caller's context: its results serve other callers.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.CheckTimeout)
			defer cancel()
			res := CheckResult{Status: "ok"}
			if err := c.Fn(ctx); err != nil {
				res = CheckResult{Status: "failing", Error: err.Error()}
			}
			mu.Lock()
			results[c.Name] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	s.ready.results, s.ready.at = results, time.Now()
	return results
}

// publicReadyz answers clients: ready or not, in the shape of readyz
// with no check in it.
func (s *Server) publicReadyz(w http.ResponseWriter, r *http.Request) {
	none := map[string]CheckResult{}
	for _, res := range s.readiness(r.Context()) {
		if res.Status != "ok" {
			WriteJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not_ready", "service": s.opts.Service, "checks": none})
			return
		}
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "service": s.opts.Service, "checks": none})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	results := s.readiness(r.Context())
	var failing []string
	for name, res := range results {
		if res.Status != "ok" {
			failing = append(failing, name)
		}
	}
	slices.Sort(failing)
	if len(failing) > 0 {
		s.log.Warn("not ready", "failing", failing)
		// The check errors are for operators, who read this endpoint on
		// the internal or ops listener; they hold no secrets.
		WriteJSON(w, http.StatusServiceUnavailable, map[string]any{
			"status": "not_ready", "service": s.opts.Service, "failing": failing, "checks": results,
		})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]any{"status": "ready", "service": s.opts.Service, "checks": results})
}

// WriteJSON writes v as a JSON response.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Error answers err as a problem document. Internal errors are logged with
// the request id, since the caller only sees "internal error".
func Error(w http.ResponseWriter, r *http.Request, err error) {
	errs.WriteProblem(w, Problem(r, err))
}

// Handle adapts a handler that returns its failure instead of writing it:
// the error becomes the problem document (Error), so that no handler
// repeats "httpserver.Error(w, r, err); return". A handler that has begun
// its answer (a stream) returns nil, or an error only for the log's sake
// before it writes.
func Handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			Error(w, r, err)
		}
	}
}

// Problem is the problem document answering err to r, for an answer that
// carries it inside a larger body (one item of a batch). It logs what
// Error logs.
func Problem(r *http.Request, err error) errs.Problem {
	p := errs.ProblemFor(err)
	p.Instance = r.URL.Path
	p.RequestID = RequestID(r.Context())
	if kind := errs.KindOf(err); kind == errs.Internal || kind == errs.Unavailable {
		Logger(r.Context()).Error("request failed", "kind", kind.String(), "err", err)
	}
	return p
}

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// RequestID returns the request's id, as set by the middleware.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// Logger returns the request-scoped logger (with request_id and trace_id),
// or a discarding one outside a request.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// WithLogger returns ctx with l as the request-scoped logger Logger
// returns, for middleware that learns more about a request (its trace).
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// requestID takes the caller's X-Request-Id when it is sane, so one id
// follows a request across services, and makes one up otherwise.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneID(id) {
			id = newID()
		}
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		ctx = WithLogger(ctx, s.log.With("request_id", id))
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// logTraceID adds the trace id of the caller's W3C traceparent header to
// the request's logger, so that log lines of one request share a trace id
// across hops. It is the trace context of a server without
// Options.TraceContext.
func logTraceID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, ok := traceIDOf(r.Header.Get("traceparent")); ok {
			r = r.WithContext(WithLogger(r.Context(), Logger(r.Context()).With("trace_id", id)))
		}
		next.ServeHTTP(w, r)
	})
}

// traceIDOf returns the trace id of a W3C traceparent header
// (version-traceid-parentid-flags, lowercase hex), and whether the header
// is valid: a version after 00 may append fields, version ff is invalid,
// and neither id may be all zeros.
func traceIDOf(traceparent string) (string, bool) {
	const length = 2 + 1 + 32 + 1 + 16 + 1 + 2
	if len(traceparent) < length {
		return "", false
	}
	version, traceID, parentID, flags := traceparent[0:2], traceparent[3:35], traceparent[36:52], traceparent[53:55]
	if traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-' ||
		!lowerHex(version) || version == "ff" || !lowerHex(flags) ||
		!lowerHex(traceID) || allZeros(traceID) || !lowerHex(parentID) || allZeros(parentID) {
		return "", false
	}
	if len(traceparent) > length && (version == "00" || traceparent[length] != '-') {
		return "", false
	}
	return traceID, true
}

func lowerHex(s string) bool {
	return strings.IndexFunc(s, func(c rune) bool { return !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') }) < 0
}

func allZeros(s string) bool { return strings.Trim(s, "0") == "" }

// recoverer turns a panic into a 500 problem and a log line with the stack,
// so one bad request never takes the process down.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			rec := recover()
			if rec == nil {
				return
			}
			if rec == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
				panic(rec)
			}
			Logger(r.Context()).Error("panic serving request", "panic", rec, "stack", string(debug.Stack()))
			if rw, ok := w.(*responseRecorder); !ok || !rw.wroteHeader {
				Error(w, r, errors.New("panic"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// observe logs and measures every request once it is done.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &responseRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		elapsed := time.Since(start)

		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		s.opts.Metrics.ObserveRequest(route, r.Method, rec.status, elapsed)

		level := slog.LevelInfo
		if isOpsPath(r.URL.Path) && rec.status < 500 {
			level = slog.LevelDebug
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("route", route),
			slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes),
			slog.Float64("duration_ms", float64(elapsed.Microseconds())/1000),
			slog.String("remote", r.RemoteAddr),
		}
		if peer, err := mtls.PeerOf(r); err == nil {
			attrs = append(attrs, slog.String("peer", peer))
		}
		Logger(r.Context()).LogAttrs(r.Context(), level, "request", attrs...)
	})
}

func isOpsPath(p string) bool {
	return p == "/healthz" || p == "/readyz" || p == "/metrics"
}

// responseRecorder remembers the status and size of a response. It passes
// Flush and Unwrap through, which server-sent events and
// http.ResponseController need.
type responseRecorder struct {
	http.ResponseWriter
	status      int
	bytes       int64
	wroteHeader bool
}

func (r *responseRecorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *responseRecorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *responseRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		r.wroteHeader = true
		f.Flush()
	}
}

func (r *responseRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func saneID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	return strings.IndexFunc(id, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.')
	}) < 0
}
