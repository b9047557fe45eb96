// Package gatewaystack runs the gateway's public API in-process for tests:
// txmanager's real internal API on its own database behind it (and, when
// asked, the ledger's real read API on its own), the gateway's own
// database, and two tenants with a signer and keys each. Every exchange
// is checked against openapi/gateway.yaml, and the ledger's against
// openapi/ledger.yaml. Given chains (Options.Chains), it runs the whole
// stack instead: real txmanagerd, mevrouterd, ledgerd and signerd on real
// anvils, one of each service for every chain.
package gatewaystack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/feedhub"
	"github.com/txfence/txfence/gateway/httpapi"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

// The two signers of txmanagertest's default chains file: tenant "acme"
// owns SignerA, tenant "globex" SignerB. Bob receives test transfers.
const (
	SignerA = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	SignerB = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
	Bob     = "0x0000000000000000000000000000000000000b0b"
)

// Gateway is the gateway's API in front of txmanager's real API, each on
// its own fresh database.
type Gateway struct {
	URL   string
	Store *postgres.Store
	TxM   *txmanagertest.Server
	// PKI holds the test's certificates (servicetest.PKI).
	PKI string
	// Ledger is the ledger behind the gateway, with Options.Ledger; nil
	// otherwise, and the ledger routes answer 503 (unless Services).
	Ledger *Ledger
	// Services are the real services behind the gateway with
	// Options.Chains (TxM is nil then); nil otherwise.
	Services *Services
	// Keys: acme's admin (every scope) and read-only (tx:read) keys,
	// globex's admin.
	Acme, AcmeRead, Globex   string
	AcmeTenant, GlobexTenant gateway.Tenant
}

// Options change what Start serves.
type Options struct {
	// SignerPolicy, when set, is a signerd policy file: a real signerd
	// (signertest) serves it, and txmanager checks approvals and
	// rejections with it; without it txmanager refuses them as
	// unavailable.
	SignerPolicy string
	// Limits, Limit and ReplayLimit set rate limits (none by default).
	Limits      httpapi.Limiter
	Limit       ratelimit.Limit
	ReplayLimit ratelimit.Limit
	// AuthFailureLimit bounds failed authentications per key id and per
	// address, the address read from ClientAddressHeader when set.
	AuthFailureLimit    ratelimit.Limit
	ClientAddressHeader string
	// StreamsPerKey, StreamsPerTenant and StreamRecheck set the event
	// streams' caps and how often a stream checks its key (the API's
	// defaults when 0).
	StreamsPerKey, StreamsPerTenant int
	StreamRecheck                   time.Duration
	// Webhooks, when set, runs a webhook dispatcher with these options
	// (AllowInsecureURLs is forced on: receivers are on loopback).
	Webhooks *webhook.Options
	// Ledger serves the ledger's read API, on a fresh ledger store, for
	// the gateway's ledger routes.
	Ledger bool
	// Adjustments set when an operator's adjustment of the ledger needs a
	// second admin key (the API's defaults: every one).
	Adjustments httpapi.AdjustmentRules
	// Mount adds more routes beside the API (the operator console).
	Mount func(chi.Router)
	// Unchecked leaves out the check of every exchange against the spec,
	// for benchmarks: it costs more than the gateway itself.
	Unchecked bool
	// Chains, when set, puts the real services behind the gateway,
	// working on these chains (see Services), instead of txmanager's API
	// alone; Ledger and SignerPolicy are then left aside. Tenants get
	// their chains' signers with AssignSigner.
	Chains []Chain
}

