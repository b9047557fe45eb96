// Package txmanagertest runs txmanagerd's real internal API in-process for
// the tests of the services that call it (the gateway, the ledger): a
// fresh migrated database, the chains and signers given, mutual TLS from
// the test's PKI. No worker or follower runs, so transactions stay where
// the test puts them; Store moves them on when a test needs it.
package txmanagertest

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/httpapi"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
)

// Server is a running txmanager API.
type Server struct {
	// URL is the API's https base URL; clients need a certificate from the
	// same PKI.
	URL string
	// PKI is the test's certificates (servicetest.PKI).
	PKI    string
	Store  *postgres.Store
	Pool   *pgxpool.Pool
	Chains *txmanager.Chains
}

// Options change how the API is served.
type Options struct {
	// Chains is a chains file (JSON); the default configures chain 31337
	// with anvil's first two accounts as signers.
	Chains string
	// Wrap, when set, wraps the API's handler (a test checks exchanges
	// against the spec with it).
	Wrap func(http.Handler) http.Handler
	// SignerURL, when set, is a signerd serving on the same PKI (the
	// signer's own rig, signertest, starts one): the API checks approvals
	// and rejections with it. Without it they are refused as unavailable.
	SignerURL string
}

// DefaultChains configures chain 31337 with anvil's first two accounts.
const DefaultChains = `{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"], "signers": [
	{"address": "` + Signer + `"},
	{"address": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"}]}]}`

// Serve starts the API on a fresh database of the test's PostgreSQL with
// the certificate of identity "txmanager" from pki (servicetest.PKI),
// stopped at the test's end.
func Serve(t testing.TB, pki string, opts Options) *Server {
	t.Helper()
	pool := pgtest.Migrated(t, postgres.Migrations)
	if opts.Chains == "" {
		opts.Chains = DefaultChains
	}
	chains, err := txmanager.ParseChains([]byte(opts.Chains))
	if err != nil {
		t.Fatal(err)
	}
	store := postgres.New(pool)
	srv := httpserver.New(httpserver.Options{Service: "txmanager"})
	// As txmanagerd: a sequencer numbers the events, and a watch of the
	// feed wakes the long polls.
	ctx, stop := context.WithCancel(context.Background())
	var sequencing sync.WaitGroup
	t.Cleanup(func() { stop(); sequencing.Wait() })
	sequencing.Go(func() {
		for ctx.Err() == nil {
			_, _ = store.Sequence(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	api := &httpapi.API{Store: store, Chains: chains, Feed: store.WatchFeed(ctx, slog.New(slog.DiscardHandler))}
	if opts.SignerURL != "" {
		if api.Signer, err = remote.NewSigner(opts.SignerURL, servicetest.Client(t, pki, "txmanager", "signer")); err != nil {
			t.Fatal(err)
		}
	}
	api.Mount(srv.Router)
	var h http.Handler = srv
	if opts.Wrap != nil {
		h = opts.Wrap(h)
	}
	ts := servicetest.ServeMTLS(t, pki, "txmanager", h)
	return &Server{URL: ts.URL, PKI: pki, Store: store, Pool: pool, Chains: chains}
}
