// Package txmanagerd wires the transaction manager together: configuration,
// its database, the mTLS listener the gateway (and, for the event feed, the
// ledger) call, and the operational endpoints. cmd/txmanagerd calls Run;
// tests call it too.
package txmanagerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/httpclient"
	"github.com/txfence/txfence/shared/prommetrics"
	"github.com/txfence/txfence/shared/rpcpool/poolmetrics"
	"github.com/txfence/txfence/shared/tracing"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/follow"
	"github.com/txfence/txfence/txmanager/httpapi"
	"github.com/txfence/txfence/txmanager/lease"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
	"github.com/txfence/txfence/txmanager/worker"
)

// Config is txmanagerd's configuration, from TXFENCE_TXMANAGER_* variables.
// Its database is the authority for leases, nonces and transaction state;
// every node of a deployment shares it.
type Config struct {
	daemon.Base
	daemon.Database
	// CrashSwitch's steps are the pipelines' (worker.Steps,
	// follow.Steps).
	daemon.CrashSwitch
	// ChainsFile names the chains and signers this deployment manages
	// (txmanager.Chains documents the format). Required to serve.
	ChainsFile string `env:"CHAINS_FILE"`
	// SequenceEvery is how often the event feed's sequencer numbers
	// committed events; a long poll of the feed also numbers them.
	SequenceEvery time.Duration `env:"SEQUENCE_EVERY" default:"100ms"`
	// SignerURL and MevrouterURL are signerd's and mevrouterd's internal
	// listeners. Without both, this node accepts transactions and serves
	// the feed but works on no signer.
	SignerURL    string `env:"SIGNER_URL"`
	MevrouterURL string `env:"MEVROUTER_URL"`
	// NodeID names this node among the deployment's; unique among running
	// nodes. Default: the host name and process id.
	NodeID     string        `env:"NODE_ID"`
	LeaseTTL   time.Duration `env:"LEASE_TTL" default:"10s"`
	RenewEvery time.Duration `env:"LEASE_RENEW" default:"3s"`
	// GasMultiplier scales gas estimates.
	GasMultiplier float64 `env:"GAS_MULTIPLIER" default:"1.2"`
	// ApprovalTTL is how long a transaction waits for approvals before it
	// FAILS (approval_expired).
	ApprovalTTL time.Duration `env:"APPROVAL_TTL" default:"24h"`
	// FundsHold is how long a transaction the signer cannot pay for is held
	// before it FAILS (insufficient_funds_timeout).
	FundsHold time.Duration `env:"FUNDS_HOLD_TIMEOUT" default:"1h"`
}

// Spec names txmanagerd.
var Spec = daemon.Spec{Binary: "txmanagerd", Identity: "txmanager", EnvPrefix: "TXFENCE_TXMANAGER_", Migrations: postgres.Migrations, TraceContext: tracing.Middleware}

// Run runs txmanagerd: `serve` (the default) or `migrate`.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	exported := prommetrics.New(Spec.Identity)
	svc, err := daemon.Setup(ctx, Spec, exported, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()
	if cfg.IdleInTransactionTimeout <= 0 || cfg.IdleInTransactionTimeout >= cfg.LeaseTTL {
		return fmt.Errorf("DB_IDLE_IN_TX_TIMEOUT=%s must be positive and below LEASE_TTL=%s: a takeover waits for the old owner's open transaction", cfg.IdleInTransactionTimeout, cfg.LeaseTTL)
	}
	crash, err := crashAfter(cfg.CrashSwitch)
	if err != nil {
		return err
	}
	if cfg.ChainsFile == "" {
		return errors.New("TXFENCE_TXMANAGER_CHAINS_FILE is required to serve: it names the chains and signers to manage")
	}
	chains, err := txmanager.LoadChains(cfg.ChainsFile)
	if err != nil {
		return err
	}
	store := postgres.New(svc.DB)
	seqCtx, stopSequencer := context.WithCancel(ctx)
	defer stopSequencer()
	api := &httpapi.API{Store: store, Chains: chains, Feed: store.WatchFeed(seqCtx, svc.Log)}
	if cfg.SignerURL != "" {
		// Approvals and rejections are checked with signerd as they come
		// in, on every node that accepts them.
		if api.Signer, err = remote.NewSigner(cfg.SignerURL, signerHTTPClient(svc)); err != nil {
			return err
		}
	}
	api.Mount(svc.HTTP.Router)
	go sequence(seqCtx, store, cfg.SequenceEvery, svc.Log)

	if cfg.SignerURL == "" || cfg.MevrouterURL == "" {
		svc.Log.Warn("SIGNER_URL or MEVROUTER_URL unset: this node accepts transactions but works on no signer")
	} else {
		stopWork, err := startWork(ctx, cfg, chains, store, svc, exported, crash)
		if err != nil {
			return err
		}
		defer stopWork()
	}
	svc.Log.Info("managing", "signers", len(chains.Signers()), "chains", len(chains.Chains))
	return svc.Serve(ctx)
}

