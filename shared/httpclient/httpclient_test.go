package httpclient_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/httpclient"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/shared/tracing"
	"github.com/txfence/txfence/testinfra/devcert"
	"github.com/txfence/txfence/testinfra/logtest"
)

// TestTraceAndRequestIDFollowTheCall sends a request with a traceparent and
// a request id to service A, which calls service B over mTLS with the
// request's context: B must log the same trace id and request id.
func TestTraceAndRequestIDFollowTheCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := devcert.WriteDir(dir, []string{"gateway", "txmanager"}); err != nil {
		t.Fatal(err)
	}

	var logB logtest.Buffer
	b := httpserver.New(httpserver.Options{Service: "txmanager", Logger: slog.New(slog.NewJSONHandler(&logB, nil)), TraceContext: tracing.Middleware("txmanager")})
	b.Router.With(mtls.Allow("gateway")).Get("/inner", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	srcB, err := mtls.Load(devcert.Files(dir, "txmanager"), mtls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srvB := httptest.NewUnstartedServer(b)
	srvB.TLS = srcB.ServerConfig()
	srvB.StartTLS()
	defer srvB.Close()

	srcA, err := mtls.Load(devcert.Files(dir, "gateway"), mtls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	client := httpclient.New(srcA.ClientConfig("txmanager"), httpclient.Options{Timeout: 5 * time.Second})
	a := httpserver.New(httpserver.Options{Service: "gateway", TraceContext: tracing.Middleware("gateway")})
	a.Router.Get("/outer", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", srvB.URL+"/inner", nil)
		resp, err := client.Do(req)
		if err != nil {
			httpserver.Error(w, r, err)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})
	srvA := httptest.NewServer(a)
	defer srvA.Close()

	req, _ := http.NewRequest("GET", srvA.URL+"/outer", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("X-Request-Id", "req-two-hops")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("outer call: %d", resp.StatusCode)
	}

	var line struct {
		Msg       string `json:"msg"`
		Route     string `json:"route"`
		RequestID string `json:"request_id"`
		TraceID   string `json:"trace_id"`
		Peer      string `json:"peer"`
	}
	for _, raw := range bytes.Split(logB.Bytes(), []byte("\n")) {
		if json.Unmarshal(raw, &line) == nil && line.Route == "/inner" {
			break
		}
	}
	if line.RequestID != "req-two-hops" || line.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || line.Peer != "gateway" {
		t.Errorf("the inner service logged %+v; want the caller's request id and trace id, and peer gateway", line)
	}
}

func TestNoProxyForServiceCalls(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := httpclient.New(&tls.Config{InsecureSkipVerify: true}, httpclient.Options{})
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("a proxy in the environment diverted a service call: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for header, want := range map[string]time.Duration{
		"":                              0,
		"  ":                            0,
		"30":                            30 * time.Second,
		" 2 ":                           2 * time.Second,
		"0":                             0,
		"-1":                            0,
		"1.5":                           0,
		"soon":                          0,
		"99999999999999999999":          math.MaxInt64,
		"Sun, 29 Nov 2026 12:01:00 GMT": time.Minute,
		"Sun, 29 Nov 2026 11:59:00 GMT": 0,
	} {
		if got := httpclient.RetryAfter(header, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", header, got, want)
		}
	}
}
