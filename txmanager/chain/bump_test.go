package chain_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
)

func TestBump(t *testing.T) {
	t.Parallel()
	gwei := func(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e9)) }
	wei := func(v *big.Int) *txmanager.Wei { return &txmanager.Wei{Int: *v} }
	fees := func(fee, tip int64) txmanager.Fees {
		return txmanager.Fees{MaxFeePerGas: gwei(fee), MaxPriorityFeePerGas: gwei(tip)}
	}
	tests := []struct {
		name    string
		market  chain.Market
		prev    txmanager.Fees
		signer  txmanager.SignerConfig
		in      *txmanager.Intent
		percent int
		want    txmanager.Fees
		wantErr string
	}{
		{
			// The market (2 × 20 + 1 = 41 gwei, tip 1) is below prev + 10%.
			name: "quiet market: 10% up", market: chain.MarketAt(gwei(20), gwei(1)), prev: fees(100, 10), percent: 300,
			want: fees(110, 11),
		},
		{
			// The base fee rose to 100 gwei: the bump goes to the market
			// (2 × 100 + 2), not just 10% up.
			name: "base fee rose: to the market", market: chain.MarketAt(gwei(100), gwei(2)), prev: fees(30, 1), percent: 300,
			want: fees(202, 2),
		},
		{
			name: "signer's cap holds the max fee", market: chain.MarketAt(gwei(100), gwei(2)), prev: fees(30, 1), percent: 300,
			signer: txmanager.SignerConfig{MaxFeePerGas: wei(gwei(50))}, want: fees(50, 2),
		},
		{
			name: "the intent's cap is lower than the signer's", market: chain.MarketAt(gwei(100), gwei(2)), prev: fees(30, 1), percent: 300,
			signer: txmanager.SignerConfig{MaxFeePerGas: wei(gwei(50))}, in: &txmanager.Intent{MaxFeePerGas: gwei(40)}, want: fees(40, 2),
		},
		{
			name: "no room under the absolute cap", market: chain.MarketAt(gwei(100), gwei(2)), prev: fees(48, 1), percent: 300,
			signer: txmanager.SignerConfig{MaxFeePerGas: wei(gwei(50))}, wantErr: "the configured cap of 50000000000 wei",
		},
		{
			// Already at 3 × the market's 21 gwei: another 10% would pass
			// the relative cap.
			name: "no room under the relative cap", market: chain.MarketAt(gwei(10), gwei(1)), prev: fees(60, 1), percent: 300,
			wantErr: "300% of the market's",
		},
		{
			name: "legacy: 10% up", market: chain.LegacyMarketAt(gwei(20)), prev: txmanager.Fees{GasPrice: gwei(30)}, percent: 300,
			want: txmanager.Fees{GasPrice: gwei(33)},
		},
		{
			// Polygon PoS: the market's 1 gwei tip is below the chain's
			// 25 gwei minimum, and so is prev + 10%.
			name: "the tip raised to the chain's minimum", market: chain.MarketAt(gwei(20), gwei(1)), prev: fees(100, 10), percent: 300,
			signer: txmanager.SignerConfig{ChainMinPriorityFeePerGas: wei(gwei(25))}, want: fees(110, 25),
		},
		{
			// The max fee follows: 2 × 20 + 25 = 65 gwei is the market now.
			name: "the minimum raises the market's max fee", market: chain.MarketAt(gwei(20), gwei(1)), prev: fees(40, 2), percent: 300,
			signer: txmanager.SignerConfig{ChainMinPriorityFeePerGas: wei(gwei(25))}, want: fees(65, 25),
		},
		{
			name: "legacy: the gas price raised to the chain's minimum", market: chain.LegacyMarketAt(gwei(20)), prev: txmanager.Fees{GasPrice: gwei(21)},
			percent: 300, signer: txmanager.SignerConfig{ChainMinPriorityFeePerGas: wei(gwei(25))}, want: txmanager.Fees{GasPrice: gwei(25)},
		},
		{
			name: "odd amounts round up", market: chain.MarketAt(big.NewInt(1), big.NewInt(1)), prev: txmanager.Fees{MaxFeePerGas: big.NewInt(101), MaxPriorityFeePerGas: big.NewInt(11)},
			percent: 1000, want: txmanager.Fees{MaxFeePerGas: big.NewInt(112), MaxPriorityFeePerGas: big.NewInt(13)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.market.Bump(tt.prev, tt.signer, tt.in, tt.percent)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			same := func(a, b *big.Int) bool { return (a == nil && b == nil) || (a != nil && b != nil && a.Cmp(b) == 0) }
			if !same(got.MaxFeePerGas, tt.want.MaxFeePerGas) || !same(got.MaxPriorityFeePerGas, tt.want.MaxPriorityFeePerGas) || !same(got.GasPrice, tt.want.GasPrice) {
				t.Fatalf("got fee %v tip %v price %v; want %v %v %v", got.MaxFeePerGas, got.MaxPriorityFeePerGas, got.GasPrice,
					tt.want.MaxFeePerGas, tt.want.MaxPriorityFeePerGas, tt.want.GasPrice)
			}
			// Whatever the market, a bump is a valid replacement.
			for _, f := range [][2]*big.Int{{got.MaxFeePerGas, tt.prev.MaxFeePerGas}, {got.MaxPriorityFeePerGas, tt.prev.MaxPriorityFeePerGas}, {got.GasPrice, tt.prev.GasPrice}} {
				if f[1] != nil && f[0].Cmp(chain.RaisedByBumpPercent(f[1])) < 0 {
					t.Fatalf("%v is not 10%% above %v", f[0], f[1])
				}
			}
		})
	}
}
