package policy_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// decision is what the table tests compare: the verdict, the deciding rule
// and the approval bookkeeping. Reasons are checked by substring.
func decision(v signer.Verdict, rule string) signer.Decision {
	return signer.Decision{Verdict: v, RuleID: rule}
}

func needs(rule string, threshold int, approvers []string, ok ...string) signer.Decision {
	return signer.Decision{Verdict: signer.NeedsApproval, RuleID: rule, Threshold: threshold, Approvers: approvers, Approved: ok}
}

func allowedWith(rule string, threshold int, approvers []string, ok ...string) signer.Decision {
	return signer.Decision{Verdict: signer.Allow, RuleID: rule, Threshold: threshold, Approvers: approvers, Approved: ok}
}

var ignoreReasons = cmpopts.IgnoreFields(signer.Decision{}, "Reasons", "PolicyVersion", "PolicyHash")

// equalAmounts compares amounts by value.
var equalAmounts = cmp.Comparer(func(a, b *big.Int) bool { return a == nil && b == nil || a != nil && b != nil && a.Cmp(b) == 0 })

type evalCase struct {
	name  string
	req   *signer.Request
	spent signer.Usage // spentIs(0) when nil
	want  signer.Decision
	// reason, when set, must appear in one of the decision's reasons.
	reason string
	// cancel: req cancels what was signed at its nonce (EvaluateCancel).
	cancel bool
}

func runEval(t *testing.T, p *policy.Policy, tests []evalCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var spent signer.Usage = spentIs(0)
			if tc.spent != nil {
				spent = tc.spent
			}
			evaluate := p.Evaluate
			if tc.cancel {
				evaluate = p.EvaluateCancel
			}
			got, err := evaluate(context.Background(), tc.req, now, spent)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreReasons, equalAmounts, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decision (-want +got):\n%s\nreasons: %q", diff, got.Reasons)
			}
			if tc.reason != "" && !slices.ContainsFunc(got.Reasons, func(r string) bool { return strings.Contains(r, tc.reason) }) {
				t.Errorf("reasons %q do not say %q", got.Reasons, tc.reason)
			}
			if len(got.Reasons) == 0 {
				t.Error("a decision without reasons")
			}
			if got.PolicyVersion != "test-7" || got.PolicyHash != p.Hash() {
				t.Errorf("decision names policy %q %s, want test-7 %s", got.PolicyVersion, got.PolicyHash, p.Hash())
			}
		})
	}
}

