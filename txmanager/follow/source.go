package follow

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"
)

// RPC is a Source over a node's JSON-RPC: one eth_getBlockByNumber or
// eth_getBlockByHash (transaction hashes only) per block.
type RPC struct{ Client *rpc.Client }

// rpcBlock is the part of a block the follower decodes.
type rpcBlock struct {
	Number       hexutil.Uint64 `json:"number"`
	Hash         common.Hash    `json:"hash"`
	ParentHash   common.Hash    `json:"parentHash"`
	Timestamp    hexutil.Uint64 `json:"timestamp"`
	Transactions []common.Hash  `json:"transactions"`
}

// Latest implements Source.
func (s RPC) Latest(ctx context.Context) (Block, error) {
	return s.call(ctx, "eth_getBlockByNumber", "latest")
}

// ByHash implements Source.
func (s RPC) ByHash(ctx context.Context, hash common.Hash) (Block, error) {
	return s.call(ctx, "eth_getBlockByHash", hash)
}

// errNoBlock: the node answered null.
var errNoBlock = errors.New("the node has no such block")

func (s RPC) call(ctx context.Context, method string, arg any) (Block, error) {
	var raw *rpcBlock
	if err := s.Client.CallContext(ctx, &raw, method, arg, false); err != nil {
		return Block{}, fmt.Errorf("%s %v: %w", method, arg, err)
	}
	if raw == nil {
		return Block{}, fmt.Errorf("%s %v: %w", method, arg, errNoBlock)
	}
	return Block{Number: uint64(raw.Number), Hash: raw.Hash, Parent: raw.ParentHash, Time: uint64(raw.Timestamp), Txs: raw.Transactions}, nil
}
