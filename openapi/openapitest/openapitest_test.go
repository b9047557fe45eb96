package openapitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// recorder keeps the failures Conform reports instead of failing the test,
// so a test can show what Conform catches.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) failures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// exchange sends one request through Conform(next) and returns what
// Conform reported.
func exchange(t *testing.T, next http.HandlerFunc, method, path, body string) string {
	t.Helper()
	rec := &recorder{TB: t}
	h := openapitest.Conform(rec, openapi.Signer, next)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	h.ServeHTTP(httptest.NewRecorder(), req)
	return rec.failures()
}

func TestConformPassesTheRealOpsEndpoints(t *testing.T) {
	t.Parallel()
	srv := httpserver.New(httpserver.Options{Service: "signer"})
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if got := exchange(t, srv.ServeHTTP, http.MethodGet, path, ""); got != "" {
			t.Errorf("GET %s: %s", path, got)
		}
	}
}

func TestConformCatchesDrift(t *testing.T) {
	t.Parallel()
	jsonAnswer := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		}
	}
	refuse := func(w http.ResponseWriter, r *http.Request) {
		httpserver.Error(w, r, errs.E(errs.Invalid, "bad request"))
	}
	tests := []struct {
		name         string
		handler      http.HandlerFunc
		method, path string
		body         string
		want         string // in the failure; "" for none
	}{
		{"a response body the spec does not allow", jsonAnswer(200, `{"status": "fine", "service": "signer"}`), "GET", "/healthz", "", "response breaks"},
		{"a status the operation does not document", jsonAnswer(201, `{"status": "ok", "service": "signer"}`), "GET", "/healthz", "", "response breaks"},
		{"a route the spec does not have", jsonAnswer(200, `{}`), "GET", "/v1/unknown", "", "not an operation"},
		{"a request the spec refuses, answered with success", jsonAnswer(200, `{}`), "POST", "/v1/evaluate", `{"nonce": "seven"}`, "yet was answered 200"},
		{"a request the spec refuses, refused", refuse, "POST", "/v1/evaluate", `{"nonce": "seven"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := exchange(t, tt.handler, tt.method, tt.path, tt.body)
			switch {
			case tt.want == "" && got != "":
				t.Errorf("reported %q, want nothing", got)
			case tt.want != "" && !strings.Contains(got, tt.want):
				t.Errorf("reported %q, want %q", got, tt.want)
			}
		})
	}
}
