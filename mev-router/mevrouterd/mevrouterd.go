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
	"github.com/ethereum/go-ethereum/common/hexutil"
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
type Config struct {
	daemon.Base
	// ChainID is the one chain this mevrouterd broadcasts on; transactions
	// of another chain are refused, and so is an endpoint that reports
	// another chain at start.
	ChainID uint64 `env:"CHAIN_ID" required:"true"`
	// PublicRPC lists the public RPC endpoints, name=url,name=url.
	PublicRPC public.Endpoints `env:"PUBLIC_RPC" required:"true"`
	// PublicNoBatch names the endpoints that take no JSON-RPC batches.
	PublicNoBatch []string      `env:"PUBLIC_NO_BATCH"`
	SendTimeout   time.Duration `env:"SEND_TIMEOUT" default:"5s"`
	// BreakerThreshold consecutive transient failures take an endpoint out
	// for BreakerCooldown, doubling while it keeps failing.
	BreakerThreshold int           `env:"BREAKER_THRESHOLD" default:"3"`
	BreakerCooldown  time.Duration `env:"BREAKER_COOLDOWN" default:"5s"`

	// Relays lists the private relays and builders, name=url,name=url;
	// none disables the private route.
	Relays public.Endpoints `env:"RELAYS"`
	// RelayKinds gives each relay's protocol, name=kind: protect (the
	// default), mev-share or bundle.
	RelayKinds []string `env:"RELAY_KINDS"`
	// RelayKeyFile holds the hex secp256k1 key that signs relay requests
	// (X-Flashbots-Signature). It is an identity towards the relays only:
	// never a key that signs transactions.
	RelayKeyFile string `env:"RELAY_KEY_FILE"`
	// WatchRPC is our own node, watched for private inclusions; default the
	// first public endpoint.
	WatchRPC      string        `env:"WATCH_RPC"`
	PrivateBlocks uint64        `env:"PRIVATE_BLOCKS" default:"25"`
	PollInterval  time.Duration `env:"PRIVATE_POLL_INTERVAL" default:"1s"`

	// The auto route sends privately calls to AutoContracts, calls with one
	// of AutoSelectors (selectors or signatures, beside the built-in DEX
	// swaps) and transactions moving more than AutoValueWei.
	AutoContracts []string `env:"AUTO_PRIVATE_CONTRACTS"`
	AutoSelectors []string `env:"AUTO_PRIVATE_SELECTORS"`
	AutoValueWei  string   `env:"AUTO_PRIVATE_VALUE_WEI"`
}

// Validate checks the route settings.
func (c Config) Validate() error {
	var problems []error
	if c.ChainID == 0 {
		problems = append(problems, errors.New("CHAIN_ID must be set"))
	}
	if len(c.Relays) > 0 && c.RelayKeyFile == "" {
		problems = append(problems, errors.New("RELAYS needs RELAY_KEY_FILE: relays identify senders by the signature header"))
	}
	if _, err := c.relayKinds(); err != nil {
		problems = append(problems, err)
	}
	if _, err := c.autoRule(); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
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

	m := metrics.New(exported.Registry)
	// Endpoints and relays are outside txfence: a plain client, which
	// carries none of our trace or request ids to them.
	client := &http.Client{Timeout: 2 * cfg.SendTimeout, Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true,
	}}
	fanout, err := public.New(cfg.PublicRPC, public.Options{
		Timeout: cfg.SendTimeout, NoBatch: cfg.PublicNoBatch, HTTP: client, Log: svc.Log,
		BreakerThreshold: cfg.BreakerThreshold, BreakerCooldown: cfg.BreakerCooldown,
	}, m)
	if err != nil {
		return err
	}
	defer fanout.Close()
	chainID := new(big.Int).SetUint64(cfg.ChainID)
	if err := checkChains(ctx, cfg, svc); err != nil {
		return err
	}
	auto, _ := cfg.autoRule() // checked by Validate
	router := &mevrouter.Router{ChainID: chainID, Public: fanout, Auto: auto, Metrics: m}
	svc.HTTP.AddReadyCheck(httpserver.Check{Name: "public_rpc", Fn: fanout.Ready})

	if len(cfg.Relays) > 0 {
		private, node, err := openPrivate(cfg, client, fanout, m, svc)
		if err != nil {
			return err
		}
		defer node.Close()
		router.Private = private
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go private.Run(watchCtx)
	}
	(&httpapi.API{Router: router}).Mount(svc.HTTP.Router)
	svc.Log.Info("routes ready", "chain_id", cfg.ChainID, "public", fanout.Names(), "relays", cfg.Relays.Names())
	return svc.Serve(ctx)
}

// checkChains asks every public endpoint for its chain id: one that answers
// with another chain is a configuration error that would send our
// transactions nowhere; one that does not answer is only logged.
func checkChains(ctx context.Context, cfg Config, svc *daemon.Service) error {
	for _, e := range cfg.PublicRPC {
		cctx, cancel := context.WithTimeout(ctx, cfg.SendTimeout)
		c, err := rpc.DialContext(cctx, e.URL)
		if err == nil {
			var id hexutil.Big
			err = c.CallContext(cctx, &id, "eth_chainId")
			c.Close()
			if err == nil && id.ToInt().Uint64() != cfg.ChainID {
				cancel()
				return fmt.Errorf("public endpoint %s is on chain %s, not CHAIN_ID=%d", e.Name, id.ToInt(), cfg.ChainID)
			}
		}
		cancel()
		if err != nil {
			svc.Log.Warn("public endpoint not answering at start; its breaker will keep it out until it does", "endpoint", e.Name, "err", err)
		}
	}
	return nil
}

// openPrivate sets up the relays and the watcher's node.
func openPrivate(cfg Config, client *http.Client, fallback *public.Fanout, m *metrics.Metrics, svc *daemon.Service) (*relay.Private, *rpc.Client, error) {
	key, err := readRelayKey(cfg.RelayKeyFile)
	if err != nil {
		return nil, nil, err
	}
	kinds, _ := cfg.relayKinds() // checked by Validate
	var relays []*relay.Relay
	for _, e := range cfg.Relays {
		kind := kinds[e.Name]
		if kind == "" {
			kind = relay.Protect
		}
		relays = append(relays, &relay.Relay{Name: e.Name, Kind: kind, Client: &flashbots.Client{URL: e.URL, AuthKey: key, HTTP: client}})
	}
	watch := cfg.WatchRPC
	if watch == "" {
		watch = cfg.PublicRPC[0].URL
	}
	node, err := rpc.DialOptions(context.Background(), watch, rpc.WithHTTPClient(client))
	if err != nil {
		return nil, nil, fmt.Errorf("WATCH_RPC: %w", err)
	}
	private, err := relay.New(relays, node, fallback, relay.Options{
		Blocks: cfg.PrivateBlocks, Timeout: cfg.SendTimeout, PollInterval: cfg.PollInterval, Log: svc.Log,
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