// signerHTTPClient is an mTLS client pinned to signerd's identity.
func signerHTTPClient(svc *daemon.Service) *http.Client {
	return httpclient.New(svc.TLS.ClientConfig("signer"), httpclient.Options{Timeout: 30 * time.Second})
}

// startWork starts the lease manager and the per-signer workers; the
// returned function stops them, releasing this node's leases.
func startWork(ctx context.Context, cfg Config, chains *txmanager.Chains, store *postgres.Store, svc *daemon.Service, exported *prommetrics.Metrics, crash func(string)) (func(), error) {
	readers := map[uint64]*chain.Reader{}
	closeReaders := func() {
		for _, r := range readers {
			r.Close()
		}
	}
	endpoints := &poolmetrics.Collector{}
	for _, ch := range chains.Chains {
		r, err := chain.Dial(ctx, ch, svc.Log)
		if err != nil {
			closeReaders()
			return nil, fmt.Errorf("chain %d: %w", ch.ID, err)
		}
		readers[ch.ID] = r
		endpoints.Add(r.Pool())
	}
	if err := exported.Registry.Register(endpoints); err != nil {
		closeReaders()
		return nil, err
	}
	client := func(identity string) *http.Client {
		return httpclient.New(svc.TLS.ClientConfig(identity), httpclient.Options{Timeout: 30 * time.Second})
	}
	signerClient, err := remote.NewSigner(cfg.SignerURL, signerHTTPClient(svc))
	if err != nil {
		closeReaders()
		return nil, err
	}
	routerClient, err := remote.NewRouter(cfg.MevrouterURL, client("mevrouter"))
	if err != nil {
		closeReaders()
		return nil, err
	}
	node := cfg.NodeID
	if node == "" {
		host, _ := os.Hostname()
		node = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	workCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	metrics, err := worker.NewMetrics(exported.Registry)
	if err != nil {
		stop()
		closeReaders()
		return nil, err
	}
	var manager *lease.Manager
	pool := worker.NewPool(workCtx, worker.Deps{
		Store: store, Chains: chains, Readers: readers, Signer: signerClient, Router: routerClient,
		Fenced: func(f txmanager.Fence) { manager.Fenced(f) }, Log: svc.Log, GasMultiplier: cfg.GasMultiplier,
		ApprovalTTL: cfg.ApprovalTTL, FundsHold: cfg.FundsHold, Metrics: metrics, AfterStep: crashHook[worker.Step](crash),
	})
	manager, err = lease.New(store, pool, exported.Registry, lease.Config{
		// A node counts as live as long as its leases last: a frozen
		// node's signers are then taken over as soon as its leases lapse
		// (a longer heartbeat would make them wait to become orphans).
		Node: node, LeaseTTL: cfg.LeaseTTL, RenewEvery: cfg.RenewEvery, HeartbeatTTL: cfg.LeaseTTL, Signers: chains.Signers, Logger: svc.Log,
	})
	if err != nil {
		stop()
		closeReaders()
		return nil, err
	}
	followMetrics, err := follow.NewMetrics(exported.Registry)
	if err != nil {
		stop()
		closeReaders()
		return nil, err
	}
	var following sync.WaitGroup
	for _, ch := range chains.Chains {
		id := strconv.FormatUint(ch.ID, 10)
		fl := follow.New(follow.Config{
			Chain: ch, Store: store, Router: routerClient, Signer: signerClient, Reader: readers[ch.ID],
			Fences: manager.Fences, Fenced: manager.Fenced, Log: svc.Log, AfterStep: crashHook[follow.Step](crash),
			RPC:    &follow.RPC{Client: readers[ch.ID].RPC(), Counted: func(m string) { followMetrics.Calls.WithLabelValues(id, m).Inc() }},
			Blocks: followMetrics.Blocks, Stuck: followMetrics.Stuck, BumpsRefused: followMetrics.BumpsRefused,
			Dropped: followMetrics.Dropped, DropRefusals: followMetrics.DropRefusals,
		})
		following.Go(func() { fl.Run(workCtx) })
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Run releases every lease and deregisters the node when its
		// context ends.
		if err := manager.Run(workCtx); err != nil {
			svc.Log.Error("lease manager stopped", "err", err)
		}
		following.Wait()
	}()
	svc.Log.Info("working on signers", "node", node, "lease_ttl", cfg.LeaseTTL)
	return func() {
		stop()
		<-done
		exported.Registry.Unregister(endpoints)
		closeReaders()
	}, nil
}

// crashAfter makes the fault-injection hook of TEST_CRASH_AFTER, over
// both pipelines' steps: nil when unset.
func crashAfter(cfg daemon.CrashSwitch) (func(string), error) {
	var steps []string
	for _, s := range worker.Steps {
		steps = append(steps, string(s))
	}
	for _, s := range follow.Steps {
		steps = append(steps, string(s))
	}
	return cfg.Hook(steps...)
}

// crashHook adapts the crash hook to a pipeline's step type (nil stays
// nil).
func crashHook[S ~string](crash func(string)) func(S) {
	if crash == nil {
		return nil
	}
	return func(s S) { crash(string(s)) }
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
