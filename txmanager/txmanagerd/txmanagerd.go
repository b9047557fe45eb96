// Package txmanagerd wires the transaction manager together: configuration,
// its database, the mTLS listener the gateway (and, for the event feed, the
// ledger) call, and the operational endpoints. cmd/txmanagerd calls Run;
// tests call it too.
package txmanagerd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/httpapi"
	"github.com/txfence/txfence/txmanager/postgres"
)

// Config is txmanagerd's configuration, from TXFENCE_TXMANAGER_* variables.
// Its database is the authority for leases, nonces and transaction state;
// every node of a deployment shares it.
type Config struct {
	daemon.Base
	daemon.Database
	// ChainsFile names the chains and signers this deployment manages
	// (txmanager.Chains documents the format). Required to serve.
	ChainsFile string `env:"CHAINS_FILE"`
	// SequenceEvery is how often the event feed's sequencer numbers
	// committed events; a long poll of the feed also numbers them.
	SequenceEvery time.Duration `env:"SEQUENCE_EVERY" default:"100ms"`
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
	if cfg.ChainsFile == "" {
		return errors.New("TXFENCE_TXMANAGER_CHAINS_FILE is required to serve: it names the chains and signers to manage")
	}
	chains, err := txmanager.LoadChains(cfg.ChainsFile)
	if err != nil {
		return err
	}
	store := postgres.New(svc.DB)
	(&httpapi.API{Store: store, Chains: chains}).Mount(svc.HTTP.Router)

	seqCtx, stopSequencer := context.WithCancel(ctx)
	defer stopSequencer()
	go sequence(seqCtx, store, cfg.SequenceEvery, svc.Log)
	svc.Log.Info("managing", "signers", len(chains.Signers()), "chains", len(chains.Chains))
	return svc.Serve(ctx)
}

// sequence numbers committed events for the feed until ctx ends.
func sequence(ctx context.Context, store *postgres.Store, every time.Duration, log *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := store.Sequence(ctx); err != nil && ctx.Err() == nil {
			log.Warn("event sequencer", "err", err)
		}
	}
}
