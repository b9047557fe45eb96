package follow

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/remote"
)

// Replacement attempts: fee bumps (automatic, per signer, or asked for by
// an operator) and cancels (operators only). Each goes through three
// durable steps, like the worker's first attempt:
//
//  1. plan: the attempt's number, kind and fees are written
//     (Store.PlanAttempt) before signerd is asked;
//  2. sign: signerd signs the plan as a replacement of the same intent (or
//     as a cancel its policy allows), and the attempt is stored as the
//     transaction's current one, claimed as sent (Store.StoreAttempt);
//  3. send: the raw attempt goes to its route.
//
// A crash after 1 signs the same plan again (signerd replays what it
// signed); after 2 the resubmission timer sends it. Every attempt stays
// tracked: whichever is mined decides.

// Step names a point of the replacement pipeline where a crash must lose
// nothing (txmanagerd's TEST_CRASH_AFTER).
type Step string

// The steps.
const (
	StepBumpPlanned   Step = "bump_planned"   // the plan is durable; signerd not asked yet
	StepBumpSignature Step = "bump_signature" // signerd signed; the attempt is not stored yet
	StepBumpStored    Step = "bump_stored"    // the attempt is stored; not sent yet
)

// Steps lists every step.
var Steps = []Step{StepBumpPlanned, StepBumpSignature, StepBumpStored}

func (fl *Follower) after(s Step) {
	if fl.cfg.AfterStep != nil {
		fl.cfg.AfterStep(s)
	}
}

// cancelGas is a cancel's gas limit: a plain transfer.
const cancelGas = 21_000

// attemptKey names one attempt of one transaction.
type attemptKey struct {
	tx      uuid.UUID
	attempt int
}

// replacements runs after each step's chain work for one signer: plans a
// crash or a takeover left are finished, operator actions are carried out,
// and, on a new block, attempts waiting longer than the signer's
// bump_after_blocks are bumped when its fee bumps are on.
func (fl *Follower) replacements(ctx context.Context, f txmanager.Fence, tracked []txmanager.Tracked, head Block, newBlock bool) error {
	cfg, _ := fl.signer(f.Key)
	p := &pricer{fl: fl}
	for i := range tracked {
		if t := &tracked[i]; t.Plan != nil {
			if err := fl.finishPlan(ctx, f, t, nil); err != nil {
				return err
			}
		}
	}
	if err := fl.operatorActions(ctx, f, cfg, tracked, p); err != nil {
		return err
	}
	if !cfg.FeeBumps {
		delete(fl.refused, f.Key)
		return nil
	}
	if !newBlock {
		return nil
	}
	// bump_after_blocks counts from the block at which each current
	// attempt was first seen waiting, stored with the attempt before any
	// bump is tried: a new process (a restart, a takeover) counts on from
	// the same block.
	var seen []txmanager.Waiting
	for i := range tracked {
		if t := &tracked[i]; waitingToBeMined(t) && t.WaitingSince == nil {
			seen = append(seen, txmanager.Waiting{TxID: t.TxID, Attempt: t.Current, Since: head.Number})
		}
	}
	if err := fl.cfg.Store.SetWaitingSince(ctx, f, seen); err != nil {
		return err
	}
	for i := range tracked {
		if t := &tracked[i]; waitingToBeMined(t) && t.WaitingSince == nil {
			since := head.Number
			t.WaitingSince = &since
		}
	}
	refused := make(map[attemptKey]bool, len(fl.refused[f.Key]))
	defer func() { fl.refused[f.Key] = refused }()
	var tried []txmanager.Waiting
	for i := range tracked {
		t := &tracked[i]
		if !waitingToBeMined(t) {
			continue
		}
		k := attemptKey{t.TxID, t.Current}
		if fl.refused[f.Key][k] {
			refused[k] = true
		}
		if t.Plan != nil || head.Number < *t.WaitingSince+uint64(cfg.BumpAfterBlocks) {
			continue
		}
		// Whatever happens, the next automatic try is bump_after_blocks
		// from now: a refused bump is not asked for again every block,
		// and alerts once per attempt.
		kind := txmanager.AttemptFeeBump
		if t.CurrentKind == txmanager.AttemptCancel {
			kind = txmanager.AttemptCancel // a cancel is bumped as a cancel, never turned back
		}
		no, err := fl.replace(ctx, f, t, cfg, kind, nil, p, refused[k])
		if err != nil {
			return errors.Join(err, fl.cfg.Store.SetWaitingSince(ctx, f, tried))
		}
		if no {
			refused[k] = true
		}
		since := head.Number
		t.WaitingSince = &since // the current attempt's: the bump's, when one was made
		tried = append(tried, txmanager.Waiting{TxID: t.TxID, Attempt: t.Current, Since: since})
	}
	return fl.cfg.Store.SetWaitingSince(ctx, f, tried)
}

