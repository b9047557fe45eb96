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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/mevrouterapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/remote"
)

// Deps are what the workers use.
type Deps struct {
	Store  txmanager.WorkStore
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
	// FundsHold is how long a transaction may wait for funds before it
	// FAILS (insufficient_funds_timeout), counted from its acceptance;
	// FundsRetry is how often a held one is looked at again.
	FundsHold, FundsRetry time.Duration
	// GapRetry is how often the signature of an allocated transaction
	// signerd refused is asked for again while it leaves a nonce gap.
	GapRetry time.Duration
	// Metrics counts what operators alert on; nil counts nothing.
	Metrics *Metrics
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
	if d.FundsHold <= 0 {
		d.FundsHold = time.Hour
	}
	if d.FundsRetry <= 0 {
		d.FundsRetry = 5 * time.Second
	}
	if d.GapRetry <= 0 {
		d.GapRetry = 10 * time.Second
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
	w := &worker{Deps: p.deps, fence: f, log: p.deps.Log.With("chain_id", f.Key.ChainID, "signer", f.Key.Signer.Hex(), "token", f.Token),
		asked: map[uuid.UUID]askedPolicy{}, fundsRetryAt: map[uuid.UUID]time.Time{}, sendRetry: map[uuid.UUID]*backoff{}}
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

	// asked is what each transaction waiting for approvals had when the
	// policy last wanted more: no change, no new question.
	asked map[uuid.UUID]askedPolicy
	// gapSince is set while an allocated transaction that signerd refused
	// waits behind signed later nonces (gap_policy halt): no nonce is
	// allocated until it is signed; its signature is asked for again every
	// GapRetry.
	gapSince, retrySignAt time.Time
	// fundsRetryAt and sendRetry space out the retries of transactions
	// held for funds and of refused broadcasts.
	fundsRetryAt map[uuid.UUID]time.Time
	sendRetry    map[uuid.UUID]*backoff
	// l1Fees are the L1 data fees of the signer's open transactions as
	// priced here, on a chain that charges them (openL1Fees).
	l1Fees map[uuid.UUID]*big.Int
	// intakeAfter is where intake's next page of INIT transactions
	// starts (uuid.Nil: at the first).
	intakeAfter uuid.UUID
}

// intakePage is how many INIT transactions one intake pass looks at.
const intakePage = 64

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
			w.Metrics.halted(w.fence.Key)
			return
		case errors.Is(err, errResettle):
			settled = false
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

// errResettle ends a round whose nonces were given back: the next nonce
// is read again from the database before anything more is allocated.
var errResettle = errors.New("nonces released")

func (w *worker) reader() (*chain.Reader, error) {
	r := w.Readers[w.fence.Key.ChainID]
	if r == nil {
		return nil, fmt.Errorf("no read RPC for chain %d", w.fence.Key.ChainID)
	}
	return r, nil
}

func (w *worker) config() (txmanager.Chain, txmanager.SignerConfig) {
	ch, _ := w.Chains.Chain(w.fence.Key.ChainID)
	cfg, _ := w.Chains.Signer(w.fence.Key)
	return *ch, *cfg
}

// settle fixes the next nonce: the highest of the cursor, the highest
// assigned + 1, the chain's mined nonce (a nonce the chain consumed is
// never signed again, whatever the database remembers: see chainAhead)
// and, when the key may be used outside txfence, the chain's pending
// nonce.
func (w *worker) settle(ctx context.Context) error {
	cfg, ok := w.Chains.Signer(w.fence.Key)
	if !ok {
		return fmt.Errorf("%w: %s is not configured", errHalt, w.fence.Key)
	}
	mined, err := w.chainAhead(ctx)
	if err != nil {
		return err
	}
	pending, err := w.chainNonce(ctx, *cfg)
	if err != nil {
		return err
	}
	if pending == nil || *pending < mined {
		pending = &mined
	}
	next, err := w.Store.NextNonce(ctx, w.fence, pending)
	if err != nil {
		return err
	}
	w.next = next
	return nil
}

// chainNonce is the chain's pending nonce of the signer when its key may
// be used outside txfence, nil otherwise.
func (w *worker) chainNonce(ctx context.Context, cfg txmanager.SignerConfig) (*uint64, error) {
	if !*cfg.ExternalUse {
		return nil, nil
	}
	r, err := w.reader()
	if err != nil {
		return nil, err
	}
	n, err := r.PendingNonce(ctx, w.fence.Key.Signer)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// round does one pass over the signer's queue: carry out operators'
// actions (operator.go), resume what is half done, settle approvals, take
// new transactions through simulation and the dry run, then allocate, sign
// and broadcast what is ready.
func (w *worker) round(ctx context.Context) error {
	for _, step := range []func(context.Context) error{w.operatorActions, w.resume, w.approvals, w.intake, w.sendReady} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// resume signs ALLOCATED transactions (again: the same signature comes
// back) and broadcasts SIGNED ones.
func (w *worker) resume(ctx context.Context) error {
	allocated, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateAllocated}, remote.MaxSignBatch)
	if err != nil {
		return err
	}
	switch {
	case len(allocated) == 0:
		w.gapSince = time.Time{}
	case w.gapSince.IsZero() || !time.Now().Before(w.retrySignAt):
		if err := w.signAndStore(ctx, allocated); err != nil {
			return err
		}
	}
	return w.broadcastSigned(ctx)
}

// approvals fails the transactions whose wait for approvals is over and
// asks the policy again about those with new approvals: allowed, they are
// ready for a nonce.
func (w *worker) approvals(ctx context.Context) error {
	waiting, err := w.Store.AwaitingApproval(ctx, w.fence.Key, 64)
	if err != nil || len(waiting) == 0 {
		return err
	}
	r, err := w.reader()
	if err != nil {
		return err
	}
	ch, cfg := w.config()
	var market *chain.Market // read at the first transaction that needs it
	for i := range waiting {
		a := &waiting[i]
		if a.Expired {
			if _, err := w.Store.Fail(ctx, w.fence, a.ID, txmanager.StateChanged{Reason: txmanager.ReasonApprovalExpired}); err != nil && !raced(err) {
				return err
			}
			delete(w.asked, a.ID)
			continue
		}
		if q, ok := w.asked[a.ID]; ok && q.decisions == a.Decisions {
			if q.belowFees == nil {
				continue
			}
			// Some approvals did not cover the price then: ask again once
			// the market falls to the highest of their ceilings.
			if market, err = readMarket(ctx, r, market, ch.Legacy); err != nil {
				return err
			}
			if feeCap(market.Fees(cfg, &a.Intent)).Cmp(q.belowFees) > 0 {
				continue
			}
		}
		approvals, err := w.approvalsOf(ctx, []txmanager.Tx{a.Tx})
		if err != nil {
			return err
		}
		if market, err = readMarket(ctx, r, market, ch.Legacy); err != nil {
			return err
		}
		fees := market.Fees(cfg, &a.Intent)
		d, err := w.Signer.Evaluate(ctx, remote.ToSign{Tx: &a.Tx, GasLimit: *a.GasLimit, Fees: fixed(fees), Approvals: approvals[a.ID]})
		if errs.Is(err, errs.Invalid) {
			// signerd refuses this transaction's request (its approvals,
			// say): that is this transaction's problem, not the wallet's.
			// Failing the round here would hold back every other
			// transaction of the signer until this one's wait expired;
			// it is asked again once its approvals change.
			w.asked[a.ID] = askedPolicy{decisions: a.Decisions}
			w.log.Warn("signerd refused the approvals of a transaction; it waits for them to change", "tx_id", a.ID, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("policy on the approvals of %s: %w", a.ID, err)
		}
		switch d.Verdict {
		case remote.Allow:
			_, err = w.Store.Approved(ctx, w.fence, a.ID, d.Approved)
		case remote.Deny:
			_, err = w.Store.Fail(ctx, w.fence, a.ID, txmanager.StateChanged{Reason: txmanager.ReasonPolicyDenied, Rule: d.RuleID})
		default:
			q := askedPolicy{decisions: a.Decisions, belowFees: highestCeilingBelow(approvals[a.ID], feeCap(fees))}
			w.asked[a.ID] = q
			w.log.Info("approvals do not suffice yet", "tx_id", a.ID, "rule", d.RuleID, "threshold", d.Threshold, "approved", d.Approved,
				"fee_cap", feeCap(fees), "highest_ceiling_below_it", q.belowFees)
		}
		if err != nil && !raced(err) {
			return err
		}
		if d.Verdict != remote.NeedsApproval {
			delete(w.asked, a.ID)
		}
	}
	return nil
}

// askedPolicy is what a transaction waiting for approvals had when the
// policy last wanted more.
type askedPolicy struct {
	// decisions sums up its stored approvals (txmanager.Awaiting.Decisions).
	decisions string
	// belowFees is the highest fee ceiling among the approvals that did
	// not cover the fee cap priced then, nil if none: they may count once
	// the market falls to it, with no approval changed.
	belowFees *big.Int
}

// highestCeilingBelow is the highest fee ceiling of approvals under
// price, nil if none is.
func highestCeilingBelow(approvals []remote.Approval, price *big.Int) *big.Int {
	var highest *big.Int
	for _, a := range approvals {
		if a.MaxFeePerGas != nil && a.MaxFeePerGas.Cmp(price) < 0 && (highest == nil || a.MaxFeePerGas.Cmp(highest) > 0) {
			highest = a.MaxFeePerGas
		}
	}
	return highest
}

// feeCap is what an approval's fee ceiling is compared with: the gas
// price of a legacy transaction, the max fee per gas of an eip1559 one.
func feeCap(f chain.Fees) *big.Int {
	if f.GasPrice != nil {
		return f.GasPrice
	}
	return f.MaxFeePerGas
}

// approvalsOf reads the stored approvals of txs in signerd's form.
func (w *worker) approvalsOf(ctx context.Context, txs []txmanager.Tx) (map[uuid.UUID][]remote.Approval, error) {
	ids := make([]uuid.UUID, len(txs))
	for i := range txs {
		ids[i] = txs[i].ID
	}
	return w.Store.Approvals(ctx, ids)
}

// raced tells a state change that lost to the API (a cancel or a
// rejection in between): the transaction is simply no longer ours to move.
func raced(err error) bool {
	var se *txmanager.StateError
	return errors.As(err, &se)
}

// intake moves INIT transactions to SIMULATED, PENDING_APPROVAL, FAILED or
// a hold, before any nonce is spent: dependencies, simulation, the balance
// against everything pending, and the policy's dry run.
func (w *worker) intake(ctx context.Context) error {
	txs, err := w.Store.OpenAfter(ctx, w.fence.Key, []txmanager.State{txmanager.StateInit}, w.intakeAfter, intakePage)
	if err != nil {
		return err
	}
	// The next pass takes the next page, and the first again after the
	// last: a page of transactions that wait (for their parents, for
	// funds) never keeps the signer's later ones from being looked at.
	w.intakeAfter = uuid.Nil
	if len(txs) == intakePage {
		w.intakeAfter = txs[len(txs)-1].ID
	}
	if len(txs) == 0 {
		return nil
	}
	r, err := w.reader()
	if err != nil {
		return err
	}
	ch, cfg := w.config()
	parents, err := w.parentStates(ctx, txs)
	if err != nil {
		return err
	}
	// Read at the first transaction that needs them.
	var (
		budget *fundsBudget
		market *chain.Market
	)
	for i := range txs {
		t := &txs[i]
		if t.SubState == txmanager.SubInsufficientFunds {
			if time.Since(t.CreatedAt) > w.FundsHold {
				if _, err := w.Store.Fail(ctx, w.fence, t.ID, txmanager.StateChanged{Reason: txmanager.ReasonFundsTimeout}); err != nil && !raced(err) {
					return err
				}
				delete(w.fundsRetryAt, t.ID)
				continue
			}
			if time.Now().Before(w.fundsRetryAt[t.ID]) {
				continue
			}
		}
		ready, err := w.dependencyMet(ctx, t, parents)
		if err != nil {
			return err
		}
		if !ready {
			continue
		}
		sim, err := r.Simulate(ctx, &t.Intent, chain.GasRules{Multiplier: w.GasMultiplier, EstimateFloor: ch.FloorsAtEstimate()})
		switch {
		case errors.Is(err, chain.ErrInsufficientFunds):
			if err := w.holdForFunds(ctx, t, "the node refused the simulation: insufficient funds"); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("simulate %s: %w", t.ID, err)
		case sim.Reverted:
			_, err := w.Store.Fail(ctx, w.fence, t.ID, txmanager.StateChanged{Reason: txmanager.ReasonSimulationReverted, RevertReason: sim.Reason})
			if err != nil && !raced(err) {
				return err
			}
			continue
		}
		if market, err = readMarket(ctx, r, market, ch.Legacy); err != nil {
			return err
		}
		fees := market.Fees(cfg, &t.Intent)
		l1Fee, err := w.l1Fee(ctx, r, &ch, &t.Intent, sim.GasLimit, fees)
		if err != nil {
			return fmt.Errorf("L1 data fee of %s: %w", t.ID, err)
		}
		if budget == nil {
			if budget, err = w.readBudget(ctx, r, &ch, cfg, market, fees); err != nil {
				return err
			}
		}
		cost := chain.Cost(sim.GasLimit, fees, t.Value, l1Fee)
		if !budget.fits(cost) {
			why := fmt.Sprintf("balance %s at block %d < %s pending + %s for this transaction", budget.balance, budget.block, budget.pending, cost)
			if l1Fee != nil {
				why += fmt.Sprintf(" (its L1 data fee %s included)", l1Fee)
			}
			if err := w.holdForFunds(ctx, t, why); err != nil {
				return err
			}
			continue
		}
		d, err := w.Signer.Evaluate(ctx, remote.ToSign{Tx: t, GasLimit: sim.GasLimit, Fees: fixed(fees)})
		if err != nil {
			return fmt.Errorf("policy dry run of %s: %w", t.ID, err)
		}
		switch d.Verdict {
		case remote.Deny:
			_, err = w.Store.Fail(ctx, w.fence, t.ID, txmanager.StateChanged{Reason: txmanager.ReasonPolicyDenied, Rule: d.RuleID})
		case remote.NeedsApproval:
			_, err = w.Store.PendingApproval(ctx, w.fence, t.ID, sim.GasLimit, time.Now().Add(w.ApprovalTTL),
				txmanager.StateChanged{Reason: txmanager.ReasonApprovalRequired, Rule: d.RuleID})
		default:
			_, err = w.Store.Simulated(ctx, w.fence, t.ID, sim.GasLimit)
		}
		if err != nil && !raced(err) {
			return err
		}
		if err == nil && d.Verdict != remote.Deny {
			budget.spend(cost)
			w.keepL1Fee(t.ID, l1Fee)
		}
		delete(w.fundsRetryAt, t.ID)
	}
	return nil
}

// readMarket reads the fee market unless m already holds it: once per
// pass over a queue, not once per transaction.
func readMarket(ctx context.Context, r *chain.Reader, m *chain.Market, legacy bool) (*chain.Market, error) {
	if m != nil {
		return m, nil
	}
	read, err := r.Market(ctx, legacy)
	if err != nil {
		return nil, err
	}
	return &read, nil
}

// parentStates reads the states of every parent of txs in one statement,
// whatever their chains and however many: nil when none has a parent.
func (w *worker) parentStates(ctx context.Context, txs []txmanager.Tx) (map[uuid.UUID]txmanager.State, error) {
	var ids []uuid.UUID
	for i := range txs {
		ids = append(ids, txs[i].DependsOn...)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return w.Store.ParentStates(ctx, ids)
}

// dependencyMet tells whether t may go on: it depends on nothing, or on
// transactions that are all CONFIRMED (states, read for the whole queue
// at once). A parent FAILED, CANCELLED or REVERTED fails t, the reason
// naming it (dependency_failed: <parent> <state>), whatever the others
// are; while any is still on its way, t waits (sub-state
// waiting_dependency).
func (w *worker) dependencyMet(ctx context.Context, t *txmanager.Tx, states map[uuid.UUID]txmanager.State) (bool, error) {
	waiting := false
	for _, parent := range t.DependsOn {
		switch state := states[parent]; state {
		case txmanager.StateConfirmed:
		case txmanager.StateFailed, txmanager.StateCancelled, txmanager.StateReverted:
			reason := fmt.Sprintf("%s: %s %s", txmanager.ReasonDependencyFailed, parent, state)
			if _, err := w.Store.Fail(ctx, w.fence, t.ID, txmanager.StateChanged{Reason: reason}); err != nil && !raced(err) {
				return false, err
			}
			return false, nil
		default:
			waiting = true
		}
	}
	if !waiting {
		return true, nil
	}
	if t.SubState == txmanager.SubWaitingDependency {
		return false, nil // held already: nothing to write
	}
	_, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateInit, txmanager.SubWaitingDependency, txmanager.ReasonWaitingDependency)
	if err != nil && !raced(err) {
		return false, err
	}
	return false, nil
}

// holdForFunds keeps t in INIT with the sub-state insufficient_funds and
// looks at it again after FundsRetry; no nonce is spent on it.
func (w *worker) holdForFunds(ctx context.Context, t *txmanager.Tx, why string) error {
	if t.SubState != txmanager.SubInsufficientFunds {
		w.log.Warn("insufficient funds: transaction held", "tx_id", t.ID, "why", why, "alert", true)
		w.Metrics.heldForFunds(w.fence.Key)
	}
	w.fundsRetryAt[t.ID] = time.Now().Add(w.FundsRetry)
	_, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateInit, txmanager.SubInsufficientFunds, txmanager.ReasonInsufficientFunds)
	if err != nil && !raced(err) {
		return err
	}
	return nil
}

// fundsBudget is a signer's balance at a mined block against the most its
// open transactions may still cost.
type fundsBudget struct {
	block            uint64
	balance, pending *big.Int
}

// readBudget reads the signer's funds and what its open transactions may
// still cost: Store.PendingCost, plus their L1 data fees on a chain that
// charges them. market prices them (fees is its price for the
// transaction at hand, the market's cap for open ones not yet signed).
func (w *worker) readBudget(ctx context.Context, r *chain.Reader, ch *txmanager.Chain, cfg txmanager.SignerConfig, market *chain.Market,
	fees chain.Fees) (*fundsBudget, error) {
	funds, err := r.MinedFunds(ctx, w.fence.Key.Signer)
	if err != nil {
		return nil, err
	}
	pending, err := w.Store.PendingCost(ctx, w.fence.Key, funds.MinedNonce, feeCap(fees))
	if err != nil {
		return nil, err
	}
	l1Fees, err := w.openL1Fees(ctx, r, ch, cfg, market, funds.MinedNonce)
	if err != nil {
		return nil, err
	}
	return &fundsBudget{block: funds.Block, balance: funds.Balance, pending: pending.Add(pending, l1Fees)}, nil
}

// l1Fee is the L1 data fee of in signed with gasLimit and fees on a chain
// that charges one (chain.Reader.L1Fee, with the chain's oracle and
// margin), nil on any other.
func (w *worker) l1Fee(ctx context.Context, r *chain.Reader, ch *txmanager.Chain, in *txmanager.Intent, gasLimit uint64, fees chain.Fees) (*big.Int, error) {
	oracle, margin, ok := ch.ChargesL1Fee()
	if !ok {
		return nil, nil
	}
	return r.L1Fee(ctx, oracle, in, gasLimit, fees, margin)
}

// pendingStates are the states of the transactions Store.PendingCost
// counts (those at a nonce below the chain's mined nonce aside).
var pendingStates = []txmanager.State{txmanager.StateSimulated, txmanager.StatePendingApproval, txmanager.StateAllocated,
	txmanager.StateSigned, txmanager.StateBroadcasted}

// openL1Fees is what the L1 data fees of the signer's open transactions
// may still take, which Store.PendingCost leaves out: 0 on a chain that
// charges none. Each is the fee read when the transaction passed intake
// here (keepL1Fee), or, for one this worker has not priced (its intake
// ran on another node or before a restart), read now at its signing fees
// or the market's; kept while the transaction is open. The margin on
// each covers the L1 prices rising meanwhile.
func (w *worker) openL1Fees(ctx context.Context, r *chain.Reader, ch *txmanager.Chain, cfg txmanager.SignerConfig, market *chain.Market,
	minedNonce uint64) (*big.Int, error) {
	total := new(big.Int)
	if _, _, ok := ch.ChargesL1Fee(); !ok {
		return total, nil
	}
	open, err := w.Store.Open(ctx, w.fence.Key, pendingStates, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	kept := make(map[uuid.UUID]*big.Int, len(open))
	for i := range open {
		t := &open[i]
		if (t.Nonce != nil && *t.Nonce < minedNonce) || t.GasLimit == nil {
			continue // mined: paid for in the balance
		}
		fee := w.l1Fees[t.ID]
		if fee == nil {
			fees := market.Fees(cfg, &t.Intent)
			if f := t.SigningFees; f != nil {
				fees = chain.Fees{MaxFeePerGas: f.MaxFeePerGas, MaxPriorityFeePerGas: f.MaxPriorityFeePerGas, GasPrice: f.GasPrice}
			}
			if fee, err = w.l1Fee(ctx, r, ch, &t.Intent, *t.GasLimit, fees); err != nil {
				return nil, fmt.Errorf("L1 data fee of open %s: %w", t.ID, err)
			}
		}
		kept[t.ID] = fee
		total.Add(total, fee)
	}
	w.l1Fees = kept
	return total, nil
}

// keepL1Fee remembers the L1 data fee of a transaction that passed intake
// (nil: its chain charges none) for openL1Fees.
func (w *worker) keepL1Fee(id uuid.UUID, fee *big.Int) {
	if fee == nil {
		return
	}
	if w.l1Fees == nil {
		w.l1Fees = map[uuid.UUID]*big.Int{}
	}
	w.l1Fees[id] = fee
}

func (b *fundsBudget) fits(cost *big.Int) bool {
	return new(big.Int).Add(b.pending, cost).Cmp(b.balance) <= 0
}

func (b *fundsBudget) spend(cost *big.Int) { b.pending = new(big.Int).Add(b.pending, cost) }

// sendReady allocates nonces to SIMULATED transactions, up to the
// in-flight window, then signs and broadcasts them. Nothing is allocated
// while a refused signature leaves a gap.
func (w *worker) sendReady(ctx context.Context) error {
	if !w.gapSince.IsZero() {
		return nil
	}
	_, cfg := w.config()
	inFlight, err := w.Store.CountOpen(ctx, w.fence.Key, []txmanager.State{txmanager.StateAllocated, txmanager.StateSigned, txmanager.StateBroadcasted})
	if err != nil {
		return err
	}
	// No more at once than signerd signs in one batch.
	room := min(cfg.InFlight-inFlight, remote.MaxSignBatch)
	if room <= 0 {
		return nil
	}
	ready, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateSimulated}, room)
	if err != nil || len(ready) == 0 {
		return err
	}
	// A key used outside txfence may have moved the chain's nonce since
	// the last allocation: skip past whatever it sent.
	chainNext, err := w.chainNonce(ctx, cfg)
	if err != nil {
		return err
	}
	if chainNext != nil && *chainNext > w.next {
		w.log.Warn("the key was used outside txfence: skipping its nonces", "from", w.next, "to", *chainNext)
		w.next = *chainNext
	}
	// The fees are fixed with the nonce: a signature asked for again after
	// a crash must be for the very same transaction.
	ch, _ := w.config()
	r, err := w.reader()
	if err != nil {
		return err
	}
	market, err := r.Market(ctx, ch.Legacy)
	if err != nil {
		return err
	}
	ids := make([]uuid.UUID, len(ready))
	fees := make([]txmanager.Fees, len(ready))
	for i := range ready {
		ids[i], fees[i] = ready[i].ID, fixed(market.Fees(cfg, &ready[i].Intent))
	}
	allocated, err := w.Store.Allocate(ctx, w.fence, ids, fees, w.next)
	if err != nil {
		return err
	}
	w.next += uint64(len(allocated))
	w.after(StepAllocated)
	if err := w.signAndStore(ctx, allocated); err != nil {
		return err
	}
	return w.broadcastSigned(ctx)
}

