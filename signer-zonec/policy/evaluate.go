package policy

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	signer "github.com/txfence/txfence/signer-zonec"
)

// Evaluate decides req at now, in this order:
//
//  1. a request that fails Validate is denied (invalid-request);
//  2. a chain not in the policy's chains is denied (chain-allowlist);
//  3. any matching deny rule denies, wherever it stands in the file;
//  4. the first matching allow rule decides: a call to a declared token
//     must be one of its standard's calls, decoded exactly, to listed
//     recipients, spenders or operators (or a selector the rule lists for
//     the token); an allowance-granting call to any other contract must be
//     to one of erc20_spenders; per-transaction caps and rolling windows of
//     value, fees and token units deny what exceeds them; then its approval
//     threshold, if it applies, needs M valid approvals whose fee ceilings
//     cover the request's fee cap;
//  5. anything else is denied (default-deny).
//
// An allowed call to a declared token carries the units it moves or
// grants in Decision.Token, which signerd records for the token's windows.
//
// A cancel of a signed nonce is decided by EvaluateCancel instead.
//
// It reads nothing but the policy, req and usage; it is safe to call
// concurrently. An error (only from usage, or a nil req) means no decision:
// the caller must not sign.
func (p *Policy) Evaluate(ctx context.Context, req *signer.Request, now time.Time, usage signer.Usage) (signer.Decision, error) {
	if req == nil {
		return signer.Decision{}, errors.New("policy: no request to evaluate")
	}
	d := signer.Decision{PolicyVersion: p.version, PolicyHash: p.hash}
	if denied, ok := p.screen(req); ok {
		return denied, nil
	}
	tok := p.tokenAt(req)
	for _, r := range p.allow {
		if r.match.matches(req, false, tok) {
			return p.apply(ctx, d, r, req, tok, now, usage)
		}
	}
	why := "no allow rule matches " + describe(req)
	if tok != nil {
		why = fmt.Sprintf("no allow rule names token %s for %s", tok.id, describe(req))
	}
	d.Verdict, d.RuleID, d.Reasons = signer.Deny, DefaultDeny, []string{why}
	return d, nil
}

// screen denies what no rule may allow: an invalid request, a chain
// outside the policy, a request a deny rule matches. ok is false when
// the request passes.
func (p *Policy) screen(req *signer.Request) (d signer.Decision, ok bool) {
	d = signer.Decision{Verdict: signer.Deny, PolicyVersion: p.version, PolicyHash: p.hash}
	if err := req.Validate(); err != nil {
		d.RuleID, d.Reasons = InvalidRequest, strings.Split(err.Error(), "\n")
		return d, true
	}
	if !p.chains[req.ChainID] {
		d.RuleID, d.Reasons = ChainNotAllowed, []string{fmt.Sprintf("chain %d is not in the policy's chains", req.ChainID)}
		return d, true
	}
	for _, r := range p.deny {
		if r.match.matches(req, true, p.tokenAt(req)) {
			if d.RuleID == "" {
				d.RuleID = r.id
			}
			d.Reasons = append(d.Reasons, "denied by rule "+r.id)
		}
	}
	return d, d.RuleID != ""
}

// EvaluateCancel decides a cancel of what was signed at req's nonce: an
// invalid request, a chain outside the policy or a matching deny rule
// denies it, as in Evaluate; otherwise the cancels entry that covers its
// signer allows it under that entry's fee and gas caps, and without one it
// is denied.
func (p *Policy) EvaluateCancel(ctx context.Context, req *signer.Request, now time.Time, usage signer.Usage) (signer.Decision, error) {
	if req == nil {
		return signer.Decision{}, errors.New("policy: no request to evaluate")
	}
	if denied, ok := p.screen(req); ok {
		return denied, nil
	}
	d := signer.Decision{PolicyVersion: p.version, PolicyHash: p.hash, Verdict: signer.Deny}
	if !req.IsCancel() {
		d.RuleID, d.Reasons = InvalidRequest, []string{"not a cancel: a 0-value transfer to the sender itself with no data"}
		return d, nil
	}
	g := p.cancelGrant(req.ChainID, req.From)
	if g == nil {
		d.RuleID, d.Reasons = DefaultDeny, []string{fmt.Sprintf("no cancels entry allows %s to cancel on chain %d", req.From.Hex(), req.ChainID)}
		return d, nil
	}
	d.RuleID = g.id
	who := "cancels entry " + g.id
	if reasons := g.limits.check(req, who); len(reasons) > 0 {
		d.Reasons = reasons
		return d, nil
	}
	why, err := overFeeWindows(ctx, g.limits.feeWindows, req, usage, who)
	if err != nil {
		return signer.Decision{}, err
	}
	if why != "" {
		d.Reasons = []string{why}
		return d, nil
	}
	d.Verdict, d.Reasons = signer.Allow, []string{"a cancel, allowed by " + g.id}
	return d, nil
}

