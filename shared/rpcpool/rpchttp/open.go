package rpchttp

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/txfence/txfence/shared/rpcpool"
)

// Config is how a chain's pool is opened.
type Config struct {
	// Pool tunes the health rules (rpcpool.Options).
	Pool rpcpool.Options
	// Timeout bounds one attempt at one endpoint (Transport.Timeout).
	Timeout time.Duration
	// ProbeEvery is the time between health probes (Prober.Every).
	ProbeEvery time.Duration
	// Base makes the HTTP exchanges (http.DefaultTransport when nil).
	Base http.RoundTripper
	// Log is told when an endpoint leaves or rejoins the pool.
	Log *slog.Logger
}

// Pooled is a chain's open pool: the pool, a Transport over it and a
// Prober keeping it current in the background until Close.
type Pooled struct {
	Pool      *rpcpool.Pool
	Transport *Transport
	stop      context.CancelFunc
	done      chan struct{}
}

// Open makes the pool of chain chainID's endpoints, probes each once and
// keeps probing in the background (Prober.Run, which logs each endpoint
// out of the pool). Endpoints down at the start are left out until a
// probe finds them up: one chain's providers being down must not keep a
// daemon serving many chains from starting. Each takes calls once a probe
// has confirmed its chain id. Whether every
// endpoint serves another chain, a configuration mistake, is AnotherChain.
func Open(ctx context.Context, chainID uint64, endpoints []rpcpool.Endpoint, cfg Config) (*Pooled, error) {
	pool, err := rpcpool.New(chainID, endpoints, cfg.Pool)
	if err != nil {
		return nil, err
	}
	tr, err := NewTransport(pool, cfg.Base)
	if err != nil {
		return nil, err
	}
	tr.Timeout = cfg.Timeout
	prober := &Prober{Transport: tr, Every: cfg.ProbeEvery, Log: cfg.Log}
	prober.Round(ctx)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	p := &Pooled{Pool: pool, Transport: tr, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		prober.Run(runCtx)
	}()
	return p, nil
}

// AnotherChain is an error naming each endpoint's chain when every one
// of them reported a chain id other than the pool's, nil otherwise (one
// endpoint on the right chain, or one not heard from yet).
func (p *Pooled) AnotherChain() error {
	var why []string
	for _, h := range p.Pool.Health() {
		if !strings.HasPrefix(h.Reason, "on chain") {
			return nil
		}
		why = append(why, fmt.Sprintf("endpoint %s is %s", h.Name, h.Reason))
	}
	return fmt.Errorf("chain %d: every RPC endpoint serves another chain: %s", p.Pool.ChainID(), strings.Join(why, "; "))
}

// HTTPClient is an http.Client through the pool, for a JSON-RPC client
// dialled at PoolURL.
func (p *Pooled) HTTPClient() *http.Client { return p.Transport.Client() }

// Close stops the prober.
func (p *Pooled) Close() {
	p.stop()
	<-p.done
}
