package chain_test

import (
	"context"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
)

// bigComparer compares *big.Int by value for cmp.
var bigComparer = cmp.Comparer(func(a, b *big.Int) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(b) == 0
})

func wei(v *big.Int) *txmanager.Wei {
	var w txmanager.Wei
	w.Set(v)
	return &w
}

func signerCaps(maxFee, tip *big.Int) txmanager.SignerConfig {
	var s txmanager.SignerConfig
	if maxFee != nil {
		s.MaxFeePerGas = wei(maxFee)
	}
	if tip != nil {
		s.MaxPriorityFeePerGas = wei(tip)
	}
	return s
}

// TestFees sets the market up so that every number is known: one block
// holds a transfer paying a 2 gwei tip, then the base fee is raised to 8
// gwei in an empty block, so the next block's base fee is 7 gwei (an
// empty block lowers it by an eighth). The market is then a 2 gwei tip
// and a max fee of 2 × 7 + 2 = 16 gwei.
func TestFees(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	ctx := testContext(t)
	from := node.Accounts()[0]
	tx := signDynamic(t, node, from.Key, 0, &stranger, chaintest.Ether, nil, gwei(2))
	if err := node.Client().SendTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	chaintest.WaitReceipt(t, node, tx.Hash())
	if err := node.SetNextBlockBaseFee(ctx, gwei(8)); err != nil {
		t.Fatal(err)
	}
	if err := node.Mine(ctx, 1); err != nil {
		t.Fatal(err)
	}
	gasPrice := settledGasPrice(t, node, gwei(7))
	r := dial(t, node.URL(), node.ChainID())

	tests := []struct {
		name   string
		signer txmanager.SignerConfig
		intent *txmanager.Intent
		legacy bool
		want   chain.Fees
	}{
		{
			name: "no caps",
			want: chain.Fees{MaxFeePerGas: gwei(16), MaxPriorityFeePerGas: gwei(2), BaseFee: gwei(7)},
		},
		{
			name:   "under the signer's caps",
			signer: signerCaps(gwei(100), gwei(10)),
			want:   chain.Fees{MaxFeePerGas: gwei(16), MaxPriorityFeePerGas: gwei(2), BaseFee: gwei(7)},
		},
		{
			name:   "exactly at the signer's caps",
			signer: signerCaps(gwei(16), gwei(2)),
			want:   chain.Fees{MaxFeePerGas: gwei(16), MaxPriorityFeePerGas: gwei(2), BaseFee: gwei(7)},
		},
		{
			name:   "signer's caps below the market",
			signer: signerCaps(gwei(10), gwei(1)),
			want:   chain.Fees{MaxFeePerGas: gwei(10), MaxPriorityFeePerGas: gwei(1), BaseFee: gwei(7), Capped: true},
		},
		{
			name:   "only the tip capped",
			signer: signerCaps(nil, gwei(1)),
			// The max fee follows the capped tip: 2 × 7 + 1.
			want: chain.Fees{MaxFeePerGas: gwei(15), MaxPriorityFeePerGas: gwei(1), BaseFee: gwei(7), Capped: true},
		},
		{
			name:   "max fee capped below the base fee and the tip",
			signer: signerCaps(gwei(1.5), nil),
			// Signable (tip at most max fee), though not includable at
			// this base fee: BaseFee tells the worker so.
			want: chain.Fees{MaxFeePerGas: gwei(1.5), MaxPriorityFeePerGas: gwei(1.5), BaseFee: gwei(7), Capped: true},
		},
		{
			name:   "the intent's caps, lower than the signer's",
			signer: signerCaps(gwei(100), gwei(10)),
			intent: &txmanager.Intent{ChainID: node.ChainID(), MaxFeePerGas: gwei(12), MaxPriorityFeePerGas: gwei(1.5)},
			want:   chain.Fees{MaxFeePerGas: gwei(12), MaxPriorityFeePerGas: gwei(1.5), BaseFee: gwei(7), Capped: true},
		},
		{
			name:   "the intent's caps without signer caps",
			intent: &txmanager.Intent{ChainID: node.ChainID(), MaxFeePerGas: gwei(12)},
			want:   chain.Fees{MaxFeePerGas: gwei(12), MaxPriorityFeePerGas: gwei(2), BaseFee: gwei(7), Capped: true},
		},
		{
			name:   "the intent's caps cannot raise the signer's",
			signer: signerCaps(gwei(15), gwei(10)),
			intent: &txmanager.Intent{ChainID: node.ChainID(), MaxFeePerGas: gwei(200), MaxPriorityFeePerGas: gwei(20)},
			want:   chain.Fees{MaxFeePerGas: gwei(15), MaxPriorityFeePerGas: gwei(2), BaseFee: gwei(7), Capped: true},
		},
		{
			name:   "legacy",
			legacy: true,
			signer: signerCaps(gwei(100), gwei(1)), // a tip cap means nothing to a gas price
			want:   chain.Fees{GasPrice: gasPrice},
		},
		{
			name:   "legacy, capped by the signer",
			legacy: true,
			signer: signerCaps(gwei(5), nil),
			want:   chain.Fees{GasPrice: gwei(5), Capped: true},
		},
		{
			name:   "legacy, capped by the intent",
			legacy: true,
			signer: signerCaps(gwei(100), nil),
			intent: &txmanager.Intent{ChainID: node.ChainID(), MaxFeePerGas: gwei(4)},
			want:   chain.Fees{GasPrice: gwei(4), Capped: true},
		},
		// A chain with a minimum tip (polygon-pos): the market's 2 gwei
		// tip is raised to it, and the max fee with it.
		{
			name:   "the tip raised to the chain's minimum",
			signer: withMinimumTip(txmanager.SignerConfig{}, gwei(5)),
			want:   chain.Fees{MaxFeePerGas: gwei(19), MaxPriorityFeePerGas: gwei(5), BaseFee: gwei(7)},
		},
		{
			name:   "a market above the chain's minimum",
			signer: withMinimumTip(txmanager.SignerConfig{}, gwei(1)),
			want:   chain.Fees{MaxFeePerGas: gwei(16), MaxPriorityFeePerGas: gwei(2), BaseFee: gwei(7)},
		},
		{
			name:   "the chain's minimum under the signer's caps",
			signer: withMinimumTip(signerCaps(gwei(100), gwei(10)), gwei(5)),
			intent: &txmanager.Intent{ChainID: node.ChainID(), MaxPriorityFeePerGas: gwei(6)},
			want:   chain.Fees{MaxFeePerGas: gwei(19), MaxPriorityFeePerGas: gwei(5), BaseFee: gwei(7)},
		},
		{
			name:   "legacy: the gas price raised to the chain's minimum",
			legacy: true,
			signer: withMinimumTip(txmanager.SignerConfig{}, new(big.Int).Add(gasPrice, gwei(1))),
			want:   chain.Fees{GasPrice: new(big.Int).Add(gasPrice, gwei(1))},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Fees(testContext(t), tt.signer, tt.intent, tt.legacy)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, bigComparer); diff != "" {
				t.Errorf("Fees (-want +got):\n%s", diff)
			}
		})
	}

	// The caps are the caller's: Fees neither changes them nor hands
	// them out to be changed.
	signer := signerCaps(gwei(10), gwei(1))
	got, err := r.Fees(ctx, signer, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	got.MaxFeePerGas.SetInt64(0)
	got.MaxPriorityFeePerGas.SetInt64(0)
	if signer.MaxFeePerGas.Cmp(gwei(10)) != 0 || signer.MaxPriorityFeePerGas.Cmp(gwei(1)) != 0 {
		t.Errorf("the signer's caps changed to %s and %s", &signer.MaxFeePerGas.Int, &signer.MaxPriorityFeePerGas.Int)
	}
}

