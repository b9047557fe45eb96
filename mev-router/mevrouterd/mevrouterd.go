// Package mevrouterd wires the broadcaster together: configuration, the
// mTLS listener that only txmanager may call, and the operational
// endpoints. mevrouterd keeps nothing durable, so it has no database and no
// migrate command. cmd/mevrouterd calls Run; tests call it too.
package mevrouterd

import (
	"context"
	"io"

	"github.com/txfence/txfence/shared/daemon"
)

// Config is mevrouterd's configuration, from TXFENCE_MEVROUTER_* variables.
type Config struct {
	daemon.Base
}

// Spec names mevrouterd.
var Spec = daemon.Spec{Binary: "mevrouterd", Identity: "mevrouter", EnvPrefix: "TXFENCE_MEVROUTER_"}

// Run runs mevrouterd. Its only command is `serve` (the default).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	svc, err := daemon.Setup(ctx, Spec, args, getenv, stdout, &cfg)
	if svc == nil {
		return err
	}
	defer svc.Close()
	return svc.Serve(ctx)
}
