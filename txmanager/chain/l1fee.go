package chain

import (
	"context"
	"fmt"
	"math"
	"math/big"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/txmanager"
)

// getL1FeeSelector is the selector of the OP Stack GasPriceOracle's
// getL1Fee(bytes): the L1 data fee of an unsigned RLP-encoded transaction
// at the L1 prices the chain knows now (since Ecotone, its L1 base fee and
// blob base fee with the chain's scalars; since Fjord, over a FastLZ
// estimate of the compressed size). The oracle adds 68 bytes for the
// signature itself.
var getL1FeeSelector = crypto.Keccak256([]byte("getL1Fee(bytes)"))[:4]

// L1Fee is the L1 data fee an OP Stack chain charges, on top of gas, for
// the transaction in would be signed as with gasLimit and fees: oracle's
// getL1Fee(bytes) of its unsigned encoding, raised by marginPercent %
// (rounded up) because it is charged at the L1 prices of the block that
// includes it. Cost adds it to what the transaction may take from its
// sender's balance.
//
// The nonce is not known yet (the balance is checked before a nonce is
// spent): the encoding carries the longest one. It also carries an empty
// signature, three bytes the oracle's own allowance for the signature
// counts again. Both err by a few bytes over the signed transaction,
// never under.
//
// An answer is a value; no answer is an error, never a fee of zero: a
// call that fails or reverts, or that answers anything but one word (an
// address without code answers nothing), is an error, and the worker
// retries.
func (r *Reader) L1Fee(ctx context.Context, oracle common.Address, in *txmanager.Intent, gasLimit uint64, fees Fees, marginPercent int) (*big.Int, error) {
	if err := r.checkChain(in); err != nil {
		return nil, err
	}
	if marginPercent < 0 {
		return nil, fmt.Errorf("L1 fee margin %d%%: want at least 0", marginPercent)
	}
	raw, err := r.unsignedTx(in, gasLimit, fees)
	if err != nil {
		return nil, fmt.Errorf("L1 fee on chain %d: encode the transaction: %w", r.chainID, err)
	}
	call := ethereum.CallMsg{To: &oracle, Data: abiBytesCall(getL1FeeSelector, raw)}
	var out []byte
	err = r.withState(func(tag *big.Int) (err error) {
		out, err = r.eth.CallContract(ctx, call, tag)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("L1 fee on chain %d: getL1Fee at %s: %w", r.chainID, oracle.Hex(), err)
	case len(out) == 0:
		return nil, fmt.Errorf("L1 fee on chain %d: getL1Fee at %s answered nothing: no GasPriceOracle there (is the chain's profile right?)", r.chainID, oracle.Hex())
	case len(out) != 32:
		return nil, fmt.Errorf("L1 fee on chain %d: getL1Fee at %s answered %d bytes, not one word", r.chainID, oracle.Hex(), len(out))
	}
	fee := new(big.Int).SetBytes(out)
	fee.Mul(fee, big.NewInt(100+int64(marginPercent)))
	fee.Add(fee, big.NewInt(99))
	return fee.Div(fee, big.NewInt(100)), nil
}

// unsignedTx is the transaction in would be signed as, with the largest
// nonce and an empty signature, in its binary (typed envelope) encoding:
// EIP-1559 unless fees are a legacy gas price.
func (r *Reader) unsignedTx(in *txmanager.Intent, gasLimit uint64, fees Fees) ([]byte, error) {
	var tx types.TxData = &types.DynamicFeeTx{
		ChainID: new(big.Int).SetUint64(r.chainID), Nonce: math.MaxUint64, GasTipCap: fees.MaxPriorityFeePerGas, GasFeeCap: fees.MaxFeePerGas,
		Gas: gasLimit, To: in.To, Value: in.Value, Data: in.Data,
	}
	if fees.GasPrice != nil {
		tx = &types.LegacyTx{Nonce: math.MaxUint64, GasPrice: fees.GasPrice, Gas: gasLimit, To: in.To, Value: in.Value, Data: in.Data}
	}
	return types.NewTx(tx).MarshalBinary()
}

// abiBytesCall is the ABI encoding of a call to a function whose only
// argument is bytes: the selector, the argument's offset (one word), its
// length, and the bytes padded to a whole word.
func abiBytesCall(selector, arg []byte) []byte {
	out := make([]byte, 0, 4+64+(len(arg)+31)/32*32)
	out = append(out, selector...)
	out = append(out, common.LeftPadBytes([]byte{0x20}, 32)...)
	out = append(out, common.LeftPadBytes(new(big.Int).SetInt64(int64(len(arg))).Bytes(), 32)...)
	out = append(out, arg...)
	return append(out, make([]byte, (32-len(arg)%32)%32)...)
}
