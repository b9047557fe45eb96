package chain

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/txfence/txfence/txmanager"
)

// Fee market sampling: the tip is the median, over the recent blocks that
// held transactions, of each block's median tip paid.
const (
	feeHistoryBlocks     = 10
	feeRewardPercentile  = 50
	baseFeeHeadroomTimes = 2 // max fee = 2 × next base fee + tip: room for about six full blocks of 12.5% rises
)

// Fees are the fees to sign a transaction with. An EIP-1559 chain sets
// MaxFeePerGas and MaxPriorityFeePerGas (GasPrice is nil); a legacy chain
// sets GasPrice (the others are nil).
type Fees struct {
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
	GasPrice             *big.Int
	// BaseFee is the next block's base fee (EIP-1559 only), so the worker
	// can tell a cap that only trims headroom (MaxFeePerGas still at or
	// above BaseFee + MaxPriorityFeePerGas) from one that prices the
	// transaction out of the next block.
	BaseFee *big.Int
	// Capped reports that the market asked for more than a cap allowed
	// and a value was lowered to its cap. The fees are still valid to sign
	// (tip at most max fee); whether to send, wait or alert is the
	// worker's decision.
	Capped bool
}

// Fees prices a transaction at the current market, within caps. The caps
// are the intent's own (MaxFeePerGas, MaxPriorityFeePerGas) where it sets
// them and the signer's configured ones, the lower of the two where both
// exist: an intent can ask for less than the operator allows, never more.
// No cap at all means the market price. in may be nil (for a fee bump,
// say): then only the signer's caps apply.
//
// EIP-1559: tip = the median of the last 10 blocks' median rewards
// (eth_feeHistory at percentile 50; empty blocks are skipped, and with
// none at all the node's eth_maxPriorityFeePerGas is used), capped; max
// fee = 2 × the next block's base fee + tip, capped; and the tip is
// lowered to the max fee if a cap put the max fee below it.
//
// Legacy (eth_gasPrice): the gas price, capped by the max fee caps (a
// legacy gas price is both what is offered and the most that is paid).
//
// A chain with a minimum tip (polygon-pos: signer.ChainMinPriorityFeePerGas)
// raises the market's tip, or legacy gas price, to it before the caps
// apply: its nodes refuse less. Caps under the minimum are refused when
// the chains file is loaded and when an intent is created.
func (r *Reader) Fees(ctx context.Context, signer txmanager.SignerConfig, in *txmanager.Intent, legacy bool) (Fees, error) {
	if in != nil {
		if err := r.checkChain(in); err != nil {
			return Fees{}, err
		}
	}
	m, err := r.Market(ctx, legacy)
	if err != nil {
		return Fees{}, err
	}
	return m.Fees(signer, in), nil
}

// Market is the fee market as read at one moment: what Fees prices with.
// A worker reads it once for a batch and prices every transaction of the
// batch from it, instead of one eth_feeHistory per transaction.
type Market struct {
	legacy bool
	// gasPrice (legacy), or the next block's base fee and the tip the
	// market pays (EIP-1559).
	gasPrice, baseFee, tip *big.Int
}

// Market reads the fee market: eth_gasPrice on a legacy chain, else the
// fee history (see Fees).
func (r *Reader) Market(ctx context.Context, legacy bool) (Market, error) {
	if legacy {
		price, err := r.eth.SuggestGasPrice(ctx)
		if err != nil {
			return Market{}, fmt.Errorf("fees on chain %d: eth_gasPrice: %w", r.chainID, err)
		}
		return Market{legacy: true, gasPrice: price}, nil
	}
	baseFee, tip, err := r.market(ctx)
	if err != nil {
		return Market{}, fmt.Errorf("fees on chain %d: %w", r.chainID, err)
	}
	return Market{baseFee: baseFee, tip: tip}, nil
}

