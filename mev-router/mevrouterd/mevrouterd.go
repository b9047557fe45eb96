// Package mevrouterd wires the broadcaster together: configuration, the
// public endpoints, the private relays and their watcher, the mTLS API that
// only txmanager may call, and the operational endpoints. mevrouterd keeps
// nothing durable, so it has no database and no migrate command.
// cmd/mevrouterd calls Run; tests call it too.
package mevrouterd

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/flashbots"
	"github.com/txfence/txfence/mev-router/httpapi"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/prommetrics"
	"github.com/txfence/txfence/shared/tracing"
)

// Config is mevrouterd's configuration, from TXFENCE_MEVROUTER_* variables.
// One chain is configured by CHAIN_ID and the per-chain variables
// (PUBLIC_RPC, PUBLIC_NO_BATCH, RELAYS, RELAY_KINDS, WATCH_RPC); any number
// of chains by CHAINS_FILE instead. The rest holds for every chain.
type Config struct {
	daemon.Base
	// ChainsFile is a JSON file of every chain served (ChainsFile); it
	// excludes CHAIN_ID and the other per-chain variables.
	ChainsFile string `env:"CHAINS_FILE"`
	// ChainID is the one chain broadcast on when there is no CHAINS_FILE;
	// transactions of another chain are refused, and so is an endpoint
	// that reports another chain at start (later, it is taken out of the
	// sends while it does).
	ChainID uint64 `env:"CHAIN_ID"`
	// PublicRPC lists the public RPC endpoints, name=url,name=url.
	PublicRPC public.Endpoints `env:"PUBLIC_RPC"`
	// PublicNoBatch names the endpoints that take no JSON-RPC batches.
	PublicNoBatch []string      `env:"PUBLIC_NO_BATCH"`
	SendTimeout   time.Duration `env:"SEND_TIMEOUT" default:"5s"`
	// BreakerThreshold consecutive transient failures take an endpoint out
	// for BreakerCooldown, doubling while it keeps failing.
	BreakerThreshold int           `env:"BREAKER_THRESHOLD" default:"3"`
	BreakerCooldown  time.Duration `env:"BREAKER_COOLDOWN" default:"5s"`
	// ChainCheckInterval is how often every public endpoint is asked its
	// chain id again; one that reports another chain gets no sends.
	ChainCheckInterval time.Duration `env:"PUBLIC_CHAIN_CHECK_INTERVAL" default:"1m"`

	// Relays lists the private relays and builders, name=url,name=url;
	// none disables the private route.
	Relays public.Endpoints `env:"RELAYS"`
	// RelayKinds gives each relay's protocol, name=kind: protect (the
	// default), mev-share or bundle.
	RelayKinds []string `env:"RELAY_KINDS"`
	// RelayKeyFile holds the hex secp256k1 key that signs relay requests
	// (X-Flashbots-Signature) on every chain. It is an identity towards the
	// relays only: never a key that signs transactions.
	RelayKeyFile string `env:"RELAY_KEY_FILE"`
	// WatchRPC is our own node, watched for private inclusions; default the
	// first public endpoint.
	WatchRPC string `env:"WATCH_RPC"`
	// PrivateBlocks is the default distance of a private send's max block;
	// a chain of CHAINS_FILE may set its own.
	PrivateBlocks uint64        `env:"PRIVATE_BLOCKS" default:"25"`
	PollInterval  time.Duration `env:"PRIVATE_POLL_INTERVAL" default:"1s"`

	// The auto route sends privately calls to AutoContracts, calls with one
	// of AutoSelectors (selectors or signatures, beside the built-in DEX
	// swaps) and transactions moving more than AutoValueWei.
	AutoContracts []string `env:"AUTO_PRIVATE_CONTRACTS"`
	AutoSelectors []string `env:"AUTO_PRIVATE_SELECTORS"`
	AutoValueWei  string   `env:"AUTO_PRIVATE_VALUE_WEI"`
}

