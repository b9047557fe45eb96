package servicetest

import (
	"net/http"
	"net/http/httptest"
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
