package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"time"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/remote"
)

// Operator actions on transactions that do not move before their
// broadcast: ALLOCATED ones signerd refused, SIGNED ones every route
// refused (or any not broadcast yet), and every abandon. The worker owns
// those states, so it carries the actions out, at the start of a round;
// the chain follower carries out those on broadcast transactions.
//
//	            ALLOCATED                          SIGNED
//	resend      ask signerd again, now             send the stored attempt again, now
//	bump        fees fixed anew at the market,     a new attempt: the same intent, both fee
//	            then as resend (stuck ones only)   caps up >= 10% and to the market
//	cancel      a 0-value transfer to the signer itself at the nonce, as the
//	            transaction's attempt (fees as a bump); the signer's cancels on
//	abandon     the transaction FAILS (abandoned) and a new 0-value transfer to
//	            the signer itself takes its nonce (txmanager.WorkStore.Abandon); for
//	            a SIGNED one, priced as a bump and the signer's cancels on
//
// A bump or a cancel fixes its fees on the action before signerd is asked
// (txmanager.WorkStore.PlanActionFees), and stores the attempt and the action's
// outcome together (StoreActionAttempt): a crash in between asks signerd
// for the very same attempt again, which it replays.

// cancelGas is a cancel's or a filler's gas limit: a plain transfer.
const cancelGas = 21_000

// operatorActions carries out the operator actions the worker owns, oldest
// first (txmanager.WorkStore.WorkerActions).
func (w *worker) operatorActions(ctx context.Context) error {
	acts, err := w.Store.WorkerActions(ctx, w.fence.Key)
	if err != nil || len(acts) == 0 {
		return err
	}
	for i := range acts {
		if err := w.operatorAction(ctx, &acts[i]); err != nil {
			return err
		}
	}
	return nil
}

func (w *worker) operatorAction(ctx context.Context, a *txmanager.Action) error {
	t, err := w.Store.Get(ctx, a.TxID)
	if err != nil {
		return err
	}
	log := w.log.With("tx_id", t.ID, "action", a.Action, "action_id", a.ID, "operator", a.Operator)
	switch t.State {
	case txmanager.StateAllocated:
		log.Info("operator action", "state", t.State, "sub_state", t.SubState)
		return w.onAllocated(ctx, log, a, &t)
	case txmanager.StateSigned:
		log.Info("operator action", "state", t.State, "sub_state", t.SubState)
		return w.onSigned(ctx, log, a, &t)
	case txmanager.StateBroadcasted:
		if a.Action != txmanager.ActionAbandon {
			return nil // broadcast meanwhile: the chain follower carries it out
		}
		return w.refuseAction(ctx, log, a, "the transaction was broadcast before it could be abandoned: it may be mined at any moment; cancel it instead")
	}
	return w.refuseAction(ctx, log, a, fmt.Sprintf("the transaction is %s: nothing to %s", t.State, a.Action))
}

// onAllocated carries out a on t, ALLOCATED.
func (w *worker) onAllocated(ctx context.Context, log *slog.Logger, a *txmanager.Action, t *txmanager.Tx) error {
	_, cfg := w.config()
	switch a.Action {
	case txmanager.ActionResend:
		return w.signAgain(ctx, log, a, t)
	case txmanager.ActionBump:
		// Only a refusal is sure to have signed nothing at the nonce: a
		// transaction merely waiting for its signature may have one at its
		// fees already (a crash before it was stored), and signerd would
		// refuse another one at other fees.
		if t.SubState != txmanager.SubStuck {
			return w.refuseAction(ctx, log, a, "only an allocated transaction signerd refused (stuck) is priced anew: this one may be signed at its fees already; resend it")
		}
		market, err := w.market(ctx)
		if err != nil {
			return err
		}
		fees := fixed(market.Fees(cfg, &t.Intent))
		refixed, err := w.Store.RefixSigningFees(ctx, w.fence, t.ID, fees)
		if raced(err) {
			return nil // moved on: the next round sees where it is
		}
		if err != nil {
			return err
		}
		log.Info("signing fees fixed anew", "max_fee_per_gas", fees.MaxFeePerGas, "max_priority_fee_per_gas", fees.MaxPriorityFeePerGas, "gas_price", fees.GasPrice)
		return w.signAgain(ctx, log, a, &refixed)
	case txmanager.ActionCancel:
		if !cfg.Cancels {
			return w.refuseAction(ctx, log, a, cancelsOff)
		}
		fees, err := w.replacingFees(ctx, a, t, t.SigningFees)
		if err != nil || fees == nil {
			return err
		}
		return w.signAction(ctx, log, a, t, txmanager.AttemptCancel, *fees)
	case txmanager.ActionAbandon:
		fees, err := w.replacingFees(ctx, a, t, t.SigningFees)
		if err != nil || fees == nil {
			return err
		}
		return w.abandon(ctx, log, a, *fees)
	}
	return w.refuseAction(ctx, log, a, "unknown action "+a.Action)
}

