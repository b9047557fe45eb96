// Package ledgerd wires the ledger together: configuration, its database,
// the consumer booking txmanager's feed from the ledger's own chain
// endpoints, the mTLS listener and the operational endpoints. cmd/ledgerd
// calls Run; tests call it too.
package ledgerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/rpc"
	"golang.org/x/sync/errgroup"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/httpapi"
	"github.com/txfence/txfence/ledger/internal/retry"
	"github.com/txfence/txfence/ledger/metrics"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/ledger/reconcile"
	"github.com/txfence/txfence/ledger/scanner"
	"github.com/txfence/txfence/ledger/transit"
	"github.com/txfence/txfence/openapi/feed"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/httpclient"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/prommetrics"
	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/shared/rpcpool/poolmetrics"
	"github.com/txfence/txfence/shared/rpcpool/rpchttp"
	"github.com/txfence/txfence/shared/tracing"
)

// Config is ledgerd's configuration, from TXFENCE_LEDGER_* variables. Its
// database holds accounts, journals and entries, which no other service
// reads.
type Config struct {
	daemon.Base
	daemon.Database
	// CrashSwitch's one step is "booked": right after a page of the feed
	// is booked.
	daemon.CrashSwitch
	// TxManagerURL is txmanagerd's internal listener, whose event feed the
	// ledger books (mutual TLS, as identity ledger).
	TxManagerURL string `env:"TXMANAGER_URL" required:"true"`
	// ChainRPC is the ledger's own endpoints of each chain it books.
	ChainRPC ChainRPCs `env:"CHAIN_RPC" required:"true"`
	// Tokens are the ERC-20 contracts opened and reconciled for every
	// wallet of a chain.
	Tokens ChainAddresses `env:"TOKENS"`
	// Wallets are addresses booked as wallets besides txmanager's signers.
	Wallets ChainAddresses `env:"WALLETS"`
	// ScanDepth keeps the deposit scanner that many blocks below the head;
	// ScanFrom is where a chain's scanner starts on its very first start
	// (default: the head less ScanDepth).
	ScanDepth uint64      `env:"SCAN_DEPTH" default:"0"`
	ScanFrom  ChainBlocks `env:"SCAN_FROM"`
	// ReconcileDepth pins reconciliation that many blocks below the head
	// (0: the node's finalized block); it runs every ReconcileInterval, and
	// waits up to ReconcileGrace for a wallet's own transactions to be
	// booked.
	ReconcileDepth    uint64        `env:"RECONCILE_DEPTH" default:"0"`
	ReconcileInterval time.Duration `env:"RECONCILE_INTERVAL" default:"10m"`
	ReconcileGrace    time.Duration `env:"RECONCILE_GRACE" default:"10m"`
	// TransitAlertAge is how long a transfer between chains may stay open
	// (one end booked) before an alert.
	TransitAlertAge time.Duration `env:"TRANSIT_ALERT_AGE" default:"1h"`
	// CursorKey signs the API's page cursors (a statement's carries its
	// running balance). Nodes serving one gateway share it; unset, each
	// start makes a random one, and cursors do not outlive the process.
	CursorKey config.Secret `env:"CURSOR_KEY"`
}

// Spec names ledgerd.
var Spec = daemon.Spec{Binary: "ledgerd", Identity: "ledger", EnvPrefix: "TXFENCE_LEDGER_", Migrations: postgres.Migrations, TraceContext: tracing.Middleware}

