package chain_test

import (
	"bytes"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
)

// l1PerByte is what the GasPriceOracle stand-in charges a byte: 1 gwei,
// so that a transfer's L1 data fee (about 100 bytes) is of the order of
// its L2 gas at anvil's prices, as on a busy OP Stack chain.
const l1PerByte = 1_000_000_000

// TestL1Fee: on an OP Stack chain (anvil with the GasPriceOracle stand-in
// at the predeploy) the L1 data fee is the oracle's price of the
// transaction's bytes, plus the margin; it grows with the data, covers
// the bytes of the transaction as really signed, and counts in Cost.
func TestL1Fee(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	chaintest.SetL1FeeOracle(t, node, txmanager.OPGasPriceOracle, l1PerByte)
	r := dial(t, node.URL(), node.ChainID())
	ctx := testContext(t)
	from := node.Accounts()[1]
	fees := chain.Fees{MaxFeePerGas: gwei(3), MaxPriorityFeePerGas: gwei(1)}
	l1Fee := func(in *txmanager.Intent, f chain.Fees, margin int) *big.Int {
		t.Helper()
		fee, err := r.L1Fee(ctx, txmanager.OPGasPriceOracle, in, 100_000, f, margin)
		if err != nil {
			t.Fatalf("L1Fee: %v", err)
		}
		return fee
	}
	transfer := &txmanager.Intent{ChainID: node.ChainID(), From: from.Address, To: &stranger, Value: chaintest.Ether}
	bare := l1Fee(transfer, fees, 0)
	if new(big.Int).Mod(bare, big.NewInt(l1PerByte)).Sign() != 0 {
		t.Fatalf("L1 fee %s is not the stand-in's price of whole bytes", bare)
	}
	size := new(big.Int).Div(bare, big.NewInt(l1PerByte)).Int64()

	// The oracle adds 68 bytes for the signature: with them, what it
	// priced covers the transaction as signed, even at nonce 0, which the
	// estimate cannot know.
	signed, err := chaintest.SignCall(t, node, from.Key, chaintest.Call{To: &stranger, Value: chaintest.Ether, Gas: 100_000}, 0).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if size+68 < int64(len(signed)) {
		t.Errorf("the oracle priced %d bytes (+68 for the signature): fewer than the %d of the signed transaction", size, len(signed))
	}

	// The margin, rounded up.
	if got, want := l1Fee(transfer, fees, 50), new(big.Int).Div(new(big.Int).Mul(bare, big.NewInt(150)), big.NewInt(100)); got.Cmp(want) != 0 {
		t.Errorf("with a 50%% margin: %s, want %s", got, want)
	}
	// 1,000 bytes of call data: 1,000 bytes more, and the few its length
	// adds to the encoding.
	call := *transfer
	call.Data = bytes.Repeat([]byte{0xab}, 1000)
	more := new(big.Int).Sub(l1Fee(&call, fees, 0), bare)
	if more.Cmp(big.NewInt(1000*l1PerByte)) < 0 || more.Cmp(big.NewInt(1010*l1PerByte)) > 0 {
		t.Errorf("1,000 bytes of data added %s wei, want about 1,000 bytes' worth (%d)", more, 1000*l1PerByte)
	}
	// A legacy transaction is priced too.
	if legacy := l1Fee(transfer, chain.Fees{GasPrice: gwei(3)}, 0); legacy.Sign() <= 0 {
		t.Errorf("legacy transaction: L1 fee %s", legacy)
	}

	// Cost counts it on top of gas and value.
	want := new(big.Int).Add(chaintest.Ether, new(big.Int).Mul(big.NewInt(100_000), gwei(3)))
	want.Add(want, bare)
	if got := chain.Cost(100_000, fees, chaintest.Ether, bare); got.Cmp(want) != 0 {
		t.Errorf("Cost with the L1 fee = %s, want %s", got, want)
	}

	if _, err := r.L1Fee(ctx, txmanager.OPGasPriceOracle, transfer, 100_000, fees, -1); err == nil {
		t.Error("a negative margin was accepted")
	}
	other := *transfer
	other.ChainID = 1
	if fee, err := r.L1Fee(ctx, txmanager.OPGasPriceOracle, &other, 100_000, fees, 0); err == nil {
		t.Errorf("L1Fee of an intent for chain 1 on chain %d = %s, want an error", node.ChainID(), fee)
	}
}

// TestL1FeeWithoutAnAnswer: an oracle that cannot answer is an error, so
// the worker retries; never a fee of zero, which would let a signer that
// cannot pay its L1 data fee through the balance check.
func TestL1FeeWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	reverter := deploy(t, node, revertsEmpty)
	r := dial(t, node.URL(), node.ChainID())
	in := &txmanager.Intent{ChainID: node.ChainID(), From: node.Accounts()[1].Address, To: &stranger, Value: big.NewInt(1)}
	fees := chain.Fees{MaxFeePerGas: gwei(3), MaxPriorityFeePerGas: gwei(1)}

	tests := []struct {
		name   string
		reader *chain.Reader
		oracle common.Address
		want   string
	}{
		// An ethereum chain given the op-stack profile: no contract at
		// the predeploy, and eth_call of an address without code succeeds
		// with nothing.
		{"no code at the oracle", r, txmanager.OPGasPriceOracle, "answered nothing"},
		{"the oracle reverts", r, reverter, "getL1Fee at " + reverter.Hex()},
		{"the node fails", dial(t, fakeNode(t, 200, `{"code":-32603,"message":"internal error"}`), 31337), txmanager.OPGasPriceOracle, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := *in
			in.ChainID = tt.reader.ChainID()
			fee, err := tt.reader.L1Fee(testContext(t), tt.oracle, &in, 21000, fees, 50)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("L1Fee = %v, %v; want an error with %q", fee, err, tt.want)
			}
			if fee != nil {
				t.Errorf("L1Fee failed with a fee of %s", fee)
			}
		})
	}
}