// signAndStore signs ALLOCATED transactions in one batch, with their
// approvals, and stores every signature before anything is broadcast.
// Those signerd refuses go to settleRefused.
func (w *worker) signAndStore(ctx context.Context, txs []txmanager.Tx) error {
	r, err := w.reader()
	if err != nil {
		return err
	}
	ch, cfg := w.config()
	approvals, err := w.approvalsOf(ctx, txs)
	if err != nil {
		return err
	}
	var market *chain.Market // for transactions allocated without fees
	batch := make([]remote.ToSign, len(txs))
	fees := make([]txmanager.Fees, len(txs))
	for i := range txs {
		t := &txs[i]
		if t.SigningFees != nil {
			fees[i] = *t.SigningFees
		} else {
			if market, err = readMarket(ctx, r, market, ch.Legacy); err != nil {
				return err
			}
			fees[i] = fixed(market.Fees(cfg, &t.Intent))
		}
		batch[i] = remote.ToSign{Tx: t, Nonce: t.Nonce, GasLimit: *t.GasLimit, Fees: fees[i], Approvals: approvals[t.ID]}
	}
	results, err := w.Signer.SignBatch(ctx, batch)
	if bad := invalidRequests(err, txs); len(bad) > 0 {
		// signerd refused the batch for the shape of these requests (say,
		// approvals stored before they were checked): that is their
		// transactions' problem, not the wallet's. The others are signed
		// first, as in a batch where signerd denies some requests, and the
		// refused ones are then settled like denied ones.
		w.log.Warn("signerd refused a signing batch for some of its requests", "err", err)
		if rest := withoutRefused(txs, bad); len(rest) > 0 {
			if err := w.signAndStore(ctx, rest); err != nil && !errors.Is(err, errResettle) {
				return err
			}
		}
		return w.settleRefused(ctx, bad)
	}
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	w.after(StepSignature)
	attempts := make([]txmanager.Attempt, 0, len(results))
	var refused []refusal
	for i, res := range results {
		if res.Outcome != remote.OutcomeSigned && res.Outcome != remote.OutcomeReplayed {
			refused = append(refused, refusal{tx: txs[i], outcome: res.Outcome, rule: res.Decision.RuleID})
			continue
		}
		attempts = append(attempts, txmanager.Attempt{TxID: txs[i].ID, Raw: res.RawTx, Hash: res.Hash, MaxFeePerGas: fees[i].MaxFeePerGas,
			MaxPriorityFeePerGas: fees[i].MaxPriorityFeePerGas, GasPrice: fees[i].GasPrice})
	}
	if len(attempts) > 0 {
		if _, err := w.Store.Signed(ctx, w.fence, attempts); err != nil {
			return err
		}
		w.after(StepSigned)
	}
	if len(refused) > 0 {
		return w.settleRefused(ctx, refused)
	}
	w.gapSince = time.Time{}
	return nil
}