// Run runs ledgerd: `serve` (the default) or `migrate`.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	exported := prommetrics.New(Spec.Identity)
	svc, err := daemon.Setup(ctx, Spec, exported, args, getenv, stdout, &cfg)
	if svc == nil { // an error, or a finished subcommand
		return err
	}
	defer svc.Close()

	api, err := txmanagerapi.NewClientWithResponses(cfg.TxManagerURL,
		txmanagerapi.WithHTTPClient(httpclient.New(svc.TLS.ClientConfig("txmanager"), httpclient.Options{Timeout: time.Minute})))
	if err != nil {
		return err
	}
	for setting, chains := range map[string][]uint64{"TOKENS": slices.Collect(maps.Keys(cfg.Tokens)),
		"WALLETS": slices.Collect(maps.Keys(cfg.Wallets)), "SCAN_FROM": slices.Collect(maps.Keys(cfg.ScanFrom))} {
		for _, id := range chains {
			if _, ok := cfg.ChainRPC[id]; !ok {
				return fmt.Errorf("%s names chain %d, which has no CHAIN_RPC endpoint", setting, id)
			}
		}
	}
	store := postgres.New(svc.DB, svc.Log)
	g, ctx := errgroup.WithContext(ctx)
	booked := newChains(ctx, slices.Collect(maps.Keys(cfg.ChainRPC)), svc.Log)
	var configured []ledger.WalletKey
	for id, addrs := range cfg.Wallets {
		for _, a := range addrs {
			configured = append(configured, ledger.WalletKey{ChainID: id, Address: a})
		}
	}
	if err := store.AddWallets(ctx, configured); err != nil {
		return fmt.Errorf("register the configured wallets: %w", err)
	}
	readers := map[uint64]*chain.Reader{}
	clients := map[uint64]*rpc.Client{}
	pools := map[uint64]*rpchttp.Pooled{}
	endpoints := &poolmetrics.Collector{}
	for id, urls := range cfg.ChainRPC {
		pooled, err := rpchttp.Open(ctx, id, rpcpool.URLs(urls...), rpchttp.Config{Log: svc.Log})
		if err != nil {
			return fmt.Errorf("chain %d endpoints: %w", id, err)
		}
		defer pooled.Close()
		client, err := rpc.DialOptions(ctx, rpchttp.PoolURL, rpc.WithHTTPClient(pooled.HTTPClient()))
		if err != nil {
			return fmt.Errorf("chain %d endpoints: %w", id, err)
		}
		defer client.Close()
		readers[id], clients[id], pools[id] = chain.NewReader(client, id), client, pooled
		endpoints.Add(pooled.Pool)
	}
	if err := exported.Registry.Register(endpoints); err != nil {
		return err
	}
	// No chain's endpoint is a readiness check: one chain's endpoint down
	// would take ledgerd, its API and every other chain out of service,
	// while the consumer sets that chain's events aside (below) and its
	// scanner waits for it. Each endpoint's state is a gauge instead
	// (txfence_ledger_chain_endpoint_up), with the chain's halt and
	// backlog. The database (daemon's checks) and txmanager's feed, which
	// every chain needs, stay checks.
	if err := exported.Registry.Register(&metrics.Collector{Stats: store.Stats, Halted: booked.halted,
		Endpoints: func(ctx context.Context) map[uint64]bool { return endpointsUp(ctx, clients) }, Log: svc.Log}); err != nil {
		return err
	}
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "txmanager", Fn: func(ctx context.Context) error {
		_, err := feed.Read(ctx, api, 0, 1, 0)
		return err
	}})
	// The feed consumer books every chain the ledger follows. A halted
	// chain's settlements and reorgs go to the consumer's backlog unread
	// (consumer/backlog.go): its endpoint may serve another chain, its
	// scanner opens no wallet, and the runbook may leave it halted for a
	// while. Skipping them instead would move the feed's one cursor past
	// settled facts for good; holding the feed on them, as before, held
	// every other chain. A ledgerd that has not halted the chain (after
	// a restart on a mended endpoint) books the backlog first, in order.
	c := &consumer.Consumer{Store: store, API: api, Readers: readers, Log: svc.Log, Halted: booked.isHalted}
	crash, err := cfg.Hook("booked")
	if err != nil {
		return err
	}
	if crash != nil {
		c.AfterBook = func() { crash("booked") }
	}

	if k := cfg.CursorKey.Reveal(); k != "" && len(k) < 32 {
		return fmt.Errorf("CURSOR_KEY: %d characters, want at least 32", len(k))
	}
	var cursorKey []byte
	if k := cfg.CursorKey.Reveal(); k != "" {
		cursorKey = []byte(k)
	}
	// The scanner and the reconciler wait for the consumer to book the
	// feed up to its head as it was when they read a block.
	feedHead := func(ctx context.Context) (uint64, error) {
		page, err := feed.Read(ctx, api, 0, 1, 0)
		if err != nil || page.HeadSeq == nil {
			return 0, err
		}
		return uint64(*page.HeadSeq), nil
	}
	// One reconciler per chain, so that a halted chain's stops with it:
	// reconciling a chain whose endpoint serves another would book that
	// chain's balances to suspense as differences.
	reconcilers := &chainReconcilers{chains: booked, by: map[uint64]*reconcile.Reconciler{}, none: &reconcile.Reconciler{Store: store}}
	for id, client := range clients {
		reconcilers.by[id] = &reconcile.Reconciler{Store: store, Chains: map[uint64]*rpc.Client{id: client}, Tokens: cfg.Tokens,
			Depth: cfg.ReconcileDepth, Grace: cfg.ReconcileGrace, Interval: cfg.ReconcileInterval, FeedHead: feedHead, Feed: consumer.Feed, Log: svc.Log}
	}
	httpapi.New(store, cursorKey).ReconcileWith(reconcilers).Mount(svc.HTTP.Router)

	g.Go(func() error { return c.Run(ctx) })
	for id, client := range clients {
		sc := &scanner.Scanner{Store: store, ChainID: id, RPC: client, Tokens: cfg.Tokens[id], Depth: cfg.ScanDepth,
			FeedHead: feedHead, Feed: consumer.Feed, Log: svc.Log.With("chain_id", id)}
		if from, ok := cfg.ScanFrom[id]; ok {
			sc.Start = &from
		}
		g.Go(func() error {
			bookChain(booked, id, client, pools[id].AnotherChain, sc, reconcilers.by[id], svc.Log.With("chain_id", id))
			return nil
		})
	}
	g.Go(func() error { return (&transit.Watch{Store: store, Age: cfg.TransitAlertAge, Log: svc.Log}).Run(ctx) })
	g.Go(func() error { return svc.Serve(ctx) })
	return g.Wait()
}

