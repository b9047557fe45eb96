package policy_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// Addresses of the test policy. Lowercase in the file; the examples test
// checksummed ones.
var (
	ops         = common.HexToAddress("0x00000000000000000000000000000000000000a1")
	treasury    = common.HexToAddress("0x00000000000000000000000000000000000000a2")
	deployer    = common.HexToAddress("0x00000000000000000000000000000000000000a3")
	misc        = common.HexToAddress("0x00000000000000000000000000000000000000a4")
	compromised = common.HexToAddress("0x00000000000000000000000000000000000000a5")
	dest1       = common.HexToAddress("0x00000000000000000000000000000000000000d1")
	dest2       = common.HexToAddress("0x00000000000000000000000000000000000000d2")
	blocked     = common.HexToAddress("0x00000000000000000000000000000000000000b1")
	token       = common.HexToAddress("0x00000000000000000000000000000000000000c1") // a contract the policy does not declare
	usd         = common.HexToAddress("0x00000000000000000000000000000000000000c2") // token usd (ERC-20) on chain 1, usd-op on chain 10
	nft         = common.HexToAddress("0x00000000000000000000000000000000000000c3") // token nft (ERC-721)
	items       = common.HexToAddress("0x00000000000000000000000000000000000000c4") // token items (ERC-1155)
	router      = common.HexToAddress("0x00000000000000000000000000000000000000e1")
	other       = common.HexToAddress("0x00000000000000000000000000000000000000f1")
)

// Selectors used by the tests.
var (
	selTransfer          = []byte{0xa9, 0x05, 0x9c, 0xbb}
	selTransferFrom      = []byte{0x23, 0xb8, 0x72, 0xdd}
	selApprove           = []byte{0x09, 0x5e, 0xa7, 0xb3}
	selIncreaseAllowance = []byte{0x39, 0x50, 0x93, 0x51}
	selSetApprovalForAll = []byte{0xa2, 0x2c, 0xb4, 0x65}
	selEvil              = []byte{0xde, 0xad, 0xbe, 0xef}
)