// overFeeWindows says why req's fees (gas × fee cap) exceed one of
// windows, with what usage says the sender signed in fees in it; "" when
// they fit. An error means no decision: the caller must not sign.
func overFeeWindows(ctx context.Context, windows []window, req *signer.Request, usage signer.Usage, who string) (string, error) {
	if usage == nil {
		return "", fmt.Errorf("policy %s: a fee window applies and there is no record of what was signed", who)
	}
	own := req.MaxFee()
	return overWindows(ctx, windows, own, "fees", usage.Fees, who, func(w window, signed *big.Int) string {
		return fmt.Sprintf("%s wei of fees signed in the last %s plus this request's %s wei (gas %d × %s wei) exceeds the fee window's max_fee %s (%s)", signed, w.duration, own, req.Gas, req.FeeCap(), w.max, who)
	})
}

// overWindows checks own against each window: what read says was signed
// in the window plus own may not exceed the window's max. It returns why
// not (from deny), or "" when own fits every window. An error reading the
// record, or a sum that is not an amount, is an error: no decision.
func overWindows(ctx context.Context, windows []window, own *big.Int, what string, read func(context.Context, time.Duration) (*big.Int, error), who string, deny func(w window, signed *big.Int) string) (string, error) {
	for _, w := range windows {
		signed, err := read(ctx, w.duration)
		if err != nil {
			return "", fmt.Errorf("policy %s: %s signed in the last %s: %w", who, what, w.duration, err)
		}
		if signed == nil || signed.Sign() < 0 {
			return "", fmt.Errorf("policy %s: %s signed in the last %s: got %v, not an amount", who, what, w.duration, signed)
		}
		if new(big.Int).Add(signed, own).Cmp(w.max) > 0 {
			return deny(w, signed), nil
		}
	}
	return "", nil
}

// apply decides req, sent to the declared token tok (or nil), under the
// allow rule r that matched it.
func (p *Policy) apply(ctx context.Context, d signer.Decision, r *rule, req *signer.Request, tok *token, now time.Time, usage signer.Usage) (signer.Decision, error) {
	d.RuleID = r.id
	deny := func(reasons []string) (signer.Decision, error) {
		d.Verdict, d.Reasons = signer.Deny, reasons
		return d, nil
	}

	var reasons []string
	var call *tokenCall
	var effect *tokenEffect
	if tok != nil {
		var why []string
		call, effect, why = tokenCallOf(tok, r, req)
		reasons = append(reasons, why...)
	} else if sel, ok := selectorOf(req); ok && req.To != nil {
		if g := grantCalls[sel]; g != nil {
			args, err := g.decode(req.Data)
			switch {
			case err != nil:
				reasons = append(reasons, fmt.Sprintf("malformed %s call data: %v", g.signature, err))
			case !r.spenders[g.grantee(args)]:
				reasons = append(reasons, fmt.Sprintf("%s to spender %s, which is not in erc20_spenders (rule %s)", g.signature, g.grantee(args).Hex(), r.id))
			}
		}
	}
	who := "rule " + r.id
	reasons = append(reasons, r.limits.check(req, who)...)
	if len(reasons) > 0 {
		return deny(reasons)
	}

	if len(r.limits.windows) > 0 {
		if usage == nil {
			return signer.Decision{}, fmt.Errorf("policy %s: a rolling window applies and there is no record of what was signed", who)
		}
		why, err := overWindows(ctx, r.limits.windows, req.Value, "value", usage.Value, who, func(w window, signed *big.Int) string {
			return fmt.Sprintf("%s wei signed in the last %s plus %s wei exceeds the window's max_value %s (%s)", signed, w.duration, req.Value, w.max, who)
		})
		if err != nil {
			return signer.Decision{}, err
		}
		if why != "" {
			return deny([]string{why})
		}
	}
	why, err := overFeeWindows(ctx, r.limits.feeWindows, req, usage, who)
	if err != nil {
		return signer.Decision{}, err
	}
	if why != "" {
		return deny([]string{why})
	}
	if effect != nil {
		why, err := r.tokens[tok.key].check(ctx, tok, call, effect, usage, who)
		if err != nil {
			return signer.Decision{}, err
		}
		if why != "" {
			return deny([]string{why})
		}
		d.Token = &signer.TokenAmount{Contract: tok.key.address, Amount: new(big.Int).Set(effect.amount)}
	}

	if a := r.approval; a != nil && a.required(req, tok, effect) {
		approved, rejected := p.countApprovals(a, req, now, r.id)
		d.Threshold, d.Approvers, d.Approved = a.threshold, slices.Clone(a.approvers), approved
		if len(approved) < a.threshold {
			d.Verdict, d.Token = signer.NeedsApproval, nil
			d.Reasons = append([]string{fmt.Sprintf("rule %s needs %d of %d approvals (%s); %d valid", r.id, a.threshold, len(a.approvers), strings.Join(a.approvers, ", "), len(approved))}, rejected...)
			return d, nil
		}
		d.Verdict = signer.Allow
		d.Reasons = append([]string{fmt.Sprintf("allowed by rule %s with the approvals of %s", r.id, strings.Join(approved, ", "))}, rejected...)
		return d, nil
	}
	d.Verdict, d.Reasons = signer.Allow, []string{"allowed by rule " + r.id}
	return d, nil
}