// Validate checks the chains and the route settings.
func (c Config) Validate() error {
	var problems []error
	chains, err := c.chains()
	if err != nil {
		problems = append(problems, err)
	}
	if c.RelayKeyFile == "" {
		for _, ch := range chains {
			if len(ch.Relays) > 0 {
				what := "RELAYS"
				if c.ChainsFile != "" {
					what = fmt.Sprintf("CHAINS_FILE: chain %d has relays, and", ch.ChainID)
				}
				problems = append(problems, fmt.Errorf("%s needs RELAY_KEY_FILE: relays identify senders by the signature header", what))
			}
		}
	}
	if _, err := c.autoRule(); err != nil {
		problems = append(problems, err)
	}
	if c.ChainCheckInterval <= 0 {
		problems = append(problems, errors.New("PUBLIC_CHAIN_CHECK_INTERVAL: want a positive duration, such as 1m"))
	}
	return errors.Join(problems...)
}

// chains are the chains to serve: those of CHAINS_FILE, or the one of
// CHAIN_ID and the per-chain variables.
func (c Config) chains() ([]Chain, error) {
	if c.ChainsFile == "" {
		return c.envChain()
	}
	var problems []error
	if c.ChainID != 0 {
		problems = append(problems, errors.New("CHAINS_FILE and CHAIN_ID are both set: configure one chain by CHAIN_ID and PUBLIC_RPC, or every chain in CHAINS_FILE"))
	}
	for name, set := range map[string]bool{
		"PUBLIC_RPC": len(c.PublicRPC) > 0, "PUBLIC_NO_BATCH": len(c.PublicNoBatch) > 0, "RELAYS": len(c.Relays) > 0,
		"RELAY_KINDS": len(c.RelayKinds) > 0, "WATCH_RPC": c.WatchRPC != "",
	} {
		if set {
			problems = append(problems, fmt.Errorf("%s is set with CHAINS_FILE: with a chains file it is set per chain, in the file", name))
		}
	}
	slices.SortFunc(problems, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	data, err := os.ReadFile(c.ChainsFile)
	if err != nil {
		return nil, errors.Join(append(problems, fmt.Errorf("CHAINS_FILE: %w", err))...)
	}
	f, err := ParseChainsFile(data)
	if err != nil {
		return nil, errors.Join(append(problems, fmt.Errorf("CHAINS_FILE %s: %w", c.ChainsFile, err))...)
	}
	return f.Chains, errors.Join(problems...)
}

// envChain is the one chain of CHAIN_ID and the per-chain variables.
func (c Config) envChain() ([]Chain, error) {
	var problems []error
	if c.ChainID == 0 {
		problems = append(problems, errors.New(Spec.EnvPrefix+"CHAIN_ID is required (or CHAINS_FILE, for many chains)"))
	}
	if len(c.PublicRPC) == 0 {
		problems = append(problems, errors.New(Spec.EnvPrefix+"PUBLIC_RPC is required"))
	}
	kinds, err := c.relayKinds()
	if err != nil {
		problems = append(problems, err)
	}
	ch := Chain{ChainID: c.ChainID, WatchRPC: c.WatchRPC}
	for _, e := range c.PublicRPC {
		ch.PublicRPC = append(ch.PublicRPC, PublicEndpoint{Name: e.Name, URL: e.URL, NoBatch: slices.Contains(c.PublicNoBatch, e.Name)})
	}
	for _, e := range c.Relays {
		ch.Relays = append(ch.Relays, Relay{Name: e.Name, URL: e.URL, Kind: kinds[e.Name]})
	}
	return []Chain{ch}, errors.Join(problems...)
}

func (c Config) relayKinds() (map[string]relay.Kind, error) {
	kinds := map[string]relay.Kind{}
	for _, item := range c.RelayKinds {
		name, kind, ok := strings.Cut(item, "=")
		k := relay.Kind(kind)
		if !ok || !slices.Contains(relay.Kinds, k) {
			return nil, fmt.Errorf("RELAY_KINDS: %q: want name=protect, name=mev-share or name=bundle", item)
		}
		if !slices.Contains(c.Relays.Names(), name) {
			return nil, fmt.Errorf("RELAY_KINDS: %q is not in RELAYS", name)
		}
		kinds[name] = k
	}
	return kinds, nil
}

func (c Config) autoRule() (*mevrouter.AutoRule, error) {
	var contracts []common.Address
	for _, a := range c.AutoContracts {
		if !common.IsHexAddress(a) {
			return nil, fmt.Errorf("AUTO_PRIVATE_CONTRACTS: %q is not an address", a)
		}
		contracts = append(contracts, common.HexToAddress(a))
	}
	var selectors []mevrouter.Selector
	for _, s := range c.AutoSelectors {
		sel, err := mevrouter.ParseSelector(s)
		if err != nil {
			return nil, fmt.Errorf("AUTO_PRIVATE_SELECTORS: %w", err)
		}
		selectors = append(selectors, sel)
	}
	var above *big.Int
	if c.AutoValueWei != "" {
		v, ok := new(big.Int).SetString(c.AutoValueWei, 10)
		if !ok || v.Sign() < 0 {
			return nil, fmt.Errorf("AUTO_PRIVATE_VALUE_WEI: %q is not a wei amount", c.AutoValueWei)
		}
		above = v
	}
	return mevrouter.NewAutoRule(contracts, selectors, above), nil
}

// Spec names mevrouterd.
var Spec = daemon.Spec{Binary: "mevrouterd", Identity: "mevrouter", EnvPrefix: "TXFENCE_MEVROUTER_", TraceContext: tracing.Middleware}

// Run runs mevrouterd. Its only command is `serve` (the default).
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	var cfg Config
	exported := prommetrics.New(Spec.Identity)
	svc, err := daemon.Setup(ctx, Spec, exported, args, getenv, stdout, &cfg)
	if svc == nil {
		return err
	}
	defer svc.Close()

	chains, err := cfg.chains() // checked by Validate; the file is read once more
	if err != nil {
		return err
	}
	var key *ecdsa.PrivateKey
	if slices.ContainsFunc(chains, func(c Chain) bool { return len(c.Relays) > 0 }) {
		if key, err = readRelayKey(cfg.RelayKeyFile); err != nil {
			return err
		}
	}
	m := metrics.New(exported.Registry)
	// Endpoints and relays are outside txfence: a plain client, which
	// carries none of our trace or request ids to them.
	client := &http.Client{Timeout: 2 * cfg.SendTimeout, Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true,
	}}
	auto, _ := cfg.autoRule() // checked by Validate
	var routers []*mevrouter.Router
	var fanouts []*public.Fanout
	var watchers []*relay.Private
	for _, ch := range chains {
		router, fanout, closeChain, err := openChain(ctx, cfg, ch, key, client, auto, m.Chain(ch.ChainID), svc)
		if err != nil {
			return err
		}
		defer closeChain()
		if p, ok := router.Private.(*relay.Private); ok {
			watchers = append(watchers, p)
		}
		routers, fanouts = append(routers, router), append(fanouts, fanout)
	}
	all, err := mevrouter.NewRouters(routers...)
	if err != nil {
		return err
	}
	// The watchers stop before their nodes close (defers run in reverse).
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	for _, p := range watchers {
		go p.Run(watchCtx)
	}
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "public_rpc", Fn: func(ctx context.Context) error {
		return publicReady(ctx, chains, fanouts)
	}})
	(&httpapi.API{Routers: all}).Mount(svc.HTTP.Router)
	return svc.Serve(ctx)
}

