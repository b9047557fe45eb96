package follow

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/txmanager"
)

// RPC is a Source over a node's JSON-RPC: one eth_getBlockByNumber or
// eth_getBlockByHash (transaction hashes only) per block, and the blocks'
// receipts. Use it by pointer.
type RPC struct {
	Client *rpc.Client
	// Counted, when set, is told the method of every call made: the
	// follower's measure of RPC cost per block.
	Counted func(method string)
	// noBlockReceipts is set once the node refused eth_getBlockReceipts.
	noBlockReceipts atomic.Bool
}

// rpcBlock is the part of a block the follower decodes.
type rpcBlock struct {
	Number       hexutil.Uint64 `json:"number"`
	Hash         common.Hash    `json:"hash"`
	ParentHash   common.Hash    `json:"parentHash"`
	Timestamp    hexutil.Uint64 `json:"timestamp"`
	Transactions []common.Hash  `json:"transactions"`
}

// Latest implements Source.
func (s *RPC) Latest(ctx context.Context) (Block, error) {
	return s.call(ctx, "eth_getBlockByNumber", "latest")
}

// Finalized is the node's finalized block ("finalized" tag).
func (s *RPC) Finalized(ctx context.Context) (Block, error) {
	return s.call(ctx, "eth_getBlockByNumber", "finalized")
}

// ByHash implements Source.
func (s *RPC) ByHash(ctx context.Context, hash common.Hash) (Block, error) {
	return s.call(ctx, "eth_getBlockByHash", hash)
}

// errNoBlock: the node answered null.
var errNoBlock = errors.New("the node has no such block")

// callRPC makes one call, counted.
func (s *RPC) callRPC(ctx context.Context, result any, method string, args ...any) error {
	if s.Counted != nil {
		s.Counted(method)
	}
	return s.Client.CallContext(ctx, result, method, args...)
}

func (s *RPC) call(ctx context.Context, method string, arg any) (Block, error) {
	var raw *rpcBlock
	if err := s.callRPC(ctx, &raw, method, arg, false); err != nil {
		return Block{}, fmt.Errorf("%s %v: %w", method, arg, err)
	}
	if raw == nil {
		return Block{}, fmt.Errorf("%s %v: %w", method, arg, errNoBlock)
	}
	return Block{Number: uint64(raw.Number), Hash: raw.Hash, Parent: raw.ParentHash, Time: uint64(raw.Timestamp), Txs: raw.Transactions}, nil
}

// Receipt is the part of a receipt the follower needs.
type Receipt struct {
	TxHash            common.Hash
	BlockHash         common.Hash
	BlockNumber       uint64
	Status            uint8
	GasUsed           uint64
	EffectiveGasPrice *big.Int
}

// stored is the receipt as the store keeps it, for our attempt number.
func (r Receipt) stored(attempt int) txmanager.Receipt {
	return txmanager.Receipt{Attempt: attempt, Hash: r.TxHash, BlockNumber: r.BlockNumber, BlockHash: r.BlockHash,
		Status: r.Status, GasUsed: r.GasUsed, EffectiveGasPrice: r.EffectiveGasPrice}
}

type rpcReceipt struct {
	TransactionHash   common.Hash    `json:"transactionHash"`
	BlockHash         common.Hash    `json:"blockHash"`
	BlockNumber       hexutil.Uint64 `json:"blockNumber"`
	Status            hexutil.Uint64 `json:"status"`
	GasUsed           hexutil.Uint64 `json:"gasUsed"`
	EffectiveGasPrice *hexutil.Big   `json:"effectiveGasPrice"`
}

func (r *rpcReceipt) receipt() Receipt {
	return Receipt{TxHash: r.TransactionHash, BlockHash: r.BlockHash, BlockNumber: uint64(r.BlockNumber), Status: uint8(r.Status),
		GasUsed: uint64(r.GasUsed), EffectiveGasPrice: (*big.Int)(r.EffectiveGasPrice)}
}