func TestEvaluateRules(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	spender := func(a common.Address) []byte { return word(a.Bytes()) }
	amount := word([]byte{0x01, 0x00})
	tests := []evalCase{
		// Chain allowlist.
		{name: "chain in the allowlist", req: request(), want: decision(signer.Allow, "payments")},
		{name: "second chain in the allowlist", req: request(chain(10)), want: decision(signer.Allow, "payments")},
		{name: "chain not in the allowlist", req: request(chain(5)), want: decision(signer.Deny, policy.ChainNotAllowed), reason: "chain 5"},
		{name: "chain allowed but not by the matching rule", req: request(chain(10), to(token), data(selTransfer, spender(dest1), amount)), want: decision(signer.Deny, policy.DefaultDeny)},

		// Signers and destinations.
		{name: "listed destination", req: request(to(dest2)), want: decision(signer.Allow, "payments")},
		{name: "unlisted destination", req: request(to(other)), want: decision(signer.Deny, policy.DefaultDeny), reason: "no allow rule matches"},
		{name: "unlisted signer", req: request(from(other)), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "listed destination takes any call data", req: request(data(selTransferFrom, word(nil))), want: decision(signer.Allow, "payments")},

		// Selectors per contract.
		{name: "listed selector", req: request(to(token), data(selTransfer, spender(dest1), amount)), want: decision(signer.Allow, "token")},
		{name: "unlisted selector", req: request(to(token), data(selTransferFrom, spender(ops), spender(dest1), amount)), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "plain transfer to a selector-only contract", req: request(to(token)), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "call data shorter than a selector", req: request(to(token), data(selTransfer[:3])), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "listed selector on another contract", req: request(to(other), data(selTransfer, spender(dest1), amount)), want: decision(signer.Deny, policy.DefaultDeny)},

		// ERC-20 approvals: each selector with an allowed, an unlisted and a malformed spender.
		{name: "approve listed spender", req: request(to(token), data(selApprove, spender(router), amount)), want: decision(signer.Allow, "token")},
		{name: "approve unlisted spender", req: request(to(token), data(selApprove, spender(other), amount)), want: decision(signer.Deny, "token"), reason: "approve(address,uint256) to spender " + other.Hex()},
		{name: "approve short", req: request(to(token), data(selApprove, spender(router))), want: decision(signer.Deny, "token"), reason: "malformed approve"},
		{name: "approve trailing bytes", req: request(to(token), data(selApprove, spender(router), amount, []byte{0})), want: decision(signer.Deny, "token"), reason: "want exactly 64"},
		{name: "approve dirty address word", req: request(to(token), data(selApprove, append([]byte{1}, spender(router)[1:]...), amount)), want: decision(signer.Deny, "token"), reason: "non-zero upper bytes"},
		{name: "approve selector only", req: request(to(token), data(selApprove)), want: decision(signer.Deny, "token"), reason: "malformed"},
		{name: "increaseAllowance listed spender", req: request(to(token), data(selIncreaseAllowance, spender(router), amount)), want: decision(signer.Allow, "token")},
		{name: "increaseAllowance unlisted spender", req: request(to(token), data(selIncreaseAllowance, spender(other), amount)), want: decision(signer.Deny, "token"), reason: "increaseAllowance"},
		{name: "increaseAllowance malformed", req: request(to(token), data(selIncreaseAllowance, spender(router)[:31])), want: decision(signer.Deny, "token"), reason: "malformed increaseAllowance"},
		{name: "setApprovalForAll listed operator", req: request(to(token), data(selSetApprovalForAll, spender(router), word([]byte{1}))), want: decision(signer.Allow, "token")},
		{name: "setApprovalForAll revoke listed operator", req: request(to(token), data(selSetApprovalForAll, spender(router), word(nil))), want: decision(signer.Allow, "token")},
		{name: "setApprovalForAll unlisted operator", req: request(to(token), data(selSetApprovalForAll, spender(other), word([]byte{1}))), want: decision(signer.Deny, "token"), reason: "setApprovalForAll"},
		{name: "setApprovalForAll bool not 0 or 1", req: request(to(token), data(selSetApprovalForAll, spender(router), word([]byte{2}))), want: decision(signer.Deny, "token"), reason: "not 0 or 1"},
		{name: "setApprovalForAll dirty bool word", req: request(to(token), data(selSetApprovalForAll, spender(router), append([]byte{1}, word([]byte{1})[1:]...))), want: decision(signer.Deny, "token"), reason: "not 0 or 1"},
		{name: "approve through a rule without spenders", req: request(data(selApprove, spender(router), amount)), want: decision(signer.Deny, "payments"), reason: "not in erc20_spenders (rule payments)"},

		// Max value per transaction.
		{name: "value at the cap", req: request(value(1000)), want: decision(signer.Allow, "payments")},
		{name: "value above the cap", req: request(value(1001)), want: decision(signer.Deny, "payments"), reason: "exceeds max_value_per_tx 1000"},

		// Rolling windows (the 1h window is 2500, the 24h one 10000).
		{name: "window reaches its max exactly", req: request(value(1000)), spent: spentIs(1500), want: decision(signer.Allow, "payments")},
		{name: "window one wei over", req: request(value(1000)), spent: spentIs(1501), want: decision(signer.Deny, "payments"), reason: "1501 wei signed in the last 1h0m0s plus 1000 wei"},
		{name: "the longer window binds", req: request(value(10)), spent: spentByWindow(map[time.Duration]int64{time.Hour: 0, 24 * time.Hour: 9991}), want: decision(signer.Deny, "payments"), reason: "24h0m0s"},
		{name: "zero value under a full window", req: request(value(0), data(selTransfer)), spent: spentIs(2500), want: decision(signer.Allow, "payments")},

		// Fee and gas caps.
		{name: "max fee at the cap", req: request(fees(100, 10)), want: decision(signer.Allow, "payments")},
		{name: "max fee above the cap", req: request(fees(101, 10)), want: decision(signer.Deny, "payments"), reason: "max_fee_per_gas 101"},
		{name: "tip above the cap", req: request(fees(100, 11)), want: decision(signer.Deny, "payments"), reason: "max_priority_fee_per_gas 11"},
		{name: "legacy gas price at the fee cap", req: request(legacy(100)), want: decision(signer.Allow, "payments")},
		{name: "legacy gas price above the fee cap", req: request(legacy(101)), want: decision(signer.Deny, "payments"), reason: "gas_price 101"},
		{name: "gas at the cap", req: request(gas(50000)), want: decision(signer.Allow, "payments")},
		{name: "gas above the cap", req: request(gas(50001)), want: decision(signer.Deny, "payments"), reason: "exceeds max_gas 50000"},
		{name: "every exceeded cap is a reason", req: request(value(2000), fees(200, 20), gas(60000)), want: decision(signer.Deny, "payments"), reason: "gas 60000"},

		// Contract creation.
		{name: "creation allowed", req: request(from(deployer), creation), want: decision(signer.Allow, "deploy")},
		{name: "creation by a signer whose rules name destinations", req: request(creation), want: decision(signer.Deny, policy.DefaultDeny), reason: "a contract creation"},
		{name: "creation refused by an allow rule without destinations", req: request(from(misc), creation), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "any call allowed by a rule without destinations", req: request(from(misc), to(other)), want: decision(signer.Allow, "misc")},
		{name: "creation rule allows no calls", req: request(from(deployer)), want: decision(signer.Deny, policy.DefaultDeny)},

		// Deny beats allow.
		{name: "deny before the allow rules", req: request(from(compromised), to(other)), want: decision(signer.Deny, "deny-compromised")},
		{name: "a deny rule without destinations covers creation", req: request(from(compromised), creation), want: decision(signer.Deny, "deny-compromised")},
		{name: "deny after the matching allow rule", req: request(data(selEvil)), want: decision(signer.Deny, "deny-evil-selector")},
		{name: "deny by value after the allow rules", req: request(from(treasury), value(1000000), approved("alice", "bob")), want: decision(signer.Deny, "deny-huge")},
		{name: "the first matching deny rule decides, all are reasons", req: request(from(compromised), to(blocked), data(selEvil)), want: decision(signer.Deny, "deny-blocked"), reason: "denied by rule deny-evil-selector"},
		{name: "denied destination", req: request(to(blocked)), want: decision(signer.Deny, "deny-blocked")},

		// Cancels.
		{name: "cancel allowed", req: request(to(ops), value(0)), want: decision(signer.Allow, "cancel-ops"), cancel: true},
		{name: "cancel above its fee cap", req: request(to(ops), value(0), fees(101, 1)), want: decision(signer.Deny, "cancel-ops"), reason: "max_fee_per_gas 101", cancel: true},
		{name: "cancel on a chain it does not cover", req: request(to(ops), value(0), chain(10)), want: decision(signer.Deny, policy.DefaultDeny), cancel: true},
		{name: "cancel by a signer it does not cover", req: request(from(treasury), to(treasury), value(0)), want: decision(signer.Deny, policy.DefaultDeny), cancel: true},
		{name: "a self-transfer with value is no cancel", req: request(to(ops), value(1)), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "a cancel at a fresh nonce is a plain transfer", req: request(to(ops), value(0)), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "a self-transfer with value is not cancelled", req: request(to(ops), value(1)), want: decision(signer.Deny, policy.InvalidRequest), cancel: true},

		// Requests that are not valid.
		{name: "no value", req: request(func(r *signer.Request) { r.Value = nil }), want: decision(signer.Deny, policy.InvalidRequest), reason: "value is required"},
		{name: "blob type", req: request(func(r *signer.Request) { r.Type = "blob" }), want: decision(signer.Deny, policy.InvalidRequest)},
	}
	runEval(t, p, tests)
}

