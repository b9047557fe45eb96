package gatewayd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
)

// bootstrapConfig is what `gatewayd bootstrap` needs from the
// environment: only the database.
type bootstrapConfig struct {
	daemon.Database
}

// signerFlags collects repeated --signer values.
type signerFlags []gateway.SignerRef

func (s *signerFlags) String() string { return fmt.Sprint(*s) }

func (s *signerFlags) Set(v string) error {
	ref, err := gateway.ParseSignerRef(v)
	if err != nil {
		return err
	}
	*s = append(*s, ref)
	return nil
}

// Bootstrap is `gatewayd bootstrap --tenant NAME --signer CHAIN:ADDRESS
// ... [--key-name NAME]`: it creates the tenant unless it exists, gives
// it the signers (a signer another tenant owns is an error), and makes an
// API key with every scope, whose token it prints alone on stdout, the
// only time it is shown. It is how the first admin key of a deployment,
// or of a new tenant, comes to be; later keys are made with that key
// over the API. Run it again for another key or more signers.
func Bootstrap(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	flags := flag.NewFlagSet("gatewayd bootstrap", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	tenantName := flags.String("tenant", "", "the tenant's name (created unless it exists)")
	keyName := flags.String("key-name", "admin", "the new key's name")
	var signers signerFlags
	flags.Var(&signers, "signer", "a signer the tenant owns, chain_id:0xaddress (repeat for more)")
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("gatewayd bootstrap: %w\nusage: gatewayd bootstrap --tenant NAME --signer CHAIN_ID:0xADDRESS [--signer ...] [--key-name NAME]", err)
	}
	if *tenantName == "" || flags.NArg() > 0 {
		return errors.New("usage: gatewayd bootstrap --tenant NAME --signer CHAIN_ID:0xADDRESS [--signer ...] [--key-name NAME]")
	}
	var cfg bootstrapConfig
	if err := config.Load(Spec.EnvPrefix, getenv, &cfg); err != nil {
		return fmt.Errorf("gatewayd bootstrap configuration:\n%w", err)
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolOptions{Application: "gatewayd bootstrap"})
	if err != nil {
		return fmt.Errorf("open database: %w", err)
	}
	defer pool.Close()
	if err := postgres.Migrations.Check(ctx, pool); err != nil {
		return fmt.Errorf("%w (run gatewayd migrate first)", err)
	}
	store := postgres.New(pool)
	tenant, err := store.TenantByName(ctx, *tenantName)
	if errs.Is(err, errs.NotFound) {
		tenant, err = store.CreateTenant(ctx, *tenantName)
	}
	if err != nil {
		return err
	}
	for _, s := range signers {
		if err := store.AssignSigner(ctx, tenant.ID, s); err != nil {
			return err
		}
	}
	_, token, err := store.CreateKey(ctx, gateway.NewKey{Tenant: tenant.ID, Name: *keyName, Scopes: gateway.Scopes})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, strings.TrimSpace(token))
	return err
}