// cancelsOff is why a cancel (or the filler of a signed transaction) is
// refused when the signer's cancels are off.
const cancelsOff = `cancels are off for this signer (chains file: "cancels": true)`

// onSigned carries out a on t, SIGNED.
func (w *worker) onSigned(ctx context.Context, log *slog.Logger, a *txmanager.Action, t *txmanager.Tx) error {
	_, cfg := w.config()
	switch a.Action {
	case txmanager.ActionResend:
		delete(w.sendRetry, t.ID)
		if t.SubState != txmanager.SubNone {
			cleared, err := w.Store.SetSubState(ctx, w.fence, t.ID, txmanager.StateSigned, txmanager.SubNone, txmanager.OperatorReason(*a))
			if raced(err) {
				return nil
			}
			if err != nil {
				return err
			}
			t = &cleared
		}
		if err := w.broadcast(ctx, []txmanager.Tx{*t}); err != nil {
			return err
		}
		return w.finishSend(ctx, log, a, t)
	case txmanager.ActionBump, txmanager.ActionCancel:
		kind := txmanager.AttemptFeeBump
		if a.Action == txmanager.ActionCancel {
			if !cfg.Cancels {
				return w.refuseAction(ctx, log, a, cancelsOff)
			}
			kind = txmanager.AttemptCancel
		}
		_, current, err := w.Store.CurrentAttempt(ctx, t.ID)
		if err != nil {
			return err
		}
		fees, err := w.planFees(ctx, log, a, func(m *chain.Market) (txmanager.Fees, error) {
			in := &t.Intent // a bump stays under the intent's own caps; a cancel is the operator's, under the signer's only
			if kind == txmanager.AttemptCancel {
				in = nil
			}
			return m.Bump(current, cfg, in, cfg.BumpMarketPercent)
		})
		if err != nil || fees == nil {
			return err
		}
		return w.signAction(ctx, log, a, t, kind, *fees)
	case txmanager.ActionAbandon:
		// The filler replaces a signed transaction at its nonce: signerd
		// signs it only as a cancel, 10% above what it signed there.
		if !cfg.Cancels {
			return w.refuseAction(ctx, log, a, "the filler of a signed transaction replaces it at its nonce, which is a cancel: "+cancelsOff)
		}
		r, err := w.reader()
		if err != nil {
			return err
		}
		if mined, err := r.Mined(ctx, *t.Hash); err != nil || mined {
			if err != nil {
				return err
			}
			return w.refuseAction(ctx, log, a, "the transaction is mined: the chain follower records it")
		}
		_, current, err := w.Store.CurrentAttempt(ctx, t.ID)
		if err != nil {
			return err
		}
		fees, err := w.replacingFees(ctx, a, t, &current)
		if err != nil || fees == nil {
			return err
		}
		return w.abandon(ctx, log, a, *fees)
	}
	return w.refuseAction(ctx, log, a, "unknown action "+a.Action)
}

// market reads the chain's fee market.
func (w *worker) market(ctx context.Context) (*chain.Market, error) {
	ch, _ := w.config()
	r, err := w.reader()
	if err != nil {
		return nil, err
	}
	return readMarket(ctx, r, nil, ch.Legacy)
}

