package servicetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/testinfra/devcert"
)

// ServeMTLS serves h in this process over mutual TLS as identity, with
// its certificate from pki (PKI), until the test's end: only clients of
// the same PKI get through, as with the real service's listener.
func ServeMTLS(t testing.TB, pki, identity string, h http.Handler) *httptest.Server {
	t.Helper()
	src, err := mtls.Load(devcert.Files(pki, identity), mtls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = src.ServerConfig()
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}

// Logs collects what the code under test logs (a slog JSON handler's
// destination) while the test reads it: safe for concurrent writers.
type Logs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything logged so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Records are the JSON records logged so far for which match holds,
// decoded; a line that is not JSON fails the test.
func (l *Logs) Records(t testing.TB, match func(map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if match(rec) {
			out = append(out, rec)
		}
	}
	return out
}

// Alerts are the records logged as alerts ("alert": true, what every
// service adds to a record an operator must act on) so far.
func (l *Logs) Alerts(t testing.TB) []map[string]any {
	t.Helper()
	return l.Records(t, func(rec map[string]any) bool { return rec["alert"] == true })
}
