package chain

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/shared/rpcpool"
)

// MinedTx is one transaction of a signer found in a canonical block.
type MinedTx struct {
	Tx        *types.Transaction
	Block     uint64
	BlockHash common.Hash
	BlockTime time.Time
}

// MinedBetween finds addr's transactions with nonces from to to-1 in the
// chain up to block head, in nonce order. to must not be above addr's
// nonce at head. There is no RPC for "the transaction of this sender at
// this nonce", so it bisects eth_getTransactionCount over block numbers
// to find the first block holding nonce k, reads that block, takes every
// transaction of addr in it, and goes on from the next block with the
// nonce after the block's: about (blocks holding them) × log2(head) calls,
// once, when the chain is found ahead of what the database remembers. It
// reads historical state, which a node that prunes it cannot give: that
// is an error, never an empty answer.
func (r *Reader) MinedBetween(ctx context.Context, addr common.Address, from, to, head uint64) ([]MinedTx, error) {
	signer := types.LatestSignerForChainID(new(big.Int).SetUint64(r.chainID))
	ctx = rpcpool.AtHead(ctx, head) // an endpoint behind head knows none of it
	var out []MinedTx
	low := uint64(0)
	for k := from; k < to; {
		// The first block after which addr's nonce is above k holds k.
		lo, hi := low, head
		for lo < hi {
			mid := lo + (hi-lo)/2
			n, err := r.NonceAt(ctx, addr, mid)
			if err != nil {
				return nil, err
			}
			if n > k {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		block, err := r.eth.BlockByNumber(ctx, new(big.Int).SetUint64(lo))
		if err != nil {
			return nil, fmt.Errorf("block %d on chain %d: %w", lo, r.chainID, err)
		}
		next := k
		for _, tx := range block.Transactions() {
			sender, err := types.Sender(signer, tx)
			if err != nil || sender != addr || tx.Nonce() < k || tx.Nonce() >= to {
				continue
			}
			out = append(out, MinedTx{Tx: tx, Block: lo, BlockHash: block.Hash(), BlockTime: time.Unix(int64(block.Time()), 0)})
			next = max(next, tx.Nonce()+1)
		}
		if next == k {
			// The node's state and its blocks disagree (a reorg under the
			// search, or a node serving another chain's state).
			return nil, fmt.Errorf("chain %d: block %d should hold nonce %d of %s and does not", r.chainID, lo, k, addr.Hex())
		}
		k, low = next, lo+1
	}
	return out, nil
}

// Head is the number of the latest block.
func (r *Reader) Head(ctx context.Context) (uint64, error) {
	n, err := r.eth.BlockNumber(ctx)
	if err != nil {
		return 0, fmt.Errorf("head of chain %d: %w", r.chainID, err)
	}
	return n, nil
}

// NonceAt is addr's next nonce after block: every nonce below it was
// consumed in that block or before.
func (r *Reader) NonceAt(ctx context.Context, addr common.Address, block uint64) (uint64, error) {
	n, err := r.eth.NonceAt(rpcpool.AtHead(ctx, block), addr, new(big.Int).SetUint64(block))
	if err != nil {
		return 0, fmt.Errorf("nonce of %s at block %d on chain %d: %w", addr.Hex(), block, r.chainID, err)
	}
	return n, nil
}