// waitingToBeMined: broadcast, not mined, not a SIGNED one stuck on a
// refused broadcast.
func waitingToBeMined(t *txmanager.Tracked) bool {
	return t.State == txmanager.StateBroadcasted && t.Mined == nil
}

// signer is the signer's configuration on the follower's chain.
func (fl *Follower) signer(key txmanager.SignerKey) (txmanager.SignerConfig, bool) {
	for _, s := range fl.cfg.Chain.Signers {
		if s.Address == key.Signer {
			return s, true
		}
	}
	return txmanager.SignerConfig{BumpAfterBlocks: txmanager.DefaultBumpAfterBlocks, BumpMarketPercent: txmanager.DefaultBumpMarketPercent}, false
}

// pricer reads the fee market at most once per step.
type pricer struct {
	fl     *Follower
	market *chain.Market
}

func (p *pricer) read(ctx context.Context) (chain.Market, error) {
	if p.market == nil {
		if p.fl.cfg.Reader == nil {
			return chain.Market{}, errors.New("the follower has no fee market reader")
		}
		m, err := p.fl.cfg.Reader.Market(ctx, p.fl.cfg.Chain.Legacy)
		if err != nil {
			return chain.Market{}, err
		}
		p.market = &m
	}
	return *p.market, nil
}

// replace plans, signs, stores and sends a replacement of t's current
// attempt: a fee bump, or a cancel. actionID is the operator action it
// carries out, nil for an automatic bump. A replacement the caps leave no
// room for is not planned (refused reports it): the operator action is
// refused with the reason; an automatic bump is logged, with an alert and
// the metric unless alerted is set (this attempt was refused before).
func (fl *Follower) replace(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked, cfg txmanager.SignerConfig, kind string,
	actionID *uuid.UUID, p *pricer, alerted bool) (refused bool, err error) {
	if fl.cfg.Signer == nil {
		return true, fl.refuse(ctx, f, t, actionID, "this node has no signerd client to sign replacements", alerted)
	}
	market, err := p.read(ctx)
	if err != nil {
		return false, err
	}
	tx, err := fl.cfg.Store.Get(ctx, t.TxID)
	if err != nil {
		return false, err
	}
	plan := txmanager.Plan{Kind: kind, GasLimit: t.GasLimit, ActionID: actionID}
	in := &tx.Intent // a bump stays under the intent's own caps; a cancel is the operator's, under the signer's only
	if kind == txmanager.AttemptCancel {
		plan.GasLimit, in = cancelGas, nil
	}
	plan.Fees, err = market.Bump(t.Fees, cfg, in, cfg.BumpMarketPercent)
	if err != nil {
		return true, fl.refuse(ctx, f, t, actionID, err.Error(), alerted)
	}
	plan, err = fl.cfg.Store.PlanAttempt(ctx, f, t.TxID, plan)
	if errors.Is(err, txmanager.ErrPlanned) || errors.Is(err, txmanager.ErrNotFollowed) {
		return false, nil // another step's plan, or the transaction moved on: the next step sees it
	}
	if err != nil {
		return false, err
	}
	fl.after(StepBumpPlanned)
	t.Plan = &plan
	return false, fl.finishPlan(ctx, f, t, &tx)
}

