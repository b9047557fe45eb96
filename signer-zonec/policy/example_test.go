package policy_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"math/big"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

func loadExample(t *testing.T, name string) *policy.Policy {
	t.Helper()
	p, err := policy.Load(filepath.Join("..", "testdata", "policy", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exampleApprover is the private key of an approver of
// production-example.json, derived as its description says.
func exampleApprover(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("txfence example approver " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e18)) }

func TestDevelopmentPolicy(t *testing.T) {
	t.Parallel()
	p := loadExample(t, "development.json")
	if p.Version() != "dev-1" {
		t.Errorf("version %q", p.Version())
	}
	dev0 := common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	dev9 := common.HexToAddress("0xa0Ee7A142d267C1f36714E4a8F75612F20a79720")
	anvil := func(mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){chain(31337), from(dev0), to(dev9), value(0)}, mods...)...)
	}
	for _, tc := range []struct {
		name string
		req  *signer.Request
		want signer.Decision
	}{
		{"transfer between dev accounts", anvil(func(r *signer.Request) { r.Value = ether(1000) }), decision(signer.Allow, "anvil-calls")},
		{"more than 1000 ETH", anvil(func(r *signer.Request) { r.Value = new(big.Int).Add(ether(1000), big.NewInt(1)) }), decision(signer.Deny, "anvil-calls")},
		{"deploy", anvil(creation), decision(signer.Allow, "anvil-deploys")},
		{"cancel", anvil(to(dev0)), decision(signer.Allow, "cancel-dev")},
		{"an account that is not anvil's", anvil(from(other)), decision(signer.Deny, policy.DefaultDeny)},
		{"mainnet", anvil(chain(1)), decision(signer.Deny, policy.ChainNotAllowed)},
		{"an approval nobody listed", anvil(to(token), data(selApprove, word(router.Bytes()), word([]byte{1}))), decision(signer.Deny, "anvil-calls")},
	} {
		evaluate := p.Evaluate
		if tc.req.IsCancel() { // the table's cancels cancel a signed nonce
			evaluate = p.EvaluateCancel
		}
		got, err := evaluate(context.Background(), tc.req, now, spentIs(0))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got, ignoreReasons, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if !p.AllowsCancel(31337, dev9) || p.AllowsCancel(1, dev9) {
		t.Error("cancels: any signer on anvil, nothing elsewhere")
	}
}