func spentByWindow(m map[time.Duration]int64) valueUsage {
	return func(_ context.Context, w time.Duration) (*big.Int, error) {
		v, ok := m[w]
		if !ok {
			return nil, fmt.Errorf("unexpected window %s", w)
		}
		return big.NewInt(v), nil
	}
}

// TestEvaluateFeeWindows: gas × max fee of every request counts toward
// its rule's rolling fee windows (payments: 5000000 wei an hour and
// 20000000 a day; cancel-ops: 4200000 an hour), cancels included. The
// request's own fees (gas 21000 × 50 wei by default) are added to what
// the record says was signed.
func TestEvaluateFeeWindows(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	cancel := request(to(ops), value(0))
	runEval(t, p, []evalCase{
		{name: "fees reach the window exactly", req: request(), spent: feesSpent(3_950_000), want: decision(signer.Allow, "payments")},
		{name: "fees one wei over", req: request(), spent: feesSpent(3_950_001), want: decision(signer.Deny, "payments"),
			reason: "3950001 wei of fees signed in the last 1h0m0s plus this request's 1050000 wei (gas 21000 × 50 wei) exceeds the fee window's max_fee 5000000 (rule payments)"},
		{name: "a legacy gas price counts", req: request(legacy(100)), spent: feesSpent(2_900_001), want: decision(signer.Deny, "payments"), reason: "2100000 wei (gas 21000 × 100 wei)"},
		{name: "the longer fee window binds", req: request(), spent: feesByWindow(map[time.Duration]int64{time.Hour: 0, 24 * time.Hour: 18_950_001}), want: decision(signer.Deny, "payments"), reason: "in the last 24h0m0s"},
		{name: "a zero-value request pays fees too", req: request(value(0)), spent: feesSpent(4_000_000), want: decision(signer.Deny, "payments"), reason: "max_fee 5000000"},
		{name: "a cancel within its fee window", req: cancel, spent: feesSpent(3_150_000), want: decision(signer.Allow, "cancel-ops"), cancel: true},
		{name: "a cancel over its fee window", req: cancel, spent: feesSpent(3_150_001), want: decision(signer.Deny, "cancel-ops"), cancel: true,
			reason: "3150001 wei of fees signed in the last 1h0m0s plus this request's 1050000 wei (gas 21000 × 50 wei) exceeds the fee window's max_fee 4200000 (cancels entry cancel-ops)"},
	})
}

