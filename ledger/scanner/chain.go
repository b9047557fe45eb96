package scanner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/shared/errs"
)

// What the scanner reads is decoded into its own small types, not
// go-ethereum's: a chain's own transaction types (an OP-stack deposit, an
// Arbitrum retryable) would fail types.Transaction's decoding.

// block is a block's transactions, as the scanner needs them.
type block struct {
	ledger.ScannedBlock
	Txs []blockTx
}

type rpcBlock struct {
	Number     hexutil.Uint64 `json:"number"`
	Hash       common.Hash    `json:"hash"`
	ParentHash common.Hash    `json:"parentHash"`
	// Transactions are objects when asked for in full, hashes otherwise.
	Transactions json.RawMessage `json:"transactions"`
}

type blockTx struct {
	Hash  common.Hash     `json:"hash"`
	From  common.Address  `json:"from"`
	To    *common.Address `json:"to"`
	Value *hexutil.Big    `json:"value"`
}

// rpcBatch bounds the calls of one JSON-RPC batch: providers refuse
// larger ones (100 is a common limit).
const rpcBatch = 100

// batchCall runs calls in batches, failing on the first error of any.
func batchCall(ctx context.Context, client *rpc.Client, calls []rpc.BatchElem) error {
	for len(calls) > 0 {
		part := calls[:min(len(calls), rpcBatch)]
		calls = calls[len(part):]
		if err := client.BatchCallContext(ctx, part); err != nil {
			return errs.Wrap(errs.Unavailable, "chain batch call", err)
		}
		for _, c := range part {
			if c.Error != nil {
				return errs.Wrap(errs.Unavailable, fmt.Sprintf("%s %v", c.Method, c.Args), c.Error)
			}
		}
	}
	return nil
}

// CheckChain checks that client serves chain chainID (eth_chainId): an
// ErrWrongChain error when it answers another, errs.Unavailable when it
// cannot be asked.
func CheckChain(ctx context.Context, client *rpc.Client, chainID uint64) error {
	var id hexutil.Big
	if err := client.CallContext(ctx, &id, "eth_chainId"); err != nil {
		return errs.Wrap(errs.Unavailable, "eth_chainId", err)
	}
	if !id.ToInt().IsUint64() || id.ToInt().Uint64() != chainID {
		return fmt.Errorf("chain %d: the endpoint answers chain id %s: %w", chainID, id.ToInt(), ErrWrongChain)
	}
	return nil
}

// head is the number of the chain's newest block.
func head(ctx context.Context, client *rpc.Client) (uint64, error) {
	var n hexutil.Uint64
	if err := client.CallContext(ctx, &n, "eth_blockNumber"); err != nil {
		return 0, errs.Wrap(errs.Unavailable, "eth_blockNumber", err)
	}
	return uint64(n), nil
}

// blocksFrom reads the canonical blocks from number on, up to count of
// them, stopping short at the first one the node does not have. With full,
// their transactions too.
func blocksFrom(ctx context.Context, client *rpc.Client, from uint64, count int, full bool) ([]block, error) {
	got := make([]*rpcBlock, count)
	calls := make([]rpc.BatchElem, count)
	for i := range calls {
		calls[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(from + uint64(i)), full}, Result: &got[i]}
	}
	if err := batchCall(ctx, client, calls); err != nil {
		return nil, err
	}
	out := make([]block, 0, count)
	for i, b := range got {
		if b == nil {
			break
		}
		if uint64(b.Number) != from+uint64(i) {
			return nil, fmt.Errorf("asked for block %d, the node answered block %d", from+uint64(i), b.Number)
		}
		blk := block{ScannedBlock: ledger.ScannedBlock{Number: uint64(b.Number), Hash: b.Hash, Parent: b.ParentHash}}
		if full {
			if err := json.Unmarshal(b.Transactions, &blk.Txs); err != nil {
				return nil, fmt.Errorf("transactions of block %d: %w", b.Number, err)
			}
		}
		out = append(out, blk)
	}
	return out, nil
}

// hashesAt reads the canonical hash at each of numbers; a zero hash where
// the chain has no block.
func hashesAt(ctx context.Context, client *rpc.Client, numbers []uint64) ([]common.Hash, error) {
	got := make([]*rpcBlock, len(numbers))
	calls := make([]rpc.BatchElem, len(numbers))
	for i, n := range numbers {
		calls[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(n), false}, Result: &got[i]}
	}
	if err := batchCall(ctx, client, calls); err != nil {
		return nil, err
	}
	out := make([]common.Hash, len(numbers))
	for i, b := range got {
		if b != nil {
			out[i] = b.Hash
		}
	}
	return out, nil
}

// pinned names block hash in a call, refused by the node unless that block
// is on its chain (EIP-1898).
func pinned(hash common.Hash) rpc.BlockNumberOrHash { return rpc.BlockNumberOrHashWithHash(hash, true) }

// rpcReceipt is the part of a receipt the scanner reads.
type rpcReceipt struct {
	TxHash    common.Hash    `json:"transactionHash"`
	BlockHash common.Hash    `json:"blockHash"`
	Status    hexutil.Uint64 `json:"status"`
}

