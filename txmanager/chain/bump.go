package chain

import (
	"fmt"
	"math/big"

	"github.com/txfence/txfence/txmanager"
)

// BumpPercent is the least a replacement raises each fee field by: nodes
// (and signerd) refuse a same-nonce replacement that raises less.
const BumpPercent = 10

// Bump prices the replacement of an attempt signed with prev: each fee
// field up at least BumpPercent and at least to this market's price (the
// tip, or legacy gas price, at least the chain's minimum), never
// above the caps (the signer's, and the intent's when in is set), and the
// max fee (or gas price) never above marketPercent % of the market's. The
// tip has no relative cap of its own (a quiet market's tip says little);
// it stays under the max fee. When the caps leave no room for
// a 10% rise, it returns an error saying which cap stands in the way: a
// smaller rise would be refused by the nodes, and the attempt in flight
// stays the one that counts.
func (m Market) Bump(prev txmanager.Fees, signer txmanager.SignerConfig, in *txmanager.Intent, marketPercent int) (txmanager.Fees, error) {
	var intentTip *big.Int
	if in != nil {
		intentTip = in.MaxPriorityFeePerGas
	}
	// The fee ceiling an approval must cover (txmanager.SignerConfig.FeeCeiling).
	feeCap := signer.FeeCeiling(in)
	tipCap := lower(intentTip, weiInt(signer.MaxPriorityFeePerGas))
	// The uncapped market price, raised to the chain's minimum tip: a bump
	// is at least what a new transaction would offer.
	market := m.Fees(txmanager.SignerConfig{ChainMinPriorityFeePerGas: signer.ChainMinPriorityFeePerGas}, nil)
	if m.legacy || prev.GasPrice != nil {
		if !m.legacy || prev.GasPrice == nil {
			return txmanager.Fees{}, fmt.Errorf("the attempt's fees (%s) do not fit the chain's fee market", describe(prev))
		}
		price, err := bumpField("gas price", prev.GasPrice, market.GasPrice, feeCap, marketPercent)
		return txmanager.Fees{GasPrice: price}, err
	}
	tip, err := bumpField("priority fee", prev.MaxPriorityFeePerGas, market.MaxPriorityFeePerGas, tipCap, 0)
	if err != nil {
		return txmanager.Fees{}, err
	}
	fee, err := bumpField("max fee", prev.MaxFeePerGas, greater(market.MaxFeePerGas, tip), feeCap, marketPercent)
	if err != nil {
		return txmanager.Fees{}, err
	}
	if tip.Cmp(fee) > 0 {
		// The fee cap held the max fee under the bumped tip; the tip may
		// not exceed it, and lowered it would no longer be a bump.
		return txmanager.Fees{}, fmt.Errorf("a bumped priority fee of %s wei would exceed the max fee of %s wei the caps allow", tip, fee)
	}
	return txmanager.Fees{MaxFeePerGas: fee, MaxPriorityFeePerGas: tip}, nil
}

// bumpField is one fee field's replacement value: max(prev + 10%, market),
// capped at limit and (unless marketPercent is 0) at marketPercent % of
// market; an error when the caps leave it under prev + 10%.
func bumpField(name string, prev, market, limit *big.Int, marketPercent int) (*big.Int, error) {
	least := RaisedByBumpPercent(prev)
	got := new(big.Int).Set(greater(least, market))
	var relative *big.Int
	if marketPercent > 0 {
		relative = new(big.Int).Mul(market, big.NewInt(int64(marketPercent)))
		relative.Div(relative, big.NewInt(100))
		if got.Cmp(relative) > 0 {
			got.Set(relative)
		}
	}
	if limit != nil && got.Cmp(limit) > 0 {
		got.Set(limit)
	}
	if got.Cmp(least) < 0 {
		why := fmt.Sprintf("the configured cap of %s wei", limit)
		if limit == nil || (relative != nil && relative.Cmp(limit) < 0) {
			why = fmt.Sprintf("%d%% of the market's %s wei", marketPercent, market)
		}
		return nil, fmt.Errorf("cannot bump the %s: it must rise from %s to at least %s wei, above %s", name, prev, least, why)
	}
	return got, nil
}

// RaisedByBumpPercent is v + 10%, rounded up: the least a replacement may
// offer.
func RaisedByBumpPercent(v *big.Int) *big.Int {
	out := new(big.Int).Mul(v, big.NewInt(100+BumpPercent))
	out.Add(out, big.NewInt(99))
	return out.Div(out, big.NewInt(100))
}

// greater is the greater of two amounts (the one given, not a copy).
func greater(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}

func describe(f txmanager.Fees) string {
	if f.GasPrice != nil {
		return "gas price " + f.GasPrice.String()
	}
	return fmt.Sprintf("max fee %v, priority fee %v", f.MaxFeePerGas, f.MaxPriorityFeePerGas)
}

// MarketAt is an EIP-1559 market with the given next base fee and tip, and
// LegacyMarketAt a legacy one at the given gas price: what a Reader reads,
// fixed (for pricing without a node, as in tests).
func MarketAt(baseFee, tip *big.Int) Market { return Market{baseFee: baseFee, tip: tip} }

// LegacyMarketAt is a legacy market at gasPrice (see MarketAt).
func LegacyMarketAt(gasPrice *big.Int) Market { return Market{legacy: true, gasPrice: gasPrice} }