// publicReady fails when nothing can be sent on any chain: every public
// endpoint of every chain is failing. One chain whose endpoints are all
// failing does not make the process unready: every mevrouterd shares the
// same endpoints, so taking them out of service would stop the other
// chains too and help none; txfence_mevrouter_endpoint_up{chain_id}
// shows such a chain.
func publicReady(ctx context.Context, chains []Chain, fanouts []*public.Fanout) error {
	if len(fanouts) == 1 {
		return fanouts[0].Ready(ctx)
	}
	var problems []error
	for i, f := range fanouts {
		if err := f.Ready(ctx); err != nil {
			problems = append(problems, fmt.Errorf("chain %d: %w", chains[i].ChainID, err))
		}
	}
	if len(problems) < len(fanouts) {
		return nil
	}
	return errors.Join(problems...)
}

// openChain sets up one chain's routes: the public endpoints, checked for
// their chain id, and the relays with their watched node when the chain
// has relays. closeChain releases what it opened.
func openChain(ctx context.Context, cfg Config, ch Chain, key *ecdsa.PrivateKey, client *http.Client, auto *mevrouter.AutoRule, m *metrics.Chain, svc *daemon.Service) (router *mevrouter.Router, fanout *public.Fanout, closeChain func(), err error) {
	endpoints, noBatch := ch.endpoints()
	fanout, err = public.New(endpoints, public.Options{
		ChainCheckEvery: cfg.ChainCheckInterval,
		Timeout:         cfg.SendTimeout, NoBatch: noBatch, HTTP: client, Log: svc.Log,
		BreakerThreshold: cfg.BreakerThreshold, BreakerCooldown: cfg.BreakerCooldown,
	}, m)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("chain %d: %w", ch.ChainID, err)
	}
	closeChain = fanout.Close
	wanted := fmt.Sprintf("CHAIN_ID=%d", ch.ChainID)
	if cfg.ChainsFile != "" {
		wanted = fmt.Sprintf("chain %d of CHAINS_FILE", ch.ChainID)
	}
	// An endpoint on another chain at start is a configuration mistake:
	// refused, so that a rollout stops with the old processes serving.
	// Later, the fanout takes such an endpoint out while it is so.
	if err := fanout.CheckChains(ctx); err != nil {
		closeChain()
		return nil, nil, nil, fmt.Errorf("%s: %w", wanted, err)
	}
	router = &mevrouter.Router{ChainID: new(big.Int).SetUint64(ch.ChainID), Public: fanout, Auto: auto, Metrics: m}
	if len(ch.Relays) > 0 {
		private, node, err := openPrivate(cfg, ch, key, client, fanout, m, svc)
		if err != nil {
			closeChain()
			return nil, nil, nil, fmt.Errorf("chain %d: %w", ch.ChainID, err)
		}
		router.Private = private
		closeChain = func() { node.Close(); fanout.Close() }
	}
	svc.Log.Info("routes ready", "chain_id", ch.ChainID, "public", fanout.Names(), "relays", ch.relayNames())
	return router, fanout, closeChain, nil
}

