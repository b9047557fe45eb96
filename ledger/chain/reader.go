// Package chain reads what the ledger books from the ledger's own chain
// endpoint: a transaction's receipt in the block an event names, pinned by
// that block's hash. Events say what happened; the chain says how much.
package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/shared/errs"
)

// Reader reads one chain.
type Reader struct {
	rpc     *rpc.Client
	chainID uint64
}

// NewReader reads the chain chainID through client.
func NewReader(client *rpc.Client, chainID uint64) *Reader {
	return &Reader{rpc: client, chainID: chainID}
}

// rpcTx is the part of eth_getTransactionByHash's answer the ledger uses.
type rpcTx struct {
	From      common.Address  `json:"from"`
	To        *common.Address `json:"to"`
	Value     *hexutil.Big    `json:"value"`
	BlockHash *common.Hash    `json:"blockHash"`
}

// rpcReceipt adds to a receipt the OP-stack data fee.
type rpcReceipt struct {
	L1Fee *hexutil.Big `json:"l1Fee"`
}

// Settled reads transaction hash as the block blockHash settled it. The
// receipt must be that block's: when the node has it in another block, or
// in none, the block left the chain (or the node is behind) and the answer
// is an errs.Conflict error, so that nothing is booked from a block the
// event did not name. An unreachable node is errs.Unavailable.
func (r *Reader) Settled(ctx context.Context, hash, blockHash common.Hash) (*booking.Settled, error) {
	var tx *rpcTx
	var rawReceipt json.RawMessage
	batch := []rpc.BatchElem{
		{Method: "eth_getTransactionByHash", Args: []any{hash}, Result: &tx},
		{Method: "eth_getTransactionReceipt", Args: []any{hash}, Result: &rawReceipt},
	}
	if err := r.rpc.BatchCallContext(ctx, batch); err != nil {
		return nil, errs.Wrap(errs.Unavailable, "read transaction "+hash.Hex(), err)
	}
	for _, b := range batch {
		if b.Error != nil {
			return nil, errs.Wrap(errs.Unavailable, fmt.Sprintf("%s %s", b.Method, hash.Hex()), b.Error)
		}
	}
	if tx == nil || len(rawReceipt) == 0 || string(rawReceipt) == "null" {
		return nil, errs.Errorf(errs.Conflict, "transaction %s has no receipt on chain %d: block %s is not canonical here", hash, r.chainID, blockHash)
	}
	receipt := new(types.Receipt)
	if err := receipt.UnmarshalJSON(rawReceipt); err != nil {
		return nil, fmt.Errorf("receipt of %s: %w", hash, err)
	}
	var extra rpcReceipt
	if err := json.Unmarshal(rawReceipt, &extra); err != nil {
		return nil, fmt.Errorf("receipt of %s: %w", hash, err)
	}
	// The receipt proves inclusion. A node may answer the transaction
	// itself without its block for a moment after mining it (anvil does,
	// under load: its pool forgets the transaction before its index
	// knows the block), so a missing block hash there is a lagging
	// answer, not a contradiction; another block hash is one.
	if receipt.BlockHash != blockHash || tx.BlockHash != nil && *tx.BlockHash != blockHash {
		return nil, errs.Errorf(errs.Conflict, "transaction %s is in block %s on chain %d, not in block %s", hash, receipt.BlockHash, r.chainID, blockHash)
	}
	s := &booking.Settled{ChainID: r.chainID, From: tx.From, To: tx.To, Value: new(big.Int), Receipt: receipt}
	if tx.Value != nil {
		s.Value = tx.Value.ToInt()
	}
	if extra.L1Fee != nil {
		s.L1Fee = extra.L1Fee.ToInt()
	}
	return s, nil
}

// BalanceAt is addr's native balance at block blockHash (EIP-1898).
func (r *Reader) BalanceAt(ctx context.Context, addr common.Address, blockHash common.Hash) (*big.Int, error) {
	var b hexutil.Big
	if err := r.rpc.CallContext(ctx, &b, "eth_getBalance", addr, rpc.BlockNumberOrHashWithHash(blockHash, true)); err != nil {
		return nil, errs.Wrap(errs.Unavailable, fmt.Sprintf("balance of %s at %s", addr, blockHash), err)
	}
	return b.ToInt(), nil
}