// approverKey derives a test approver's key from its name.
func approverKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("txfence test approver " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

func pubB64(name string) string {
	return base64.StdEncoding.EncodeToString(approverKey(name).Public().(ed25519.PublicKey))
}

func pubHex(name string) string {
	return fmt.Sprintf("%x", []byte(approverKey(name).Public().(ed25519.PublicKey)))
}

// testPolicy is the policy the evaluation tests and FuzzEvaluate run
// against: one rule of each kind, deny rules both before and after the
// allow rules.
var testPolicy = strings.NewReplacer(
	"$ALICE", pubB64("alice"), "$BOB", "0x"+pubHex("bob"), "$CAROL", pubHex("carol"), "$DAVE", pubB64("dave"),
).Replace(`{
  "version": "test-7",
  "chains": [1, 10],
  "approvers": {"alice": "$ALICE", "bob": "$BOB", "carol": "$CAROL", "dave": "$DAVE"},
  "tokens": {
    "usd": {"chain": 1, "address": "0x00000000000000000000000000000000000000c2", "standard": "erc20"},
    "usd-op": {"chain": 10, "address": "0x00000000000000000000000000000000000000c2", "standard": "erc20"},
    "nft": {"chain": 1, "address": "0x00000000000000000000000000000000000000c3", "standard": "erc721"},
    "items": {"chain": 1, "address": "0x00000000000000000000000000000000000000c4", "standard": "erc1155"}
  },
  "cancels": [
    {"id": "cancel-ops", "chains": [1], "from": ["0x00000000000000000000000000000000000000a1"],
     "limits": {"max_fee_per_gas": "100", "max_gas": 21000, "fee_windows": [{"duration": "1h", "max_fee": "4200000"}]}}
  ],
  "rules": [
    {"id": "deny-blocked", "effect": "deny", "match": {"to": ["0x00000000000000000000000000000000000000b1"]}},
    {"id": "deny-compromised", "effect": "deny", "match": {"from": ["0x00000000000000000000000000000000000000a5"]}},
    {"id": "payments", "effect": "allow",
     "match": {"from": ["0x00000000000000000000000000000000000000a1"],
               "to": ["0x00000000000000000000000000000000000000d1", "0x00000000000000000000000000000000000000d2"]},
     "limits": {"max_value_per_tx": "1000", "windows": [{"duration": "1h", "max_value": "2500"}, {"duration": "24h", "max_value": "10000"}],
                "max_fee_per_gas": "100", "max_priority_fee_per_gas": "10", "max_gas": 50000,
                "fee_windows": [{"duration": "1h", "max_fee": "5000000"}, {"duration": "24h", "max_fee": "20000000"}]}},
    {"id": "token", "effect": "allow",
     "match": {"chains": [1], "from": ["0x00000000000000000000000000000000000000a1"],
               "selectors": {"0x00000000000000000000000000000000000000c1": ["0xa9059cbb", "0x095ea7b3", "0x39509351", "0xa22cb465"]}},
     "limits": {"max_fee_per_gas": "100", "max_gas": 100000, "fee_windows": [{"duration": "24h", "max_fee": "100000000"}]},
     "erc20_spenders": ["0x00000000000000000000000000000000000000e1"]},
    {"id": "token-payouts", "effect": "allow",
     "match": {"chains": [1], "from": ["0x00000000000000000000000000000000000000a1"],
               "selectors": {"0x00000000000000000000000000000000000000c2": ["0x42966c68"]}},
     "limits": {"max_value_per_tx": "0", "max_fee_per_gas": "100", "max_gas": 200000, "fee_windows": [{"duration": "24h", "max_fee": "100000000"}]},
     "tokens": {
       "usd": {"max_amount_per_tx": "1000", "windows": [{"duration": "24h", "max_amount": "5000"}],
               "recipients": ["0x00000000000000000000000000000000000000d1", "0x00000000000000000000000000000000000000d2"],
               "spenders": ["0x00000000000000000000000000000000000000e1"]},
       "nft": {"max_amount_per_tx": "2", "windows": [{"duration": "24h", "max_amount": "3"}],
               "spenders": ["0x00000000000000000000000000000000000000e1"], "operators": ["0x00000000000000000000000000000000000000e1"]},
       "items": {"max_amount_per_tx": "100", "windows": [{"duration": "24h", "max_amount": "150"}],
                 "operators": ["0x00000000000000000000000000000000000000e1"]}
     },
     "approval": {"threshold": 2, "approvers": ["alice", "bob", "carol"], "above_value": "0",
                  "above_token_amounts": {"usd": "500", "nft": "1", "items": "50"}, "max_ttl": "24h"}},
    {"id": "deploy", "effect": "allow",
     "match": {"from": ["0x00000000000000000000000000000000000000a3"], "contract_creation": true},
     "limits": {"max_fee_per_gas": "100", "max_gas": 5000000, "fee_windows": [{"duration": "24h", "max_fee": "1000000000"}]}},
    {"id": "misc", "effect": "allow",
     "match": {"from": ["0x00000000000000000000000000000000000000a4", "0x00000000000000000000000000000000000000a5"]},
     "limits": {"max_value_per_tx": "5", "max_fee_per_gas": "100", "max_gas": 100000, "fee_windows": [{"duration": "24h", "max_fee": "100000000"}]}},
    {"id": "treasury", "effect": "allow",
     "match": {"from": ["0x00000000000000000000000000000000000000a2"], "to": ["0x00000000000000000000000000000000000000d1"]},
     "limits": {"max_fee_per_gas": "100", "max_gas": 50000, "fee_windows": [{"duration": "24h", "max_fee": "100000000"}]},
     "approval": {"threshold": 2, "approvers": ["alice", "bob", "carol"], "above_value": "100", "max_ttl": "24h"}},
    {"id": "deny-evil-selector", "effect": "deny", "match": {"selectors": {"*": ["0xdeadbeef"]}}},
    {"id": "deny-huge", "effect": "deny", "match": {"value": {"min": "1000000"}}}
  ]
}`)

func mustParse(t testing.TB, src string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// now is the evaluation time of the tests.
var now = time.Date(2025, 11, 23, 12, 0, 0, 0, time.UTC)

// request builds a valid eip1559 request from ops to dest1 on chain 1,
// changed by mods.
func request(mods ...func(*signer.Request)) *signer.Request {
	to := dest1
	r := &signer.Request{
		TxID: "tx-1", ChainID: 1, From: ops, Nonce: 7, Type: signer.DynamicFee, To: &to,
		Value: big.NewInt(1), Gas: 21000, MaxFeePerGas: big.NewInt(50), MaxPriorityFeePerGas: big.NewInt(2),
	}
	for _, m := range mods {
		m(r)
	}
	return r
}

func from(a common.Address) func(*signer.Request) { return func(r *signer.Request) { r.From = a } }
func to(a common.Address) func(*signer.Request) {
	return func(r *signer.Request) { r.To = &a }
}
func value(v int64) func(*signer.Request)   { return func(r *signer.Request) { r.Value = big.NewInt(v) } }
func chain(id uint64) func(*signer.Request) { return func(r *signer.Request) { r.ChainID = id } }
func data(parts ...[]byte) func(*signer.Request) {
	return func(r *signer.Request) {
		r.Data = nil
		for _, p := range parts {
			r.Data = append(r.Data, p...)
		}
	}
}
func creation(r *signer.Request) { r.To = nil; r.Data = []byte{0x60, 0x80, 0x60, 0x40} }
func legacy(price int64) func(*signer.Request) {
	return func(r *signer.Request) {
		r.Type, r.GasPrice, r.MaxFeePerGas, r.MaxPriorityFeePerGas = signer.Legacy, big.NewInt(price), nil, nil
	}
}
func fees(maxFee, tip int64) func(*signer.Request) {
	return func(r *signer.Request) { r.MaxFeePerGas, r.MaxPriorityFeePerGas = big.NewInt(maxFee), big.NewInt(tip) }
}
func gas(g uint64) func(*signer.Request) { return func(r *signer.Request) { r.Gas = g } }

// approved attaches approvals by names, each signed over the request as it
// stands, up to its fee cap, valid for an hour.
func approved(names ...string) func(*signer.Request) {
	return func(r *signer.Request) {
		for _, n := range names {
			r.Approvals = append(r.Approvals, signer.SignApproval(approverKey(n), n, r, r.FeeCap(), now.Add(time.Hour)))
		}
	}
}

// approvedUpTo attaches approvals by names, each signed over the request as
// it stands with a fee ceiling of maxFee wei per gas, valid for an hour.
func approvedUpTo(maxFee int64, names ...string) func(*signer.Request) {
	return func(r *signer.Request) {
		for _, n := range names {
			r.Approvals = append(r.Approvals, signer.SignApproval(approverKey(n), n, r, big.NewInt(maxFee), now.Add(time.Hour)))
		}
	}
}

// withApproval attaches an approval built by f from the request as it
// stands.
func withApproval(f func(r *signer.Request) signer.Approval) func(*signer.Request) {
	return func(r *signer.Request) { r.Approvals = append(r.Approvals, f(r)) }
}

// word is a 32-byte ABI word holding b right-aligned.
func word(b []byte) []byte { return common.LeftPadBytes(b, 32) }

// valueUsage is a signer.Usage of native value: it reports no tokens and
// no fees signed.
type valueUsage func(ctx context.Context, window time.Duration) (*big.Int, error)

func (f valueUsage) Value(ctx context.Context, w time.Duration) (*big.Int, error) { return f(ctx, w) }
func (valueUsage) Token(context.Context, common.Address, time.Duration) (*big.Int, error) {
	return new(big.Int), nil
}
func (valueUsage) Fees(context.Context, time.Duration) (*big.Int, error) { return new(big.Int), nil }

// tokensSpent is a signer.Usage of token units: for every window, m[token]
// of each token it lists (and an error for any other token), no value and
// no fees.
type tokensSpent map[common.Address]int64

func (tokensSpent) Value(context.Context, time.Duration) (*big.Int, error) { return new(big.Int), nil }
func (m tokensSpent) Token(_ context.Context, t common.Address, _ time.Duration) (*big.Int, error) {
	v, ok := m[t]
	if !ok {
		return nil, fmt.Errorf("no record of token %s in this test", t.Hex())
	}
	return big.NewInt(v), nil
}
func (tokensSpent) Fees(context.Context, time.Duration) (*big.Int, error) { return new(big.Int), nil }

// spentIs is a valueUsage that reports v for every window.
func spentIs(v int64) valueUsage {
	return func(context.Context, time.Duration) (*big.Int, error) { return big.NewInt(v), nil }
}

// feeUsage is a signer.Usage of fees: it reports no value and no tokens
// signed.
type feeUsage func(window time.Duration) (*big.Int, error)

func (feeUsage) Value(context.Context, time.Duration) (*big.Int, error) { return new(big.Int), nil }
func (feeUsage) Token(context.Context, common.Address, time.Duration) (*big.Int, error) {
	return new(big.Int), nil
}
func (f feeUsage) Fees(_ context.Context, w time.Duration) (*big.Int, error) { return f(w) }

// feesSpent is a feeUsage that reports v wei of fees for every window.
func feesSpent(v int64) feeUsage {
	return func(time.Duration) (*big.Int, error) { return big.NewInt(v), nil }
}

// feesByWindow is a feeUsage that reports m[window] and fails for a window
// it does not list.
func feesByWindow(m map[time.Duration]int64) feeUsage {
	return func(w time.Duration) (*big.Int, error) {
		v, ok := m[w]
		if !ok {
			return nil, fmt.Errorf("unexpected fee window %s", w)
		}
		return big.NewInt(v), nil
	}
}
