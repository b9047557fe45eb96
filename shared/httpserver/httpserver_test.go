package httpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/testinfra/logtest"
)

func newServer(t *testing.T, ready ...httpserver.Check) (*httpserver.Server, *logtest.Buffer) {
	t.Helper()
	logs := &logtest.Buffer{}
	s := httpserver.New(httpserver.Options{
		Service: "test",
		Logger:  slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Ready:   ready,
	})
	s.Router.Get("/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	s.Router.Get("/conflict", func(w http.ResponseWriter, r *http.Request) {
		httpserver.Error(w, r, errs.E(errs.Conflict, "request id reused"))
	})
	s.Router.Get("/secret-failure", func(w http.ResponseWriter, r *http.Request) {
		httpserver.Error(w, r, errors.New("dial 10.1.2.3: password=hunter2"))
	})
	return s, logs
}

func do(t *testing.T, h http.Handler, req *http.Request) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	dbDown := errors.New("connection refused to 10.0.0.7:5432")
	var failing bool
	var calls int
	var mu sync.Mutex
	s, _ := newServer(t, httpserver.Check{Name: "database", Fn: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if failing {
			return dbDown
		}
		return nil
	}})
	if resp := do(t, s, httptest.NewRequest("GET", "/healthz", nil)); resp.StatusCode != 200 {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
	if resp := do(t, s, httptest.NewRequest("GET", "/readyz", nil)); resp.StatusCode != 200 {
		t.Errorf("readyz while healthy: %d", resp.StatusCode)
	}
	// However many ask at once, the checks run at most once a second.
	public := s.PublicRouter()
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() { do(t, s, httptest.NewRequest("GET", "/readyz", nil)) })
		wg.Go(func() { do(t, public, httptest.NewRequest("GET", "/readyz", nil)) })
	}
	wg.Wait()
	mu.Lock()
	failing = true
	ran := calls
	mu.Unlock()
	if ran > 2 {
		t.Errorf("101 readiness probes ran the checks %d times; want them reused within a second", ran)
	}
	// The failure shows once the reused results are a second old.
	var resp *http.Response
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		resp = do(t, s, httptest.NewRequest("GET", "/readyz", nil))
		body, _ = io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			break
		}
		<-time.After(50 * time.Millisecond)
	}
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"failing":["database"]`) || !strings.Contains(string(body), "connection refused") {
		t.Errorf("readyz while the database is down: %d %s", resp.StatusCode, body)
	}
	// Clients are told no more than that: no check, no internal address.
	resp = do(t, public, httptest.NewRequest("GET", "/readyz", nil))
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || strings.Contains(string(body), "database") || strings.Contains(string(body), "10.0.0.7") {
		t.Errorf("public readyz while the database is down: %d %s", resp.StatusCode, body)
	}
	// Liveness does not depend on dependencies: restarting would not help.
	if resp := do(t, s.Ops(), httptest.NewRequest("GET", "/healthz", nil)); resp.StatusCode != 200 {
		t.Errorf("ops healthz: %d", resp.StatusCode)
	}
}

func TestErrorsAreProblemDocuments(t *testing.T) {
	t.Parallel()
	s, logs := newServer(t)
	tests := []struct {
		path       string
		status     int
		kind       errs.Kind
		detailHas  string
		detailLack string
	}{
		{"/conflict", 409, errs.Conflict, "request id reused", ""},
		{"/no-such-route", 404, errs.NotFound, "no route for GET /no-such-route", ""},
		{"/panic", 500, errs.Internal, "internal error", "boom"},
		{"/secret-failure", 500, errs.Internal, "internal error", "hunter2"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", tt.path, nil)
		req.Header.Set("X-Request-Id", "req-"+strings.TrimPrefix(tt.path, "/"))
		resp := do(t, s, req)
		var p errs.Problem
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		if resp.StatusCode != tt.status || p.Status != tt.status || errs.KindOf(errs.FromProblem(p.Status, p)) != tt.kind {
			t.Errorf("%s: status %d, problem %+v", tt.path, resp.StatusCode, p)
		}
		if !strings.Contains(p.Detail, tt.detailHas) || (tt.detailLack != "" && strings.Contains(p.Detail, tt.detailLack)) {
			t.Errorf("%s: detail %q", tt.path, p.Detail)
		}
		if p.RequestID != req.Header.Get("X-Request-Id") || resp.Header.Get("X-Request-Id") != p.RequestID {
			t.Errorf("%s: request id not carried: problem %q header %q", tt.path, p.RequestID, resp.Header.Get("X-Request-Id"))
		}
	}
	// The panic and the hidden failure are in the log, with request ids.
	for _, want := range []string{`"panic":"boom"`, `"request_id":"req-panic"`, "hunter2", `"request_id":"req-secret-failure"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %s", want)
		}
	}
}

