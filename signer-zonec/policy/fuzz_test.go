package policy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// FuzzParse: Parse never panics; what it refuses it refuses with a
// *policy.Error naming paths; what it accepts re-validates: re-encoded, it
// parses again to the same policy, and its hash is the SHA-256 of the input.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"development.json", "production-example.json"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "policy", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(testPolicy))
	for _, s := range []string{
		`{"version": "v", "chains": [1], "rules": []}`,
		`{"version": "v", "chains": [1], "rules": [{"id": "a", "effect": "deny", "effect": "allow", "match": {}}]}`,
		`{"version": "v", "chains": [1], "rules": [{"id": "a", "effect": "allow", "match": {"selectors": {"*": ["0xa9059cbb"]}, "value": {"min": "0", "max": "10"}}}]}`,
		`{"version": "v", "chains": [1], "cancels": [{"id": "c", "limits": {"max_gas": 21000}}], "rules": [{"id": "a", "Effect": "allow", "match": null}]}`,
		`{"version": "v", "chains": [1], "rules": []} {}`,
		`{"version": "v\u0000", "chains": [18446744073709551616], "rules": [[]]}`,
		`[{"version": 1}]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse(data)
		if err != nil {
			var perr *policy.Error
			if !errors.As(err, &perr) || len(perr.Problems) == 0 {
				t.Fatalf("refused without problems: %v", err)
			}
			for _, pr := range perr.Problems {
				if pr.Path == "" || pr.Msg == "" {
					t.Fatalf("a problem without a path or message: %#v", pr)
				}
			}
			return
		}
		if p.Hash() != common.Hash(sha256.Sum256(data)) {
			t.Fatal("Hash is not the SHA-256 of the input")
		}
		canon := policy.Canonical(p)
		q, err := policy.Parse(canon)
		if err != nil {
			t.Fatalf("accepted, but its re-encoding is refused: %v\ninput: %q\nre-encoded: %s", err, data, canon)
		}
		if !bytes.Equal(policy.Canonical(q), canon) || q.Version() != p.Version() {
			t.Fatalf("re-encoding changed the policy:\n%s\n%s", canon, policy.Canonical(q))
		}
	})
}

// FuzzEvaluate runs random requests against testPolicy. Evaluate never
// panics and never fails (its SpentFunc cannot); every decision is
// well-formed; a matching deny rule always denies (checked against an
// oracle written apart from the engine); and a denied request stays denied
// when approvals, even valid ones, are added, or when bytes are appended to
// call data that already has a selector (unless they complete a truncated
// approval call). testdata/fuzz/FuzzEvaluate holds the inputs that once
// failed.
func FuzzEvaluate(f *testing.F) {
	// chainSel, fromSel, toSel, value, callData, gas, maxFee, tip, legacy, approvers, spent
	f.Add(uint8(0), uint8(0), uint8(0), uint64(1), []byte{}, uint64(21000), uint64(50), uint64(2), false, uint8(0), uint64(0))
	f.Add(uint8(0), uint8(1), uint8(0), uint64(101), []byte{}, uint64(21000), uint64(50), uint64(2), false, uint8(3), uint64(0))
	f.Add(uint8(0), uint8(0), uint8(4), uint64(0), append(slices.Clone(selApprove), append(word(router.Bytes()), word([]byte{1})...)...), uint64(60000), uint64(50), uint64(2), false, uint8(0), uint64(0))
	f.Add(uint8(0), uint8(0), uint8(4), uint64(0), append(slices.Clone(selSetApprovalForAll), append(word(other.Bytes()), word([]byte{2})...)...), uint64(60000), uint64(50), uint64(2), true, uint8(0), uint64(0))
	f.Add(uint8(0), uint8(2), uint8(7), uint64(0), []byte{0x60, 0x80, 0x60, 0x40}, uint64(1e6), uint64(50), uint64(2), false, uint8(0), uint64(0))
	f.Add(uint8(0), uint8(4), uint8(3), uint64(3), slices.Clone(selEvil), uint64(21000), uint64(50), uint64(2), false, uint8(0), uint64(0))
	f.Add(uint8(1), uint8(0), uint8(5), uint64(0), []byte{}, uint64(21000), uint64(100), uint64(10), false, uint8(0), uint64(2500))
	f.Add(uint8(2), uint8(0), uint8(0), uint64(1000), []byte{1, 2, 3}, uint64(50001), uint64(101), uint64(11), false, uint8(7), uint64(1501))
	f.Add(uint8(0), uint8(3), uint8(1), uint64(2000000), []byte{}, uint64(21000), uint64(50), uint64(2), false, uint8(15), uint64(0))
	f.Add(uint8(0), uint8(0), uint8(7), uint64(0), policy.EncodeCall("transfer(address,uint256)", dest1, 500), uint64(100000), uint64(50), uint64(2), false, uint8(0), uint64(0))
	f.Add(uint8(0), uint8(0), uint8(7), uint64(0), policy.EncodeCall("transfer(address,uint256)", dest1, 1000), uint64(100000), uint64(50), uint64(2), false, uint8(3), uint64(0))
	f.Add(uint8(0), uint8(0), uint8(8), uint64(0), policy.EncodeCall("setApprovalForAll(address,bool)", router, true), uint64(100000), uint64(50), uint64(2), false, uint8(6), uint64(0))
	f.Add(uint8(0), uint8(0), uint8(9), uint64(0), policy.EncodeCall("safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)", ops, dest1, []any{1, 2}, []any{30, 20}, []byte{}), uint64(100000), uint64(50), uint64(2), false, uint8(0), uint64(0))

	p := mustParse(f, testPolicy)
	chains := []uint64{1, 10, 5}
	signers := []common.Address{ops, treasury, deployer, misc, compromised, other}
	dests := []common.Address{dest1, dest2, blocked, other, token, ops, treasury, usd, nft, items}
	names := []string{"alice", "bob", "carol", "dave"}
	denyIDs := []string{"deny-blocked", "deny-compromised", "deny-evil-selector", "deny-huge"}

	f.Fuzz(func(t *testing.T, chainSel, fromSel, toSel uint8, val uint64, callData []byte, gasLimit, maxFee, tip uint64, isLegacy bool, approvers uint8, spentVal uint64) {
		req := &signer.Request{
			TxID: "fuzz", ChainID: chains[int(chainSel)%len(chains)], From: signers[int(fromSel)%len(signers)],
			Type: signer.DynamicFee, Value: new(big.Int).SetUint64(val), Data: callData, Gas: gasLimit,
			MaxFeePerGas: new(big.Int).SetUint64(maxFee), MaxPriorityFeePerGas: new(big.Int).SetUint64(tip),
		}
		if int(toSel)%(len(dests)+1) < len(dests) {
			a := dests[int(toSel)%(len(dests)+1)]
			req.To = &a
		}
		if isLegacy {
			req.Type, req.GasPrice, req.MaxFeePerGas, req.MaxPriorityFeePerGas = signer.Legacy, req.MaxFeePerGas, nil, nil
		}
		for i, n := range names {
			if approvers&(1<<i) != 0 {
				req.Approvals = append(req.Approvals, signer.SignApproval(approverKey(n), n, req, req.FeeCap(), now.Add(time.Hour)))
			}
		}
		spent := valueUsage(func(context.Context, time.Duration) (*big.Int, error) { return new(big.Int).SetUint64(spentVal), nil })
		eval := func(r *signer.Request) signer.Decision {
			t.Helper()
			d, err := p.Evaluate(context.Background(), r, now, spent)
			if err != nil {
				t.Fatalf("Evaluate: %v", err)
			}
			if d.RuleID == "" || len(d.Reasons) == 0 || d.PolicyHash != p.Hash() || d.PolicyVersion != p.Version() {
				t.Fatalf("ill-formed decision %+v", d)
			}
			switch d.Verdict {
			case signer.Allow, signer.Deny:
			case signer.NeedsApproval:
				if d.Threshold <= len(d.Approved) || len(d.Approvers) < d.Threshold {
					t.Fatalf("needs approval with %d of %d valid, %d approvers", len(d.Approved), d.Threshold, len(d.Approvers))
				}
			default:
				t.Fatalf("verdict %q", d.Verdict)
			}
			return d
		}
		d := eval(req)

		valid := req.Validate() == nil && req.ChainID != 5
		if valid && oracleDenies(req) {
			if d.Verdict != signer.Deny || !slices.Contains(denyIDs, d.RuleID) {
				t.Fatalf("a deny rule matches, decision %s by %s: %q", d.Verdict, d.RuleID, d.Reasons)
			}
		}
		if d.Verdict == signer.Allow && d.Threshold > 0 && len(d.Approved) < d.Threshold {
			t.Fatalf("allowed with %d of %d approvals", len(d.Approved), d.Threshold)
		}
		if d.Verdict != signer.Deny {
			return
		}

		more := *req
		more.Approvals = slices.Clone(req.Approvals)
		for _, n := range names {
			more.Approvals = append(more.Approvals, signer.SignApproval(approverKey(n), n, &more, more.FeeCap(), now.Add(time.Hour)))
		}
		if d2 := eval(&more); d2.Verdict != signer.Deny || d2.RuleID != d.RuleID {
			t.Fatalf("denied by %s, then %s by %s with more approvals", d.RuleID, d2.Verdict, d2.RuleID)
		}
		// Appending to call data never turns a denial into an allow once the
		// call has its selector, except by completing a truncated call that
		// policy decodes: that one was denied as malformed, and completed it
		// is a different, well-formed call.
		known, malformed := policy.Decodes(callData)
		if len(callData) >= 4 && !(known && malformed != nil) {
			longer := *req
			longer.Data = append(slices.Clone(callData), 0, 1, 2, 3)
			if d2 := eval(&longer); d2.Verdict != signer.Deny {
				t.Fatalf("denied by %s, then %s by %s with more call data", d.RuleID, d2.Verdict, d2.RuleID)
			}
		}
	})
}

// oracleDenies restates testPolicy's deny rules independently of the
// engine.
func oracleDenies(r *signer.Request) bool {
	if r.From == compromised || r.Value.Cmp(big.NewInt(1000000)) >= 0 {
		return true
	}
	if r.To == nil {
		return false
	}
	return *r.To == blocked || (len(r.Data) >= 4 && bytes.Equal(r.Data[:4], selEvil))
}
