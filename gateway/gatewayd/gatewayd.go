// Package gatewayd wires the gateway together: configuration, its
// database, Redis for rate limits, the public listener that clients and
// browsers use (plain HTTP or TLS), the internal mTLS listener, and the
// operational endpoints. cmd/gatewayd calls Run; tests call it too.
package gatewayd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/txfence/txfence/gateway/console"
	"github.com/txfence/txfence/gateway/feedhub"
	"github.com/txfence/txfence/gateway/httpapi"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/devswitch"
	"github.com/txfence/txfence/shared/httpclient"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/shared/prommetrics"
	"github.com/txfence/txfence/shared/tracing"
)

// Config is gatewayd's configuration, from TXFENCE_GATEWAY_* variables.
// Its database holds tenants, API keys, webhook subscriptions and
// deliveries.
type Config struct {
	daemon.Base
	daemon.Database
	// RedisURL is where per-key rate limits are counted.
	RedisURL string         `env:"REDIS_URL" default:"redis://127.0.0.1:6379/0"`
	Public   PublicListener `envprefix:"PUBLIC_"`
	// TxManagerURL is txmanagerd's internal listener (mutual TLS).
	TxManagerURL string `env:"TXMANAGER_URL" required:"true"`
	// LedgerURL is ledgerd's internal listener (mutual TLS), which the
	// ledger routes read; without it they answer 503.
	LedgerURL string `env:"LEDGER_URL"`
	// KeyCacheTTL is how long an authenticated key is reused without a
	// database lookup: a revoked key stops working on other nodes within it.
	KeyCacheTTL time.Duration `env:"KEY_CACHE_TTL" default:"5s"`
	// ClientAddressHeader names the header a trusted proxy in front of the
	// public listener puts the client's address in (its last value
	// counts), for the budget of failed authentications per address.
	// Empty: the connection's address.
	ClientAddressHeader string `env:"CLIENT_ADDRESS_HEADER"`
	// StreamsPerKey and StreamsPerTenant cap the event streams one node
	// holds open; StreamRecheck is how often a stream checks that its key
	// still stands (it ends when the key is revoked or expires).
	StreamsPerKey    int           `env:"STREAMS_PER_KEY" default:"5"`
	StreamsPerTenant int           `env:"STREAMS_PER_TENANT" default:"50"`
	StreamRecheck    time.Duration `env:"STREAM_RECHECK" default:"5s"`
	// StreamWindow is how many recent feed events the process keeps in
	// memory for its streams; a stream further behind reads txmanager.
	StreamWindow int       `env:"STREAM_WINDOW" default:"8192"`
	RateLimit    RateLimit `envprefix:"RATE_LIMIT_"`
	Webhooks     Webhooks  `envprefix:"WEBHOOK_"`
	// Adjustments are when an operator's adjustment of the ledger needs a
	// second admin key.
	Adjustments Adjustments `envprefix:"ADJUSTMENT_"`
}

// Adjustments configures the operator path of ledger adjustments.
type Adjustments struct {
	// ApprovalAbove is "CHAIN:ASSET=AMOUNT,...": an adjustment whose
	// magnitude, with those of the wallet's adjustments in the asset
	// booked without a second key within ApprovalWindow, is above its
	// chain's and asset's amount (base units) waits for a second admin
	// key. A chain and asset not listed has no threshold: every
	// adjustment in it waits.
	ApprovalAbove  httpapi.AdjustmentThresholds `env:"APPROVAL_ABOVE"`
	ApprovalWindow time.Duration                `env:"APPROVAL_WINDOW" default:"24h"`
	// ApprovalTTL is how long a pending adjustment may be approved.
	ApprovalTTL time.Duration `env:"APPROVAL_TTL" default:"72h"`
}

// Validate requires a window and a time to live.
func (a Adjustments) Validate() error {
	if a.ApprovalWindow <= 0 || a.ApprovalTTL <= 0 {
		return errors.New("ADJUSTMENT_APPROVAL_WINDOW and ADJUSTMENT_APPROVAL_TTL must be positive")
	}
	return nil
}

// Webhooks configures webhook delivery.
type Webhooks struct {
	// Workers is how many deliveries this node attempts at once.
	Workers int `env:"WORKERS" default:"8"`
	// Timeout bounds one attempt, the receiver's answer included.
	Timeout time.Duration `env:"TIMEOUT" default:"10s"`
	// BackoffBase and BackoffMax shape retries (exponential, full jitter).
	BackoffBase time.Duration `env:"BACKOFF_BASE" default:"5s"`
	BackoffMax  time.Duration `env:"BACKOFF_MAX" default:"1h"`
	// DeadAfter is the dead letter horizon, from a delivery's first attempt.
	DeadAfter time.Duration `env:"DEAD_AFTER" default:"24h"`
	// AllowInsecureURLs accepts http URLs and loopback or private hosts,
	// in builds with the development switches only (package devswitch).
	AllowInsecureURLs bool `env:"ALLOW_INSECURE_URLS" default:"false" devswitch:"true"`
}

