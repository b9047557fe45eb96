package errs_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/shared/errs"
)

func TestKindNamesRoundTrip(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, k := range errs.Kinds {
		name := k.String()
		if seen[name] {
			t.Fatalf("kind name %q used twice", name)
		}
		seen[name] = true
		got, ok := errs.ParseKind(name)
		if !ok || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", name, got, ok, k)
		}
	}
	if _, ok := errs.ParseKind("no_such_kind"); ok {
		t.Error("ParseKind accepted an unknown name")
	}
}

func TestKindOfFollowsWrapping(t *testing.T) {
	t.Parallel()
	base := errs.E(errs.Conflict, "request id reused with a different body")
	wrapped := fmt.Errorf("create tx: %w", base)
	if got := errs.KindOf(wrapped); got != errs.Conflict {
		t.Errorf("KindOf(wrapped) = %v, want conflict", got)
	}
	if got := errs.KindOf(errors.New("plain")); got != errs.Internal {
		t.Errorf("KindOf(plain) = %v, want internal", got)
	}
	if errs.Is(nil, errs.Internal) {
		t.Error("a nil error has no kind")
	}
	cause := errors.New("connection refused")
	e := errs.Wrap(errs.Unavailable, "database unavailable", cause)
	if !errors.Is(e, cause) {
		t.Error("Wrap lost the cause for errors.Is")
	}
}

func TestProblemHidesInternalDetails(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		errors.New("pq: password authentication failed for user secret"),
		errs.Wrap(errs.Internal, "scan row", errors.New("secret detail")),
	} {
		p := errs.ProblemFor(err)
		if p.Status != 500 || p.Detail != "internal error" {
			t.Errorf("ProblemFor(%v) = %+v; want a bare 500", err, p)
		}
	}
	// A classified error shows its message but not its cause.
	p := errs.ProblemFor(errs.Wrap(errs.Unavailable, "signer unavailable", errors.New("dial tcp 10.0.0.7:8443")))
	if p.Detail != "signer unavailable" || strings.Contains(p.Detail, "10.0.0.7") {
		t.Errorf("detail %q leaks the cause", p.Detail)
	}
}

// TestRoundTripOverHTTP sends every kind through a real HTTP server and reads
// it back the way a client does.
func TestRoundTripOverHTTP(t *testing.T) {
	t.Parallel()
	for _, kind := range errs.Kinds {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			sent := errs.InvalidFields("bad input", errs.FieldError{Pointer: "/value", Detail: "not a uint256"})
			sent.Kind = kind
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				errs.WriteProblem(w, errs.ProblemFor(sent))
			}))
			defer srv.Close()

			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != kind.HTTPStatus() {
				t.Errorf("status %d, want %d", resp.StatusCode, kind.HTTPStatus())
			}
			if ct := resp.Header.Get("Content-Type"); ct != errs.ProblemContentType {
				t.Errorf("content type %q", ct)
			}
			got := errs.FromResponse(resp)
			if errs.KindOf(got) != kind {
				t.Errorf("kind came back as %v", errs.KindOf(got))
			}
			var e *errs.Error
			if !errors.As(got, &e) {
				t.Fatalf("FromResponse returned %T", got)
			}
			if kind == errs.Invalid {
				want := []errs.FieldError{{Pointer: "/value", Detail: "not a uint256"}}
				if diff := cmp.Diff(want, e.Fields); diff != "" {
					t.Errorf("fields (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestFromBodyOfForeignServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status      int
		contentType string
		body        string
		want        errs.Kind
		wantMsg     string
	}{
		{502, "text/html", "<html>bad gateway</html>", errs.Unavailable, "status 502: <html>bad gateway</html>"},
		{404, "application/json", `{"error":"nope"}`, errs.NotFound, `status 404: {"error":"nope"}`},
		{422, "", "", errs.Invalid, "status 422: Unprocessable Entity"},
		{500, "text/plain", "boom", errs.Internal, "status 500: boom"},
		// A problem document from another implementation: kind from status.
		{409, "application/problem+json", `{"type":"https://example.com/dup","title":"Duplicate","status":409}`, errs.Conflict, "Duplicate"},
	}
	for _, tt := range tests {
		err := errs.FromBody(tt.status, tt.contentType, []byte(tt.body))
		if errs.KindOf(err) != tt.want || err.Error() != tt.wantMsg {
			t.Errorf("FromBody(%d, %q) = %v (%v); want %v (%q)", tt.status, tt.body, err, errs.KindOf(err), tt.want, tt.wantMsg)
		}
	}
}

// TestAnUpstreamRefusalOfThisServiceIsInternal: another service's 401 or
// 403 refuses the calling service's identity, so it reaches the end
// caller as an internal error, its detail hidden; every other kind passes
// on as it came.
func TestAnUpstreamRefusalOfThisServiceIsInternal(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]errs.Kind{401: errs.Internal, 403: errs.Internal, 404: errs.NotFound, 409: errs.Conflict, 503: errs.Unavailable} {
		body := fmt.Sprintf(`{"type":"urn:txfence:problem:%s","title":"t","status":%d,"detail":"peer spiffe://txfence/gateway is not allowed"}`,
			errs.KindFromStatus(status), status)
		err := errs.FromUpstream(status, "application/problem+json", []byte(body))
		if errs.KindOf(err) != want {
			t.Errorf("FromUpstream(%d) is %v, want %v", status, errs.KindOf(err), want)
		}
		if p := errs.ProblemFor(err); want == errs.Internal && strings.Contains(p.Detail, "spiffe") {
			t.Errorf("FromUpstream(%d) shows the caller the upstream's detail: %q", status, p.Detail)
		}
	}
}

func TestFromResponseBoundsTheBody(t *testing.T) {
	t.Parallel()
	resp := &http.Response{StatusCode: 503, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 1<<20)))}
	err := errs.FromResponse(resp)
	if len(err.Error()) > 1024 {
		t.Errorf("error message is %d bytes; want it bounded", len(err.Error()))
	}
}
