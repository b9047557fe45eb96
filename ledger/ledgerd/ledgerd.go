// Package ledgerd wires the ledger together: configuration, its database,
// the mTLS listener the gateway reads balances and statements from, and the
// operational endpoints. cmd/ledgerd calls Run; tests call it too.
package ledgerd

import (
	"context"
	"io"

	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/daemon"
)

// Config is ledgerd's configuration, from TXFENCE_LEDGER_* variables. Its
// database holds accounts, journals and entries, which no other service
// reads.
type Config struct {
	daemon.Base
	daemon.Database
}

// Spec names ledgerd.
var Spec = daemon.Spec{Binary: "ledgerd", Identity: "ledger", EnvPrefix: "TXFENCE_LEDGER_", Migrations: postgres.Migrations}

// Run runs ledgerd: `serve` (the default) or `migrate`.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	svc, err := daemon.Setup(ctx, Spec, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()
	return svc.Serve(ctx)
}
