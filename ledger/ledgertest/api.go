package ledgertest

import (
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger/httpapi"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/devcert"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
)

// API is the ledger's API as ledgerd serves it (mutual TLS with the
// certificate of identity "ledger", the gateway-only allowlist) on a fresh
// store whose books are checked for conservation when the test ends;
// every exchange is checked against openapi/ledger.yaml.
type API struct {
	URL    string
	Store  *postgres.Store
	Pool   *pgxpool.Pool
	Server *httptest.Server
}

// ServeAPI serves the API newAPI makes on the store, with the certificates
// of pki (servicetest.PKI), for the test's duration.
func ServeAPI(t testing.TB, pki string, newAPI func(*postgres.Store) *httpapi.API) *API {
	t.Helper()
	store, pool := Store(t)
	srv := httpserver.New(httpserver.Options{Service: "ledger"})
	newAPI(store).Mount(srv.Router)
	src, err := mtls.Load(devcert.Files(pki, "ledger"), mtls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(openapitest.Conform(t, openapi.Ledger, srv))
	ts.TLS = src.ServerConfig()
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return &API{URL: ts.URL, Store: store, Pool: pool, Server: ts}
}