func TestRequestIDIsMadeUpWhenMissingOrInsane(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t)
	for _, given := range []string{"", "has spaces", strings.Repeat("x", 65), "new\nline"} {
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Header.Set("X-Request-Id", given)
		got := do(t, s, req).Header.Get("X-Request-Id")
		if got == given || len(got) != 32 {
			t.Errorf("given %q, answered with id %q", given, got)
		}
	}
}

func TestMetricsCountRequestsByRoute(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t)
	s.Router.Get("/tx/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	for _, id := range []string{"a", "b", "c"} {
		do(t, s, httptest.NewRequest("GET", "/tx/"+id, nil))
	}
	body, _ := io.ReadAll(do(t, s, httptest.NewRequest("GET", "/metrics", nil)).Body)
	want := `txfence_http_requests_total{code="204",method="GET",route="/tx/{id}",service="test"} 3`
	if !strings.Contains(string(body), want) {
		t.Errorf("metrics lack %s", want)
	}
	if !strings.Contains(string(body), "go_goroutines") {
		t.Error("metrics lack the Go collector")
	}
}

func TestTraceContextReachesTheLog(t *testing.T) {
	t.Parallel()
	s, logs := newServer(t)
	req := httptest.NewRequest("GET", "/conflict", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	do(t, s, req)
	if !strings.Contains(logs.String(), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Errorf("the caller's trace id is not in the log:\n%s", logs)
	}
}

// TestServeShutsDownGracefully starts a real listener on port 0, holds a
// request in flight, cancels the context and checks the request completes
// and Serve returns.
func TestServeShutsDownGracefully(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t)
	entered, release := make(chan struct{}), make(chan struct{})
	s.Router.Get("/slow", func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	logR, logW := io.Pipe()
	log := slog.New(slog.NewJSONHandler(logW, nil))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- httpserver.Serve(ctx, log, 5*time.Second, httpserver.Listener{Name: "internal", Addr: "127.0.0.1:0", Handler: s})
		_ = logW.Close()
	}()
	url := readListeningURL(t, logR)
	go func() { _, _ = io.Copy(io.Discard, logR) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(url + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-entered
	cancel()
	close(release)
	if body := <-got; body != "done" {
		t.Errorf("in-flight request got %q during shutdown", body)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestServeFailsFastOnATakenPort(t *testing.T) {
	t.Parallel()
	busy := httptest.NewServer(http.NotFoundHandler())
	defer busy.Close()
	err := httpserver.Serve(context.Background(), slog.New(slog.DiscardHandler), time.Second,
		httpserver.Listener{Name: "ops", Addr: "127.0.0.1:0", Handler: http.NotFoundHandler()},
		httpserver.Listener{Name: "internal", Addr: strings.TrimPrefix(busy.URL, "http://"), Handler: http.NotFoundHandler()})
	if err == nil || !strings.Contains(err.Error(), "internal listener") {
		t.Fatalf("got %v; want the taken port named", err)
	}
}

func readListeningURL(t *testing.T, r io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var line struct{ Msg, URL string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
			return line.URL
		}
	}
	t.Fatal("no listening line")
	return ""
}
