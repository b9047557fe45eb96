package public

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

// chainCheck is what an endpoint last said of its chain id. An endpoint
// is asked before its first send, and again every Options.ChainCheckEvery
// by the Fanout's checker; while it reports another chain than the
// Fanout's, it gets no sends.
type chainCheck struct {
	asking sync.Mutex // one question at a time
	// reported is the chain id of the endpoint's last answer; nil until
	// it has answered.
	reported atomic.Pointer[big.Int]
	// unanswerable: the endpoint answered eth_chainId with an error (a
	// send-only endpoint may refuse every other method). It is sent to
	// meanwhile, and asked again by the checker only, not before each send.
	unanswerable atomic.Bool
}

// wrongChain is the chain the endpoint reports when it is not want, or
// nil: an endpoint not yet asked, or that could not answer, is not known
// to be on another chain.
func (c *chainCheck) wrongChain(want *big.Int) *big.Int {
	if id := c.reported.Load(); id != nil && id.Cmp(want) != 0 {
		return id
	}
	return nil
}

// unasked reports whether the endpoint is to be asked before it is sent
// to: it has not answered yet.
func (c *chainCheck) unasked() bool {
	return c.reported.Load() == nil && !c.unanswerable.Load()
}

// onWrongChain is what a transaction gets from an endpoint on another
// chain: nothing was sent to it. It is Temporary, so that nodeerr reads it
// as Transient: the endpoint may come back, and another may take it.
type onWrongChain struct {
	endpoint string
	reported *big.Int
	want     *big.Int
}

func (e *onWrongChain) Error() string {
	return fmt.Sprintf("public endpoint %s is on chain %s, not %s: nothing sent to it", e.endpoint, e.reported, e.want)
}

func (e *onWrongChain) Temporary() bool { return true }

// checkFailure is an endpoint's failure to answer eth_chainId, given to
// the transactions it kept from being sent (a rate limit). Temporary, as
// a failed check is no verdict on a transaction, whatever its words.
type checkFailure struct{ err error }

func (e *checkFailure) Error() string   { return "eth_chainId: " + e.err.Error() }
func (e *checkFailure) Unwrap() error   { return e.err }
func (e *checkFailure) Temporary() bool { return true }

// askMode says when askChain asks.
type askMode int

const (
	askNow        askMode = iota
	askIfUnasked          // unless another question got an answer meanwhile
	askUnlessBusy         // unless a question is running (the checker's)
)

// askChain asks the endpoint for its chain id and notes the answer: a
// change is logged (an alert when it leaves our chain) and shown by
// txfence_mevrouter_endpoint_up. A rate limit keeps the endpoint out as a
// send's would.
func (p *Fanout) askChain(ctx context.Context, e *publicEndpoint, mode askMode) error {
	if mode == askUnlessBusy {
		if !e.chain.asking.TryLock() {
			return nil
		}
	} else {
		e.chain.asking.Lock()
	}
	defer e.chain.asking.Unlock()
	if mode == askIfUnasked && !e.chain.unasked() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var id hexutil.Big
	err := e.client.CallContext(ctx, &id, "eth_chainId")
	if err != nil {
		if nodeerr.RateLimited(err) {
			p.rateLimited(e, err)
		} else if answeredWithError(err) {
			if !e.chain.unanswerable.Swap(true) {
				p.log.Warn("public endpoint does not tell its chain id: sent to unchecked", "endpoint", e.Name, "err", e.scrub(err))
			}
		}
		return &checkFailure{err: err}
	}
	e.chain.unanswerable.Store(false)
	p.noteChain(e, id.ToInt())
	return nil
}

// answeredWithError reports whether the endpoint answered, with an error,
// rather than failed to answer (no connection, a timeout, a 5xx).
func answeredWithError(err error) bool {
	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) {
		return true
	}
	var httpErr rpc.HTTPError
	return errors.As(err, &httpErr) && httpErr.StatusCode < 500
}

// noteChain records the chain id the endpoint reported, and logs a change.
func (p *Fanout) noteChain(e *publicEndpoint, id *big.Int) {
	prev := e.chain.reported.Swap(id)
	switch {
	case prev != nil && prev.Cmp(id) == 0:
		return
	case id.Cmp(p.chainID) != 0:
		p.log.Error("public endpoint is on another chain: nothing is sent to it while it is", "alert", true,
			"endpoint", e.Name, "reported_chain_id", id.String())
	case prev != nil:
		p.log.Info("public endpoint is on its chain again: sent to", "endpoint", e.Name)
	}
	p.reportUp(e)
}

// chainFirst asks an endpoint that was never asked for its chain id, just
// before its first send, and tells whether the send may go: not to an
// endpoint on another chain, nor to one that answered the question with a
// rate limit. One that could not answer otherwise (down, or refusing the
// method) is sent to, as before any check: its breaker judges it.
func (p *Fanout) chainFirst(ctx context.Context, e *publicEndpoint) error {
	if e.chain.unasked() {
		if err := p.askChain(ctx, e, askIfUnasked); err != nil && nodeerr.RateLimited(err) {
			return err
		}
	}
	if id := e.chain.wrongChain(p.chainID); id != nil {
		return &onWrongChain{endpoint: e.Name, reported: id, want: p.chainID}
	}
	return nil
}

// checkChains asks every endpoint for its chain id every interval, until
// ctx ends: an endpoint that moves to another chain (a provider's
// misrouting, a URL edited under us) is taken out, and one that comes back
// is sent to again. Rate-limited endpoints are left alone until they are
// back; an endpoint whose question (a send's) is running is not asked twice.
func (p *Fanout) checkChains(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, e := range p.endpoints {
			if !e.limiter.allow() {
				continue
			}
			wg.Go(func() {
				if err := p.askChain(ctx, e, askUnlessBusy); err != nil && ctx.Err() == nil {
					p.log.Debug("public endpoint's chain id check failed", "endpoint", e.Name, "err", e.scrub(err))
				}
			})
		}
		wg.Wait()
	}
}

// CheckChains asks every endpoint for its chain id now, and fails naming
// each endpoint that reports another chain. One that does not answer is
// logged, not an error: its breaker keeps it out until it does, and it is
// asked again before its first send. mevrouterd calls this at start.
func (p *Fanout) CheckChains(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, e := range p.endpoints {
		wg.Go(func() {
			if err := p.askChain(ctx, e, askNow); err != nil {
				p.log.Warn("public endpoint not answering eth_chainId at start; asked again before its first send", "endpoint", e.Name, "err", e.scrub(err))
			}
		})
	}
	wg.Wait()
	var wrong []string
	for _, e := range p.endpoints {
		if id := e.chain.wrongChain(p.chainID); id != nil {
			wrong = append(wrong, fmt.Sprintf("public endpoint %s is on chain %s", e.Name, id))
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("%s, not %s", strings.Join(wrong, "; "), p.chainID)
	}
	return nil
}
