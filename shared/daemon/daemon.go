// Package daemon holds what every txfence service's Run does the same way:
// the configuration all services share, the logger, the subcommand, the
// database with its migrate command, and the listeners. Each service's Run
// still wires its own pieces by hand, in its own package; this package only
// keeps the five of them from drifting apart.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/shared/pg"
)

// Base is the configuration every service shares. Services embed it in
// their own config struct, so its variables take the service's prefix
// (TXFENCE_SIGNER_LISTEN_ADDR, TXFENCE_LEDGER_LOG_LEVEL, …).
type Base struct {
	// ListenAddr is the internal listener: mutual TLS, for other services.
	ListenAddr string `env:"LISTEN_ADDR" default:"127.0.0.1:0"`
	// OpsAddr, when set, serves /healthz, /readyz and /metrics over plain
	// HTTP, for probes and scrapers that hold no client certificate.
	OpsAddr         string        `env:"OPS_ADDR"`
	TLS             TLSFiles      `envprefix:"TLS_"`
	LogLevel        slog.Level    `env:"LOG_LEVEL" default:"info"`
	LogFormat       string        `env:"LOG_FORMAT" default:"json"`
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" default:"15s"`
}

// TLSFiles are the service's mutual TLS files.
type TLSFiles struct {
	CAFile   string `env:"CA_FILE" required:"true"`
	CertFile string `env:"CERT_FILE" required:"true"`
	KeyFile  string `env:"KEY_FILE" required:"true"`
}

// Files converts to mtls.Files.
func (f TLSFiles) Files() mtls.Files {
	return mtls.Files{CA: f.CAFile, Cert: f.CertFile, Key: f.KeyFile}
}

// Validate checks the shared settings.
func (b Base) Validate() error {
	var problems []error
	if b.LogFormat != "json" && b.LogFormat != "text" {
		problems = append(problems, fmt.Errorf("LOG_FORMAT=%q: must be json or text", b.LogFormat))
	}
	if b.ShutdownTimeout <= 0 {
		problems = append(problems, errors.New("SHUTDOWN_TIMEOUT must be positive"))
	}
	return errors.Join(problems...)
}

// Logger makes the service's logger: JSON (or text) to w at the configured
// level, every line tagged with the service name.
func (b Base) Logger(w io.Writer, service string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: b.LogLevel}
	var h slog.Handler = slog.NewJSONHandler(w, opts)
	if b.LogFormat == "text" {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(h).With("service", service)
}

// Database is the setting of a service that owns a database. Services
// with one embed it beside Base; Setup then opens the pool and offers the
// migrate subcommand.
type Database struct {
	// DatabaseURL is the service's own database; no other service reads it.
	DatabaseURL string `env:"DATABASE_URL" required:"true"`
	// IdleInTransactionTimeout ends a session that sits in an open
	// transaction this long (the server rolls it back), so a paused or
	// partitioned process never holds row locks for ever: txmanager's
	// takeover of a signer waits for the old owner's fenced transaction.
	IdleInTransactionTimeout time.Duration `env:"DB_IDLE_IN_TX_TIMEOUT" default:"5s"`
}

// The unexported accessors are promoted to every config struct that embeds
// Base or Database, which is how Setup finds them.
func (b *Base) base() *Base             { return b }
func (d *Database) database() *Database { return d }

type baseConfig interface{ base() *Base }
type databaseConfig interface{ database() *Database }

// Subcommands. Every service serves; one with a database also migrates.
const (
	Serve   = "serve"
	Migrate = "migrate"
)

// Spec names a service for Setup.
type Spec struct {
	Binary    string // "signerd": logs and the pool's application name
	Identity  string // "signer": its certificate identity and metrics label
	EnvPrefix string // "TXFENCE_SIGNER_"
	// Migrations is the service's schema; required when its config
	// embeds Database.
	Migrations *pg.Migrations
	// TraceContext makes the middleware that takes a caller's trace
	// context on to the calls the service makes: tracing.Middleware for
	// every service that calls another. Nil (signerd, which calls none):
	// the caller's trace id is only logged (httpserver.Options).
	TraceContext func(service string) func(http.Handler) http.Handler
}

// Service is a service's common wiring: logger, database, mTLS source and
// HTTP server. Run adds its own routes, checks and workers, then Serve.
type Service struct {
	Log  *slog.Logger
	DB   *pgxpool.Pool // nil when the service has no database
	TLS  *mtls.Source
	HTTP *httpserver.Server
	base *Base
}