func TestEvaluateApprovals(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	abc := []string{"alice", "bob", "carol"}
	large := func(mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){from(treasury), value(101)}, mods...)...)
	}
	tests := []evalCase{
		{name: "at the threshold value no approval is needed", req: request(from(treasury), value(100)), want: decision(signer.Allow, "treasury")},
		{name: "0 of 2", req: large(), want: needs("treasury", 2, abc), reason: "needs 2 of 3 approvals (alice, bob, carol); 0 valid"},
		{name: "1 of 2", req: large(approved("bob")), want: needs("treasury", 2, abc, "bob")},
		{name: "2 of 2", req: large(approved("carol", "alice")), want: allowedWith("treasury", 2, abc, "alice", "carol")},
		{name: "3 of 2", req: large(approved("alice", "bob", "carol")), want: allowedWith("treasury", 2, abc, "alice", "bob", "carol")},
		{name: "duplicate approver counts once", req: large(approved("alice", "alice")), want: needs("treasury", 2, abc, "alice"), reason: `"alice" counts once`},
		{name: "expired", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			return signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(-time.Second))
		})), want: needs("treasury", 2, abc, "alice"), reason: "expired at"},
		{name: "expiring at now is expired", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			return signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now)
		})), want: needs("treasury", 2, abc, "alice"), reason: "expired"},
		{name: "expiring past max_ttl", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			return signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(25*time.Hour))
		})), want: needs("treasury", 2, abc, "alice"), reason: "max_ttl"},
		{name: "unknown approver", req: large(approved("alice", "mallory")), want: needs("treasury", 2, abc, "alice"), reason: `"mallory" is not an approver`},
		{name: "approver of the policy but not of the rule", req: large(approved("alice", "dave")), want: needs("treasury", 2, abc, "alice"), reason: `"dave" is not an approver of rule treasury`},
		{name: "signed by another approver's key", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			return signer.SignApproval(approverKey("alice"), "bob", r, r.FeeCap(), now.Add(time.Hour))
		})), want: needs("treasury", 2, abc, "alice"), reason: `"bob" has a signature that does not verify`},
		{name: "signed over a different intent", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			return signer.SignApproval(approverKey("bob"), "bob", large(value(102)), r.FeeCap(), now.Add(time.Hour))
		})), want: needs("treasury", 2, abc, "alice"), reason: "does not verify"},
		{name: "signed for a different tx id", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			o := *r
			o.TxID = "tx-2"
			return signer.SignApproval(approverKey("bob"), "bob", &o, r.FeeCap(), now.Add(time.Hour))
		})), want: needs("treasury", 2, abc, "alice"), reason: "does not verify"},
		{name: "tampered signature", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(time.Hour))
			a.Signature[10] ^= 1
			return a
		})), want: needs("treasury", 2, abc, "alice"), reason: "does not verify"},
		{name: "tampered expiry", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(time.Hour))
			a.Expiry = a.Expiry.Add(time.Hour)
			return a
		})), want: needs("treasury", 2, abc, "alice"), reason: "does not verify"},
		{name: "expiry moved by a fraction of the signed second", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(time.Hour))
			a.Expiry = a.Expiry.Add(900 * time.Millisecond)
			return a
		})), want: decision(signer.Deny, policy.InvalidRequest), reason: "whole second"},
		{name: "truncated signature", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(time.Hour))
			a.Signature = a.Signature[:63]
			return a
		})), want: needs("treasury", 2, abc, "alice"), reason: "does not verify"},
		{name: "an invalid approval next to a valid one by the same approver", req: large(withApproval(func(r *signer.Request) signer.Approval {
			return signer.SignApproval(approverKey("bob"), "bob", r, r.FeeCap(), now.Add(-time.Minute))
		}), approved("bob", "carol")), want: allowedWith("treasury", 2, abc, "bob", "carol")},
		{name: "approvals do not make a request match", req: request(from(treasury), to(other), value(101), approved("alice", "bob")), want: decision(signer.Deny, policy.DefaultDeny)},
	}
	runEval(t, p, tests)
}

