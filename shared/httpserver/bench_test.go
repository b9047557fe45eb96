package httpserver_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/txfence/txfence/shared/httpserver"
)

// BenchmarkMiddlewareStack measures what the common middleware (request id,
// trace context, access log, metrics, recovery) costs per request, with the
// access log going to a JSON handler that discards, as in production minus
// the I/O.
func BenchmarkMiddlewareStack(b *testing.B) {
	s := httpserver.New(httpserver.Options{Service: "bench", Logger: slog.New(slog.NewJSONHandler(discard{}, nil))})
	s.Router.Get("/tx/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest("GET", "/tx/0x01", nil)
		for pb.Next() {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				b.Fatal(rec.Code)
			}
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