// BlockReceipts returns the receipts of hashes, transactions of the block
// blockHash: one eth_getBlockReceipts for the whole block, or, on a node
// without it (remembered), eth_getTransactionReceipt per hash, batched. A
// receipt from another block than blockHash (the chain moved meanwhile)
// is left out.
func (s *RPC) BlockReceipts(ctx context.Context, blockHash common.Hash, hashes []common.Hash) ([]Receipt, error) {
	if !s.noBlockReceipts.Load() {
		var all []*rpcReceipt
		err := s.callRPC(ctx, &all, "eth_getBlockReceipts", blockHash)
		if err == nil {
			want := make(map[common.Hash]bool, len(hashes))
			for _, h := range hashes {
				want[h] = true
			}
			var out []Receipt
			for _, r := range all {
				if r != nil && want[r.TransactionHash] && r.BlockHash == blockHash {
					out = append(out, r.receipt())
				}
			}
			return out, nil
		}
		var rpcErr rpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.ErrorCode() != -32601 { // not "method not found"
			return nil, fmt.Errorf("eth_getBlockReceipts %s: %w", blockHash.Hex(), err)
		}
		s.noBlockReceipts.Store(true)
	}
	byHash, err := s.TransactionReceipts(ctx, hashes)
	if err != nil {
		return nil, err
	}
	var out []Receipt
	for _, h := range hashes {
		if r, ok := byHash[h]; ok && r.BlockHash == blockHash {
			out = append(out, r)
		}
	}
	return out, nil
}

// NonceAt is addr's nonce after block number (eth_getTransactionCount):
// every nonce below it is consumed on the chain up to that block.
func (s *RPC) NonceAt(ctx context.Context, addr common.Address, block uint64) (uint64, error) {
	var n hexutil.Uint64
	if err := s.callRPC(ctx, &n, "eth_getTransactionCount", addr, hexutil.Uint64(block)); err != nil {
		return 0, fmt.Errorf("eth_getTransactionCount %s at %d: %w", addr.Hex(), block, err)
	}
	return uint64(n), nil
}

// TransactionReceipts asks for the receipts of hashes in batches of 256
// calls per request; a hash the node has no receipt for is absent from
// the answer.
func (s *RPC) TransactionReceipts(ctx context.Context, hashes []common.Hash) (map[common.Hash]Receipt, error) {
	out := make(map[common.Hash]Receipt, len(hashes))
	for start := 0; start < len(hashes); start += 256 {
		chunk := hashes[start:min(start+256, len(hashes))]
		results := make([]*rpcReceipt, len(chunk))
		elems := make([]rpc.BatchElem, len(chunk))
		for i, h := range chunk {
			elems[i] = rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{h}, Result: &results[i]}
			if s.Counted != nil {
				s.Counted("eth_getTransactionReceipt")
			}
		}
		if err := s.Client.BatchCallContext(ctx, elems); err != nil {
			return nil, fmt.Errorf("eth_getTransactionReceipt of %d transactions: %w", len(chunk), err)
		}
		for i, el := range elems {
			if el.Error != nil {
				return nil, fmt.Errorf("eth_getTransactionReceipt %s: %w", chunk[i].Hex(), el.Error)
			}
			if results[i] != nil {
				out[chunk[i]] = results[i].receipt()
			}
		}
	}
	return out, nil
}

// lookupBatch bounds the calls in one batched lookup request: geth's
// default batch limit (--rpc.batch-request-limit) is 1,000, and providers
// cap theirs near it. One request holds every recent send up to there.
const lookupBatch = 1000

// KnownTransactions asks the node whether it knows each of hashes
// (eth_getTransactionByHash: pooled or mined), in one batched request per
// lookupBatch hashes. The answer maps each hash the node answered for to
// whether it knows it; a hash the node gave an error for is absent: no
// answer, which is not "unknown". Each call in a batch is counted.
func (s *RPC) KnownTransactions(ctx context.Context, hashes []common.Hash) (map[common.Hash]bool, error) {
	out := make(map[common.Hash]bool, len(hashes))
	for start := 0; start < len(hashes); start += lookupBatch {
		chunk := hashes[start:min(start+lookupBatch, len(hashes))]
		// Only whether the answer is null matters: the hash is decoded,
		// not the whole transaction.
		results := make([]*struct {
			Hash common.Hash `json:"hash"`
		}, len(chunk))
		elems := make([]rpc.BatchElem, len(chunk))
		for i, h := range chunk {
			elems[i] = rpc.BatchElem{Method: "eth_getTransactionByHash", Args: []any{h}, Result: &results[i]}
			if s.Counted != nil {
				s.Counted("eth_getTransactionByHash")
			}
		}
		if err := s.Client.BatchCallContext(ctx, elems); err != nil {
			return nil, fmt.Errorf("eth_getTransactionByHash of %d transactions: %w", len(chunk), err)
		}
		for i, el := range elems {
			if el.Error == nil {
				out[chunk[i]] = results[i] != nil
			}
		}
	}
	return out, nil
}