// openPrivate sets up a chain's relays and the watcher's node.
func openPrivate(cfg Config, ch Chain, key *ecdsa.PrivateKey, client *http.Client, fallback *public.Fanout, m *metrics.Chain, svc *daemon.Service) (*relay.Private, *rpc.Client, error) {
	var relays []*relay.Relay
	for _, r := range ch.Relays {
		kind := r.Kind
		if kind == "" {
			kind = relay.Protect
		}
		relays = append(relays, &relay.Relay{Name: r.Name, Kind: kind, Client: &flashbots.Client{URL: r.URL, AuthKey: key, HTTP: client}})
	}
	watch := ch.WatchRPC
	if watch == "" {
		watch = ch.PublicRPC[0].URL
	}
	node, err := rpc.DialOptions(context.Background(), watch, rpc.WithHTTPClient(client))
	if err != nil {
		return nil, nil, fmt.Errorf("WATCH_RPC: %w", err)
	}
	blocks := ch.PrivateBlocks
	if blocks == 0 {
		blocks = cfg.PrivateBlocks
	}
	private, err := relay.New(relays, node, fallback, relay.Options{
		Blocks: blocks, Timeout: cfg.SendTimeout, PollInterval: cfg.PollInterval, Log: svc.Log.With("chain_id", ch.ChainID),
	}, m)
	if err != nil {
		node.Close()
		return nil, nil, err
	}
	return private, node, nil
}

// readRelayKey reads the relay-auth key: hex, one line, mode 0600 or less
// open is the operator's business, but the key never reaches a log.
func readRelayKey(path string) (*ecdsa.PrivateKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("RELAY_KEY_FILE: %w", err)
	}
	defer clear(raw)
	key, err := crypto.HexToECDSA(strings.TrimPrefix(strings.TrimSpace(string(raw)), "0x"))
	if err != nil {
		return nil, fmt.Errorf("RELAY_KEY_FILE %s does not hold a hex secp256k1 key", path)
	}
	return key, nil
}
