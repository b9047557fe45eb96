// Package mevrouter broadcasts signed transactions: publicly to every
// configured RPC endpoint at once, privately through relays and builders
// that keep them out of the public mempool (MEV protection), or by the auto
// route, which sends privately what a sandwich bot could exploit. Node and
// relay refusals are classified (package nodeerr) so that txmanager acts
// on a category, not on one client's wording. Nothing is durable: private
// sends are watched in memory.
//
// This package is the routing domain only: the Router decides and
// dispatches, and reaches the world through the small interfaces below.
// The public fan-out is package public, the private relays and their
// inclusion watcher package relay, the Prometheus metrics package metrics.
package mevrouter

import (
	"context"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/shared/errs"
)

// MaxBatch bounds the transactions of one broadcast.
const MaxBatch = 256

// Router is the broadcaster of one chain.
type Router struct {
	ChainID *big.Int
	Public  PublicRoute
	// Private is nil when no relay is configured: private and auto
	// requests that resolve to private are then refused.
	Private PrivateRoute
	Auto    *AutoRule
	Metrics BroadcastCounter
}

// PublicRoute sends transactions to public mempools (package public).
type PublicRoute interface {
	// Send sends the raw transactions, whose hashes are given, and answers
	// for each one.
	Send(ctx context.Context, raws [][]byte, hashes []common.Hash) []Sent
}

// PrivateRoute sends transactions through private relays, never to a
// public mempool, and follows them until inclusion or expiry (package
// relay).
type PrivateRoute interface {
	// Prepare checks a request before anything is sent and resolves it:
	// the relays it names exist (none named means all), and its max block
	// lies ahead (zero means the route's default distance from the
	// current block).
	Prepare(ctx context.Context, req PrivateRequest) (PrivateRequest, error)
	// Send sends the transactions as a prepared request says.
	Send(ctx context.Context, raws [][]byte, hashes []common.Hash, req PrivateRequest) []Sent
	// Status reports a send this process made.
	Status(hash common.Hash) (Status, bool)
	// Cancel asks the relays to drop a pending send.
	Cancel(ctx context.Context, hash common.Hash) (Status, error)
}

// BroadcastCounter counts broadcast transactions by the route taken and
// the result: accepted, or the error category of the answer.
type BroadcastCounter interface {
	Broadcast(route Route, result string)
}

// Request is one broadcast: transactions and how to send them.
type Request struct {
	Raw     [][]byte
	Route   Route
	Private PrivateRequest
}

// Result is the answer for one transaction.
type Result struct {
	Sent
	Route    Route // public or private, as taken
	Reason   string
	MaxBlock uint64 // private sends
}

// Broadcast checks every transaction, resolves each one's route, and sends
// them, the public ones in one fan-out and the private ones to the relays.
// A malformed batch is refused whole (errs.Invalid) before anything is sent.
func (r *Router) Broadcast(ctx context.Context, req Request) ([]Result, error) {
	txs, err := decode(req.Raw)
	if err != nil {
		return nil, err
	}
	return r.broadcast(ctx, req, txs)
}

// broadcast is Broadcast once the transactions are decoded.
func (r *Router) broadcast(ctx context.Context, req Request, txs []*types.Transaction) ([]Result, error) {
	if err := r.check(txs); err != nil {
		return nil, err
	}
	if req.Route == "" {
		req.Route = RoutePublic
	}
	results := make([]Result, len(txs))
	var public, private []int
	for i, tx := range txs {
		route, reason := r.Auto.Decide(req.Route, tx)
		results[i] = Result{Sent: Sent{Hash: tx.Hash()}, Route: route, Reason: reason}
		if route == RoutePrivate {
			private = append(private, i)
		} else {
			public = append(public, i)
		}
	}
	var prepared PrivateRequest
	if len(private) > 0 {
		if r.Private == nil {
			return nil, errs.Errorf(errs.Invalid, "%d transaction(s) need the private route but no private relay is configured (%s)", len(private), results[private[0]].Reason)
		}
		var err error
		if prepared, err = r.Private.Prepare(ctx, req.Private); err != nil {
			return nil, err
		}
	}
	if len(public) > 0 {
		sent := r.Public.Send(ctx, pick(req.Raw, public), pickHashes(results, public))
		for j, i := range public {
			results[i].Sent = sent[j]
		}
	}
	if len(private) > 0 {
		sent := r.Private.Send(ctx, pick(req.Raw, private), pickHashes(results, private), prepared)
		for j, i := range private {
			results[i].Sent, results[i].MaxBlock = sent[j], prepared.MaxBlock
		}
	}
	for _, res := range results {
		outcome := "accepted"
		if !res.Accepted {
			outcome = string(res.Err.Category)
		}
		r.Metrics.Broadcast(res.Route, outcome)
	}
	return results, nil
}

// decode parses every raw transaction and checks what needs no chain:
// well-formed, replay-protected, no duplicates, not too many.
func decode(raws [][]byte) ([]*types.Transaction, error) {
	if len(raws) == 0 {
		return nil, errs.E(errs.Invalid, "no transactions to broadcast")
	}
	if len(raws) > MaxBatch {
		return nil, errs.Errorf(errs.Invalid, "%d transactions in one broadcast; at most %d", len(raws), MaxBatch)
	}
	txs := make([]*types.Transaction, len(raws))
	seen := map[common.Hash]int{}
	for i, raw := range raws {
		tx := new(types.Transaction)
		if err := tx.UnmarshalBinary(raw); err != nil {
			return nil, errs.Errorf(errs.Invalid, "transactions[%d]: not a signed transaction (EIP-2718 binary): %v", i, err)
		}
		if !tx.Protected() {
			return nil, errs.Errorf(errs.Invalid, "transactions[%d]: a legacy transaction without EIP-155 replay protection is refused: it would be valid on every chain", i)
		}
		if j, dup := seen[tx.Hash()]; dup {
			return nil, errs.Errorf(errs.Invalid, "transactions[%d] is transactions[%d] again (%s)", i, j, tx.Hash().Hex())
		}
		seen[tx.Hash()] = i
		txs[i] = tx
	}
	return txs, nil
}

// check checks the decoded transactions against the router's chain: of
// our chain, with a recoverable sender.
func (r *Router) check(txs []*types.Transaction) error {
	signer := types.LatestSignerForChainID(r.ChainID)
	for i, tx := range txs {
		if tx.ChainId().Cmp(r.ChainID) != 0 {
			return errs.Errorf(errs.Invalid, "transactions[%d]: chain id %s, but this mevrouterd broadcasts on chain %s", i, tx.ChainId(), r.ChainID)
		}
		if _, err := types.Sender(signer, tx); err != nil {
			return errs.Errorf(errs.Invalid, "transactions[%d]: the sender cannot be recovered: %v", i, err)
		}
	}
	return nil
}

func pick(raws [][]byte, idx []int) [][]byte {
	out := make([][]byte, len(idx))
	for j, i := range idx {
		out[j] = raws[i]
	}
	return out
}

func pickHashes(results []Result, idx []int) []common.Hash {
	out := make([]common.Hash, len(idx))
	for j, i := range idx {
		out[j] = results[i].Hash
	}
	return out
}