// withMinimumTip is s on a chain whose minimum tip is least, as
// ParseChains copies a polygon-pos chain's min_priority_fee_per_gas.
func withMinimumTip(s txmanager.SignerConfig, least *big.Int) txmanager.SignerConfig {
	s.ChainMinPriorityFeePerGas = wei(least)
	return s
}

// settledGasPrice waits for anvil's eth_gasPrice to be the next base fee
// plus its suggested tip, and returns it: anvil updates its gas price
// oracle after a mined block has been answered for, so a read right
// after Mine may still see the mined block's base fee.
func settledGasPrice(t *testing.T, node *anvil.Node, nextBaseFee *big.Int) *big.Int {
	t.Helper()
	ctx := testContext(t)
	// anvil works its suggestions out from a fee history it updates after
	// each block, on its own: read the tip again each time, and say both
	// when they never agree.
	var price, tip *big.Int
	for {
		var err error
		if tip, err = node.Client().SuggestGasTipCap(ctx); err != nil {
			t.Fatal(err)
		}
		if price, err = node.Client().SuggestGasPrice(ctx); err != nil {
			t.Fatal(err)
		}
		if price.Cmp(new(big.Int).Add(nextBaseFee, tip)) == 0 {
			return price
		}
		select {
		case <-ctx.Done():
			history, err := node.Client().FeeHistory(context.Background(), 3, nil, []float64{50})
			t.Fatalf("eth_gasPrice still %s, want the next base fee %s plus the tip %s; fee history %+v (%v)", price, nextBaseFee, tip, history, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestFeesNoTraffic: with no transaction in the recent blocks there is
// no reward to read, and the tip is the node's own suggestion.
func TestFeesNoTraffic(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	ctx := testContext(t)
	if err := node.Mine(ctx, 3); err != nil {
		t.Fatal(err)
	}
	tip, err := node.Client().SuggestGasTipCap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := dial(t, node.URL(), node.ChainID())
	got, err := r.Fees(ctx, txmanager.SignerConfig{}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := new(big.Int).Add(new(big.Int).Mul(got.BaseFee, big.NewInt(2)), tip)
	if got.BaseFee == nil || got.BaseFee.Sign() <= 0 || got.MaxPriorityFeePerGas.Cmp(tip) != 0 || got.MaxFeePerGas.Cmp(want) != 0 || got.GasPrice != nil || got.Capped {
		t.Errorf("Fees = %+v; want tip %s (eth_maxPriorityFeePerGas), max fee 2 × base fee + tip", got, tip)
	}
}

func TestCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		gas   uint64
		fees  chain.Fees
		value *big.Int
		l1Fee *big.Int
		want  *big.Int
	}{
		{"EIP-1559: the max fee, not the tip", 21000, chain.Fees{MaxFeePerGas: gwei(16), MaxPriorityFeePerGas: gwei(2)}, chaintest.Ether, nil,
			new(big.Int).Add(chaintest.Ether, new(big.Int).Mul(big.NewInt(21000), gwei(16)))},
		{"legacy", 50000, chain.Fees{GasPrice: gwei(3)}, big.NewInt(7), nil, new(big.Int).Add(big.NewInt(7), new(big.Int).Mul(big.NewInt(50000), gwei(3)))},
		{"nil value", 21000, chain.Fees{GasPrice: big.NewInt(1)}, nil, nil, big.NewInt(21000)},
		{"no fees", 21000, chain.Fees{}, big.NewInt(5), nil, big.NewInt(5)},
		{"beyond uint64", 1 << 40, chain.Fees{MaxFeePerGas: new(big.Int).Lsh(big.NewInt(1), 60)}, nil, nil, new(big.Int).Lsh(big.NewInt(1), 100)},
		{"an L1 data fee on top", 21000, chain.Fees{MaxFeePerGas: big.NewInt(2)}, big.NewInt(5), big.NewInt(1000), big.NewInt(42000 + 5 + 1000)},
		{"an L1 data fee alone", 21000, chain.Fees{}, nil, big.NewInt(1000), big.NewInt(1000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var valueBefore *big.Int
			if tt.value != nil {
				valueBefore = new(big.Int).Set(tt.value)
			}
			if got := chain.Cost(tt.gas, tt.fees, tt.value, tt.l1Fee); got.Cmp(tt.want) != 0 {
				t.Errorf("Cost = %s, want %s", got, tt.want)
			}
			if tt.value != nil && tt.value.Cmp(valueBefore) != 0 {
				t.Errorf("Cost changed the value to %s", tt.value)
			}
		})
	}
}

func TestBalanceAndNonces(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	ctx := testContext(t)
	r := dial(t, node.URL(), node.ChainID())
	acct := node.Accounts()[3]

	chaintest.Transfer(t, node, acct.Key, stranger, chaintest.Ether) // nonce 0, mined
	if err := node.SetAutomine(ctx, false); err != nil {
		t.Fatal(err)
	}
	tx := chaintest.SendTransfer(t, node, acct.Key, stranger, chaintest.Ether) // nonce 1, pooled

	mined, err := node.Client().BalanceAt(ctx, acct.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	bal, err := r.Balance(ctx, acct.Address)
	if err != nil {
		t.Fatal(err)
	}
	// The pending balance has the pooled transfer's value and gas spent.
	if spent := new(big.Int).Sub(mined, bal); spent.Cmp(tx.Value()) <= 0 {
		t.Errorf("pending balance %s, mined %s: the pooled transfer of %s is not counted", bal, mined, tx.Value())
	}
	if n, err := r.PendingNonce(ctx, acct.Address); err != nil || n != 2 {
		t.Errorf("PendingNonce = %d, %v; want 2", n, err)
	}
	if n, err := r.MinedNonce(ctx, acct.Address); err != nil || n != 1 {
		t.Errorf("MinedNonce = %d, %v; want 1", n, err)
	}
}

// TestFeesPreLondon: a chain without EIP-1559 has no base fee, so asking
// for EIP-1559 fees is an error that names the fix; legacy pricing works.
func TestFeesPreLondon(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{ExtraArgs: []string{"--hardfork", "berlin"}})
	ctx := testContext(t)
	r := dial(t, node.URL(), node.ChainID())
	if got, err := r.Fees(ctx, txmanager.SignerConfig{}, nil, false); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("EIP-1559 fees on a Berlin chain = %+v, %v; want an error saying to configure it legacy", got, err)
	}
	price, err := node.Client().SuggestGasPrice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Fees(ctx, txmanager.SignerConfig{}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chain.Fees{GasPrice: price}, got, bigComparer); diff != "" {
		t.Errorf("legacy Fees (-want +got):\n%s", diff)
	}
}