// refuse records that a replacement was not made: the operator action is
// refused with why; an automatic bump is logged, with an alert and the
// metric the first time for this attempt.
func (fl *Follower) refuse(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked, actionID *uuid.UUID, why string, alerted bool) error {
	if actionID != nil {
		fl.cfg.Log.Warn("operator action refused", "tx_id", t.TxID, "action_id", *actionID, "why", why)
		return fl.cfg.Store.FinishAction(ctx, f, *actionID, txmanager.ActionRefused, why, nil)
	}
	if alerted {
		fl.cfg.Log.Info("fee bump still not possible", "tx_id", t.TxID, "signer", f.Key.Signer, "nonce", t.Nonce, "why", why)
		return nil
	}
	fl.cfg.Log.Error("fee bump not possible", "tx_id", t.TxID, "signer", f.Key.Signer, "nonce", t.Nonce, "why", why, "alert", true)
	if fl.cfg.BumpsRefused != nil {
		fl.cfg.BumpsRefused.WithLabelValues(chainLabel(f.Key), f.Key.Signer.Hex()).Inc()
	}
	return nil
}

// finishPlan signs t's planned attempt (again, after a crash: signerd
// replays it), stores it as current and sends it. tx is t as stored, nil
// to read it. A plan that no longer applies (the transaction was mined
// meanwhile) or that signerd refuses is dropped with the reason.
func (fl *Follower) finishPlan(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked, tx *txmanager.Tx) error {
	plan := *t.Plan
	if !waitingToBeMined(t) {
		t.Plan = nil
		return fl.cfg.Store.DropPlan(ctx, f, t.TxID, plan, fmt.Sprintf("the transaction was %s before the %s was signed", minedOr(t), plan.Kind))
	}
	if fl.cfg.Signer == nil {
		return errors.New("a planned replacement waits, and this node has no signerd client")
	}
	if tx == nil {
		stored, err := fl.cfg.Store.Get(ctx, t.TxID)
		if err != nil {
			return err
		}
		tx = &stored
	}
	req := remote.ToSign{Tx: tx, Nonce: &t.Nonce, GasLimit: plan.GasLimit, Fees: plan.Fees}
	if plan.Kind == txmanager.AttemptCancel {
		// The same transaction id and nonce, another intent: a 0-value
		// transfer from the signer to itself, which signerd signs only
		// under its policy's cancels.
		cancel := *tx
		self := tx.From
		cancel.To, cancel.Value, cancel.Data = &self, new(big.Int), nil
		req.Tx = &cancel
	} else {
		// A replacement goes through signerd's policy too: the approvals
		// stored for the transaction count again, each up to its fee
		// ceiling, so a bump above it is refused and the attempt in
		// flight stays the one that counts.
		approvals, err := fl.cfg.Store.Approvals(ctx, []uuid.UUID{t.TxID})
		if err != nil {
			return err
		}
		req.Approvals = approvals[t.TxID]
	}
	signed, err := fl.cfg.Signer.SignBatch(ctx, []remote.ToSign{req})
	if err != nil {
		return fmt.Errorf("sign attempt %d of %s: %w", plan.Attempt, t.TxID, err)
	}
	fl.after(StepBumpSignature)
	if len(signed) != 1 {
		return fmt.Errorf("sign attempt %d of %s: signerd answered %d results", plan.Attempt, t.TxID, len(signed))
	}
	s := signed[0]
	if s.Outcome != remote.OutcomeSigned && s.Outcome != remote.OutcomeReplayed {
		why := fmt.Sprintf("signerd did not sign the %s: %s (rule %s: %s)", plan.Kind, s.Outcome, s.Decision.RuleID, strings.Join(s.Decision.Reasons, "; "))
		fl.cfg.Log.Error("replacement refused by signerd", "tx_id", t.TxID, "attempt", plan.Attempt, "kind", plan.Kind, "why", why, "alert", plan.ActionID == nil)
		t.Plan = nil
		return fl.cfg.Store.DropPlan(ctx, f, t.TxID, plan, why)
	}
	if err := fl.cfg.Store.StoreAttempt(ctx, f, t.TxID, plan, s.RawTx, s.Hash); err != nil {
		return err
	}
	fl.after(StepBumpStored)
	fl.cfg.Log.Info("replacement attempt stored", "tx_id", t.TxID, "attempt", plan.Attempt, "kind", plan.Kind, "hash", s.Hash,
		"max_fee_per_gas", plan.Fees.MaxFeePerGas, "max_priority_fee_per_gas", plan.Fees.MaxPriorityFeePerGas, "gas_price", plan.Fees.GasPrice)
	t.Attempts[s.Hash] = plan.Attempt
	// A new current attempt: its bump_after_blocks counts from the block
	// it is first seen waiting at.
	t.Current, t.CurrentKind, t.Fees, t.SentAt, t.Plan, t.WaitingSince = plan.Attempt, plan.Kind, plan.Fees, time.Now(), nil, nil
	fl.send(ctx, t, s.RawTx, "replacement refused by every route; resubmission tries again")
	return nil
}

