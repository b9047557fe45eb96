// Package httpapi is gatewayd's public HTTP API (openapi/gateway.yaml): API
// keys, tenants and scopes, rate limits, request validation against the
// spec, and the handlers, which check what the caller may see and pass
// the work to txmanager (and reads of the books to the ledger) over
// mutual TLS.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/feedhub"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// maxBody bounds a request body: a create carries at most 128 KiB of call
// data as hex and 16 KiB of metadata.
const maxBody = 320 << 10

// Config is what the API is built from.
type Config struct {
	Store     Store
	TxManager *remote.TxManager
	// Ledger serves the ledger routes; nil answers them 503.
	Ledger *remote.Ledger
	// Limits counts each key's requests against Limit; nil serves
	// without limits.
	Limits Limiter
	Limit  ratelimit.Limit
	// ReplayLimit is each key's budget of webhook replays, on top of
	// Limit: a replay queues up to a page of deliveries at once.
	ReplayLimit ratelimit.Limit
	// AuthFailureLimit is the budget of failed authentications per key id
	// and per client address (zero: unbounded); ClientAddressHeader names
	// the header a trusted proxy puts the client's address in (empty: the
	// connection's address).
	AuthFailureLimit    ratelimit.Limit
	ClientAddressHeader string
	// Webhooks serves the webhook subscription endpoints.
	Webhooks Webhooks
	Log      *slog.Logger
	// KeyCacheTTL is how long an authenticated key and its tenant's
	// signers are reused without asking the database: a revoked key or a
	// signer given to another tenant takes effect within it. 0 means 5 s.
	KeyCacheTTL time.Duration
	// Events is the process's one reader of txmanager's feed, which every
	// event stream reads from (feedhub.Hub).
	Events EventFeed
	// StreamWait is how long an event stream waits for an event before it
	// sends a keep-alive; 0 means 15 s.
	StreamWait time.Duration
	// Done ends open event streams (at shutdown, so that they do not hold
	// the server open).
	Done <-chan struct{}
	// StreamsPerKey and StreamsPerTenant cap the event streams one node
	// holds open (0: 5 and 50); StreamRecheck is how often a stream checks
	// that its key still stands, and ends when it does not (0: 5 s).
	StreamsPerKey, StreamsPerTenant int
	StreamRecheck                   time.Duration

	// Adjustments are when an operator's adjustment of the ledger needs
	// a second admin key (adjustments.go).
	Adjustments AdjustmentRules
}

// Store is what the API keeps of its own: tenants with their signers, API
// keys and operators' adjustments of the ledger (postgres.Store).
type Store interface {
	gateway.Tenants
	gateway.Keys
	gateway.Adjustments
}

// EventFeed is txmanager's feed as the event streams read it: Head is
// where a stream that starts now starts after; Next answers up to limit
// events after a seq, waiting up to wait for the first.
type EventFeed interface {
	Head(ctx context.Context) (uint64, error)
	Next(ctx context.Context, after uint64, limit int, wait time.Duration) ([]feedhub.Event, error)
}

// API serves /api/v1.
type API struct {
	cfg       Config
	validator *validator
	keys      *keyCache
	failures  *authFailures // nil: failed authentications are not bounded
	streams   *streamSlots
}

