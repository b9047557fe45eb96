// Package chain is what txmanager's per-signer worker asks of a chain's
// read RPC before it allocates a nonce: does the transaction succeed
// (Simulate), what gas limit and fees to sign with (Simulate, Fees), can
// the signer pay for it (Balance, Cost) and where its nonces stand
// (PendingNonce, MinedNonce).
//
// The one rule every method keeps: an answer about the transaction is a
// value, a failure to get an answer is an error. A revert is an answer
// (Simulation.Reverted), so the worker fails the transaction without
// consuming a nonce; a timeout, a 5xx or a node's internal error is an
// error, so the worker retries later and never fails a transaction
// because a node was flaky. The one error with a meaning of its own is
// ErrInsufficientFunds: the signer cannot pay the value now, which the
// worker holds (sub-state insufficient_funds) instead of failing.
package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"sync/atomic"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/shared/rpcpool/rpchttp"
	"github.com/txfence/txfence/txmanager"
)

// Reader reads one chain through the chain's provider pool (package
// rpcpool): each call goes to a healthy endpoint within its budget, and a
// read whose "not found" would mean something goes only to an endpoint
// at the head it needs. It is safe for concurrent use by every signer
// worker of the chain.
type Reader struct {
	chainID uint64
	pooled  *rpchttp.Pooled
	rpc     *rpc.Client
	eth     *ethclient.Client

	// latestOnly is set once the node has refused the "pending" block tag
	// and answered at "latest": some providers and older clients have no
	// pending state, and asking twice per call forever would double the
	// RPC cost of every simulation.
	latestOnly atomic.Bool
}

// Dial opens chain's pool (chain.RPC) and probes every endpoint: an
// endpoint on another chain is left out (it would simulate against
// someone else's state and report nonces that mean nothing here), and
// Dial fails when every endpoint is on another chain. An endpoint down
// at the start joins once a probe finds it up on the right chain. log, when set, is told
// when an endpoint leaves or rejoins the pool.
func Dial(ctx context.Context, chain txmanager.Chain, log *slog.Logger) (*Reader, error) {
	if len(chain.RPC) == 0 {
		return nil, fmt.Errorf("dial chain %d: no RPC endpoint configured", chain.ID)
	}
	pooled, err := rpchttp.Open(ctx, chain.ID, chain.RPC, rpchttp.Config{
		Pool:    rpcpool.Options{MaxLag: chain.RPCPool.MaxLag, Cooldown: chain.RPCPool.Cooldown.Duration},
		Timeout: chain.RPCPool.Timeout.Duration, ProbeEvery: chain.RPCPool.ProbeEvery.Duration, Log: log,
	})
	if err != nil {
		return nil, fmt.Errorf("dial chain %d: %w", chain.ID, err)
	}
	if err := pooled.AnotherChain(); err != nil {
		pooled.Close()
		return nil, fmt.Errorf("dial chain %d: %w", chain.ID, err)
	}
	c, err := rpc.DialOptions(ctx, rpchttp.PoolURL, rpc.WithHTTPClient(pooled.HTTPClient()))
	if err != nil {
		pooled.Close()
		return nil, fmt.Errorf("dial chain %d: %w", chain.ID, err)
	}
	return &Reader{chainID: chain.ID, pooled: pooled, rpc: c, eth: ethclient.NewClient(c)}, nil
}

// RPC is the reader's connection through the pool, shared with the chain
// follower.
func (r *Reader) RPC() *rpc.Client { return r.rpc }

// Pool is the chain's provider pool, for metrics and for calls pinned to
// a head (rpcpool.AtHead) or to an endpoint (rpcpool.On).
func (r *Reader) Pool() *rpcpool.Pool { return r.pooled.Pool }

// Close closes the connection and stops the pool's health probes. Calls
// in flight fail.
func (r *Reader) Close() {
	r.rpc.Close()
	r.pooled.Close()
}

// atBestHead asks that ctx's calls go to an endpoint at the best head any
// endpoint reported: for a read whose "not found" is taken as "not
// mined", which a lagging endpoint must never answer.
func (r *Reader) atBestHead(ctx context.Context) context.Context {
	return rpcpool.AtHead(ctx, r.pooled.Pool.BestHead())
}

// ChainID is the chain the reader serves, checked at Dial.
func (r *Reader) ChainID() uint64 { return r.chainID }

