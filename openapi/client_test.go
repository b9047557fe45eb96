package openapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/openapi/mevrouterapi"
	"github.com/txfence/txfence/openapi/signerapi"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/errs"
)

// readinessResponse is what every generated GetReadinessResponse offers:
// the shared response types are the components package's, so one test
// covers the five clients.
type readinessResponse interface {
	StatusCode() int
	ContentType() string
	GetBody() []byte
	GetJSON200() *components.Readiness
	GetJSON503() *components.Readiness
	GetApplicationproblemJSON503() *components.Problem
	GetApplicationproblemJSONDefault() *components.Problem
}

type healthResponse interface {
	StatusCode() int
	GetJSON200() *components.Health
	GetApplicationproblemJSONDefault() *components.Problem
}

type metricsResponse interface {
	StatusCode() int
	ContentType() string
	GetBody() []byte
}

// opsClient is one service's generated ClientWithResponses, seen through
// the interfaces above.
type opsClient struct {
	spec      string
	readiness func(context.Context) (readinessResponse, error)
	health    func(context.Context) (healthResponse, error)
	metrics   func(context.Context) (metricsResponse, error) // nil for the gateway's public API
}

// newClients makes every service's generated client for server.
func newClients(t *testing.T, server string) []opsClient {
	t.Helper()
	gw, err := gatewayapi.NewClientWithResponses(server)
	if err != nil {
		t.Fatal(err)
	}
	txm, err := txmanagerapi.NewClientWithResponses(server)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signerapi.NewClientWithResponses(server)
	if err != nil {
		t.Fatal(err)
	}
	mev, err := mevrouterapi.NewClientWithResponses(server)
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledgerapi.NewClientWithResponses(server)
	if err != nil {
		t.Fatal(err)
	}
	// Each closure checks err before returning, so that a failed call is
	// never a non-nil interface holding a nil pointer.
	return []opsClient{
		{
			spec: openapi.Gateway,
			readiness: func(ctx context.Context) (readinessResponse, error) {
				r, err := gw.GetReadinessWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			health: func(ctx context.Context) (healthResponse, error) {
				r, err := gw.GetHealthWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
		},
		{
			spec: openapi.TxManager,
			readiness: func(ctx context.Context) (readinessResponse, error) {
				r, err := txm.GetReadinessWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			health: func(ctx context.Context) (healthResponse, error) {
				r, err := txm.GetHealthWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			metrics: func(ctx context.Context) (metricsResponse, error) {
				r, err := txm.GetMetricsWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
		},
		{
			spec: openapi.Signer,
			readiness: func(ctx context.Context) (readinessResponse, error) {
				r, err := sig.GetReadinessWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			health: func(ctx context.Context) (healthResponse, error) {
				r, err := sig.GetHealthWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			metrics: func(ctx context.Context) (metricsResponse, error) {
				r, err := sig.GetMetricsWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
		},
		{
			spec: openapi.MEVRouter,
			readiness: func(ctx context.Context) (readinessResponse, error) {
				r, err := mev.GetReadinessWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			health: func(ctx context.Context) (healthResponse, error) {
				r, err := mev.GetHealthWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			metrics: func(ctx context.Context) (metricsResponse, error) {
				r, err := mev.GetMetricsWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
		},
		{
			spec: openapi.Ledger,
			readiness: func(ctx context.Context) (readinessResponse, error) {
				r, err := led.GetReadinessWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			health: func(ctx context.Context) (healthResponse, error) {
				r, err := led.GetHealthWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
			metrics: func(ctx context.Context) (metricsResponse, error) {
				r, err := led.GetMetricsWithResponse(ctx)
				if err != nil {
					return nil, err
				}
				return r, nil
			},
		},
	}
}

// TestErrsRoundTripThroughGeneratedClients answers the readiness path with
// an errs problem of every kind and checks that each generated client hands
// back something that turns into the same error: by errs.FromBody on the
// raw response and by the parsed Problem's Err method.
func TestErrsRoundTripThroughGeneratedClients(t *testing.T) {
	cases := []*errs.Error{
		errs.InvalidFields("the request breaks 2 rules",
			errs.FieldError{Pointer: "/value", Detail: "must be a decimal integer below 2^256"},
			errs.FieldError{Pointer: "Idempotency-Key", Detail: "required"}),
	}
	for _, k := range errs.Kinds {
		cases = append(cases, errs.E(k, "readiness failed: "+k.String()))
	}
	for _, sent := range cases {
		t.Run(sent.Kind.String(), func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/readyz" {
					http.NotFound(w, r)
					return
				}
				if sent.Kind == errs.RateLimited || sent.Kind == errs.Unavailable {
					w.Header().Set("Retry-After", "2")
				}
				w.Header().Set("X-Request-Id", "6f1c2d9a0b3e4f5a6b7c8d9e0f1a2b3c")
				errs.WriteProblem(w, errs.ProblemFor(sent))
			}))
			t.Cleanup(ts.Close)

			// What the caller may see: Internal errors say only "internal error".
			want := &errs.Error{Kind: sent.Kind, Message: sent.Message, Fields: sent.Fields}
			if sent.Kind == errs.Internal {
				want.Message = "internal error"
			}

			for _, c := range newClients(t, ts.URL) {
				r, err := c.readiness(t.Context())
				if err != nil {
					t.Fatalf("%s: the generated client failed: %v", c.spec, err)
				}
				if r.StatusCode() != sent.Kind.HTTPStatus() {
					t.Errorf("%s: status %d, want %d", c.spec, r.StatusCode(), sent.Kind.HTTPStatus())
				}

				// The raw response, as any client can convert it.
				checkErr(t, c.spec+" errs.FromBody", errs.FromBody(r.StatusCode(), r.ContentType(), r.GetBody()), want)

				// The parsed problem: a 503 problem is the NotReady
				// response's problem variant, anything else the default.
				problem, other := r.GetApplicationproblemJSONDefault(), r.GetApplicationproblemJSON503()
				if r.StatusCode() == http.StatusServiceUnavailable {
					problem, other = other, problem
				}
				if problem == nil || other != nil || r.GetJSON200() != nil || r.GetJSON503() != nil {
					t.Fatalf("%s: the problem was parsed into the wrong response field: %+v", c.spec, r)
				}
				checkErr(t, c.spec+" Problem.Err", problem.Err(), want)
			}
		})
	}
}

func checkErr(t *testing.T, where string, err error, want *errs.Error) {
	t.Helper()
	var got *errs.Error
	if !errors.As(err, &got) {
		t.Errorf("%s: %T %v is not an *errs.Error", where, err, err)
		return
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: the error changed on the hop (-sent +received):\n%s", where, diff)
	}
}
