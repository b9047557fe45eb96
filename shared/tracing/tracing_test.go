package tracing_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/tracing"
)

// TestMiddlewareTakesTheTraceIntoContextAndLog: a handler behind the
// middleware sees the caller's trace in its context (which httpclient
// carries on), and the request's log line carries its trace id.
func TestMiddlewareTakesTheTraceIntoContextAndLog(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := httpserver.New(httpserver.Options{Service: "test", Logger: slog.New(slog.NewJSONHandler(&logs, nil)), TraceContext: tracing.Middleware("test")})
	var seen trace.SpanContext
	s.Router.Get("/traced", func(w http.ResponseWriter, r *http.Request) {
		seen = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	})
	req := httptest.NewRequest("GET", "/traced", nil)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	s.ServeHTTP(httptest.NewRecorder(), req)
	if got := seen.TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("the handler's context holds trace %s; want the caller's", got)
	}
	if n := strings.Count(logs.String(), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`); n != 1 {
		t.Errorf("the caller's trace id is logged %d times; want once:\n%s", n, logs.String())
	}
}
