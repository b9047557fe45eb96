package chain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/ethereum/go-ethereum"

	"github.com/txfence/txfence/txmanager"
)

// DefaultGasMultiplier is the headroom over the node's gas estimate when
// the caller gives none: the state a transaction runs against when mined
// differs from the one it was estimated on (other transactions, storage
// slots going from zero to non-zero), and running out of gas costs the
// whole gas limit.
const DefaultGasMultiplier = 1.2

// ErrInsufficientFunds is what Simulate returns, wrapped, when the node
// refuses to simulate because the sender cannot pay the value: not a
// revert (the transaction would never be mined, not fail on chain) and
// not a flaky node. The worker holds the transaction with sub-state
// insufficient_funds until the balance allows it or the hold times out.
var ErrInsufficientFunds = errors.New("insufficient funds")

// GasRules are how Simulate sizes a gas limit: a chain's rules and the
// deployment's headroom.
type GasRules struct {
	// Multiplier scales the node's estimate; 0 means DefaultGasMultiplier.
	// It is read as the decimal it prints as, so 1.1 × 21000 is 23100, not
	// 23101.
	Multiplier float64
	// EstimateFloor (txmanager.Chain.FloorsAtEstimate, the arbitrum
	// profile) estimates an intent that gives its own gas too, and fails
	// it (Reverted) if it gave less than the estimate. Arbitrum's
	// eth_estimateGas includes the L1 (poster) component in L2 gas units
	// (NodeInterface.gasEstimateComponents splits it out): the cost of
	// posting the transaction's bytes to L1 is charged as gas, so a gas
	// limit under the estimate does not cover the transaction's own bytes
	// and the node refuses it (intrinsic gas too low), however little it
	// executes.
	EstimateFloor bool
}

// Simulation is the outcome of simulating an intent.
type Simulation struct {
	// GasLimit is the gas limit to sign with: the intent's own Gas, else
	// the estimate times the multiplier, rounded up and capped at the
	// block gas limit. It is never below Estimate: an estimate above the
	// block gas limit is a Reverted simulation, not a smaller limit. On
	// Arbitrum the headers' gas limit is an artificial 2^50 (the L1
	// component has no block limit; execution alone is held to 32
	// million a block by the sequencer), so the cap never takes the L1
	// component off. It is 0 when Reverted.
	GasLimit uint64
	// Estimate is the node's eth_estimateGas answer, 0 when the intent
	// gave its own gas limit (nothing was estimated, unless the rules'
	// EstimateFloor asks for it) or when Reverted.
	Estimate uint64
	// Reverted reports that the transaction would fail: it reverted
	// (RevertData holds what it reverted with, empty if nothing), or
	// halted (out of gas, an invalid opcode, a gas limit below its
	// intrinsic cost or above the block gas limit; RevertData is nil).
	// The worker fails it without consuming a nonce.
	Reverted bool
	// Reason says why, in one line (see RevertReason for reverts; halts
	// quote the node).
	Reason string
	// RevertData is the raw revert data, nil if the node gave none.
	RevertData []byte
}