// RateLimit is every key's request budget.
type RateLimit struct {
	// Rate requests per Period, with bursts up to Burst.
	Rate   int           `env:"RATE" default:"1000"`
	Burst  int           `env:"BURST" default:"2000"`
	Period time.Duration `env:"PERIOD" default:"1s"`
	// WhenRedisDown: local (each node limits on its own, the default),
	// allow (no limits) or deny (503) while Redis cannot be reached; an
	// alert is logged either way.
	WhenRedisDown ratelimit.DownMode `env:"WHEN_REDIS_DOWN" default:"local"`
	// ReplayRate webhook replays per ReplayPeriod per key, with bursts up
	// to ReplayBurst, on top of the request budget: each replay queues up
	// to a page (1,000) of deliveries.
	ReplayRate   int           `env:"REPLAY_RATE" default:"30"`
	ReplayBurst  int           `env:"REPLAY_BURST" default:"10"`
	ReplayPeriod time.Duration `env:"REPLAY_PERIOD" default:"1m"`
	// AuthFailureRate failed authentications per AuthFailurePeriod per
	// key id and per client address, bursts up to AuthFailureBurst; past
	// it, that key id or address is answered 429 before any lookup.
	AuthFailureRate   int           `env:"AUTH_FAILURE_RATE" default:"20"`
	AuthFailureBurst  int           `env:"AUTH_FAILURE_BURST" default:"20"`
	AuthFailurePeriod time.Duration `env:"AUTH_FAILURE_PERIOD" default:"1m"`
}

// Validate requires a usable budget.
func (r RateLimit) Validate() error {
	if r.Rate <= 0 || r.Burst <= 0 || r.Period <= 0 {
		return errors.New("RATE_LIMIT_RATE, RATE_LIMIT_BURST and RATE_LIMIT_PERIOD must be positive")
	}
	if r.ReplayRate <= 0 || r.ReplayBurst <= 0 || r.ReplayPeriod <= 0 {
		return errors.New("RATE_LIMIT_REPLAY_RATE, RATE_LIMIT_REPLAY_BURST and RATE_LIMIT_REPLAY_PERIOD must be positive")
	}
	if r.AuthFailureRate <= 0 || r.AuthFailureBurst <= 0 || r.AuthFailurePeriod <= 0 {
		return errors.New("RATE_LIMIT_AUTH_FAILURE_RATE, RATE_LIMIT_AUTH_FAILURE_BURST and RATE_LIMIT_AUTH_FAILURE_PERIOD must be positive")
	}
	return nil
}

// Limit is the budget as the limiter takes it.
func (r RateLimit) Limit() ratelimit.Limit {
	return ratelimit.Limit{Rate: r.Rate, Burst: r.Burst, Period: r.Period}
}

// PublicListener is the listener clients use.
type PublicListener struct {
	Addr string `env:"ADDR" default:"127.0.0.1:8080"`
	// TLSCertFile and TLSKeyFile switch the public listener to HTTPS; both
	// or neither. Without them it serves plain HTTP, for a deployment that
	// terminates TLS at a load balancer in front of it.
	TLSCertFile string `env:"TLS_CERT_FILE"`
	TLSKeyFile  string `env:"TLS_KEY_FILE"`
}

// Validate requires the certificate and key together.
func (p PublicListener) Validate() error {
	if (p.TLSCertFile == "") != (p.TLSKeyFile == "") {
		return errors.New("PUBLIC_TLS_CERT_FILE and PUBLIC_TLS_KEY_FILE must be set together")
	}
	return nil
}

// Spec names gatewayd. Its identity is what it presents to the services it
// calls.
var Spec = daemon.Spec{Binary: "gatewayd", Identity: "gateway", EnvPrefix: "TXFENCE_GATEWAY_", Migrations: postgres.Migrations, TraceContext: tracing.Middleware}

