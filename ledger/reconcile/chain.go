package reconcile

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// rpcBlock is the part of eth_getBlockByNumber's answer a pin uses. The
// hash is the node's, not one recomputed from the header fields, which
// differ on some L2s.
type rpcBlock struct {
	Number *hexutil.Uint64 `json:"number"`
	Hash   *common.Hash    `json:"hash"`
}

// pin names the block to reconcile at: depth blocks below the head, or
// the node's finalized block when depth is 0. Anvil's finalized block is
// the head less 64 (two epochs of 32 slots; genesis below that height),
// its safe block the head less 32.
func pin(ctx context.Context, client *rpc.Client, chainID, depth uint64) (ledger.Block, error) {
	var tag any = "finalized"
	what := "finalized block"
	if depth > 0 {
		var head hexutil.Uint64
		if err := client.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
			return ledger.Block{}, errs.Wrap(errs.Unavailable, fmt.Sprintf("chain %d: read the head", chainID), err)
		}
		n := uint64(0)
		if uint64(head) > depth {
			n = uint64(head) - depth
		}
		tag, what = hexutil.Uint64(n), fmt.Sprintf("block %d (head %d less depth %d)", n, uint64(head), depth)
	}
	var b *rpcBlock
	if err := client.CallContext(ctx, &b, "eth_getBlockByNumber", tag, false); err != nil {
		return ledger.Block{}, errs.Wrap(errs.Unavailable, fmt.Sprintf("chain %d: read the %s", chainID, what), err)
	}
	if b == nil || b.Number == nil || b.Hash == nil {
		hint := ""
		if depth == 0 {
			hint = ": the node may not know finality; configure a depth"
		}
		return ledger.Block{}, errs.Errorf(errs.Unavailable, "chain %d: the node has no %s%s", chainID, what, hint)
	}
	return ledger.Block{Number: uint64(*b.Number), Hash: *b.Hash}, nil
}

// holding is one asset of one wallet.
type holding struct {
	addr  common.Address
	asset string
}

// chainBalance is what the chain says a holding is at the pinned block:
// its balance, or why that could not be read (a token call that reverted
// or found no contract) for the item's cause.
type chainBalance struct {
	amount  *big.Int
	problem string
}

// balanceOfSelector is ERC-20 balanceOf(address).
var balanceOfSelector = []byte{0x70, 0xa0, 0x82, 0x31}

// rpcBatch bounds a JSON-RPC batch: providers refuse large ones (100 to
// 1000 calls).
const rpcBatch = 100

// readBalances reads the holdings' balances at block, pinned by its hash
// (EIP-1898, canonical required: a block that left the chain fails the
// read), in batches. An answer the node could not give at all (it is
// down, lacks the block's state, or the block is gone) fails the whole
// read with errs.Unavailable; a token whose balanceOf reverts or has no
// code is that holding's problem.
func readBalances(ctx context.Context, client *rpc.Client, chainID uint64, block ledger.Block, hs []holding) (map[holding]chainBalance, error) {
	at := rpc.BlockNumberOrHashWithHash(block.Hash, true)
	out := make(map[holding]chainBalance, len(hs))
	for start := 0; start < len(hs); start += rpcBatch {
		part := hs[start:min(start+rpcBatch, len(hs))]
		natives := make([]hexutil.Big, len(part))
		tokens := make([]hexutil.Bytes, len(part))
		batch := make([]rpc.BatchElem, len(part))
		for i, h := range part {
			if h.asset == ledger.Native {
				batch[i] = rpc.BatchElem{Method: "eth_getBalance", Args: []any{h.addr, at}, Result: &natives[i]}
				continue
			}
			data := append(append([]byte{}, balanceOfSelector...), common.LeftPadBytes(h.addr.Bytes(), 32)...)
			call := map[string]any{"to": common.HexToAddress(h.asset), "data": hexutil.Bytes(data)}
			batch[i] = rpc.BatchElem{Method: "eth_call", Args: []any{call, at}, Result: &tokens[i]}
		}
		if err := client.BatchCallContext(ctx, batch); err != nil {
			return nil, errs.Wrap(errs.Unavailable, fmt.Sprintf("chain %d: read balances at block %d (%s)", chainID, block.Number, block.Hash), err)
		}
		for i, h := range part {
			e := batch[i]
			switch {
			case e.Error != nil && h.asset != ledger.Native && reverted(e.Error):
				out[h] = chainBalance{problem: fmt.Sprintf("balanceOf(%s) on token %s reverted at block %d: %v", strings.ToLower(h.addr.Hex()), h.asset, block.Number, e.Error)}
			case e.Error != nil:
				return nil, errs.Wrap(errs.Unavailable, fmt.Sprintf("chain %d: read the %s balance of %s at block %d (%s)", chainID, h.asset, h.addr, block.Number, block.Hash), e.Error)
			case h.asset == ledger.Native:
				out[h] = chainBalance{amount: natives[i].ToInt()}
			case len(tokens[i]) == 0:
				out[h] = chainBalance{problem: fmt.Sprintf("token %s has no contract at block %d: balanceOf answered nothing", h.asset, block.Number)}
			case len(tokens[i]) != 32:
				out[h] = chainBalance{problem: fmt.Sprintf("balanceOf on token %s answered %d bytes at block %d, not a uint256", h.asset, len(tokens[i]), block.Number)}
			default:
				out[h] = chainBalance{amount: new(big.Int).SetBytes(tokens[i])}
			}
		}
	}
	return out, nil
}

// reverted reports whether a call's error is the contract's revert, not
// the node's failure. Nodes word it differently; geth and anvil give code 3.
func reverted(err error) bool {
	var re rpc.Error
	if errors.As(err, &re) && re.ErrorCode() == 3 {
		return true
	}
	return strings.Contains(strings.ToLower(err.Error()), "revert")
}
