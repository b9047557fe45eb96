// Package worker runs the per-signer pipeline on the node that holds the
// signer's lease: one goroutine per signer takes its transactions from
// INIT through simulation, the policy's dry run, batch nonce allocation,
// batch signing and broadcast, every step a fenced write, so a node that
// lost the lease writes nothing more. Started on lease acquisition, it
// first resumes what a previous owner left: ALLOCATED transactions are
// signed again (signerd answers the same signature), SIGNED ones are
// broadcast.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
)

// Deps are what the workers use.
type Deps struct {
	Store  *postgres.Store
	Chains *txmanager.Chains
	// Readers are the chains' read RPCs, by chain id.
	Readers map[uint64]*chain.Reader
	Signer  *remote.Signer
	Router  *remote.Router
	// Fenced is told when a fenced write touched nothing (lease.Manager's
	// Fenced): the signer's work stops.
	Fenced func(txmanager.Fence)
	Log    *slog.Logger
	// PollEvery is how often an idle worker looks for new work.
	PollEvery time.Duration
	// GasMultiplier scales gas estimates (chain.DefaultGasMultiplier).
	GasMultiplier float64
	// ApprovalTTL is how long a transaction waits for approvals.
	ApprovalTTL time.Duration
	// AfterStep, when set, is called after each write-ahead step of the
	// pipeline has committed (or, for StepSignature, before the signature
	// is stored): a fault-injection point for the crash tests, nil in
	// production.
	AfterStep func(Step)
}

// Step names a point of the pipeline where a crash must lose nothing.
type Step string

// The steps, in pipeline order.
const (
	// StepAllocated: nonces are durable; nothing is signed yet.
	StepAllocated Step = "allocated"
	// StepSignature: signerd has signed (and recorded) the batch; the
	// signatures are not stored yet.
	StepSignature Step = "signature"
	// StepSigned: the signed transactions are durable; nothing is sent.
	StepSigned Step = "signed"
	// StepBroadcast: a route accepted the transactions; BROADCASTED is not
	// written yet.
	StepBroadcast Step = "broadcast"
)

// Steps lists every step.
var Steps = []Step{StepAllocated, StepSignature, StepSigned, StepBroadcast}

func (d *Deps) after(s Step) {
	if d.AfterStep != nil {
		d.AfterStep(s)
	}
}