// New builds the API; it loads and compiles the spec it validates
// requests against.
func New(ctx context.Context, cfg Config) (*API, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.KeyCacheTTL == 0 {
		cfg.KeyCacheTTL = 5 * time.Second
	}
	if cfg.StreamWait == 0 {
		cfg.StreamWait = 15 * time.Second
	}
	if cfg.Adjustments.Window == 0 {
		cfg.Adjustments.Window = 24 * time.Hour
	}
	if cfg.Adjustments.TTL == 0 {
		cfg.Adjustments.TTL = 72 * time.Hour
	}
	v, err := newValidator(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.StreamsPerKey == 0 {
		cfg.StreamsPerKey = 5
	}
	if cfg.StreamsPerTenant == 0 {
		cfg.StreamsPerTenant = 50
	}
	if cfg.StreamRecheck == 0 {
		cfg.StreamRecheck = 5 * time.Second
	}
	a := &API{cfg: cfg, validator: v, keys: newKeyCache(cfg.Store, cfg.KeyCacheTTL), streams: newStreamSlots(cfg.StreamsPerKey, cfg.StreamsPerTenant)}
	if cfg.Limits != nil && cfg.AuthFailureLimit.Rate > 0 {
		a.failures = &authFailures{limits: cfg.Limits, limit: cfg.AuthFailureLimit, addressHeader: cfg.ClientAddressHeader,
			now: time.Now, until: map[string]time.Time{}}
	}
	return a, nil
}

// Mount adds the /api/v1 routes to r. Every route authenticates the key,
// counts it against its rate limit, validates the request against the
// spec and checks the scope, in that order: an unauthenticated caller
// learns nothing about what a valid request looks like.
func (a *API) Mount(r chi.Router) {
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(limitBody, a.authenticate, a.rateLimit, a.validator.middleware)

		r.With(need(gateway.ScopeTxWrite)).Post("/tx", httpserver.Handle(a.createTx))
		r.With(need(gateway.ScopeTxRead)).Get("/tx", httpserver.Handle(a.listTx))
		r.With(need(gateway.ScopeTxRead)).Get("/tx/by-request", httpserver.Handle(a.getTxByRequest))
		r.With(need(gateway.ScopeTxRead)).Get("/tx/{tx_id}", httpserver.Handle(a.getTx))
		r.With(need(gateway.ScopeTxRead)).Get("/tx/{tx_id}/events", httpserver.Handle(a.txEvents))
		r.With(need(gateway.ScopeTxWrite)).Post("/tx/{tx_id}/cancel", httpserver.Handle(a.cancelTx))
		r.With(need(gateway.ScopeAdmin)).Post("/tx/{tx_id}/actions", httpserver.Handle(a.requestAction))
		r.With(need(gateway.ScopeTxRead)).Get("/tx/{tx_id}/actions", httpserver.Handle(a.listActions))

		r.With(need(gateway.ScopeApprovals)).Get("/approvals", httpserver.Handle(a.pendingApprovals))
		r.With(need(gateway.ScopeApprovals)).Post("/tx/{tx_id}/approvals", httpserver.Handle(a.approve))
		r.With(need(gateway.ScopeApprovals)).Post("/tx/{tx_id}/reject", httpserver.Handle(a.reject))

		r.With(need(gateway.ScopeTxRead)).Get("/signers", a.listSigners)
		r.With(need(gateway.ScopeAdmin)).Get("/signers/{chain_id}/{address}", httpserver.Handle(a.signerStatus))

		r.With(need(gateway.ScopeTxRead)).Get("/events", httpserver.Handle(a.streamEvents))

		r.Route("/webhooks", a.mountWebhooks)
		r.Route("/ledger", a.mountLedger)

		r.With(need(gateway.ScopeAdmin)).Post("/keys", httpserver.Handle(a.createKey))
		r.With(need(gateway.ScopeAdmin)).Get("/keys", httpserver.Handle(a.listKeys))
		r.With(need(gateway.ScopeAdmin)).Delete("/keys/{key_id}", httpserver.Handle(a.revokeKey))
		r.Get("/me", a.me)
	})
}

func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

// need refuses a key without scope.
func need(scope gateway.Scope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p := caller(r.Context()); !p.key.Has(scope) {
				httpserver.Error(w, r, errs.Errorf(errs.Forbidden, "this key lacks the %s scope", scope))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// configuredOnly guards the routes of an optional part of the gateway (the
// ledger, the webhook engine): on a gateway that runs without it
// (configured false) they answer 503 rather than panic on a nil client.
func configuredOnly(configured bool, unavailable string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if configured {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpserver.Error(w, r, errs.E(errs.Unavailable, unavailable))
		})
	}
}

// writeRaw writes a JSON body already encoded (txmanager's answer, passed
// on unchanged).
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