// invalidRequests are the transactions of txs whose requests err, a
// signing batch's error, names as invalid (its fields point into
// /requests/<i>/): none when err is not Invalid or names no request, as
// when signerd holds no key for the signer, which is the wallet's.
func invalidRequests(err error, txs []txmanager.Tx) []refusal {
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid {
		return nil
	}
	var out []refusal
	seen := map[int]bool{}
	for _, f := range e.Fields {
		rest, ok := strings.CutPrefix(f.Pointer, "/requests/")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, "/")
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= len(txs) || seen[i] {
			continue
		}
		seen[i] = true
		out = append(out, refusal{tx: txs[i], outcome: remote.OutcomeDenied, rule: "invalid request: " + f.Pointer + ": " + f.Detail})
	}
	return out
}

// withoutRefused is txs less the transactions of refused.
func withoutRefused(txs []txmanager.Tx, refused []refusal) []txmanager.Tx {
	out := make([]txmanager.Tx, 0, len(txs))
	for _, t := range txs {
		if !slices.ContainsFunc(refused, func(rf refusal) bool { return rf.tx.ID == t.ID }) {
			out = append(out, t)
		}
	}
	return out
}

// refusal is an allocated transaction signerd did not sign.
type refusal struct {
	tx      txmanager.Tx
	outcome remote.Outcome
	rule    string
}

