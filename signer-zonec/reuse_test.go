package signer_test

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

var (
	alice = common.HexToAddress("0x00000000000000000000000000000000000a11ce")
	bob   = common.HexToAddress("0x0000000000000000000000000000000000000b0b")
)

func gwei(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e9)) }

// transfer is a 1559 transfer of value wei from alice to bob at nonce 7.
func transfer(txID string, value int64, feeCap, tipCap *big.Int) *signer.Request {
	to := bob
	return &signer.Request{
		TxID: txID, ChainID: 31337, From: alice, Nonce: 7, Type: signer.DynamicFee,
		To: &to, Value: big.NewInt(value), Gas: 21000, MaxFeePerGas: feeCap, MaxPriorityFeePerGas: tipCap,
	}
}

func cancelOf(r *signer.Request, feeCap, tipCap *big.Int) *signer.Request {
	self := r.From
	c := *r
	c.TxID, c.To, c.Value, c.Data, c.MaxFeePerGas, c.MaxPriorityFeePerGas = r.TxID+"-cancel", &self, big.NewInt(0), nil, feeCap, tipCap
	return &c
}

func record(r *signer.Request) signer.Signed {
	return signer.Signed{
		ChainID: r.ChainID, From: r.From, Nonce: r.Nonce, TxID: r.TxID, Intent: r.Intent(), Digest: r.Digest(),
		FeeCap: r.FeeCap(), TipCap: r.TipCap(), Value: r.Value, Cancel: r.IsCancel(),
	}
}

func TestCheckReuse(t *testing.T) {
	t.Parallel()
	original := transfer("tx-1", 100, gwei(100), gwei(2))
	bump := transfer("tx-1", 100, gwei(110), gwei(3)) // +10% fee cap, +50% tip
	tests := []struct {
		name          string
		req           *signer.Request
		earlier       []signer.Signed
		cancelAllowed bool
		want          signer.Reuse
		refused       bool
	}{
		{"nothing signed yet", original, nil, false, signer.Fresh, false},
		{"the identical request again", original, []signer.Signed{record(original)}, false, signer.Identical, false},
		{"a fee bump of 10% on both caps", bump, []signer.Signed{record(original)}, false, signer.Replacement, false},
		{"a bump of the fee cap only", transfer("tx-1", 100, gwei(120), gwei(2)), []signer.Signed{record(original)}, false, 0, true},
		{"a bump just under 10%", transfer("tx-1", 100, big.NewInt(109_999_999_999), gwei(3)), []signer.Signed{record(original)}, false, 0, true},
		{"a lower fee", transfer("tx-1", 100, gwei(90), gwei(1)), []signer.Signed{record(original)}, false, 0, true},
		{"a bump over the first but not the second attempt", transfer("tx-1", 100, gwei(115), gwei(4)), []signer.Signed{record(original), record(bump)}, false, 0, true},
		{"a different value at the nonce", transfer("tx-2", 101, gwei(200), gwei(20)), []signer.Signed{record(original)}, false, 0, true},
		{"a different destination at the nonce", func() *signer.Request {
			r := transfer("tx-1", 100, gwei(200), gwei(20))
			r.To = &alice
			r.Value = big.NewInt(100)
			return r
		}(), []signer.Signed{record(original)}, false, 0, true},
		{"a cancel when policy allows it", cancelOf(original, gwei(110), gwei(3)), []signer.Signed{record(original)}, true, signer.Cancel, false},
		{"a cancel when policy does not", cancelOf(original, gwei(110), gwei(3)), []signer.Signed{record(original)}, false, 0, true},
		{"an underpriced cancel", cancelOf(original, gwei(100), gwei(2)), []signer.Signed{record(original)}, true, 0, true},
		{"a fee bump of a signed 0-value self-transfer is a replacement, needing no cancel grant",
			cancelOf(original, gwei(121), gwei(4)), []signer.Signed{record(cancelOf(original, gwei(110), gwei(3)))}, false, signer.Replacement, false},
		{"a bump of the original after a cancel, over both", transfer("tx-1", 100, gwei(121), gwei(4)),
			[]signer.Signed{record(original), record(cancelOf(original, gwei(110), gwei(3)))}, false, signer.Replacement, false},
		{"a cancel does not open the nonce to another intent", transfer("tx-3", 5, gwei(300), gwei(30)),
			[]signer.Signed{record(original), record(cancelOf(original, gwei(110), gwei(3)))}, true, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, _, err := signer.CheckReuse(tt.req, tt.earlier, tt.cancelAllowed)
			var refused *signer.RefusedError
			if tt.refused != errors.As(err, &refused) {
				t.Fatalf("err = %v, refused want %v", err, tt.refused)
			}
			if !tt.refused && got != tt.want {
				t.Errorf("reuse = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIntentIgnoresFeesAndNonceButNotWhatTheTxDoes(t *testing.T) {
	t.Parallel()
	a := transfer("tx-1", 100, gwei(100), gwei(2))
	b := transfer("tx-1", 100, gwei(500), gwei(50))
	b.Nonce, b.Gas = 9, 50000
	if a.Intent() != b.Intent() {
		t.Error("fees, gas and nonce changed the intent")
	}
	if a.Digest() == b.Digest() {
		t.Error("different fees share a digest")
	}
	for name, mutate := range map[string]func(r *signer.Request){
		"value": func(r *signer.Request) { r.Value = big.NewInt(101) },
		"to":    func(r *signer.Request) { r.To = &alice },
		"data":  func(r *signer.Request) { r.Data = []byte{1} },
		"chain": func(r *signer.Request) { r.ChainID = 1 },
		"from":  func(r *signer.Request) { r.From = bob },
		"type": func(r *signer.Request) {
			r.Type, r.GasPrice, r.MaxFeePerGas, r.MaxPriorityFeePerGas = signer.Legacy, gwei(1), nil, nil
		},
		"creation": func(r *signer.Request) { r.To, r.Data = nil, []byte{0x60} },
	} {
		c := transfer("tx-1", 100, gwei(100), gwei(2))
		mutate(c)
		if c.Intent() == a.Intent() {
			t.Errorf("changing %s kept the intent", name)
		}
	}
}

func TestValidateNamesEachProblem(t *testing.T) {
	t.Parallel()
	huge := new(big.Int).Lsh(big.NewInt(1), 256)
	r := &signer.Request{Type: "blob", Value: huge, MaxFeePerGas: gwei(1), MaxPriorityFeePerGas: gwei(2)}
	err := r.Validate()
	for _, want := range []string{"tx_id is required", "chain_id must be positive", "from is required", "gas must be positive",
		"value is not a uint256", `type "blob" is not signed here`, "a contract creation needs data"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to say %q", err, want)
		}
	}
	ok := transfer("tx-1", 1, gwei(2), gwei(1))
	if err := ok.Validate(); err != nil {
		t.Errorf("a good request: %v", err)
	}
	ok.MaxPriorityFeePerGas = gwei(3)
	if err := ok.Validate(); err == nil {
		t.Error("a tip above the fee cap passed")
	}
}
