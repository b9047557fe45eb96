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

	"github.com/redis/go-redis/v9"

	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
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
var Spec = daemon.Spec{Binary: "gatewayd", Identity: "gateway", EnvPrefix: "TXFENCE_GATEWAY_", Migrations: postgres.Migrations}

// Run runs gatewayd: `serve` (the default) or `migrate`.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	svc, err := daemon.Setup(ctx, Spec, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()

	redisOpts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("TXFENCE_GATEWAY_REDIS_URL: %w", err)
	}
	// Redis being down does not stop the gateway from starting: rate
	// limits fall back to per-process counting (issue 7) and readiness
	// reports it.
	rdb := redis.NewClient(redisOpts)
	defer rdb.Close()
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "redis", Fn: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }})

	var publicTLS *tls.Config
	if cfg.Public.TLSCertFile != "" {
		if publicTLS, err = mtls.PublicServerConfig(cfg.Public.TLSCertFile, cfg.Public.TLSKeyFile, mtls.Options{Logger: svc.Log}); err != nil {
			return fmt.Errorf("public TLS: %w", err)
		}
	}
	public := svc.HTTP.PublicRouter()
	return svc.Serve(ctx, httpserver.Listener{Name: "public", Addr: cfg.Public.Addr, TLS: publicTLS, Handler: public})
}