// Pool runs one worker per acquired signer; it is the lease.Handler.
type Pool struct {
	deps Deps
	base context.Context

	mu      sync.Mutex
	running map[txmanager.SignerKey]*running
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPool makes a pool whose workers stop when base ends.
func NewPool(base context.Context, d Deps) *Pool {
	if d.PollEvery <= 0 {
		d.PollEvery = 50 * time.Millisecond
	}
	if d.GasMultiplier == 0 {
		d.GasMultiplier = chain.DefaultGasMultiplier
	}
	if d.ApprovalTTL <= 0 {
		d.ApprovalTTL = 24 * time.Hour
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	return &Pool{deps: d, base: base, running: map[txmanager.SignerKey]*running{}}
}

// Acquired starts the signer's worker under fence f.
func (p *Pool) Acquired(f txmanager.Fence) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.running[f.Key]; r != nil { // a stale worker: stop it first
		r.cancel()
		<-r.done
	}
	ctx, cancel := context.WithCancel(p.base)
	r := &running{cancel: cancel, done: make(chan struct{})}
	p.running[f.Key] = r
	w := &worker{Deps: p.deps, fence: f, log: p.deps.Log.With("chain_id", f.Key.ChainID, "signer", f.Key.Signer.Hex(), "token", f.Token)}
	go func() {
		defer close(r.done)
		w.run(ctx)
	}()
}

// Lost stops the signer's worker and waits for it.
func (p *Pool) Lost(key txmanager.SignerKey, reason string) {
	p.mu.Lock()
	r := p.running[key]
	delete(p.running, key)
	p.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// worker is one signer's pipeline.
type worker struct {
	Deps
	fence txmanager.Fence
	log   *slog.Logger
	next  uint64 // the next nonce to allocate
}

func (w *worker) run(ctx context.Context) {
	tick := time.NewTicker(w.PollEvery)
	defer tick.Stop()
	settled := false
	for {
		var err error
		if !settled {
			err = w.settle(ctx)
			settled = err == nil
		}
		if settled {
			err = w.round(ctx)
		}
		switch {
		case errors.Is(err, txmanager.ErrFenced):
			w.log.Error("fenced: another node holds this signer now; stopping its work", "err", err)
			if w.Fenced != nil {
				w.Fenced(w.fence)
			}
			return
		case errors.Is(err, errHalt):
			w.log.Error("signer halted", "err", err)
			return
		case err != nil && ctx.Err() == nil:
			w.log.Warn("signer round failed; retrying", "err", err)
			settled = false // re-read the nonce cursor before allocating again
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// errHalt stops a signer's worker until its lease is acquired again: a
// state only an operator can resolve.
var errHalt = errors.New("halted")

func (w *worker) reader() (*chain.Reader, error) {
	r := w.Readers[w.fence.Key.ChainID]
	if r == nil {
		return nil, fmt.Errorf("no read RPC for chain %d", w.fence.Key.ChainID)
	}
	return r, nil
}

// settle fixes the next nonce: the highest of the cursor, the highest
// assigned + 1 and, when the key may be used outside txfence, the chain's
// pending nonce.
func (w *worker) settle(ctx context.Context) error {
	var pending *uint64
	cfg, ok := w.Chains.Signer(w.fence.Key)
	if !ok {
		return fmt.Errorf("%w: %s is not configured", errHalt, w.fence.Key)
	}
	if *cfg.ExternalUse {
		r, err := w.reader()
		if err != nil {
			return err
		}
		n, err := r.PendingNonce(ctx, w.fence.Key.Signer)
		if err != nil {
			return err
		}
		pending = &n
	}
	next, err := w.Store.NextNonce(ctx, w.fence, pending)
	if err != nil {
		return err
	}
	w.next = next
	return nil
}

// round does one pass over the signer's queue: resume what is half done,
// take new transactions through simulation and the dry run, then
// allocate, sign and broadcast what is ready.
func (w *worker) round(ctx context.Context) error {
	for _, step := range []func(context.Context) error{w.resume, w.intake, w.sendReady} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// resume signs ALLOCATED transactions (again: the same signature comes
// back) and broadcasts SIGNED ones.
func (w *worker) resume(ctx context.Context) error {
	allocated, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateAllocated}, 256)
	if err != nil {
		return err
	}
	if len(allocated) > 0 {
		if err := w.signAndStore(ctx, allocated); err != nil {
			return err
		}
	}
	signed, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateSigned}, 256)
	if err != nil || len(signed) == 0 {
		return err
	}
	return w.broadcast(ctx, signed)
}

// intake moves INIT transactions to SIMULATED (or FAILED, or a hold) and
// asks the policy before any nonce is spent.
func (w *worker) intake(ctx context.Context) error {
	txs, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateInit}, 64)
	if err != nil {
		return err
	}
	r, err := w.reader()
	if err != nil {
		return err
	}
	ch, _ := w.Chains.Chain(w.fence.Key.ChainID)
	cfg, _ := w.Chains.Signer(w.fence.Key)
	for i := range txs {
		t := &txs[i]
		if t.DependsOn != nil {
			parent, err := w.Store.Get(ctx, *t.DependsOn)
			if err != nil {
				return err
			}
			switch parent.State {
			case txmanager.StateConfirmed:
			case txmanager.StateFailed, txmanager.StateCancelled, txmanager.StateReverted:
				if _, err := w.Store.Fail(ctx, w.fence, t.ID, "dependency_failed", ""); err != nil {
					return err
				}
				continue
			default:
				if _, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateInit, txmanager.SubWaitingDependency, ""); err != nil {
					return err
				}
				continue
			}
		}
		sim, err := r.Simulate(ctx, &t.Intent, w.GasMultiplier)
		switch {
		case errors.Is(err, chain.ErrInsufficientFunds):
			if _, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateInit, txmanager.SubInsufficientFunds, "insufficient_funds"); err != nil {
				return err
			}
			w.log.Warn("insufficient funds: held", "tx_id", t.ID)
			continue
		case err != nil:
			return fmt.Errorf("simulate %s: %w", t.ID, err)
		case sim.Reverted:
			if _, err := w.Store.Fail(ctx, w.fence, t.ID, "simulation_reverted", sim.Reason); err != nil {
				return err
			}
			continue
		}
		fees, err := r.Fees(ctx, *cfg, &t.Intent, ch.Legacy)
		if err != nil {
			return err
		}
		d, err := w.Signer.Evaluate(ctx, remote.ToSign{Tx: t, GasLimit: sim.GasLimit, Fees: signerFees(fees)})
		if err != nil {
			return fmt.Errorf("policy dry run of %s: %w", t.ID, err)
		}
		if d.Verdict == remote.Deny {
			if _, err := w.Store.Fail(ctx, w.fence, t.ID, "policy_denied", d.RuleID); err != nil {
				return err
			}
			continue
		}
		if _, err := w.Store.Simulated(ctx, w.fence, t.ID, sim.GasLimit); err != nil {
			return err
		}
		if d.Verdict == remote.NeedsApproval {
			if _, err := w.Store.PendingApproval(ctx, w.fence, t.ID, time.Now().Add(w.ApprovalTTL), "approval_required:"+d.RuleID); err != nil {
				return err
			}
		}
	}
	return nil
}