// bookChain books one chain until ledgerd stops, or the chain halts: it
// checks that the endpoints serve the chain (retrying while none can be
// asked; halting when every one serves another chain, as anotherChain
// tells), then scans and reconciles it. A scanner that stops halts the
// chain, and nothing else.
func bookChain(booked *chains, id uint64, client *rpc.Client, anotherChain func() error, sc *scanner.Scanner, rec *reconcile.Reconciler, log *slog.Logger) {
	ctx := booked.context(id)
	// retry.Run repeats a step until it fails for good: a check that
	// passes ends it that way too.
	errChecked := errors.New("the endpoint serves the chain")
	err := retry.Run(ctx, log, "checking the chain endpoint", func(ctx context.Context) error {
		if wrong := anotherChain(); wrong != nil {
			return retry.Stop(fmt.Errorf("%w: %w", scanner.ErrWrongChain, wrong))
		}
		err := scanner.CheckChain(ctx, client, id)
		switch {
		case err == nil:
			return retry.Stop(errChecked)
		case errors.Is(err, scanner.ErrWrongChain):
			return retry.Stop(err)
		}
		return err
	})
	switch {
	case err == nil: // ledgerd stops
		return
	case !errors.Is(err, errChecked):
		booked.halt(id, err)
		return
	}
	booked.checked(id)
	var wg sync.WaitGroup
	wg.Go(func() { _ = rec.Run(ctx) })
	if err := sc.Run(ctx); err != nil {
		booked.halt(id, err) // ends ctx: the reconciler stops
	}
	wg.Wait()
}

// endpointProbe bounds each endpoint's answer to the gauge's question, as
// a readiness check would be bounded.
const endpointProbe = 2 * time.Second

// endpointsUp asks every chain's endpoint for its head, at once, and
// reports which answered.
func endpointsUp(ctx context.Context, clients map[uint64]*rpc.Client) map[uint64]bool {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[uint64]bool, len(clients))
	for id, client := range clients {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, endpointProbe)
			defer cancel()
			var block string
			err := client.CallContext(ctx, &block, "eth_blockNumber")
			mu.Lock()
			defer mu.Unlock()
			out[id] = err == nil
		})
	}
	wg.Wait()
	return out
}
