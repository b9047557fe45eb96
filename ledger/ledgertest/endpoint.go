package ledgertest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
)

// Endpoint is a chain endpoint in front of a node that a test takes down
// and brings back, or points at another node: what a provider or an
// operator does to the ledger's CHAIN_RPC endpoints.
type Endpoint struct {
	// URL is the endpoint's http URL.
	URL string

	upstream atomic.Pointer[url.URL]
	down     atomic.Bool
	requests atomic.Int64
}

// NewEndpoint serves an endpoint in front of the node at upstream (an http
// URL) for the test's duration.
func NewEndpoint(t testing.TB, upstream string) *Endpoint {
	t.Helper()
	e := &Endpoint{}
	e.PointAt(t, upstream)
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(e.upstream.Load()) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		if e.down.Load() {
			http.Error(w, "the endpoint is down", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

// Down makes every request fail with 503 until Up.
func (e *Endpoint) Down() { e.down.Store(true) }

// Up serves requests again.
func (e *Endpoint) Up() { e.down.Store(false) }

// PointAt sends the requests to the node at upstream from now on.
func (e *Endpoint) PointAt(t testing.TB, upstream string) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	e.upstream.Store(u)
}

// Requests counts the requests the endpoint has had, answered or not.
func (e *Endpoint) Requests() int64 { return e.requests.Load() }
