package policy_test

import (
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// call sets the request's call data to the canonical encoding of a call
// of signature.
func call(signature string, args ...any) func(*signer.Request) {
	return data(policy.EncodeCall(signature, args...))
}

// moved is the decision that allows a token call under rule, with the
// units signerd records for the token's windows.
func moved(rule string, contract common.Address, amount int64) signer.Decision {
	return signer.Decision{Verdict: signer.Allow, RuleID: rule, Token: &signer.TokenAmount{Contract: contract, Amount: big.NewInt(amount)}}
}

// movedWith is moved, allowed with approvals.
func movedWith(rule string, contract common.Address, amount int64, approvers []string, ok ...string) signer.Decision {
	d := moved(rule, contract, amount)
	d.Threshold, d.Approvers, d.Approved = 2, approvers, ok
	return d
}

var (
	maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	half256    = new(big.Int).Lsh(big.NewInt(1), 255)
)

// TestEvaluateTokens runs token calls against testPolicy's token-payouts
// rule: usd (ERC-20) at most 1000 units a transaction and 5000 a day, to
// dest1 and dest2, approvals to router, 2 of 3 approvals above 500; nft
// (ERC-721) 2 a transaction, 3 a day, approvals and operator router,
// approvals above 1; items (ERC-1155) 100 a transaction, 150 a day,
// operator router, approvals above 50.
func TestEvaluateTokens(t *testing.T) {
	t.Parallel()
	p := mustParse(t, testPolicy)
	abc := []string{"alice", "bob", "carol"}
	tx := func(contract common.Address, mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){to(contract), value(0), gas(100000)}, mods...)...)
	}
	none := tokensSpent{usd: 0, nft: 0, items: 0}
	transfer := "transfer(address,uint256)"
	transferFrom := "transferFrom(address,address,uint256)"
	approve := "approve(address,uint256)"
	setAll := "setApprovalForAll(address,bool)"
	safe721 := "safeTransferFrom(address,address,uint256)"
	safe721Data := "safeTransferFrom(address,address,uint256,bytes)"
	safe1155 := "safeTransferFrom(address,address,uint256,uint256,bytes)"
	batch1155 := "safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)"
	runEval(t, p, []evalCase{
		// ERC-20: amounts, recipients and windows in token units.
		{name: "usd transfer under the caps", req: tx(usd, call(transfer, dest1, 500)), spent: none, want: moved("token-payouts", usd, 500)},
		{name: "usd transferFrom to a listed recipient", req: tx(usd, call(transferFrom, other, dest2, 10)), spent: none, want: moved("token-payouts", usd, 10)},
		{name: "usd transfer at the per-tx cap needs approvals", req: tx(usd, call(transfer, dest1, 1000)), spent: none, want: needs("token-payouts", 2, abc),
			reason: "rule token-payouts needs 2 of 3 approvals"},
		{name: "usd transfer at the per-tx cap, approved", req: tx(usd, call(transfer, dest1, 1000), approved("alice", "carol")), spent: none, want: movedWith("token-payouts", usd, 1000, abc, "alice", "carol")},
		{name: "usd transfer above the per-tx cap", req: tx(usd, call(transfer, dest1, 1001), approved("alice", "carol")), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "transfer of 1001 units of token usd exceeds max_amount_per_tx 1000 (rule token-payouts)"},
		{name: "usd transfer of 2^255", req: tx(usd, call(transfer, dest1, half256)), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "exceeds max_amount_per_tx 1000"},
		{name: "usd window reached exactly", req: tx(usd, call(transfer, dest1, 500)), spent: tokensSpent{usd: 4500}, want: moved("token-payouts", usd, 500)},
		{name: "usd window one unit over", req: tx(usd, call(transfer, dest1, 500)), spent: tokensSpent{usd: 4501}, want: decision(signer.Deny, "token-payouts"),
			reason: "4501 units of token usd signed in the last 24h0m0s plus 500 exceeds the window's max_amount 5000 (rule token-payouts)"},
		{name: "usd transfer to an unlisted recipient", req: tx(usd, call(transfer, other, 1)), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "transfer of 1 units of token usd to " + other.Hex() + ", which is not in the recipients of token usd (rule token-payouts)"},
		{name: "usd transfer with native value", req: tx(usd, value(1), call(transfer, dest1, 1)), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "max_value_per_tx 0"},

		// ERC-20 approvals: spenders per token, amounts under the same caps.
		{name: "usd approve to a listed spender", req: tx(usd, call(approve, router, 100)), spent: none, want: moved("token-payouts", usd, 100)},
		{name: "usd increaseAllowance to a listed spender", req: tx(usd, call("increaseAllowance(address,uint256)", router, 100)), spent: none, want: moved("token-payouts", usd, 100)},
		{name: "usd approve above the approval threshold", req: tx(usd, call(approve, router, 501)), spent: none, want: needs("token-payouts", 2, abc)},
		{name: "usd unlimited approve", req: tx(usd, call(approve, router, maxUint256), approved("alice", "bob", "carol")), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "approve of 115792089237316195423570985008687907853269984665640564039457584007913129639935 units of token usd exceeds max_amount_per_tx 1000"},
		{name: "usd approve to an unlisted spender", req: tx(usd, call(approve, other, 1)), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "approve of 1 units of token usd to " + other.Hex() + ", which is not in the spenders of token usd (rule token-payouts)"},
		{name: "usd approve within the window after a full day", req: tx(usd, call(approve, router, 1)), spent: tokensSpent{usd: 5000}, want: decision(signer.Deny, "token-payouts"), reason: "max_amount 5000"},
		{name: "usd revoke of any spender", req: tx(usd, call(approve, other, 0)), spent: tokensSpent{usd: 5000}, want: moved("token-payouts", usd, 0)},

		// What the decoder cannot read exactly is denied.
		{name: "usd transfer with a byte more", req: tx(usd, call(transfer, dest1, 1), func(r *signer.Request) { r.Data = append(r.Data, 0) }), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "malformed ERC-20 transfer(address,uint256) call data to token usd"},
		{name: "usd transfer cut short", req: tx(usd, call(transfer, dest1, 1), func(r *signer.Request) { r.Data = r.Data[:40] }), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "malformed"},
		{name: "usd transfer to a dirty address word", req: tx(usd, call(transfer, dest1, 1), func(r *signer.Request) { r.Data[4] = 1 }), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "non-zero upper bytes"},
		{name: "usd call the standard does not have", req: tx(usd, call("increaseApproval(address,uint256)", router, 1)), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "is not an ERC-20 call policy reads, and rule token-payouts lists no selector 0xd73dd623 for it"},
		{name: "usd without call data", req: tx(usd), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "without a selector"},
		{name: "usd selector the rule lists", req: tx(usd, data([]byte{0x42, 0x96, 0x6c, 0x68}, word([]byte{5}))), spent: none, want: decision(signer.Allow, "token-payouts")},

		// Calls to a declared token no rule names.
		{name: "usd from a signer whose rule names no token", req: tx(usd, from(misc), call(transfer, dest1, 1)), spent: none, want: decision(signer.Deny, policy.DefaultDeny),
			reason: "no allow rule names token usd"},
		{name: "the same address on another chain is another token", req: tx(usd, chain(10), call(transfer, dest1, 1)), spent: none, want: decision(signer.Deny, policy.DefaultDeny),
			reason: "no allow rule names token usd-op"},

		// ERC-721: one unit per token; operators for all.
		{name: "nft transferFrom", req: tx(nft, call(transferFrom, ops, other, 7)), spent: none, want: moved("token-payouts", nft, 1)},
		{name: "nft safeTransferFrom", req: tx(nft, call(safe721, ops, other, 7)), spent: none, want: moved("token-payouts", nft, 1)},
		{name: "nft safeTransferFrom with data", req: tx(nft, call(safe721Data, ops, other, 7, []byte("hi"))), spent: none, want: moved("token-payouts", nft, 1)},
		{name: "nft window full", req: tx(nft, call(transferFrom, ops, other, 7)), spent: tokensSpent{nft: 3}, want: decision(signer.Deny, "token-payouts"), reason: "3 units of token nft signed in the last 24h0m0s plus 1"},
		{name: "nft approve a listed spender", req: tx(nft, call(approve, router, 7)), spent: none, want: moved("token-payouts", nft, 1)},
		{name: "nft approve an unlisted spender", req: tx(nft, call(approve, other, 7)), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "not in the spenders of token nft"},
		{name: "nft approval cleared", req: tx(nft, call(approve, common.Address{}, 7)), spent: tokensSpent{nft: 3}, want: moved("token-payouts", nft, 0)},
		{name: "nft operator for all needs approvals", req: tx(nft, call(setAll, router, true)), spent: none, want: needs("token-payouts", 2, abc)},
		{name: "nft operator for all, approved", req: tx(nft, call(setAll, router, true), approved("bob", "carol")), spent: tokensSpent{nft: 3}, want: movedWith("token-payouts", nft, 0, abc, "bob", "carol")},
		{name: "nft operator not listed", req: tx(nft, call(setAll, other, true), approved("bob", "carol")), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "setApprovalForAll grants every unit of token nft to " + other.Hex() + ", which is not in the operators of token nft (rule token-payouts)"},
		{name: "nft operator revoked", req: tx(nft, call(setAll, other, false)), spent: none, want: moved("token-payouts", nft, 0)},
		{name: "nft bool not 0 or 1", req: tx(nft, call(setAll, router, true), func(r *signer.Request) { r.Data[len(r.Data)-1] = 2 }), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "not 0 or 1"},

		// ERC-1155: amounts summed over ids.
		{name: "items safeTransferFrom", req: tx(items, call(safe1155, ops, dest1, 1, 40, []byte{})), spent: none, want: moved("token-payouts", items, 40)},
		{name: "items batch", req: tx(items, call(batch1155, ops, dest1, []any{1, 2}, []any{30, 20}, []byte{})), spent: none, want: moved("token-payouts", items, 50)},
		{name: "items batch above the threshold", req: tx(items, call(batch1155, ops, dest1, []any{1, 2}, []any{30, 21}, []byte{})), spent: none, want: needs("token-payouts", 2, abc)},
		{name: "items batch above the per-tx cap", req: tx(items, call(batch1155, ops, dest1, []any{1, 2}, []any{60, 50}, []byte{}), approved("alice", "bob")), spent: none, want: decision(signer.Deny, "token-payouts"),
			reason: "safeBatchTransferFrom of 110 units of token items exceeds max_amount_per_tx 100"},
		{name: "items batch of huge amounts", req: tx(items, call(batch1155, ops, dest1, []any{1, 2}, []any{maxUint256, maxUint256}, []byte{}), approved("alice", "bob")), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "exceeds max_amount_per_tx 100"},
		{name: "items batch with more ids than amounts", req: tx(items, call(batch1155, ops, dest1, []any{1, 2}, []any{30}, []byte{})), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "2 ids and 1 amounts"},
		{name: "items window", req: tx(items, call(safe1155, ops, dest1, 1, 40, []byte{})), spent: tokensSpent{items: 111}, want: decision(signer.Deny, "token-payouts"), reason: "max_amount 150"},
		{name: "items approve is not ERC-1155", req: tx(items, call(approve, router, 1)), spent: none, want: decision(signer.Deny, "token-payouts"), reason: "not an ERC-1155 call"},
		{name: "items operator for all, approved", req: tx(items, call(setAll, router, true), approved("alice", "bob")), spent: none, want: movedWith("token-payouts", items, 0, abc, "alice", "bob")},
	})
}