// planFees fixes the fees of the attempt a has signerd sign, priced by
// price at the market, unless a has them already (asked again after a
// crash: the very same attempt). nil fees and no error: a was refused (the
// caps leave no room) or finished meanwhile.
func (w *worker) planFees(ctx context.Context, log *slog.Logger, a *txmanager.Action, price func(*chain.Market) (txmanager.Fees, error)) (*txmanager.Fees, error) {
	if a.Fees != nil {
		return a.Fees, nil
	}
	market, err := w.market(ctx)
	if err != nil {
		return nil, err
	}
	fees, err := price(market)
	if err != nil {
		return nil, w.refuseAction(ctx, log, a, err.Error())
	}
	fees, err = w.Store.PlanActionFees(ctx, w.fence, a.ID, fees)
	if errors.Is(err, txmanager.ErrActionDone) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &fees, nil
}

// replacingFees are the fees of a 0-value transfer to the signer itself
// at t's nonce (a cancel, or an abandon's filler). After a refusal signerd
// signed nothing there, and the market's price will do; otherwise it may
// have signed prev there (a signature not stored before a crash, or the
// stored attempt of a SIGNED transaction), and the transfer must replace
// it: both fee caps up at least 10% and to the market, under the signer's
// caps.
func (w *worker) replacingFees(ctx context.Context, a *txmanager.Action, t *txmanager.Tx, prev *txmanager.Fees) (*txmanager.Fees, error) {
	_, cfg := w.config()
	log := w.log.With("tx_id", t.ID, "action", a.Action, "action_id", a.ID)
	refusedUnsigned := t.State == txmanager.StateAllocated && t.SubState == txmanager.SubStuck
	return w.planFees(ctx, log, a, func(m *chain.Market) (txmanager.Fees, error) {
		if refusedUnsigned || prev == nil {
			return fixed(m.Fees(cfg, nil)), nil
		}
		return m.Bump(*prev, cfg, nil, cfg.BumpMarketPercent)
	})
}

// signAgain asks signerd for t's signature again, now, with its signing
// fees as stored, and records the outcome: done once t is SIGNED, refused
// with what signerd answered otherwise (see settleRefused).
func (w *worker) signAgain(ctx context.Context, log *slog.Logger, a *txmanager.Action, t *txmanager.Tx) error {
	serr := w.signAndStore(ctx, []txmanager.Tx{*t})
	if serr != nil && !errors.Is(serr, errResettle) && !errors.Is(serr, errHalt) {
		return serr
	}
	now, err := w.Store.Get(ctx, t.ID)
	if err != nil {
		return err
	}
	if now.State == txmanager.StateSigned {
		first := 1
		log.Info("operator action done: signed")
		err = w.Store.FinishAction(ctx, w.fence, a.ID, txmanager.ActionDone, "", &first)
	} else {
		why := fmt.Sprintf("signerd did not sign it: the transaction is %s", now.State)
		if now.Reason != "" {
			why += " (" + now.Reason + ")"
		}
		err = w.refuseAction(ctx, log, a, why)
	}
	if err != nil {
		return err
	}
	return serr
}