// succeeded reports which of txs, all in block b, succeeded: from
// eth_getBlockReceipts, or where the node lacks it, from each one's
// receipt.
func succeeded(ctx context.Context, client *rpc.Client, b *block, txs []common.Hash) (map[common.Hash]bool, error) {
	var receipts []*rpcReceipt
	err := client.CallContext(ctx, &receipts, "eth_getBlockReceipts", b.Hash)
	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) && rpcErr.ErrorCode() == -32601 { // method not found
		receipts = make([]*rpcReceipt, len(txs))
		calls := make([]rpc.BatchElem, len(txs))
		for i, h := range txs {
			calls[i] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{h}, Result: &receipts[i]}
		}
		err = batchCall(ctx, client, calls)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, fmt.Sprintf("receipts of block %d (%s)", b.Number, b.Hash), err)
	}
	out := map[common.Hash]bool{}
	for _, r := range receipts {
		if r == nil || r.BlockHash != b.Hash {
			return nil, errs.Errorf(errs.Conflict, "the node has no receipts of block %d (%s): it left the chain", b.Number, b.Hash)
		}
		out[r.TxHash] = r.Status == hexutil.Uint64(types.ReceiptStatusSuccessful)
	}
	return out, nil
}

// logCalls says how eth_getLogs asks for a block's Transfer logs to
// wallets: their topics as an OR-list, perCall at a time; a wallet set
// needing more than maxCalls calls reads every Transfer log of the block
// in one call instead, and leaves out the others itself.
type logCalls struct{ perCall, maxCalls int }

var defaultLogCalls = logCalls{perCall: 500, maxCalls: 8}

// transferLogs reads block b's Transfer logs to wallets: the candidate
// ERC-20 deposits. Only successful transactions leave logs: a reverted
// call's are discarded with its state, and its receipt has none.
func transferLogs(ctx context.Context, client *rpc.Client, b *block, wallets []common.Address, lc logCalls) ([]types.Log, error) {
	if len(wallets) == 0 {
		return nil, nil
	}
	var filters [][]common.Hash
	if (len(wallets)+lc.perCall-1)/lc.perCall <= lc.maxCalls {
		for part := range slices.Chunk(wallets, lc.perCall) {
			topics := make([]common.Hash, len(part))
			for i, w := range part {
				topics[i] = common.BytesToHash(w.Bytes())
			}
			filters = append(filters, topics)
		}
	} else {
		filters = [][]common.Hash{nil} // any recipient
	}
	got := make([][]types.Log, len(filters))
	calls := make([]rpc.BatchElem, len(filters))
	for i, to := range filters {
		topics := []any{[]common.Hash{booking.TransferTopic}, nil}
		if to != nil {
			topics = append(topics, to)
		}
		calls[i] = rpc.BatchElem{Method: "eth_getLogs", Args: []any{map[string]any{"blockHash": b.Hash, "topics": topics}}, Result: &got[i]}
	}
	if err := batchCall(ctx, client, calls); err != nil {
		return nil, fmt.Errorf("transfer logs of block %d (%s): %w", b.Number, b.Hash, err)
	}
	var out []types.Log
	for _, logs := range got {
		for _, l := range logs {
			if l.BlockHash != b.Hash {
				return nil, errs.Errorf(errs.Conflict, "asked for the logs of block %s, the node answered with a log of block %s", b.Hash, l.BlockHash)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// balanceOf is the selector of ERC-20 balanceOf(address).
var balanceOf = common.FromHex("0x70a08231")

// balancesAt reads each wallet's native balance and each token's
// balanceOf at block hash: by wallet, by asset. A token without code
// there holds nothing.
func balancesAt(ctx context.Context, client *rpc.Client, wallets []common.Address, tokens []common.Address, hash common.Hash) (map[common.Address]map[string]*big.Int, error) {
	type read struct {
		wallet common.Address
		asset  string
		native hexutil.Big
		call   hexutil.Bytes
	}
	reads := make([]*read, 0, len(wallets)*(1+len(tokens)))
	calls := make([]rpc.BatchElem, 0, cap(reads))
	for _, w := range wallets {
		r := &read{wallet: w, asset: ledger.Native}
		reads = append(reads, r)
		calls = append(calls, rpc.BatchElem{Method: "eth_getBalance", Args: []any{w, pinned(hash)}, Result: &r.native})
		for _, t := range tokens {
			r := &read{wallet: w, asset: strings.ToLower(t.Hex())}
			reads = append(reads, r)
			data := append(append([]byte{}, balanceOf...), common.LeftPadBytes(w.Bytes(), 32)...)
			calls = append(calls, rpc.BatchElem{Method: "eth_call", Args: []any{map[string]any{"to": t, "data": hexutil.Bytes(data)}, pinned(hash)}, Result: &r.call})
		}
	}
	if err := batchCall(ctx, client, calls); err != nil {
		return nil, fmt.Errorf("balances at block %s: %w", hash, err)
	}
	out := make(map[common.Address]map[string]*big.Int, len(wallets))
	for _, r := range reads {
		if out[r.wallet] == nil {
			out[r.wallet] = map[string]*big.Int{}
		}
		switch {
		case r.asset == ledger.Native:
			out[r.wallet][r.asset] = r.native.ToInt()
		case len(r.call) == 0:
			out[r.wallet][r.asset] = new(big.Int)
		case len(r.call) == 32:
			out[r.wallet][r.asset] = new(big.Int).SetBytes(r.call)
		default:
			return nil, fmt.Errorf("balanceOf(%s) of token %s at block %s: %d bytes, not a uint256", r.wallet, r.asset, hash, len(r.call))
		}
	}
	return out, nil
}
