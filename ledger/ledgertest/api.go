package ledgertest

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger/httpapi"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/testinfra/servicetest"
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
	ts := servicetest.ServeMTLS(t, pki, "ledger", openapitest.Conform(t, openapi.Ledger, srv))
	return &API{URL: ts.URL, Store: store, Pool: pool, Server: ts}
}

// WalkPages reads a list from path (a query with at least one parameter)
// page by page, passing each page's next cursor back with the same
// filters, and returns the ids of every item in order. page reads one
// page: its items' ids and its next cursor.
func WalkPages(t testing.TB, path string, page func(path string) (ids []string, next *string)) []string {
	t.Helper()
	base, _, _ := strings.Cut(path, "&cursor=")
	var out []string
	for path != "" {
		ids, next := page(path)
		out = append(out, ids...)
		path = ""
		if next != nil {
			path = base + "&cursor=" + url.QueryEscape(*next)
		}
	}
	return out
}