// Simulate runs the intent as a call from in.From at the pending state
// (at the latest block on a node without one): eth_call, then, unless
// in.Gas is set (and rules.EstimateFloor is not), eth_estimateGas. The call carries no fees, so it tests
// what the transaction does, not whether the signer can pay for gas: the
// worker checks that against Cost over everything pending. A value the
// sender cannot pay is ErrInsufficientFunds.
//
// rules size the gas limit (see GasRules).
//
// A revert or halt is not an error: it is Simulation{Reverted: true}. A
// failure to get an answer (transport, timeout, 5xx, a node's internal
// error or any answer not known to be about the transaction) is an
// error, and the worker retries. So is an intent for another chain,
// which is a routing bug.
func (r *Reader) Simulate(ctx context.Context, in *txmanager.Intent, rules GasRules) (Simulation, error) {
	if err := r.checkChain(in); err != nil {
		return Simulation{}, err
	}
	mult, err := multiplier(rules.Multiplier)
	if err != nil {
		return Simulation{}, err
	}
	msg := ethereum.CallMsg{From: in.From, To: in.To, Value: in.Value, Data: in.Data}
	if in.Gas != nil {
		msg.Gas = *in.Gas
	}
	fail := func(step string, err error) (Simulation, error) {
		switch o := classify(err); o.kind {
		case reverted, halted:
			return Simulation{Reverted: true, Reason: o.reason, RevertData: o.data}, nil
		case insufficientFunds:
			return Simulation{}, fmt.Errorf("simulate on chain %d: %s from %s: %w: %s", r.chainID, step, in.From.Hex(), ErrInsufficientFunds, o.reason)
		}
		return Simulation{}, fmt.Errorf("simulate on chain %d: %s from %s: %w", r.chainID, step, in.From.Hex(), err)
	}

	// The call decides which state the rest reads: estimating at pending
	// on a node that just refused pending would fail the same way.
	var tag *big.Int
	err = r.withState(func(t *big.Int) error {
		tag = t
		_, err := r.eth.CallContract(ctx, msg, t)
		return err
	})
	if err != nil {
		return fail("eth_call", err)
	}
	var sim Simulation
	if in.Gas == nil || rules.EstimateFloor {
		// Estimated without the intent's gas: the node's own answer, not
		// whether the given gas suffices.
		est := msg
		est.Gas = 0
		if sim.Estimate, err = r.eth.EstimateGasAtBlock(ctx, est, tag); err != nil {
			return fail("eth_estimateGas", err)
		}
	}
	// The latest block's gas limit, whatever state was simulated: every
	// node has that header (some answer null for a pending one), and the
	// next block's limit differs from it by 1/1024 at most.
	head, err := r.eth.HeaderByNumber(ctx, nil)
	if err != nil {
		return Simulation{}, fmt.Errorf("simulate on chain %d: latest header: %w", r.chainID, err)
	}
	limit := head.GasLimit

	if in.Gas != nil {
		if *in.Gas > limit {
			return Simulation{Reverted: true, Reason: fmt.Sprintf("gas limit %d exceeds the block gas limit %d", *in.Gas, limit)}, nil
		}
		if *in.Gas < sim.Estimate {
			return Simulation{Reverted: true, Reason: fmt.Sprintf(
				"gas limit %d is below the node's estimate of %d, which on this chain includes the L1 data component", *in.Gas, sim.Estimate)}, nil
		}
		sim.GasLimit = *in.Gas
		return sim, nil
	}
	if sim.Estimate > limit {
		// No node should estimate above its own cap; if one does, no
		// block can hold the transaction.
		return Simulation{Reverted: true, Reason: fmt.Sprintf("estimated gas %d exceeds the block gas limit %d", sim.Estimate, limit)}, nil
	}
	sim.GasLimit = min(scaleUp(sim.Estimate, mult), limit)
	return sim, nil
}

// multiplier checks m and returns it as an exact fraction of the decimal
// it prints as: 1.2 is 6/5, where the float64 nearest to 1.2 is slightly
// below it, and 1.1 slightly above, which would round 21000 × 1.1 up to
// 23101.
func multiplier(m float64) (*big.Rat, error) {
	if m == 0 {
		m = DefaultGasMultiplier
	}
	if math.IsNaN(m) || math.IsInf(m, 0) || m < 1 {
		return nil, fmt.Errorf("gas multiplier %v: want a finite number of at least 1", m)
	}
	rat, ok := new(big.Rat).SetString(strconv.FormatFloat(m, 'g', -1, 64))
	if !ok {
		return nil, fmt.Errorf("gas multiplier %v: not a decimal", m)
	}
	return rat, nil
}

// scaleUp is ⌈gas × m⌉, saturating at the largest uint64.
func scaleUp(gas uint64, m *big.Rat) uint64 {
	num := new(big.Int).Mul(new(big.Int).SetUint64(gas), m.Num())
	q, rem := new(big.Int).QuoRem(num, m.Denom(), new(big.Int))
	if rem.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsUint64() {
		return math.MaxUint64
	}
	return q.Uint64()
}