// TestApprovalsCoverFeeCapsUpToTheirCeiling: an approval counts for a
// request whose fee cap (max_fee_per_gas, or a legacy gas price) is at or
// below the approval's ceiling, and not above, saying why; the ceiling is
// part of what the approver signed.
func TestApprovalsCoverFeeCapsUpToTheirCeiling(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	abc := []string{"alice", "bob", "carol"}
	large := func(mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){from(treasury), value(101)}, mods...)...)
	}
	// The default request's fee cap is 50 wei per gas.
	runEval(t, p, []evalCase{
		{name: "ceiling at the fee cap", req: large(approvedUpTo(50, "alice", "bob")), want: allowedWith("treasury", 2, abc, "alice", "bob")},
		{name: "ceiling above the fee cap", req: large(approvedUpTo(90, "alice", "bob")), want: allowedWith("treasury", 2, abc, "alice", "bob")},
		{name: "one ceiling one wei below the fee cap", req: large(approvedUpTo(50, "alice"), approvedUpTo(49, "bob")), want: needs("treasury", 2, abc, "alice"),
			reason: `the approval by "bob" covers fee caps up to 49 wei per gas, below this request's 50: a new approval is needed`},
		{name: "both ceilings below the fee cap", req: large(approvedUpTo(30, "alice", "bob")), want: needs("treasury", 2, abc),
			reason: `the approval by "alice" covers fee caps up to 30 wei per gas, below this request's 50`},
		{name: "a ceiling below the fee cap next to a covering one by the same approver", req: large(approvedUpTo(10, "bob"), approvedUpTo(50, "bob", "carol")),
			want: allowedWith("treasury", 2, abc, "bob", "carol")},
		{name: "legacy gas price at the ceiling", req: large(legacy(70), approvedUpTo(70, "alice", "bob")), want: allowedWith("treasury", 2, abc, "alice", "bob")},
		{name: "legacy gas price above the ceiling", req: large(legacy(71), approvedUpTo(70, "alice", "bob")), want: needs("treasury", 2, abc),
			reason: "covers fee caps up to 70 wei per gas, below this request's 71"},
		{name: "the tip does not count against the ceiling", req: large(fees(50, 50), approvedUpTo(50, "alice", "bob")), want: allowedWith("treasury", 2, abc, "alice", "bob")},
		{name: "ceiling raised after signing", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, big.NewInt(40), now.Add(time.Hour))
			a.MaxFeePerGas = big.NewInt(4000)
			return a
		})), want: needs("treasury", 2, abc, "alice"), reason: `"bob" has a signature that does not verify`},
		{name: "ceiling lowered after signing", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, big.NewInt(4000), now.Add(time.Hour))
			a.MaxFeePerGas = big.NewInt(50)
			return a
		})), want: needs("treasury", 2, abc, "alice"), reason: `"bob" has a signature that does not verify`},
		{name: "an approval without a ceiling", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, big.NewInt(50), now.Add(time.Hour))
			a.MaxFeePerGas = nil
			return a
		})), want: needs("treasury", 2, abc, "alice"), reason: `the approval by "bob" has no fee ceiling (max_fee_per_gas)`},
		{name: "an approval with a ceiling beyond uint256", req: large(approved("alice"), withApproval(func(r *signer.Request) signer.Approval {
			a := signer.SignApproval(approverKey("bob"), "bob", r, big.NewInt(50), now.Add(time.Hour))
			a.MaxFeePerGas = new(big.Int).Lsh(big.NewInt(1), 256)
			return a
		})), want: decision(signer.Deny, policy.InvalidRequest), reason: "approval 1: max_fee_per_gas is not a uint256"},
	})
}

// TestApprovalsFollowTheIntent: approvals given to an intent still count
// for its fee-bump replacements up to their fee ceiling (fees are not part
// of the intent, the ceiling is part of the approval), while a bump above
// the ceiling needs new approvals and a change of destination, value or
// data voids them.
func TestApprovalsFollowTheIntent(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	orig := request(from(treasury), value(500), approvedUpTo(66, "alice", "bob"))
	bump := *orig
	bump.MaxFeePerGas, bump.MaxPriorityFeePerGas, bump.Gas = big.NewInt(60), big.NewInt(3), 21001
	toCeiling := bump
	toCeiling.MaxFeePerGas, toCeiling.MaxPriorityFeePerGas = big.NewInt(66), big.NewInt(4)
	aboveCeiling := toCeiling
	aboveCeiling.MaxFeePerGas, aboveCeiling.MaxPriorityFeePerGas = big.NewInt(73), big.NewInt(5)
	reapproved := aboveCeiling
	reapproved.Approvals = nil
	approvedUpTo(73, "alice", "bob")(&reapproved)
	changed := *orig
	changed.Data = []byte{1}
	for _, tc := range []struct {
		name string
		req  *signer.Request
		want signer.Verdict
	}{
		{"original", orig, signer.Allow},
		{"fee bump", &bump, signer.Allow},
		{"fee bump to the ceiling", &toCeiling, signer.Allow},
		{"fee bump above the ceiling", &aboveCeiling, signer.NeedsApproval},
		{"fee bump above the old ceiling, approved anew", &reapproved, signer.Allow},
		{"other data", &changed, signer.NeedsApproval},
	} {
		got, err := p.Evaluate(context.Background(), tc.req, now, spentIs(0))
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != tc.want {
			t.Errorf("%s: %s %q, want %s", tc.name, got.Verdict, got.Reasons, tc.want)
		}
	}
}