// countApprovals returns the approvers whose approvals of req are valid at
// now, in the rule's order, and why the others did not count. An approval
// counts only if its approver is one of the rule's and of the policy's, it
// has not expired (nor expires further ahead than max_ttl), its signature
// verifies over the intent recomputed from req, req's tx id and the
// approval's fee ceiling, and req's fee cap is at or below that ceiling
// (a fee bump above it needs new approvals); each approver counts once
// however many approvals carry its id.
func (p *Policy) countApprovals(a *approvalRule, req *signer.Request, now time.Time, ruleID string) (approved, rejected []string) {
	valid := map[string]bool{}
	for _, ap := range req.Approvals {
		_, why := p.approvalWhy(a, req, ap, now, ruleID)
		switch {
		case why != "":
		case valid[ap.Approver]:
			why = "counts once"
		case req.FeeCap().Cmp(ap.MaxFeePerGas) > 0:
			// Checked after the signature, so that it speaks of what the
			// approver really signed.
			why = fmt.Sprintf("covers fee caps up to %s wei per gas, below this request's %s: a new approval is needed", ap.MaxFeePerGas, req.FeeCap())
		default:
			valid[ap.Approver] = true
			continue
		}
		rejected = append(rejected, fmt.Sprintf("the approval by %q %s", ap.Approver, why))
	}
	for _, id := range a.approvers {
		if valid[id] {
			approved = append(approved, id)
		}
	}
	return approved, rejected
}

// approvalWhy says why ap cannot count for req under rule ruleID's
// approval a at now, whatever the fees; "" when it can.
func (p *Policy) approvalWhy(a *approvalRule, req *signer.Request, ap signer.Approval, now time.Time, ruleID string) (field, why string) {
	if field, why := p.approverWhy(a, ap.Approver, ap.Expiry, now, ruleID); why != "" {
		return field, why
	}
	switch {
	case ap.MaxFeePerGas == nil:
		return signer.FieldMaxFeePerGas, "has no fee ceiling (max_fee_per_gas): an approval signed before txfence/approval/v2 must be given again"
	case !signer.VerifyApproval(p.approvers[ap.Approver], req, ap):
		return signer.FieldSignature, "has a signature that does not verify for this intent, tx id and fee ceiling"
	}
	return "", ""
}