// signAction has signerd sign the attempt a asks of t (a bump: the same
// intent; a cancel: a 0-value transfer to the signer itself) at its nonce
// with fees, and stores it as t's current attempt with a's outcome. The
// worker's broadcast sends it.
func (w *worker) signAction(ctx context.Context, log *slog.Logger, a *txmanager.Action, t *txmanager.Tx, kind string, fees txmanager.Fees) error {
	req := remote.ToSign{Tx: t, Nonce: t.Nonce, GasLimit: *t.GasLimit, Fees: fees}
	if kind == txmanager.AttemptCancel {
		// The same transaction id and nonce, another intent, which signerd
		// signs only as a cancel its policy allows (or, at a nonce where it
		// signed nothing, as its rules allow a transfer to the signer).
		cancel := *t
		self := t.From
		cancel.To, cancel.Value, cancel.Data = &self, new(big.Int), nil
		req.Tx, req.GasLimit = &cancel, cancelGas
	} else {
		// A replacement goes through signerd's policy too: the approvals
		// stored for the transaction count again, each up to its fee
		// ceiling, so a bump above it is refused and the attempt in
		// flight stays the one that counts.
		approvals, err := w.approvalsOf(ctx, []txmanager.Tx{*t})
		if err != nil {
			return err
		}
		req.Approvals = approvals[t.ID]
	}
	signed, err := w.Signer.SignBatch(ctx, []remote.ToSign{req})
	if err != nil {
		return fmt.Errorf("sign the %s of %s: %w", kind, t.ID, err)
	}
	if len(signed) != 1 {
		return fmt.Errorf("sign the %s of %s: signerd answered %d results", kind, t.ID, len(signed))
	}
	s := signed[0]
	if s.Outcome != remote.OutcomeSigned && s.Outcome != remote.OutcomeReplayed {
		return w.refuseAction(ctx, log, a, fmt.Sprintf("signerd did not sign the %s: %s (rule %s: %s)", kind, s.Outcome, s.Decision.RuleID,
			strings.Join(s.Decision.Reasons, "; ")))
	}
	stored, err := w.Store.StoreActionAttempt(ctx, w.fence, *a, txmanager.ActionAttempt{Kind: kind, GasLimit: req.GasLimit, Fees: fees, Raw: s.RawTx, Hash: s.Hash})
	if raced(err) {
		return nil // moved on (mined, say): the next round sees where it is
	}
	if err != nil {
		return err
	}
	delete(w.sendRetry, t.ID)
	log.Info("operator action done: attempt stored", "kind", kind, "hash", s.Hash, "nonce", *stored.Nonce,
		"max_fee_per_gas", fees.MaxFeePerGas, "max_priority_fee_per_gas", fees.MaxPriorityFeePerGas, "gas_price", fees.GasPrice)
	return nil
}

// abandon carries out a, an abandon: its transaction FAILS and a filler
// priced at fees takes its nonce, signed and sent by this round's resume.
func (w *worker) abandon(ctx context.Context, log *slog.Logger, a *txmanager.Action, fees txmanager.Fees) error {
	failed, filler, err := w.Store.Abandon(ctx, w.fence, *a, fees)
	if raced(err) {
		return nil
	}
	if err != nil {
		return err
	}
	delete(w.sendRetry, failed.ID)
	w.retrySignAt = time.Time{} // sign the filler now, whatever the gap's retry
	log.Warn("operator action done: transaction abandoned, its nonce filled with a 0-value transfer to the signer", "filler", filler.ID,
		"nonce", *filler.Nonce, "alert", true)
	return nil
}

// finishSend records the outcome of a resend of t: done once a route
// accepted it, refused with why otherwise.
func (w *worker) finishSend(ctx context.Context, log *slog.Logger, a *txmanager.Action, t *txmanager.Tx) error {
	now, err := w.Store.Get(ctx, t.ID)
	if err != nil {
		return err
	}
	attempt, _, err := w.Store.CurrentAttempt(ctx, t.ID)
	if err != nil {
		return err
	}
	if now.State != txmanager.StateSigned {
		log.Info("operator action done: sent", "state", now.State)
		return w.Store.FinishAction(ctx, w.fence, a.ID, txmanager.ActionDone, "", &attempt)
	}
	why := "a route refused it for now; it is sent again with backoff"
	switch now.SubState {
	case txmanager.SubStuck:
		why = "every route refused it again: " + now.Reason
	case txmanager.SubInsufficientFunds:
		why = "refused for insufficient funds; it is sent again as the balance allows"
	}
	return w.refuseAction(ctx, log, a, why)
}

// refuseAction records that a was not carried out, and why.
func (w *worker) refuseAction(ctx context.Context, log *slog.Logger, a *txmanager.Action, why string) error {
	log.Warn("operator action refused", "why", why)
	return w.Store.FinishAction(ctx, w.fence, a.ID, txmanager.ActionRefused, why, nil)
}
