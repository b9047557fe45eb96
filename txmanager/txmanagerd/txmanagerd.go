// Package txmanagerd wires the transaction manager together: configuration,
// its database, the mTLS listener the gateway (and, for the event feed, the
// ledger) call, and the operational endpoints. cmd/txmanagerd calls Run;
// tests call it too.
package txmanagerd

import (
	"context"
	"io"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/txmanager/postgres"
)

// Config is txmanagerd's configuration, from TXFENCE_TXMANAGER_* variables.
// Its database is the authority for leases, nonces and transaction state;
// every node of a deployment shares it.
type Config struct {
	daemon.Base
	daemon.Database
}

// Spec names txmanagerd.
var Spec = daemon.Spec{Binary: "txmanagerd", Identity: "txmanager", EnvPrefix: "TXFENCE_TXMANAGER_", Migrations: postgres.Migrations}

// Run runs txmanagerd: `serve` (the default) or `migrate`.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	svc, err := daemon.Setup(ctx, Spec, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()
	return svc.Serve(ctx)
}