// approverWhy says why a decision by approver, expiring at expiry, cannot
// count under rule ruleID's approval a at now before its signature is
// even looked at; "" when it can.
func (p *Policy) approverWhy(a *approvalRule, approver string, expiry, now time.Time, ruleID string) (field, why string) {
	_, known := p.approvers[approver]
	switch {
	case !known || !slices.Contains(a.approvers, approver):
		return signer.FieldApprover, "is not an approver of rule " + ruleID
	case !now.Before(expiry):
		return signer.FieldExpiry, "expired at " + expiry.UTC().Format(time.RFC3339)
	case a.maxTTL > 0 && expiry.After(now.Add(a.maxTTL)):
		return signer.FieldExpiry, fmt.Sprintf("expires at %s, more than the max_ttl of %s ahead", expiry.UTC().Format(time.RFC3339), a.maxTTL)
	}
	return "", ""
}

// CheckApprovals says whether each of req's approvals, and rejection when
// not nil, counts at now under the allow rule that would decide req, and
// why not. It checks what Evaluate checks of an approval except its fee
// ceiling against req's fee cap (the price moves while a transaction
// waits; a ceiling below it may count later): approver of the rule,
// expiry within max_ttl, signature. An approver counts once: a second
// approval by the same id is refused. Nothing about the request's fees,
// limits or windows is looked at.
func (p *Policy) CheckApprovals(req *signer.Request, rejection *signer.Rejection, now time.Time) signer.ApprovalCheck {
	c := signer.ApprovalCheck{PolicyVersion: p.version, PolicyHash: p.hash}
	a, why := p.approvalRuleOf(req, &c)
	seen := map[string]bool{}
	for _, ap := range req.Approvals {
		item := signer.ItemCheck{Approver: ap.Approver, Why: why}
		switch {
		case why != "":
		case seen[ap.Approver]:
			item.Field, item.Why = signer.FieldApprover, "counts once: another approval of this request names the same approver"
		default:
			item.Field, item.Why = p.approvalWhy(a, req, ap, now, c.RuleID)
		}
		seen[ap.Approver] = true
		item.Counts = item.Why == ""
		c.Approvals = append(c.Approvals, item)
	}
	if rejection != nil {
		item := signer.ItemCheck{Approver: rejection.Approver, Why: why}
		if why == "" {
			item.Field, item.Why = p.approverWhy(a, rejection.Approver, rejection.Expiry, now, c.RuleID)
		}
		if item.Why == "" && !signer.VerifyRejection(p.approvers[rejection.Approver], req, *rejection) {
			item.Field, item.Why = signer.FieldSignature, "has a signature that does not verify as a rejection (txfence/rejection/v1) of this intent and tx id"
		}
		item.Counts = item.Why == ""
		c.Rejection = &item
	}
	c.Why = why
	return c
}

// approvalRuleOf finds the allow rule that would decide req and its
// approval requirement, filling c's rule, threshold and approvers; why
// says why none applies (and no approval can count).
func (p *Policy) approvalRuleOf(req *signer.Request, c *signer.ApprovalCheck) (*approvalRule, string) {
	if denied, ok := p.screen(req); ok {
		return nil, fmt.Sprintf("the policy denies this request (rule %s): no approval can count", denied.RuleID)
	}
	tok := p.tokenAt(req)
	for _, r := range p.allow {
		if !r.match.matches(req, false, tok) {
			continue
		}
		var effect *tokenEffect
		if tok != nil {
			var why []string
			if _, effect, why = tokenCallOf(tok, r, req); len(why) > 0 {
				return nil, fmt.Sprintf("rule %s denies this request (%s): no approval can count", r.id, strings.Join(why, "; "))
			}
		}
		if r.approval == nil || !r.approval.required(req, tok, effect) {
			return nil, fmt.Sprintf("rule %s needs no approvals for this request", r.id)
		}
		c.RuleID, c.Threshold, c.Approvers = r.id, r.approval.threshold, slices.Clone(r.approval.approvers)
		return r.approval, ""
	}
	return nil, fmt.Sprintf("no allow rule matches this request (rule %s): no approval can count", DefaultDeny)
}

// describe summarizes what a request does, for a default-deny reason.
func describe(req *signer.Request) string {
	to := "a contract creation"
	if req.To != nil {
		to = "to " + req.To.Hex()
	}
	s := fmt.Sprintf("(chain %d, from %s, %s, value %s", req.ChainID, req.From.Hex(), to, req.Value)
	if sel := req.Selector(); sel != nil && req.To != nil {
		s += fmt.Sprintf(", selector 0x%x", sel)
	}
	return s + ")"
}
