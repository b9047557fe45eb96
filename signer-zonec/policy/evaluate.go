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
//  4. the first matching allow rule decides: its ERC-20 spender allowlist,
//     per-transaction caps and rolling windows deny what exceeds them, then
//     its approval threshold, if it applies, needs M valid approvals;
//  5. anything else is denied (default-deny).
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
	for _, r := range p.allow {
		if r.match.matches(req, false) {
			return p.apply(ctx, d, r, req, now, usage)
		}
	}
	d.Verdict, d.RuleID, d.Reasons = signer.Deny, DefaultDeny, []string{"no allow rule matches " + describe(req)}
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
		if r.match.matches(req, true) {
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
	if reasons := g.limits.check(req, g.id); len(reasons) > 0 {
		d.Reasons = reasons
		return d, nil
	}
	d.Verdict, d.Reasons = signer.Allow, []string{"a cancel, allowed by " + g.id}
	return d, nil
}

// apply decides req under the allow rule r that matched it.
func (p *Policy) apply(ctx context.Context, d signer.Decision, r *rule, req *signer.Request, now time.Time, usage signer.Usage) (signer.Decision, error) {
	d.RuleID = r.id
	deny := func(reasons []string) (signer.Decision, error) {
		d.Verdict, d.Reasons = signer.Deny, reasons
		return d, nil
	}

	var reasons []string
	if sel, ok := selectorOf(req); ok && req.To != nil {
		if name, ok := approvalCalls[sel]; ok {
			spender, err := decodeSpender(sel, req.Data)
			switch {
			case err != nil:
				reasons = append(reasons, fmt.Sprintf("malformed %s call data: %v", name, err))
			case !r.spenders[spender]:
				reasons = append(reasons, fmt.Sprintf("%s to spender %s, which is not in erc20_spenders (rule %s)", name, spender.Hex(), r.id))
			}
		}
	}
	reasons = append(reasons, r.limits.check(req, r.id)...)
	if len(reasons) > 0 {
		return deny(reasons)
	}

	for _, w := range r.limits.windows {
		if usage == nil {
			return signer.Decision{}, fmt.Errorf("policy rule %s: a rolling window applies and there is no record of what was signed", r.id)
		}
		s, err := usage.Value(ctx, w.duration)
		if err != nil {
			return signer.Decision{}, fmt.Errorf("policy rule %s: value signed in the last %s: %w", r.id, w.duration, err)
		}
		if s == nil || s.Sign() < 0 {
			return signer.Decision{}, fmt.Errorf("policy rule %s: value signed in the last %s: got %v, not an amount", r.id, w.duration, s)
		}
		if total := new(big.Int).Add(s, req.Value); total.Cmp(w.max) > 0 {
			return deny([]string{fmt.Sprintf("%s wei signed in the last %s plus %s wei exceeds the window's max_value %s (rule %s)", s, w.duration, req.Value, w.max, r.id)})
		}
	}

	if a := r.approval; a != nil && a.required(req) {
		approved, rejected := p.countApprovals(a, req, now, r.id)
		d.Threshold, d.Approvers, d.Approved = a.threshold, slices.Clone(a.approvers), approved
		if len(approved) < a.threshold {
			d.Verdict = signer.NeedsApproval
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
// has not expired (nor expires further ahead than max_ttl), and its
// signature verifies over the intent recomputed from req and req's tx id;
// each approver counts once however many approvals carry its id.
func (p *Policy) countApprovals(a *approvalRule, req *signer.Request, now time.Time, ruleID string) (approved, rejected []string) {
	valid := map[string]bool{}
	for _, ap := range req.Approvals {
		pub, known := p.approvers[ap.Approver]
		why := ""
		switch {
		case !known || !slices.Contains(a.approvers, ap.Approver):
			why = "is not an approver of rule " + ruleID
		case valid[ap.Approver]:
			why = "counts once"
		case !now.Before(ap.Expiry):
			why = "expired at " + ap.Expiry.UTC().Format(time.RFC3339)
		case a.maxTTL > 0 && ap.Expiry.After(now.Add(a.maxTTL)):
			why = fmt.Sprintf("expires at %s, more than the max_ttl of %s ahead", ap.Expiry.UTC().Format(time.RFC3339), a.maxTTL)
		case !signer.VerifyApproval(pub, req, ap):
			why = "has a signature that does not verify for this intent and tx id"
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