// Fees prices one transaction at this market within the caps (see
// Reader.Fees); in may be nil. It reads nothing.
func (m Market) Fees(signer txmanager.SignerConfig, in *txmanager.Intent) Fees {
	var intentTip *big.Int
	if in != nil {
		intentTip = in.MaxPriorityFeePerGas
	}
	// The fee ceiling an approval must cover (txmanager.SignerConfig.FeeCeiling).
	feeCap := signer.FeeCeiling(in)
	tipCap := lower(intentTip, weiInt(signer.MaxPriorityFeePerGas))
	least := weiInt(signer.ChainMinPriorityFeePerGas)

	if m.legacy {
		price, capped := capAt(atLeast(m.gasPrice, least), feeCap)
		return Fees{GasPrice: price, Capped: capped}
	}
	tip, tipCapped := capAt(atLeast(m.tip, least), tipCap)
	maxFee := new(big.Int).Mul(m.baseFee, big.NewInt(baseFeeHeadroomTimes))
	maxFee.Add(maxFee, tip)
	maxFee, feeCapped := capAt(maxFee, feeCap)
	if tip.Cmp(maxFee) > 0 {
		tip = new(big.Int).Set(maxFee)
	}
	return Fees{
		MaxFeePerGas:         maxFee,
		MaxPriorityFeePerGas: tip,
		BaseFee:              new(big.Int).Set(m.baseFee),
		Capped:               tipCapped || feeCapped,
	}
}

// market is the next block's base fee and the tip the market pays.
func (r *Reader) market(ctx context.Context) (baseFee, tip *big.Int, err error) {
	h, err := r.eth.FeeHistory(ctx, feeHistoryBlocks, nil, []float64{feeRewardPercentile})
	if err != nil {
		return nil, nil, fmt.Errorf("eth_feeHistory: %w", err)
	}
	// BaseFee has one entry more than blocks: the last is the next
	// block's. A chain without EIP-1559 reports zeros or nothing.
	if len(h.BaseFee) == 0 || h.BaseFee[len(h.BaseFee)-1] == nil || h.BaseFee[len(h.BaseFee)-1].Sign() == 0 {
		return nil, nil, errors.New("eth_feeHistory reports no base fee: configure the chain as legacy")
	}
	baseFee = new(big.Int).Set(h.BaseFee[len(h.BaseFee)-1])

	var rewards []*big.Int
	for i, ratio := range h.GasUsedRatio {
		// An empty block reports a reward of 0, which says nothing about
		// what it takes to be included.
		if ratio > 0 && i < len(h.Reward) && len(h.Reward[i]) > 0 && h.Reward[i][0] != nil {
			rewards = append(rewards, h.Reward[i][0])
		}
	}
	if len(rewards) == 0 {
		if tip, err = r.eth.SuggestGasTipCap(ctx); err != nil {
			return nil, nil, fmt.Errorf("eth_maxPriorityFeePerGas (no recent block held a transaction): %w", err)
		}
		return baseFee, tip, nil
	}
	slices.SortFunc(rewards, (*big.Int).Cmp)
	// The upper median: with an even count, the higher of the two middle
	// values, which errs towards inclusion.
	return baseFee, new(big.Int).Set(rewards[len(rewards)/2]), nil
}

// Cost is the most a transaction can take from its sender's balance:
// value + gasLimit × (MaxFeePerGas, or GasPrice on a legacy chain) +
// l1Fee, the L1 data fee a rollup charges on top of gas (Reader.L1Fee;
// nil on a chain without one). The worker sums it over everything pending
// of a signer for the balance check. A nil value counts as 0, and so do
// fees with neither price set.
func Cost(gasLimit uint64, f Fees, value, l1Fee *big.Int) *big.Int {
	price := f.MaxFeePerGas
	if price == nil {
		price = f.GasPrice
	}
	cost := new(big.Int)
	if price != nil {
		cost.Mul(new(big.Int).SetUint64(gasLimit), price)
	}
	for _, v := range []*big.Int{value, l1Fee} {
		if v != nil {
			cost.Add(cost, v)
		}
	}
	return cost
}

// atLeast is v raised to least, an optional minimum (nil: none); either
// is returned as is, not copied.
func atLeast(v, least *big.Int) *big.Int {
	if least == nil {
		return v
	}
	return greater(v, least)
}

// lower is the lower of two optional caps; nil means no cap.
func lower(a, b *big.Int) *big.Int {
	switch {
	case a == nil:
		return b
	case b == nil || a.Cmp(b) <= 0:
		return a
	}
	return b
}

func weiInt(w *txmanager.Wei) *big.Int {
	if w == nil {
		return nil
	}
	return &w.Int
}

// capAt returns a copy of v, lowered to limit if limit is set and below
// it, and whether it was lowered. Copies: neither the caller's caps nor
// the node's answer are shared with the returned Fees.
func capAt(v, limit *big.Int) (*big.Int, bool) {
	if limit != nil && v.Cmp(limit) > 0 {
		return new(big.Int).Set(limit), true
	}
	return new(big.Int).Set(v), false
}
