package rpchttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/txfence/txfence/shared/rpcpool"
)

// Prober asks every endpoint of a pool, every Every, for its head and its
// chain id (one batch of eth_chainId and eth_blockNumber: two requests of
// the endpoint's budget), so the pool knows each endpoint's lag and
// excludes one on another chain. Its calls go even to an endpoint that is
// cooling down or on probation (that is how one gets back in), never to
// one that is rate limited, and they are counted in the budgets.
type Prober struct {
	Transport *Transport
	// Every is the time between rounds (default 2s: under the block time
	// of most chains, so a lag is seen within a block or two).
	Every time.Duration
	// Log, when set, is told when an endpoint changes between usable and
	// not, with the reason: an operator's first clue.
	Log *slog.Logger
}

// Run probes every Every until ctx ends, the first time after Every: the
// pool's opener has just made a Round. It logs (Log) every endpoint out
// of the pool now, then each one that leaves or rejoins it.
func (p *Prober) Run(ctx context.Context) {
	every := p.Every
	if every <= 0 {
		every = 2 * time.Second
	}
	usable := p.report(nil)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		p.Round(ctx)
		usable = p.report(usable)
	}
}

// report logs each endpoint whose usability differs from was (with no
// was, each that is out of the pool) and returns what it is now.
func (p *Prober) report(was map[string]bool) map[string]bool {
	now := map[string]bool{}
	for _, h := range p.Transport.Pool.Health() {
		now[h.Name] = h.Usable
		before, seen := was[h.Name]
		if p.Log == nil || (seen && before == h.Usable) || (was == nil && h.Usable) {
			continue
		}
		if h.Usable {
			p.Log.Info("RPC endpoint usable", "chain_id", p.Transport.Pool.ChainID(), "endpoint", h.Name, "head", h.Head)
		} else {
			p.Log.Warn("RPC endpoint out of the pool", "chain_id", p.Transport.Pool.ChainID(), "endpoint", h.Name, "reason", h.Reason, "alert", true)
		}
	}
	return now
}

// Round probes every endpoint once, at once, and returns when all have
// answered or given up.
func (p *Prober) Round(ctx context.Context) { p.Transport.probeAll(ctx) }

// probeAll probes every endpoint once, at once.
func (t *Transport) probeAll(ctx context.Context) {
	eps := t.Pool.Endpoints()
	var wg sync.WaitGroup
	for _, e := range eps {
		wg.Go(func() { t.probe(ctx, e.Name) })
	}
	wg.Wait()
}

// refreshHeads probes every endpoint for a call that no endpoint was
// known to be at the head of: the heads the pool holds may be a probe
// interval old. Calls that need it at once share one round.
func (t *Transport) refreshHeads(ctx context.Context) {
	ch := t.refreshing.DoChan("heads", func() (any, error) {
		t.probeAll(context.WithoutCancel(ctx))
		return nil, nil
	})
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

var probeBody = []byte(`[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},` +
	`{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]}]`)

var probeMethods = []string{"eth_chainId", "eth_blockNumber"}

// probe asks endpoint name for its chain id and head.
func (t *Transport) probe(ctx context.Context, name string) {
	if _, err := t.Pool.Pick(rpcpool.Call{Methods: probeMethods, Endpoint: name, Probe: true}); err != nil {
		return // rate limited or out of budget: not now
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, PoolURL, bytes.NewReader(probeBody))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	ans, result := t.exchange(req, name, probeBody, probeMethods)
	if result.Class == classCancelled {
		return
	}
	if result.Outcome == rpcpool.OK && ans.response != nil {
		if err := t.observe(name, ans.response); err != nil {
			result.Outcome, result.Class = rpcpool.Failed, classServer
		}
	}
	t.Pool.Done(name, result)
}

// observe reads a probe's answer into the pool.
func (t *Transport) observe(name string, resp *http.Response) error {
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var answers []struct {
		ID     int             `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &answers); err != nil {
		return err
	}
	var got int
	for _, a := range answers {
		n, ok := quantity(a.Result)
		if !ok {
			continue
		}
		switch a.ID {
		case 1:
			t.Pool.ObserveChainID(name, n)
			got++
		case 2:
			t.Pool.ObserveHead(name, n)
			got++
		}
	}
	if got != 2 {
		return fmt.Errorf("a probe answered %d of 2 calls", got)
	}
	return nil
}