// Run runs gatewayd: `serve` (the default), `migrate`, or `bootstrap`
// (see Bootstrap).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "bootstrap" {
		return Bootstrap(ctx, args[1:], getenv, stdout)
	}
	var cfg Config
	exported := prommetrics.New(Spec.Identity)
	svc, err := daemon.Setup(ctx, Spec, exported, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()

	redisOpts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("TXFENCE_GATEWAY_REDIS_URL: %w", err)
	}
	// The limiter bounds each Redis call by its context, which go-redis
	// honours only when told to.
	redisOpts.ContextTimeoutEnabled = true
	// Redis being down does not stop the gateway from starting: rate
	// limits fall back as configured and readiness reports it.
	rdb := redis.NewClient(redisOpts)
	defer rdb.Close()
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "redis", Fn: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})
	limits, err := ratelimit.New(rdb, ratelimit.Options{WhenRedisDown: cfg.RateLimit.WhenRedisDown, Logger: svc.Log, Registerer: exported.Registry})
	if err != nil {
		return err
	}

	txm, err := remote.NewTxManager(cfg.TxManagerURL, httpclient.New(svc.TLS.ClientConfig("txmanager"), httpclient.Options{Timeout: 60 * time.Second}))
	if err != nil {
		return err
	}
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "txmanager", Fn: func(ctx context.Context) error {
		_, err := txm.Feed(ctx, 0, 1, 0)
		return err
	}})

	// The ledger is optional and left out of readiness: the gateway
	// without it still sends and follows transactions, and only the
	// ledger routes answer 503.
	var ledger *remote.Ledger
	if cfg.LedgerURL != "" {
		if ledger, err = remote.NewLedger(cfg.LedgerURL, httpclient.New(svc.TLS.ClientConfig("ledger"), httpclient.Options{})); err != nil {
			return err
		}
	}

	var publicTLS *tls.Config
	if cfg.Public.TLSCertFile != "" {
		if publicTLS, err = mtls.PublicServerConfig(cfg.Public.TLSCertFile, cfg.Public.TLSKeyFile, mtls.Options{Logger: svc.Log}); err != nil {
			return fmt.Errorf("public TLS: %w", err)
		}
	}
	store := postgres.New(svc.DB)
	dispatcher, err := webhook.New(store, txm, webhook.Options{Workers: cfg.Webhooks.Workers, Timeout: cfg.Webhooks.Timeout,
		BackoffBase: cfg.Webhooks.BackoffBase, BackoffMax: cfg.Webhooks.BackoffMax, DeadAfter: cfg.Webhooks.DeadAfter,
		AllowInsecureURLs: devswitch.Enabled && cfg.Webhooks.AllowInsecureURLs, Logger: svc.Log, Registerer: exported.Registry})
	if err != nil {
		return err
	}
	events := feedhub.New(txm, feedhub.Options{Window: cfg.StreamWindow, Logger: svc.Log})
	public := svc.HTTP.PublicRouter()
	adjustments := httpapi.AdjustmentRules{Thresholds: cfg.Adjustments.ApprovalAbove, Window: cfg.Adjustments.ApprovalWindow, TTL: cfg.Adjustments.ApprovalTTL}
	a, err := httpapi.New(ctx, httpapi.Config{Store: store, TxManager: txm, Ledger: ledger, Limits: limits, Limit: cfg.RateLimit.Limit(),
		ReplayLimit:         ratelimit.Limit{Rate: cfg.RateLimit.ReplayRate, Burst: cfg.RateLimit.ReplayBurst, Period: cfg.RateLimit.ReplayPeriod},
		AuthFailureLimit:    ratelimit.Limit{Rate: cfg.RateLimit.AuthFailureRate, Burst: cfg.RateLimit.AuthFailureBurst, Period: cfg.RateLimit.AuthFailurePeriod},
		ClientAddressHeader: cfg.ClientAddressHeader, Webhooks: dispatcher, Adjustments: adjustments,
		Log: svc.Log, KeyCacheTTL: cfg.KeyCacheTTL, Done: ctx.Done(), Events: events,
		StreamsPerKey: cfg.StreamsPerKey, StreamsPerTenant: cfg.StreamsPerTenant, StreamRecheck: cfg.StreamRecheck})
	if err != nil {
		return err
	}
	a.Mount(public)
	console.Mount(public) // the operator console, /console/

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := dispatcher.Run(ctx); ctx.Err() == nil {
			return fmt.Errorf("webhook dispatcher stopped: %w", err)
		}
		return nil // shutting down
	})
	g.Go(func() error {
		if err := events.Run(ctx); ctx.Err() == nil {
			return fmt.Errorf("event feed reader stopped: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		return svc.Serve(ctx, httpserver.Listener{Name: "public", Addr: cfg.Public.Addr, TLS: publicTLS, Handler: public})
	})
	return g.Wait()
}