// Setup does what every service's Run starts with: it reads the
// subcommand from args, loads cfg (a pointer to a struct embedding Base,
// and Database when the service has one) from the environment, makes the
// logger and logs the configuration with secrets masked. For migrate, it
// migrates and returns a nil Service: the command is done. For serve, it
// opens the database, loads the certificates and builds the HTTP server
// with the database's readiness checks, recording requests in metrics
// (prommetrics.New; signerd, which links no metrics library, passes
// httpserver.TextMetrics). The caller closes the Service.
func Setup(ctx context.Context, spec Spec, metrics httpserver.Metrics, args []string, getenv func(string) string, stdout io.Writer, cfg any) (*Service, error) {
	bc, ok := cfg.(baseConfig)
	if !ok {
		return nil, fmt.Errorf("%s: config %T does not embed daemon.Base", spec.Binary, cfg)
	}
	dbc, hasDB := cfg.(databaseConfig)
	commands := []string{Serve}
	if hasDB {
		commands = append(commands, Migrate)
	}
	cmd, err := subcommand(args, commands...)
	if err != nil {
		return nil, err
	}
	if err := config.Load(spec.EnvPrefix, getenv, cfg); err != nil {
		return nil, fmt.Errorf("%s configuration:\n%w", spec.Binary, err)
	}
	base := bc.base()
	log := base.Logger(stdout, spec.Binary)
	attrs := append(config.Dump(spec.EnvPrefix, cfg), slog.Int("gc_percent", TuneGC(getenv)))
	log.LogAttrs(ctx, slog.LevelInfo, "configuration", attrs...)

	svc := &Service{Log: log, base: base}
	var ready []httpserver.Check
	if hasDB {
		if svc.DB, err = pg.Open(ctx, dbc.database().DatabaseURL, pg.PoolOptions{Application: spec.Binary, IdleInTransactionTimeout: dbc.database().IdleInTransactionTimeout}); err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		if cmd == Migrate {
			defer svc.Close()
			return nil, migrate(ctx, log, svc.DB, spec.Migrations)
		}
		ready = databaseChecks(svc.DB, spec.Migrations)
	}
	if svc.TLS, err = mtls.Load(base.TLS.Files(), mtls.Options{Logger: log}); err != nil {
		svc.Close()
		return nil, err
	}
	opts := httpserver.Options{Service: spec.Identity, Logger: log, Ready: ready, Metrics: metrics}
	if spec.TraceContext != nil {
		opts.TraceContext = spec.TraceContext(spec.Identity)
	}
	svc.HTTP = httpserver.New(opts)
	return svc, nil
}

// Serve serves the internal mTLS listener, the ops listener when
// configured, and any extra listeners (the gateway's public one) until ctx
// ends, then shuts down within the configured bound.
func (s *Service) Serve(ctx context.Context, extra ...httpserver.Listener) error {
	listeners := []httpserver.Listener{{Name: "internal", Addr: s.base.ListenAddr, TLS: s.TLS.ServerConfig(), Handler: s.HTTP}}
	if s.base.OpsAddr != "" {
		listeners = append(listeners, httpserver.Listener{Name: "ops", Addr: s.base.OpsAddr, Handler: s.HTTP.Ops()})
	}
	return httpserver.Serve(ctx, s.Log, s.base.ShutdownTimeout, append(listeners, extra...)...)
}

// Close releases the database pool.
func (s *Service) Close() {
	if s.DB != nil {
		s.DB.Close()
	}
}

// subcommand returns the subcommand named by args (the arguments after the
// program name), Serve when there is none, and an error naming the choices
// for anything else.
func subcommand(args []string, known ...string) (string, error) {
	if len(args) == 0 {
		return Serve, nil
	}
	if len(args) > 1 {
		return "", fmt.Errorf("unexpected arguments after %q: %s", args[0], strings.Join(args[1:], " "))
	}
	if slices.Contains(known, args[0]) {
		return args[0], nil
	}
	return "", fmt.Errorf("unknown command %q; commands: %s (settings come from the environment)", args[0], strings.Join(known, ", "))
}

// migrate is the migrate subcommand. Migrating is an explicit step, never
// a side effect of serving; a serving service only checks the version.
func migrate(ctx context.Context, log *slog.Logger, pool *pgxpool.Pool, ms *pg.Migrations) error {
	applied, err := ms.Up(ctx, pool, log)
	if err != nil {
		return err
	}
	log.Info("database migrated", "applied", len(applied), "version", ms.Latest())
	return nil
}

// databaseChecks are the readiness checks of a service's database: it
// answers, and its schema is at this build's version.
func databaseChecks(pool *pgxpool.Pool, ms *pg.Migrations) []httpserver.Check {
	return []httpserver.Check{
		{Name: "database", Fn: pg.Check(pool)},
		{Name: "schema", Fn: func(ctx context.Context) error { return ms.Check(ctx, pool) }},
	}
}

// RunFunc is the signature of every service's Run: everything a process
// gets from outside, passed in, so that tests run the real thing.
type RunFunc func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error