// settleRefused deals with allocated transactions signerd would not sign
// (its policy changed, a rolling window filled, approvals expired). Their
// nonces are given back when no later nonce is signed: denied ones FAIL,
// those needing approvals wait for them again. Otherwise giving the nonces
// back would leave a gap, and the signer's gap policy decides: halt stops
// allocating, marks them stuck and asks for the signature again every
// GapRetry; fill fails them and gives each nonce to a 0-value transfer to
// the signer itself. A refusal by double-sign protection (signerd signed
// something else at that nonce) halts the signer: only an operator can
// tell what happened.
func (w *worker) settleRefused(ctx context.Context, refused []refusal) error {
	releases := make([]txmanager.NonceRelease, len(refused))
	for i, rf := range refused {
		w.log.Warn("signerd refused an allocated transaction", "tx_id", rf.tx.ID, "nonce", *rf.tx.Nonce, "outcome", rf.outcome, "rule", rf.rule)
		switch rf.outcome {
		case remote.OutcomeNeedsApproval:
			releases[i] = txmanager.NonceRelease{TxID: rf.tx.ID, To: txmanager.StatePendingApproval, Reason: txmanager.ReasonApprovalRequired,
				ApprovalExpires: time.Now().Add(w.ApprovalTTL)}
		case remote.OutcomeDenied:
			releases[i] = txmanager.NonceRelease{TxID: rf.tx.ID, To: txmanager.StateFailed, Reason: txmanager.ReasonSigningRefused}
		default:
			_, err := w.Store.SetSubState(ctx, w.fence, rf.tx.ID, txmanager.StateAllocated, txmanager.SubStuck,
				fmt.Sprintf("%s: signerd answered %s at nonce %d", txmanager.ReasonSigningRefused, rf.outcome, *rf.tx.Nonce))
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: signerd answered %s (rule %s) for %s at nonce %d: it holds another signature at that nonce",
				errHalt, rf.outcome, rf.rule, rf.tx.ID, *rf.tx.Nonce)
		}
	}
	_, err := w.Store.ReleaseNonces(ctx, w.fence, releases)
	if err == nil {
		return errResettle
	}
	if !errors.Is(err, txmanager.ErrLaterNonceSigned) {
		return err
	}
	_, cfg := w.config()
	var market *chain.Market
	for _, rf := range refused {
		why := fmt.Sprintf("%s: signerd answered %s (rule %s) at nonce %d, later nonces are signed", txmanager.ReasonSigningRefused, rf.outcome, rf.rule, *rf.tx.Nonce)
		w.Metrics.gap(w.fence.Key, cfg.GapPolicy)
		// A filler signerd refuses is not filled again: that would never end.
		if cfg.GapPolicy == txmanager.GapFill && rf.tx.RequestID != txmanager.GapFillRequestID(fillerOf(rf.tx)) {
			ch, _ := w.config()
			r, err := w.reader()
			if err != nil {
				return err
			}
			if market, err = readMarket(ctx, r, market, ch.Legacy); err != nil {
				return err
			}
			_, filler, err := w.Store.FillGap(ctx, w.fence, rf.tx.ID, txmanager.ReasonSigningRefused, fixed(market.Fees(cfg, nil)))
			if err != nil {
				return err
			}
			w.log.Error("nonce gap filled with a 0-value transfer to the signer", "tx_id", rf.tx.ID, "filler", filler.ID, "nonce", *rf.tx.Nonce, "why", why, "alert", true)
			continue
		}
		if _, err := w.Store.SetSubState(ctx, w.fence, rf.tx.ID, txmanager.StateAllocated, txmanager.SubStuck, why); err != nil {
			return err
		}
		w.log.Error("nonce gap: allocation stops until this transaction is signed", "tx_id", rf.tx.ID, "why", why, "retry_every", w.GapRetry, "alert", true)
	}
	if cfg.GapPolicy != txmanager.GapFill {
		if w.gapSince.IsZero() {
			w.gapSince = time.Now()
		}
		w.retrySignAt = time.Now().Add(w.GapRetry)
	}
	return nil
}