// sendReady allocates nonces to SIMULATED transactions, up to the
// in-flight window, then signs and broadcasts them.
func (w *worker) sendReady(ctx context.Context) error {
	cfg, _ := w.Chains.Signer(w.fence.Key)
	inFlight, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateAllocated, txmanager.StateSigned, txmanager.StateBroadcasted}, cfg.InFlight)
	if err != nil {
		return err
	}
	room := cfg.InFlight - len(inFlight)
	if room <= 0 {
		return nil
	}
	ready, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateSimulated}, room)
	if err != nil || len(ready) == 0 {
		return err
	}
	ids := make([]uuid.UUID, len(ready))
	for i := range ready {
		ids[i] = ready[i].ID
	}
	allocated, err := w.Store.Allocate(ctx, w.fence, ids, w.next)
	if err != nil {
		return err
	}
	w.next += uint64(len(allocated))
	w.after(StepAllocated)
	if err := w.signAndStore(ctx, allocated); err != nil {
		return err
	}
	signed, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateSigned}, 256)
	if err != nil || len(signed) == 0 {
		return err
	}
	return w.broadcast(ctx, signed)
}

// signAndStore signs ALLOCATED transactions in one batch and stores each
// signature before anything is broadcast. signerd refusing one after its
// nonce was allocated halts the signer: its nonce cannot be given to
// another intent (signerd would refuse that too), and gaps are never
// filled silently.
func (w *worker) signAndStore(ctx context.Context, txs []txmanager.Tx) error {
	r, err := w.reader()
	if err != nil {
		return err
	}
	ch, _ := w.Chains.Chain(w.fence.Key.ChainID)
	cfg, _ := w.Chains.Signer(w.fence.Key)
	batch := make([]remote.ToSign, len(txs))
	fees := make([]chain.Fees, len(txs))
	for i := range txs {
		t := &txs[i]
		if fees[i], err = r.Fees(ctx, *cfg, &t.Intent, ch.Legacy); err != nil {
			return err
		}
		batch[i] = remote.ToSign{Tx: t, Nonce: t.Nonce, GasLimit: *t.GasLimit, Fees: signerFees(fees[i])}
	}
	results, err := w.Signer.SignBatch(ctx, batch)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	w.after(StepSignature)
	attempts := make([]postgres.Attempt, 0, len(results))
	for i, res := range results {
		if res.Outcome != remote.OutcomeSigned && res.Outcome != remote.OutcomeReplayed {
			return fmt.Errorf("%w: signerd answered %s (rule %s) for %s at nonce %d after allocation: the nonce stays reserved; resolve the policy and restart the signer",
				errHalt, res.Outcome, res.Decision.RuleID, txs[i].ID, *txs[i].Nonce)
		}
		attempts = append(attempts, postgres.Attempt{TxID: txs[i].ID, Raw: res.RawTx, Hash: res.Hash, MaxFeePerGas: fees[i].MaxFeePerGas,
			MaxPriorityFeePerGas: fees[i].MaxPriorityFeePerGas, GasPrice: fees[i].GasPrice})
	}
	if _, err := w.Store.Signed(ctx, w.fence, attempts); err != nil {
		return err
	}
	w.after(StepSigned)
	return nil
}

// broadcast sends SIGNED transactions through mevrouterd and records the
// accepted ones; refusals stay SIGNED and are sent again next round
// (nonce_too_low and friends are the chain follower's to settle).
func (w *worker) broadcast(ctx context.Context, txs []txmanager.Tx) error {
	// One broadcast per route: the request carries one route.
	byRoute := map[txmanager.Route][]txmanager.Tx{}
	for _, t := range txs {
		byRoute[t.Route] = append(byRoute[t.Route], t)
	}
	for route, group := range byRoute {
		ids := make([]uuid.UUID, len(group))
		for i := range group {
			ids[i] = group[i].ID
		}
		byID, err := w.Store.RawAttempts(ctx, ids)
		if err != nil {
			return err
		}
		raws := make([][]byte, len(group))
		for i := range group {
			if raws[i] = byID[group[i].ID]; raws[i] == nil {
				return fmt.Errorf("%s is SIGNED without a stored attempt", group[i].ID)
			}
		}
		sent, err := w.Router.Broadcast(ctx, remote.Broadcast{Raw: raws, Route: route})
		if err != nil {
			return fmt.Errorf("broadcast: %w", err)
		}
		w.after(StepBroadcast)
		var accepted []postgres.Sent
		for i, s := range sent {
			if !s.Accepted {
				w.log.Warn("broadcast refused", "tx_id", group[i].ID, "category", s.Category, "message", s.Message)
				continue
			}
			accepted = append(accepted, postgres.Sent{TxID: group[i].ID, Route: s.Route})
		}
		if _, err := w.Store.Broadcasted(ctx, w.fence, accepted, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

func signerFees(f chain.Fees) remote.Fees {
	return remote.Fees{MaxFeePerGas: f.MaxFeePerGas, MaxPriorityFeePerGas: f.MaxPriorityFeePerGas, GasPrice: f.GasPrice}
}
