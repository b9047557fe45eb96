package signerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/signer-zonec/postgres"
)

// migrateConfig is what `signerd migrate` reads. It runs as the role that
// owns signerd's tables and never needs the serving role's credentials,
// nor the TLS files serving needs.
type migrateConfig struct {
	// OwnerDatabaseURL connects as the role that owns (or will own)
	// signerd's schema and tables. Unset, migrate connects with
	// DatabaseURL, whose role then owns them.
	OwnerDatabaseURL string `env:"OWNER_DATABASE_URL"`
	DatabaseURL      string `env:"DATABASE_URL"`
	// ServeRole is the role signerd serves as (DATABASE_URL's user when
	// serving): after migrating, it is granted exactly what serving needs
	// and nothing else.
	ServeRole string     `env:"SERVE_ROLE"`
	LogLevel  slog.Level `env:"LOG_LEVEL" default:"info"`
	LogFormat string     `env:"LOG_FORMAT" default:"json"`
}

func (c migrateConfig) Validate() error {
	if c.OwnerDatabaseURL == "" && c.DatabaseURL == "" {
		return errors.New("TXFENCE_SIGNER_OWNER_DATABASE_URL (the role that owns signerd's tables) is required to migrate")
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return fmt.Errorf("LOG_FORMAT=%q: must be json or text", c.LogFormat)
	}
	return nil
}

// migrateCommand is `signerd migrate`: apply the migrations as the owner,
// then grant the serving role its privileges. Running it again is
// harmless, and puts the serving role's privileges back to exactly what
// serving needs.
func migrateCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("migrate takes no arguments (settings come from the environment), got %q", args)
	}
	var cfg migrateConfig
	if err := config.Load(Spec.EnvPrefix, getenv, &cfg); err != nil {
		return fmt.Errorf("signerd migrate configuration:\n%w", err)
	}
	log := daemon.Base{LogLevel: cfg.LogLevel, LogFormat: cfg.LogFormat}.Logger(stdout, Spec.Binary)
	log.LogAttrs(ctx, slog.LevelInfo, "configuration", config.Dump(Spec.EnvPrefix, &cfg)...)
	ownerURL := cfg.OwnerDatabaseURL
	if ownerURL == "" {
		ownerURL = cfg.DatabaseURL
	}
	pool, err := pg.Open(ctx, ownerURL, pg.PoolOptions{MaxConns: 2, Application: Spec.Binary + " migrate"})
	if err != nil {
		return fmt.Errorf("open database as the owner: %w", err)
	}
	defer pool.Close()
	applied, err := postgres.Migrations.Up(ctx, pool, log)
	if err != nil {
		return err
	}
	log.Info("database migrated", "applied", len(applied), "version", postgres.Migrations.Latest())
	if cfg.ServeRole == "" {
		log.Warn("no serving role (TXFENCE_SIGNER_SERVE_ROLE) to grant: signerd serve refuses a role that owns its tables or holds more than serving needs")
		return nil
	}
	if err := postgres.GrantServing(ctx, pool, cfg.ServeRole); err != nil {
		return err
	}
	log.Info("serving role granted", "role", cfg.ServeRole)
	return nil
}