// fillerOf is the transaction whose nonce t fills, if t is a gap filler
// (uuid.Nil otherwise).
func fillerOf(t txmanager.Tx) uuid.UUID {
	var m struct {
		FillsGapOf uuid.UUID `json:"fills_gap_of"`
	}
	_ = json.Unmarshal(t.Metadata, &m)
	return m.FillsGapOf
}

// broadcastSigned broadcasts the signer's SIGNED transactions that are due
// (not stuck, not waiting out a retry).
func (w *worker) broadcastSigned(ctx context.Context) error {
	signed, err := w.Store.Open(ctx, w.fence.Key, []txmanager.State{txmanager.StateSigned}, 256)
	if err != nil {
		return err
	}
	now := time.Now()
	due := signed[:0]
	for _, t := range signed {
		if t.SubState == txmanager.SubStuck {
			continue
		}
		if b := w.sendRetry[t.ID]; b != nil && now.Before(b.at) {
			continue
		}
		due = append(due, t)
	}
	if len(due) == 0 {
		return nil
	}
	return w.broadcast(ctx, due)
}

// broadcast sends SIGNED transactions through mevrouterd and records the
// accepted ones; a refusal is handled per SYSTEM.md section 5 (see
// refused).
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
		var accepted []txmanager.Sent
		for i, s := range sent {
			ok, err := w.refused(ctx, &group[i], s)
			if err != nil {
				return err
			}
			if ok {
				accepted = append(accepted, txmanager.Sent{TxID: group[i].ID, Route: s.Route})
				delete(w.sendRetry, group[i].ID)
			}
		}
		if len(accepted) == 0 {
			continue
		}
		if _, err := w.Store.Broadcasted(ctx, w.fence, accepted, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

// refused acts on a route's answer for t; ok means t counts as broadcast.
//   - accepted (already known included): broadcast.
//   - nonce too low: broadcast if t's own attempt is mined (a resend after
//     a crash); else the nonce went to someone else: stuck, for the chain
//     follower to settle.
//   - insufficient funds: the sub-state insufficient_funds, sent again
//     later.
//   - a refusal no resend changes (intrinsic gas too low, above a gas
//     limit cap, bad signature, above the node's fee cap, a transaction
//     type the nodes do not take, too large, undecodable, any other
//     rejection): stuck with the reason and an alert; an operator acts.
//   - execution reverted: the node ran it and it reverted, and one that
//     mines on arrival (Hardhat automining) may have mined it already.
//     Neither failed (the nonce may be consumed, and only the chain says)
//     nor resent (a resend can only be refused again): stuck with the
//     reason and an alert, so an operator sees it. The chain follower
//     tracks SIGNED hashes too, so if it is mined the follower records it
//     and it ends REVERTED (or CONFIRMED) whatever this verdict said.
//   - anything else (node failures, underpriced, a full pool, a nonce gap
//     in the node's view, an attempt of ours already pooled): sent again
//     with exponential backoff.
func (w *worker) refused(ctx context.Context, t *txmanager.Tx, s remote.Sent) (ok bool, err error) {
	if s.Accepted {
		return true, nil
	}
	w.Metrics.refused(w.fence.Key, s.Category)
	log := w.log.With("tx_id", t.ID, "nonce", *t.Nonce, "category", s.Category, "message", s.Message)
	switch mevrouterapi.ErrorCategory(s.Category) {
	case mevrouterapi.NonceTooLow:
		r, err := w.reader()
		if err != nil {
			return false, err
		}
		mined, err := r.Mined(ctx, *t.Hash)
		if err != nil || mined {
			return mined, err
		}
		log.Error("nonce too low and no attempt of ours is mined: the nonce was used outside txfence", "alert", true)
		return false, w.stuck(ctx, t, "nonce_too_low: "+s.Message)
	case mevrouterapi.InsufficientFunds:
		log.Warn("insufficient funds to broadcast: held", "alert", true)
		w.retryLater(t.ID)
		_, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateSigned, txmanager.SubInsufficientFunds, txmanager.ReasonInsufficientFunds)
		return false, err
	case mevrouterapi.IntrinsicGasTooLow, mevrouterapi.GasLimitExceeded, mevrouterapi.InvalidSenderOrSignature, mevrouterapi.TxFeeCapExceeded,
		mevrouterapi.TxTypeNotSupported, mevrouterapi.Oversized, mevrouterapi.Malformed, mevrouterapi.Rejected:
		log.Error("broadcast refused for good: stuck until an operator acts", "alert", true)
		return false, w.stuck(ctx, t, fmt.Sprintf("%s: %s: %s", txmanager.ReasonBroadcastRefused, s.Category, s.Message))
	case mevrouterapi.ExecutionReverted:
		log.Error("broadcast answered with a revert: stuck; if the node mined it, the chain follower records it", "alert", true)
		return false, w.stuck(ctx, t, fmt.Sprintf("%s: %s: %s", txmanager.ReasonBroadcastRefused, s.Category, s.Message))
	default:
		b := w.retryLater(t.ID)
		log.Warn("broadcast refused; sending again later", "retry_in", b.wait)
		return false, nil
	}
}

func (w *worker) stuck(ctx context.Context, t *txmanager.Tx, why string) error {
	_, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateSigned, txmanager.SubStuck, why)
	return err
}

// backoff spaces out the resends of one refused transaction.
type backoff struct {
	wait time.Duration
	at   time.Time
}

const (
	firstResend = 200 * time.Millisecond
	maxResend   = 30 * time.Second
)

func (w *worker) retryLater(id uuid.UUID) *backoff {
	b := w.sendRetry[id]
	if b == nil {
		b = &backoff{wait: firstResend}
		w.sendRetry[id] = b
	} else {
		b.wait = min(2*b.wait, maxResend)
	}
	b.at = time.Now().Add(b.wait)
	return b
}

// fixed keeps the fee fields of a price.
func fixed(f chain.Fees) txmanager.Fees {
	return txmanager.Fees{MaxFeePerGas: f.MaxFeePerGas, MaxPriorityFeePerGas: f.MaxPriorityFeePerGas, GasPrice: f.GasPrice}
}
