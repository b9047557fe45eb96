package signerd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/pg"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/postgres"
)

// auditCommand is `signerd audit verify` and `signerd audit export
// [-after SEQ]`, run by operators and auditors against signerd's database
// (TXFENCE_SIGNER_DATABASE_URL; a read-only role is enough).
func auditCommand(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: signerd audit verify | signerd audit export [-after SEQ]")
	}
	var cfg struct{ daemon.Database }
	if err := config.Load(Spec.EnvPrefix, getenv, &cfg); err != nil {
		return err
	}
	pool, err := pg.Open(ctx, cfg.DatabaseURL, pg.PoolOptions{MaxConns: 2, Application: "signerd audit"})
	if err != nil {
		return err
	}
	defer pool.Close()
	store := postgres.New(pool)

	switch args[0] {
	case "verify":
		if len(args) > 1 {
			return fmt.Errorf("audit verify takes no arguments, got %q", args[1:])
		}
		n, err := store.VerifyAudit(ctx)
		var bad *signer.ChainError
		if errors.As(err, &bad) {
			return fmt.Errorf("audit log BROKEN after %d good records: %w", n, bad)
		}
		if err != nil {
			return err
		}
		head, err := store.AuditHead(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "audit log intact: %d records, head %d %s\n", n, head.Seq, head.Hash.Hex())
		return nil
	case "export":
		fs := flag.NewFlagSet("audit export", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		after := fs.Uint64("after", 0, "export records after this sequence number")
		if err := fs.Parse(args[1:]); err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		_, err := store.ExportAudit(ctx, *after, stdout)
		return err
	default:
		return fmt.Errorf("unknown audit command %q: verify or export", args[0])
	}
}
