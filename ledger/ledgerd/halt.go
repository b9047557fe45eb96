package ledgerd

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/reconcile"
	"github.com/txfence/txfence/ledger/scanner"
	"github.com/txfence/txfence/shared/errs"
)

// Reasons a chain halts, in its alert.
const (
	// haltDeepReorg: the chain forked below every block the scanner keeps
	// (or the endpoint started its chain afresh, or lost it).
	haltDeepReorg = "deep_reorg"
	// haltWrongChain: the endpoint answers another chain id.
	haltWrongChain = "wrong_chain"
	// haltScannerStopped: the scanner stopped for another reason.
	haltScannerStopped = "scanner_stopped"
)

// chains is what ledgerd does with each chain it books: its endpoint's
// chain id checked first, then booked (scanned and reconciled), or halted
// when what the books hold of it cannot be followed on the chain its
// endpoint serves. A halted chain stays halted until ledgerd restarts;
// every other chain, the feed consumer and the API go on. Halting one
// chain never ends the process: before it, a deep fork ended ledgerd, and
// with it the stack around it, over one chain.
type chains struct {
	log *slog.Logger

	mu    sync.Mutex
	state map[uint64]*chainState
}

type chainState struct {
	// ctx ends when the chain halts, or ledgerd stops: its scanner and
	// reconciliation run under it.
	ctx    context.Context
	cancel context.CancelFunc
	// checked says the endpoint serves the chain: reconciliation may read it.
	checked bool
	// halted is why the chain halted; "" while it has not.
	halted string
}

// newChains tracks ids under ctx.
func newChains(ctx context.Context, ids []uint64, log *slog.Logger) *chains {
	c := &chains{log: log, state: map[uint64]*chainState{}}
	for _, id := range ids {
		st := &chainState{}
		st.ctx, st.cancel = context.WithCancel(ctx)
		c.state[id] = st
	}
	return c
}

// context is the chain's context, which ends when it halts.
func (c *chains) context(id uint64) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state[id].ctx
}

// checked records that the chain's endpoint serves it.
func (c *chains) checked(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state[id].checked = true
}

// halt stops booking chain id for err, with an alert, once. The chain's
// context ends: its reconciliation stops with it.
func (c *chains) halt(id uint64, err error) {
	reason := haltScannerStopped
	switch {
	case errors.Is(err, scanner.ErrDeepReorg):
		reason = haltDeepReorg
	case errors.Is(err, scanner.ErrWrongChain):
		reason = haltWrongChain
	}
	c.mu.Lock()
	st := c.state[id]
	first := st.halted == ""
	if first {
		st.halted = reason
	}
	c.mu.Unlock()
	st.cancel()
	if first {
		c.log.Error("ledger: chain halted: the ledger stops booking it until ledgerd restarts", "alert", true,
			"chain_id", id, "reason", reason, "err", err,
			"runbook", "docs/operations.md, ledger: a chain forked below what the ledger keeps")
	}
}

// halted reports, for every chain, whether it is halted: the
// txfence_ledger_chain_halted gauge.
func (c *chains) halted() map[uint64]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uint64]bool, len(c.state))
	for id, st := range c.state {
		out[id] = st.halted != ""
	}
	return out
}

// isHalted reports whether chain id is halted: the feed consumer sets
// its events aside unread. A chain not booked here is not halted.
func (c *chains) isHalted(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.state[id]
	return ok && st.halted != ""
}

// reconcilable is the chain's context when it may be reconciled: its
// endpoint checked, and not halted.
func (c *chains) reconcilable(id uint64) (context.Context, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.state[id]
	switch {
	case st.halted != "":
		return nil, errs.Errorf(errs.Unavailable, "chain %d is halted (%s): the ledger stopped booking it; see the runbook", id, st.halted)
	case !st.checked:
		return nil, errs.Errorf(errs.Unavailable, "chain %d: the ledger has not yet checked that its endpoint serves it", id)
	}
	return st.ctx, nil
}

// chainReconcilers reconcile each chain on demand (POST
// /v1/reconciliations) with that chain's Reconciler, and refuse a chain
// that is halted or not yet checked: its endpoint may serve another chain,
// whose balances would be booked to suspense as differences.
type chainReconcilers struct {
	chains *chains
	by     map[uint64]*reconcile.Reconciler
	// none answers for a chain without an endpoint, as one Reconciler of
	// every chain would.
	none *reconcile.Reconciler
}

// Reconcile implements httpapi.Reconciler.
func (c *chainReconcilers) Reconcile(ctx context.Context, chainID uint64, trigger string) (*ledger.ReconciliationRun, error) {
	r, ok := c.by[chainID]
	if !ok {
		return c.none.Reconcile(ctx, chainID, trigger)
	}
	chainCtx, err := c.chains.reconcilable(chainID)
	if err != nil {
		return nil, err
	}
	// A run in flight when the chain halts is cut short, as the
	// scheduled ones are.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(chainCtx, cancel)()
	return r.Reconcile(ctx, chainID, trigger)
}