func minedOr(t *txmanager.Tracked) string {
	if t.Mined != nil {
		return "mined"
	}
	return strings.ToLower(string(t.State))
}

// operatorActions carries out the operator actions waiting on f's signer,
// oldest first. An action on a transaction that has a replacement in
// progress waits for the next step.
func (fl *Follower) operatorActions(ctx context.Context, f txmanager.Fence, cfg txmanager.SignerConfig, tracked []txmanager.Tracked, p *pricer) error {
	actions, err := fl.cfg.Store.PendingActions(ctx, f.Key)
	if err != nil || len(actions) == 0 {
		return err
	}
	byID := make(map[uuid.UUID]*txmanager.Tracked, len(tracked))
	for i := range tracked {
		byID[tracked[i].TxID] = &tracked[i]
	}
	for _, a := range actions {
		t := byID[a.TxID]
		switch {
		case t == nil:
			// Not in the view: final and out of reach, or broadcast so
			// recently that the feed the view follows has not numbered its
			// events yet (the sequencer runs apart, and waits out busy
			// writers). Only the first is a refusal; the second is carried
			// out at a step that sees it.
			var tx txmanager.Tx
			if tx, err = fl.cfg.Store.Get(ctx, a.TxID); err == nil {
				if tx.State == txmanager.StateBroadcasted {
					continue
				}
				err = fl.cfg.Store.FinishAction(ctx, f, a.ID, txmanager.ActionRefused,
					"the transaction is "+strings.ToLower(string(tx.State))+": nothing to "+a.Action, nil)
			}
		case !waitingToBeMined(t):
			err = fl.cfg.Store.FinishAction(ctx, f, a.ID, txmanager.ActionRefused, "the transaction is "+minedOr(t)+": nothing to "+a.Action, nil)
		case t.Plan != nil:
			continue
		case a.Action == txmanager.ActionResend:
			fl.cfg.Log.Info("operator action: resend", "tx_id", t.TxID, "operator", a.Operator, "action_id", a.ID)
			fl.resendCurrent(ctx, f, t)
			current := t.Current
			err = fl.cfg.Store.FinishAction(ctx, f, a.ID, txmanager.ActionDone, "", &current)
		case a.Action == txmanager.ActionCancel && !cfg.Cancels:
			err = fl.cfg.Store.FinishAction(ctx, f, a.ID, txmanager.ActionRefused, "cancels are off for this signer (chains file: \"cancels\": true)", nil)
		default:
			kind := txmanager.AttemptFeeBump
			if a.Action == txmanager.ActionCancel {
				kind = txmanager.AttemptCancel
			}
			fl.cfg.Log.Info("operator action", "action", a.Action, "tx_id", t.TxID, "operator", a.Operator, "action_id", a.ID)
			id := a.ID
			_, err = fl.replace(ctx, f, t, cfg, kind, &id, p, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