// Balance is addr's balance in wei in the pending state (what the node's
// pool has already spent included), or at the latest block on a node
// without a pending state.
func (r *Reader) Balance(ctx context.Context, addr common.Address) (*big.Int, error) {
	var bal *big.Int
	err := r.withState(func(tag *big.Int) (err error) {
		bal, err = r.eth.BalanceAt(ctx, addr, tag)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("balance of %s on chain %d: %w", addr.Hex(), r.chainID, err)
	}
	return bal, nil
}

// PendingNonce is the next nonce of addr counting the node's pool
// (eth_getTransactionCount at "pending"). There is no fallback to
// "latest" here: that would be the mined nonce under another name, and
// nonce allocation must know which one it was given.
func (r *Reader) PendingNonce(ctx context.Context, addr common.Address) (uint64, error) {
	n, err := r.eth.PendingNonceAt(ctx, addr)
	if err != nil {
		return 0, fmt.Errorf("pending nonce of %s on chain %d: %w", addr.Hex(), r.chainID, err)
	}
	return n, nil
}

// MinedNonce is the next nonce of addr after the latest block: every
// nonce below it is consumed on the canonical chain as the node sees it
// now (eth_getTransactionCount at "latest").
func (r *Reader) MinedNonce(ctx context.Context, addr common.Address) (uint64, error) {
	n, err := r.eth.NonceAt(ctx, addr, nil)
	if err != nil {
		return 0, fmt.Errorf("mined nonce of %s on chain %d: %w", addr.Hex(), r.chainID, err)
	}
	return n, nil
}

// Funds is what a signer has at one mined block: its balance and its
// next nonce, read at the same block so that one explains the other.
type Funds struct {
	Block   uint64
	Balance *big.Int
	// MinedNonce is the next nonce after that block: every transaction of
	// the signer below it is paid for in Balance.
	MinedNonce uint64
}

// MinedFunds reads addr's balance and mined nonce at the latest block,
// both pinned to that block's hash (EIP-1898) on an endpoint at its
// height, so that the three answers describe one block even when they
// come from different endpoints.
func (r *Reader) MinedFunds(ctx context.Context, addr common.Address) (Funds, error) {
	var f Funds
	head, err := r.eth.HeaderByNumber(ctx, nil)
	if err != nil {
		return f, fmt.Errorf("funds of %s on chain %d: latest block: %w", addr.Hex(), r.chainID, err)
	}
	f.Block = head.Number.Uint64()
	ctx = rpcpool.AtHead(ctx, f.Block)
	if f.Balance, err = r.eth.BalanceAtHash(ctx, addr, head.Hash()); err != nil {
		return f, fmt.Errorf("funds of %s on chain %d: %w", addr.Hex(), r.chainID, err)
	}
	if f.MinedNonce, err = r.eth.NonceAtHash(ctx, addr, head.Hash()); err != nil {
		return f, fmt.Errorf("funds of %s on chain %d: %w", addr.Hex(), r.chainID, err)
	}
	return f, nil
}

// Mined tells whether the chain has a receipt for the transaction hash
// (in its canonical chain, at any depth), asked of an endpoint at the
// best head seen: "not found" from one behind it would be a lie.
func (r *Reader) Mined(ctx context.Context, hash common.Hash) (bool, error) {
	_, err := r.eth.TransactionReceipt(r.atBestHead(ctx), hash)
	switch {
	case errors.Is(err, ethereum.NotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("receipt of %s on chain %d: %w", hash.Hex(), r.chainID, err)
	}
	return true, nil
}

// checkChain refuses an intent for another chain: simulated or priced
// here, it would be judged by the wrong chain's state and market. That is
// a routing bug, not a node failure.
func (r *Reader) checkChain(in *txmanager.Intent) error {
	if in.ChainID != r.chainID {
		return fmt.Errorf("intent for chain %d given to the reader of chain %d", in.ChainID, r.chainID)
	}
	return nil
}

// pending is ethclient's spelling of the "pending" block tag; nil is
// "latest".
var pending = big.NewInt(int64(rpc.PendingBlockNumber))

// withState runs read at the pending state, or at the latest block if
// the node refuses the pending tag; it remembers a refusal once "latest"
// has worked, so later reads go straight there. read may run twice.
func (r *Reader) withState(read func(tag *big.Int) error) error {
	if r.latestOnly.Load() {
		return read(nil)
	}
	err := read(pending)
	if !refusesPending(err) {
		return err
	}
	latestErr := read(nil)
	if latestErr != nil && classify(latestErr).kind == nodeFailure {
		// The refusal was about something else, or the node is failing:
		// do not give up on pending for good.
		return fmt.Errorf("%w (at pending: %v)", latestErr, err)
	}
	r.latestOnly.Store(true)
	return latestErr
}

// refusesPending reports whether err is a node's refusal of the pending
// block tag: a JSON-RPC answer (not a transport failure, not an execution
// result) that names "pending" or says the parameters are invalid. geth,
// erigon, nethermind, besu, reth and anvil all serve pending; providers
// behind load balancers and some L2 nodes do not.
func refusesPending(err error) bool {
	if err == nil {
		return false
	}
	var re rpc.Error
	if !errors.As(err, &re) || classify(err).kind != nodeFailure {
		return false
	}
	return re.ErrorCode() == -32602 || containsFold(re.Error(), "pending")
}