func TestProductionExamplePolicy(t *testing.T) {
	t.Parallel()
	p := loadExample(t, "production-example.json")
	if diff := cmp.Diff([]uint64{1, 8453}, p.Chains()); diff != "" {
		t.Errorf("chains (-want +got):\n%s", diff)
	}
	var (
		treasuryW = common.HexToAddress("0x1000000000000000000000000000000000000001")
		payouts   = common.HexToAddress("0x2000000000000000000000000000000000000002")
		deployerW = common.HexToAddress("0x3000000000000000000000000000000000000003")
		exchange  = common.HexToAddress("0x4000000000000000000000000000000000000004")
		usdc      = common.HexToAddress("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")
		usdcBase  = common.HexToAddress("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913")
		permit2   = common.HexToAddress("0x000000000022D473030F116dDEE9F6B43aC78BA3")
		tornado   = common.HexToAddress("0xd90e2f925DA726b50C4Ed8D0Fb90Ad053324F31b")
	)
	mainnetFees := fees(100e9, 2e9)
	pay := func(mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){from(payouts), to(usdc), value(0), gas(80000), mainnetFees}, mods...)...)
	}
	treasuryTx := func(eth int64, mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){from(treasuryW), to(exchange), func(r *signer.Request) { r.Value = ether(eth) }, mainnetFees}, mods...)...)
	}
	sign := func(names ...string) func(*signer.Request) {
		return func(r *signer.Request) {
			for _, n := range names {
				r.Approvals = append(r.Approvals, signer.SignApproval(exampleApprover(n), n, r, r.FeeCap(), now.Add(time.Hour)))
			}
		}
	}
	abc := []string{"alice", "bob", "carol"}
	deploy := func(mods ...func(*signer.Request)) *signer.Request {
		return request(append([]func(*signer.Request){chain(8453), from(deployerW), creation, value(0), gas(3e6), fees(1e9, 1e8)}, mods...)...)
	}
	usdcUnits := func(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e6)) }
	transfer := func(to common.Address, units *big.Int) func(*signer.Request) {
		return call("transfer(address,uint256)", to, units)
	}
	for _, tc := range []struct {
		name  string
		req   *signer.Request
		spent int64        // ether
		usage signer.Usage // instead of spent
		want  signer.Decision
	}{
		{name: "USDC transfer", req: pay(transfer(exchange, usdcUnits(1))), want: moved("payouts-usdc-mainnet", usdc, 1e6)},
		{name: "USDC transfer at the per-tx cap, approved", req: pay(transfer(exchange, usdcUnits(50_000)), sign("alice", "bob")), want: movedWith("payouts-usdc-mainnet", usdc, 50_000e6, abc, "alice", "bob")},
		{name: "USDC transfer above 10,000 needs approvals", req: pay(transfer(exchange, usdcUnits(10_001))), want: needs("payouts-usdc-mainnet", 2, abc)},
		{name: "USDC transfer above the per-tx cap", req: pay(transfer(exchange, usdcUnits(50_001)), sign("alice", "bob", "carol")), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC transfer of 2^255-1", req: pay(transfer(exchange, new(big.Int).Sub(half256, big.NewInt(1))), sign("alice", "bob", "carol")), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC past the hour", req: pay(transfer(exchange, usdcUnits(5_000))), usage: tokensSpent{usdc: 95_001e6}, want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC payouts past their fee window", req: pay(transfer(exchange, usdcUnits(1))), usage: feesSpent(2e18 - 80000*100e9 + 1), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC approve to Permit2", req: pay(call("approve(address,uint256)", permit2, usdcUnits(1))), want: moved("payouts-usdc-mainnet", usdc, 1e6)},
		{name: "USDC unlimited approve to Permit2", req: pay(call("approve(address,uint256)", permit2, maxUint256), sign("alice", "bob", "carol")), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC approve to someone else", req: pay(call("approve(address,uint256)", exchange, usdcUnits(1))), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC transferFrom cut short", req: pay(data(selTransferFrom)), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "USDC permit", req: pay(call("permit(address,address,uint256,uint256,uint8,bytes32,bytes32)", payouts, permit2, 1, 1, 27, make([]byte, 32), make([]byte, 32))), want: decision(signer.Deny, "payouts-usdc-mainnet")},
		{name: "ETH from the payouts wallet", req: pay(to(exchange), value(1)), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "USDC on Base", req: pay(chain(8453), to(usdcBase), fees(1e9, 1e8), transfer(exchange, usdcUnits(1))), want: moved("payouts-usdc-base", usdcBase, 1e6)},
		{name: "mainnet USDC's address on Base is no token", req: pay(chain(8453), fees(1e9, 1e8), transfer(exchange, usdcUnits(1))), want: decision(signer.Deny, policy.DefaultDeny)},
		{name: "setApprovalForAll to Permit2", req: pay(data(selSetApprovalForAll, word(permit2.Bytes()), word([]byte{1}))), want: decision(signer.Deny, "deny-nft-operators")},
		{name: "tornado", req: treasuryTx(1, to(tornado)), want: decision(signer.Deny, "deny-tornado-router")},
		{name: "treasury 10 ETH, no approval needed", req: treasuryTx(10), want: decision(signer.Allow, "treasury-to-exchanges")},
		{name: "treasury 50 ETH needs two approvals", req: treasuryTx(50, sign("carol")), want: needs("treasury-to-exchanges", 2, abc, "carol")},
		{name: "treasury 50 ETH approved", req: treasuryTx(50, sign("carol", "bob")), want: allowedWith("treasury-to-exchanges", 2, abc, "bob", "carol")},
		{name: "treasury 101 ETH", req: treasuryTx(101, sign("alice", "bob", "carol")), want: decision(signer.Deny, "treasury-to-exchanges")},
		{name: "treasury over the hour", req: treasuryTx(60, sign("alice", "bob")), spent: 91, want: decision(signer.Deny, "treasury-to-exchanges")},
		{name: "treasury fee too high", req: treasuryTx(1, fees(301e9, 1e9)), want: decision(signer.Deny, "treasury-to-exchanges")},
		{name: "mainnet deploy", req: deploy(chain(1)), want: decision(signer.Deny, "deny-mainnet-deploys")},
		{name: "Base deploy needs approvals", req: deploy(), want: needs("base-deployer", 2, abc)},
		{name: "Base deploy approved", req: deploy(sign("alice", "carol")), want: allowedWith("base-deployer", 2, abc, "alice", "carol")},
		{name: "anvil", req: treasuryTx(1, chain(31337)), want: decision(signer.Deny, policy.ChainNotAllowed)},
		{name: "payouts cancel", req: pay(to(payouts), gas(21000)), want: decision(signer.Allow, "cancel-payouts")},
	} {
		evaluate := p.Evaluate
		if tc.req.IsCancel() { // the table's cancels cancel a signed nonce
			evaluate = p.EvaluateCancel
		}
		usage := tc.usage
		if usage == nil {
			usage = valueUsage(func(context.Context, time.Duration) (*big.Int, error) { return ether(tc.spent), nil })
		}
		got, err := evaluate(context.Background(), tc.req, now, usage)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got, ignoreReasons, equalAmounts, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s\nreasons: %q", tc.name, diff, got.Reasons)
		}
	}
	if !p.AllowsCancel(8453, payouts) || p.AllowsCancel(1, treasuryW) {
		t.Error("cancels: the payouts wallet only")
	}
}