// TestDenyBeatsAllowInAnyOrder evaluates the same requests against every
// rotation of the rule list: the deny rules win wherever they stand.
func TestDenyBeatsAllowInAnyOrder(t *testing.T) {
	t.Parallel()
	const head = `{"version": "order", "chains": [1], "rules": [`
	rules := []string{
		`{"id": "allow-all", "effect": "allow", "match": {}, "limits": {` + feeCaps + `}}`,
		`{"id": "deny-blocked", "effect": "deny", "match": {"to": ["0x00000000000000000000000000000000000000b1"]}}`,
		`{"id": "allow-blocked", "effect": "allow", "match": {"to": ["0x00000000000000000000000000000000000000b1"]}, "limits": {` + feeCaps + `}}`,
		`{"id": "deny-big", "effect": "deny", "match": {"value": {"min": "1000"}}}`,
	}
	for i := range rules {
		rotated := append(slices.Clone(rules[i:]), rules[:i]...)
		p := mustParse(t, head+strings.Join(rotated, ",")+"]}")
		for _, tc := range []struct {
			req  *signer.Request
			want signer.Decision
		}{
			{request(to(blocked)), decision(signer.Deny, "deny-blocked")},
			{request(value(1000)), decision(signer.Deny, "deny-big")},
			{request(to(other), value(999)), decision(signer.Allow, "allow-all")},
		} {
			got, err := p.Evaluate(context.Background(), tc.req, now, spentIs(0))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, ignoreReasons, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("rotation %d: (-want +got):\n%s", i, diff)
			}
		}
	}
}

