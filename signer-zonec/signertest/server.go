package signertest

import (
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/textmetrics"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/httpapi"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// ServerOptions shape a Server.
type ServerOptions struct {
	// PKI is a directory of development certificates (servicetest.PKI)
	// holding the "signer" identity; its CA is what clients trust.
	PKI string
	// PolicyFile defaults to the development policy (anvil's accounts on
	// chain 31337).
	PolicyFile string
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Wrap, when set, wraps the server's handler (a spec check, say).
	Wrap func(http.Handler) http.Handler
}

// Server is signerd's API in this process over mutual TLS, on a real
// store, holding DevKeys: for tests of signerd's callers.
type Server struct {
	URL string
	// Pool connects as the serving role, which the store uses: it reads
	// everything and appends, but changes nothing.
	Pool *pgxpool.Pool
	// Database is the store's database, with its owner.
	Database *Database
}

// StartServer starts a Server, stopped at the test's cleanup. Its store
// is set up as signerd migrate sets one up, and used as signerd serve
// uses it: as the serving role.
func StartServer(t testing.TB, opts ServerOptions) *Server {
	t.Helper()
	db := MigratedDatabase(t)
	pool := db.ServePool(t)
	if opts.PolicyFile == "" {
		opts.PolicyFile = DevelopmentPolicy()
	}
	pol, err := policy.Load(opts.PolicyFile)
	if err != nil {
		t.Fatal(err)
	}
	svc := &signer.Service{Keys: NewMemoryKeys(t, DevKeys...), Policy: pol, Store: postgres.New(pool)}
	exported := textmetrics.NewRegistry()
	srv := httpserver.New(httpserver.Options{Service: "signer", Logger: opts.Logger, Metrics: httpserver.TextMetrics(exported, "signer")})
	httpapi.New(svc, exported).Mount(srv.Router)
	var h http.Handler = srv
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	ts := servicetest.ServeMTLS(t, opts.PKI, "signer", h)
	return &Server{URL: ts.URL, Pool: pool, Database: db}
}

// DevelopmentPolicy is the path of the development policy file.
func DevelopmentPolicy() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "testdata", "policy", "development.json")
}