// Start serves the API for the test's duration.
func Start(t testing.TB, opts Options) *Gateway {
	t.Helper()
	ctx := context.Background()
	pki := servicetest.PKI(t)
	var (
		txm      *txmanagertest.Server
		services *Services
		txmURL   string
	)
	if len(opts.Chains) > 0 {
		services = startServices(t, pki, opts.Chains)
		txmURL = services.TxManager.URL("internal")
	} else {
		var signerURL string
		if opts.SignerPolicy != "" {
			signerURL = signertest.StartServer(t, signertest.ServerOptions{PKI: pki, PolicyFile: opts.SignerPolicy}).URL
		}
		txm = txmanagertest.Serve(t, pki, txmanagertest.Options{SignerURL: signerURL})
		txmURL = txm.URL
	}
	pool := pgtest.Migrated(t, postgres.Migrations)
	store := postgres.New(pool)
	client, err := remote.NewTxManager(txmURL, servicetest.Client(t, pki, "gateway", "txmanager"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	var hooks httpapi.Webhooks
	if opts.Webhooks != nil {
		wo := *opts.Webhooks
		wo.AllowInsecureURLs = true
		d, err := webhook.New(store, client, wo)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = d.Run(runCtx) }()
		t.Cleanup(func() { stop(); <-stopped })
		hooks = d
	}
	var books *Ledger
	var ledgerClient *remote.Ledger
	switch {
	case services != nil:
		if ledgerClient, err = remote.NewLedger(services.Ledger.URL("internal"), servicetest.Client(t, pki, "gateway", "ledger")); err != nil {
			t.Fatal(err)
		}
	case opts.Ledger:
		books = ServeLedger(t, pki)
		if ledgerClient, err = remote.NewLedger(books.URL, servicetest.Client(t, pki, "gateway", "ledger")); err != nil {
			t.Fatal(err)
		}
	}
	events := feedhub.New(client, feedhub.Options{Wait: time.Second, RetryAfter: 100 * time.Millisecond})
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = events.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	a, err := httpapi.New(ctx, httpapi.Config{Events: events, Store: store, TxManager: client, Ledger: ledgerClient, Limits: opts.Limits, Limit: opts.Limit, ReplayLimit: opts.ReplayLimit,
		AuthFailureLimit: opts.AuthFailureLimit, ClientAddressHeader: opts.ClientAddressHeader, Webhooks: hooks, Adjustments: opts.Adjustments,
		Done: done, KeyCacheTTL: time.Minute, StreamWait: time.Second, StreamsPerKey: opts.StreamsPerKey, StreamsPerTenant: opts.StreamsPerTenant, StreamRecheck: opts.StreamRecheck})
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserver.New(httpserver.Options{Service: "gateway"})
	public := srv.PublicRouter()
	a.Mount(public)
	var h http.Handler = public
	if !opts.Unchecked {
		h = openapitest.Conform(t, openapi.Gateway, public)
	}
	if opts.Mount != nil {
		// Routes beside the API are not the spec's: they skip the check.
		extra := chi.NewRouter()
		opts.Mount(extra)
		checked := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
				checked.ServeHTTP(w, r)
				return
			}
			extra.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)

	g := &Gateway{URL: ts.URL, Store: store, TxM: txm, PKI: pki, Ledger: books, Services: services}
	g.AcmeTenant, g.Acme = g.Tenant(t, "acme", SignerA)
	g.GlobexTenant, g.Globex = g.Tenant(t, "globex", SignerB)
	g.AcmeRead = g.Key(t, g.AcmeTenant, "reader", []gateway.Scope{gateway.ScopeTxRead}, nil)
	return g
}

// Tenant makes a tenant that owns signer on chain 31337, and its admin
// key.
func (r *Gateway) Tenant(t testing.TB, name, signer string) (gateway.Tenant, string) {
	t.Helper()
	tenant, err := r.Store.CreateTenant(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	r.AssignSigner(t, tenant, 31337, signer)
	return tenant, r.Key(t, tenant, "admin", gateway.Scopes, nil)
}

// AssignSigner gives tenant signer on chainID: its keys without a list
// of signers may use it from then on.
func (r *Gateway) AssignSigner(t testing.TB, tenant gateway.Tenant, chainID uint64, signer string) {
	t.Helper()
	if err := r.Store.AssignSigner(context.Background(), tenant.ID, gateway.SignerRef{ChainID: chainID, Address: common.HexToAddress(signer)}); err != nil {
		t.Fatal(err)
	}
}

// Key makes a key of tenant and returns its token.
func (r *Gateway) Key(t testing.TB, tenant gateway.Tenant, name string, scopes []gateway.Scope, signers []gateway.SignerRef) string {
	t.Helper()
	_, token, err := r.Store.CreateKey(context.Background(), gateway.NewKey{Tenant: tenant.ID, Name: name, Scopes: scopes, Signers: signers})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Do sends a request with key (none when empty) and headers given as
// name, value pairs; it returns the response with its body read.
func (r *Gateway) Do(t testing.TB, key, method, path, body string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	if key != "" {
		headers = append([]string{"Authorization", "Bearer " + key}, headers...)
	}
	return servicetest.Do(t, http.DefaultClient, method, r.URL+path, body, headers...)
}

// Create sends a transfer from signer under the idempotency key and
// requires a 201.
func (r *Gateway) Create(t testing.TB, key, signer, idempotencyKey string) Tx {
	t.Helper()
	resp, b := r.Do(t, key, "POST", "/api/v1/tx", Transfer(signer, "1000"), "Idempotency-Key", idempotencyKey)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	return servicetest.Decode[Tx](t, b)
}

// Transfer is a create body: value wei from signer to Bob, with metadata
// holding a number too big for a float.
func Transfer(signer, value string) string {
	return `{"chain_id": 31337, "from": "` + signer + `", "to": "` + Bob + `", "value": "` + value + `", "route": "public", "metadata": {"order": 123456789012345678901234567890}}`
}

// Tx is what tests read of a transaction.
type Tx struct {
	TxID      string `json:"tx_id"`
	From      string `json:"from"`
	State     string `json:"state"`
	RequestID string `json:"request_id"`
	Reason    string `json:"reason"`
}

// Problem is what tests read of a problem document.
type Problem struct {
	Type   string
	Status int
	Detail string
	Errors []struct{ Pointer, Detail string }
}