// TestFirstMatchingAllowRuleDecides: a later, laxer allow rule does not
// rescue a request that the first matching one refuses.
func TestFirstMatchingAllowRuleDecides(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"version": "first", "chains": [1], "rules": [
		{"id": "strict", "effect": "allow", "match": {"to": ["0x00000000000000000000000000000000000000d1"]}, "limits": {"max_value_per_tx": "10", `+feeCaps+`}},
		{"id": "lax", "effect": "allow", "match": {}, "limits": {`+feeCaps+`}}
	]}`)
	runEvalOn(t, p, []struct {
		req  *signer.Request
		want signer.Decision
	}{
		{request(value(11)), decision(signer.Deny, "strict")},
		{request(value(10)), decision(signer.Allow, "strict")},
		{request(to(other), value(11)), decision(signer.Allow, "lax")},
	})
}

func runEvalOn(t *testing.T, p *policy.Policy, tests []struct {
	req  *signer.Request
	want signer.Decision
}) {
	t.Helper()
	for i, tc := range tests {
		got, err := p.Evaluate(context.Background(), tc.req, now, spentIs(0))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got, ignoreReasons, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("case %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestDefaultDenyWithoutRules(t *testing.T) {
	t.Parallel()
	p := mustParse(t, `{"version": "freeze", "chains": [1], "rules": []}`)
	got, err := p.Evaluate(context.Background(), request(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := signer.Decision{
		Verdict: signer.Deny, RuleID: "default-deny", PolicyVersion: "freeze", PolicyHash: p.Hash(),
		Reasons: []string{"no allow rule matches (chain 1, from " + ops.Hex() + ", to " + dest1.Hex() + ", value 1)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if p.AllowsCancel(1, ops) {
		t.Error("a policy without cancels allows a cancel")
	}
}

func TestEvaluateFailsClosed(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	boom := errors.New("store unavailable")
	_, err := p.Evaluate(context.Background(), request(), now, valueUsage(func(context.Context, time.Duration) (*big.Int, error) { return nil, boom }))
	if !errors.Is(err, boom) {
		t.Errorf("spent failing: %v, want it to carry %v", err, boom)
	}
	if _, err := p.Evaluate(context.Background(), request(), now, nil); err == nil {
		t.Error("no SpentFunc under a window rule: no error")
	}
	if _, err := p.Evaluate(context.Background(), request(), now, valueUsage(func(context.Context, time.Duration) (*big.Int, error) { return nil, nil })); err == nil {
		t.Error("a nil amount from spent: no error")
	}
	if _, err := p.Evaluate(context.Background(), request(), now, spentIs(-1)); err == nil {
		t.Error("a negative amount from spent: no error")
	}
	if _, err := p.Evaluate(context.Background(), nil, now, spentIs(0)); err == nil {
		t.Error("a nil request: no error")
	}
	// Every allow rule and cancels entry has a fee window, so every
	// allowed request needs the record, even under a rule without value
	// windows.
	if _, err := p.Evaluate(context.Background(), request(to(token), data(selTransfer, word(dest1.Bytes()), word([]byte{1}))), now, nil); err == nil {
		t.Error("a fee window and no record: no error")
	}
	cancel := request(to(ops), value(0))
	if _, err := p.EvaluateCancel(context.Background(), cancel, now, nil); err == nil {
		t.Error("a cancel's fee window and no record: no error")
	}
	for name, u := range map[string]feeUsage{
		"failing":  func(time.Duration) (*big.Int, error) { return nil, boom },
		"nil":      func(time.Duration) (*big.Int, error) { return nil, nil },
		"negative": feesSpent(-1),
	} {
		if _, err := p.Evaluate(context.Background(), request(), now, u); err == nil {
			t.Errorf("fees %s: no error", name)
		}
		if _, err := p.EvaluateCancel(context.Background(), cancel, now, u); err == nil {
			t.Errorf("fees %s, a cancel: no error", name)
		}
	}
}

// record is signerd's record of what it signed, as the SpentFunc sees it:
// it outlives any Policy value, as the database outlives a restart.
type record struct {
	mu     sync.Mutex
	signed []struct {
		at    time.Time
		value *big.Int
	}
}

func (r *record) add(at time.Time, v *big.Int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.signed = append(r.signed, struct {
		at    time.Time
		value *big.Int
	}{at, v})
}

// spentAt is the SpentFunc at now: the value signed in (now-window, now].
func (r *record) spentAt(now time.Time) valueUsage {
	return func(_ context.Context, w time.Duration) (*big.Int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		sum := new(big.Int)
		for _, s := range r.signed {
			if s.at.After(now.Add(-w)) && !s.at.After(now) {
				sum.Add(sum, s.value)
			}
		}
		return sum, nil
	}
}

// TestRollingWindowAcrossRestarts signs against the 1h window of 2500,
// reloading the policy (a restart: nothing carries over but the file and
// the record) between every request.
func TestRollingWindowAcrossRestarts(t *testing.T) {
	t.Parallel()
	rec := &record{}
	start := now
	steps := []struct {
		at    time.Duration // after start
		value int64
		want  signer.Verdict
	}{
		{0, 1000, signer.Allow},
		{10 * time.Minute, 1000, signer.Allow},
		{20 * time.Minute, 501, signer.Deny},  // 2000 + 501 > 2500
		{20 * time.Minute, 500, signer.Allow}, // exactly 2500
		{59 * time.Minute, 1, signer.Deny},
		{time.Hour, 1000, signer.Allow}, // the first 1000 left the window
		{time.Hour + time.Minute, 1, signer.Deny},
		{time.Hour + 10*time.Minute, 1000, signer.Allow}, // the second left too
	}
	for i, s := range steps {
		p := mustParse(t, testPolicy) // restart
		at := start.Add(s.at)
		req := request(value(s.value))
		d, err := p.Evaluate(context.Background(), req, at, rec.spentAt(at))
		if err != nil {
			t.Fatal(err)
		}
		if d.Verdict != s.want {
			t.Fatalf("step %d (+%s, %d wei): %s %q, want %s", i, s.at, s.value, d.Verdict, d.Reasons, s.want)
		}
		if d.Verdict == signer.Allow {
			rec.add(at, req.Value) // signerd records what it signed
		}
	}
}

func TestAllowsCancel(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	for _, tc := range []struct {
		chain uint64
		from  common.Address
		want  bool
	}{
		{1, ops, true},
		{10, ops, false},     // the entry names chain 1 only
		{1, treasury, false}, // and ops only
		{5, ops, false},      // not a chain of the policy
		{1, common.Address{}, false},
	} {
		if got := p.AllowsCancel(tc.chain, tc.from); got != tc.want {
			t.Errorf("AllowsCancel(%d, %s) = %v, want %v", tc.chain, tc.from.Hex(), got, tc.want)
		}
	}
	open := mustParse(t, `{"version": "v", "chains": [1, 2], "cancels": [{"id": "anyone", "limits": {`+feeCaps+`}}], "rules": [
		{"id": "frozen", "effect": "deny", "match": {"from": ["0x00000000000000000000000000000000000000a5"]}}]}`)
	if !open.AllowsCancel(2, other) || open.AllowsCancel(3, other) {
		t.Error("an open cancels entry covers every signer on the policy's chains, and nothing else")
	}
	// A deny rule beats a cancels entry, in AllowsCancel as in Evaluate.
	if open.AllowsCancel(1, compromised) {
		t.Error("AllowsCancel for a signer a deny rule matches")
	}
	if d, err := open.EvaluateCancel(context.Background(), request(from(compromised), to(compromised), value(0)), now, spentIs(0)); err != nil || d.RuleID != "frozen" {
		t.Errorf("Evaluate of that cancel: %s by %s, %v", d.Verdict, d.RuleID, err)
	}
	if d, err := open.EvaluateCancel(context.Background(), request(from(other), to(other), value(0), chain(2)), now, spentIs(0)); err != nil || d.Verdict != signer.Allow || d.RuleID != "anyone" {
		t.Errorf("Evaluate of an allowed cancel: %s by %s, %v", d.Verdict, d.RuleID, err)
	}
}

func TestDecisionDoesNotShareThePolicy(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	d, err := p.Evaluate(context.Background(), request(from(treasury), value(101)), now, spentIs(0))
	if err != nil {
		t.Fatal(err)
	}
	d.Approvers[0] = "mallory"
	d, _ = p.Evaluate(context.Background(), request(from(treasury), value(101)), now, spentIs(0))
	if d.Approvers[0] != "alice" {
		t.Error("changing a decision changed the policy")
	}
}

// TestCheckApprovalsNamesWhatDoesNotCount: the check txmanager asks for
// when an approval or a rejection is submitted answers, for each item,
// whether it would count and which field is at fault (approver,
// signature, expiry), with the rule's threshold and approvers; a
// rejection is signed over its own message, so an approval's signature
// is no rejection; a request that needs no approval can take none.
func TestCheckApprovalsNamesWhatDoesNotCount(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	req := request(from(treasury), value(101))
	in := now.Add(time.Hour)
	sign := func(key, as string, r *signer.Request, expiry time.Time) signer.Approval {
		return signer.SignApproval(approverKey(key), as, r, r.FeeCap(), expiry)
	}
	otherTx := *req
	otherTx.TxID = "tx-2"
	req.Approvals = []signer.Approval{
		sign("alice", "alice", req, in),      // counts
		sign("alice", "bob", req, in),        // bob's name, alice's key
		sign("carol", "carol", &otherTx, in), // another transaction's
		sign("mallory", "mallory", req, in),  // unknown approver
		sign("dave", "dave", req, in),        // of the policy, not of the rule
	}
	got := p.CheckApprovals(req, nil, now)
	if got.RuleID != "treasury" || got.Threshold != 2 || len(got.Approvers) != 3 || got.Why != "" {
		t.Fatalf("check: %+v", got)
	}
	wantFields := []string{"", signer.FieldSignature, signer.FieldSignature, signer.FieldApprover, signer.FieldApprover}
	if len(got.Approvals) != len(wantFields) {
		t.Fatalf("%d items checked, want %d", len(got.Approvals), len(wantFields))
	}
	for i, item := range got.Approvals {
		if item.Counts != (wantFields[i] == "") || item.Field != wantFields[i] || !item.Counts && item.Why == "" {
			t.Errorf("approval %d (%s): counts %v, field %q, why %q; want field %q", i, item.Approver, item.Counts, item.Field, item.Why, wantFields[i])
		}
	}

	for _, expiry := range []time.Time{now.Add(-time.Minute), now.Add(25 * time.Hour)} { // past, beyond max_ttl
		late := *req
		late.Approvals = []signer.Approval{sign("carol", "carol", req, expiry)}
		if got := p.CheckApprovals(&late, nil, now); len(got.Approvals) != 1 || got.Approvals[0].Counts || got.Approvals[0].Field != signer.FieldExpiry {
			t.Errorf("an approval expiring at %s: %+v", expiry, got.Approvals)
		}
	}

	reject := signer.SignRejection(approverKey("bob"), "bob", req, in)
	if got := p.CheckApprovals(req, &reject, now); got.Rejection == nil || !got.Rejection.Counts {
		t.Errorf("bob's rejection: %+v", got.Rejection)
	}
	asApproval := sign("bob", "bob", req, in)
	fake := signer.Rejection{Approver: "bob", Expiry: asApproval.Expiry, Signature: asApproval.Signature}
	if got := p.CheckApprovals(req, &fake, now); got.Rejection == nil || got.Rejection.Counts || got.Rejection.Field != signer.FieldSignature {
		t.Errorf("an approval's signature presented as a rejection: %+v", got.Rejection)
	}
	if got := p.CheckApprovals(request(from(treasury), value(100)), nil, now); got.Why == "" || got.RuleID != "" {
		t.Errorf("a request that needs no approval: %+v", got)
	}
}