// TestTokenWindowsAcrossRestarts: token units are counted from the
// record of what was signed (Decision.Token), whatever policy value
// decided.
func TestTokenWindowsAcrossRestarts(t *testing.T) {
	t.Parallel()
	var signed int64
	for i, step := range []struct {
		amount int64
		want   signer.Verdict
	}{
		{400, signer.Allow}, {500, signer.Allow}, {450, signer.Allow}, {500, signer.Allow}, {500, signer.Allow}, {500, signer.Allow},
		{500, signer.Allow}, {500, signer.Allow}, {500, signer.Allow}, {500, signer.Allow}, // 4850
		{500, signer.Deny}, {150, signer.Allow}, {1, signer.Deny},
	} {
		p := mustParse(t, testPolicy)
		d, err := p.Evaluate(t.Context(), request(to(usd), value(0), gas(100000), call("transfer(address,uint256)", dest1, step.amount)), now.Add(time.Duration(i)*time.Minute), tokensSpent{usd: signed})
		if err != nil {
			t.Fatal(err)
		}
		if d.Verdict != step.want {
			t.Fatalf("step %d (%d units after %d): %s %q, want %s", i, step.amount, signed, d.Verdict, d.Reasons, step.want)
		}
		if d.Verdict == signer.Allow {
			if d.Token == nil || d.Token.Contract != usd || d.Token.Amount.Int64() != step.amount {
				t.Fatalf("step %d: allowed with token %+v, want %d of %s", i, d.Token, step.amount, usd.Hex())
			}
			signed += d.Token.Amount.Int64()
		}
	}
	if signed != 5000 {
		t.Errorf("%d units signed, want the window's 5000", signed)
	}
}
