package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// serviceNames are the names services give shared/httpserver, by spec.
var serviceNames = map[string]string{
	openapi.Gateway:   "gateway",
	openapi.TxManager: "txmanager",
	openapi.Signer:    "signer",
	openapi.MEVRouter: "mevrouter",
	openapi.Ledger:    "ledger",
}

// TestSpecsDescribeTheOpsEndpoints serves the real operational endpoints
// of shared/httpserver, the way each service mounts them, calls them
// through the generated clients and validates every response against the
// spec: the specs describe what the services answer, not what we hope
// they answer.
func TestSpecsDescribeTheOpsEndpoints(t *testing.T) {
	for _, ready := range []bool{true, false} {
		var failing error
		if !ready {
			failing = errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
		}
		for _, name := range openapi.Services {
			t.Run(name+map[bool]string{true: "/ready", false: "/not_ready"}[ready], func(t *testing.T) {
				t.Parallel()
				doc, err := openapi.Load(t.Context(), name)
				if err != nil {
					t.Fatal(err)
				}
				srv := httpserver.New(httpserver.Options{
					Service: serviceNames[name],
					Ready: []httpserver.Check{
						{Name: "postgres", Fn: func(context.Context) error { return failing }},
						{Name: "chain", Fn: func(context.Context) error { return nil }},
					},
				})
				var h http.Handler = srv // the internal listener
				if name == openapi.Gateway {
					h = srv.PublicRouter()
				}
				ts := httptest.NewServer(validating(t, doc, h))
				t.Cleanup(ts.Close)
				c := clientFor(t, ts.URL, name)

				hr, err := c.health(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if got := hr.GetJSON200(); got == nil || got.Status != components.HealthOK || got.Service != serviceNames[name] {
					t.Errorf("health: %d %+v", hr.StatusCode(), got)
				}

				rr, err := c.readiness(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				// The gateway's public listener says ready or not and
				// names no check (their errors name internal addresses).
				public := name == openapi.Gateway
				if ready {
					if got := rr.GetJSON200(); got == nil || got.Status != components.ReadinessReady || public != (len(got.Checks) == 0) ||
						!public && got.Checks["postgres"].Status != components.CheckOK {
						t.Errorf("readiness: %d %s", rr.StatusCode(), rr.GetBody())
					}
				} else {
					got := rr.GetJSON503()
					if got == nil || got.Status != components.ReadinessNotReady || public != (len(got.Checks) == 0 && got.Failing == nil) ||
						!public && (got.Failing == nil || strings.Join(*got.Failing, ",") != "postgres" || got.Checks["postgres"].Status != components.CheckFailing) {
						t.Errorf("readiness: %d %s", rr.StatusCode(), rr.GetBody())
					}
				}

				if c.metrics != nil {
					mr, err := c.metrics(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if mr.StatusCode() != http.StatusOK || !strings.HasPrefix(mr.ContentType(), "text/plain") ||
						!bytes.Contains(mr.GetBody(), []byte("txfence_http_requests_total")) {
						t.Errorf("metrics: %d %s", mr.StatusCode(), mr.ContentType())
					}
				}
			})
		}
	}
}

// TestOpsErrorsAreProblems checks a problem the real stack answers on a
// spec'd path (here: a client whose base path the server does not know)
// against the Problem response and through the generated client.
func TestOpsErrorsAreProblems(t *testing.T) {
	srv := httpserver.New(httpserver.Options{Service: "txmanager"})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	c := clientFor(t, ts.URL+"/nowhere", openapi.TxManager)
	r, err := c.readiness(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	p := r.GetApplicationproblemJSONDefault()
	if p == nil {
		t.Fatalf("no problem parsed from %d %s", r.StatusCode(), r.GetBody())
	}
	if p.Type != components.ProblemNotFound || p.RequestId == nil || p.Instance == nil || *p.Instance != "/nowhere/readyz" {
		t.Errorf("problem %s", r.GetBody())
	}
	if !errs.Is(p.Err(), errs.NotFound) {
		t.Errorf("Err() = %v, want a not_found error", p.Err())
	}

	schema := componentSchemas(t)["Problem"].Value
	var doc any
	if err := json.Unmarshal(r.GetBody(), &doc); err != nil {
		t.Fatal(err)
	}
	if err := schema.VisitJSON(doc); err != nil {
		t.Errorf("the problem does not validate: %v", err)
	}
}

func clientFor(t *testing.T, server, spec string) opsClient {
	t.Helper()
	for _, c := range newClients(t, server) {
		if c.spec == spec {
			return c
		}
	}
	t.Fatalf("no client for %s", spec)
	return opsClient{}
}

// validating wraps h so that every response is validated against the
// operation doc declares for its path, failing the test when it does not
// conform (an undeclared status included).
func validating(t *testing.T, doc *openapi3.T, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())

		item := doc.Paths.Value(r.URL.Path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("%s %s: not in the spec", r.Method, r.URL.Path)
			return
		}
		input := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{
				Request: r,
				Route: &routers.Route{
					Spec: doc, Path: r.URL.Path, PathItem: item,
					Method: r.Method, Operation: item.GetOperation(r.Method),
				},
			},
			Status:  rec.Code,
			Header:  rec.Header(),
			Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
			Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		if err := openapi3filter.ValidateResponse(r.Context(), input); err != nil {
			t.Errorf("%s %s: the response (%d %s) does not match the spec: %v", r.Method, r.URL.Path, rec.Code, rec.Header().Get("Content-Type"), err)
		}
	})
}
