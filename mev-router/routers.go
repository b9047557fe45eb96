package mevrouter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/shared/errs"
)

// Routers are the routers of every chain one mevrouterd serves, one per
// chain id. A broadcast goes to the router of its transactions' chain; a
// private send is found in whichever chain's router made it.
type Routers struct {
	byChain map[uint64]*Router
	ids     []uint64 // sorted, for messages
}

// NewRouters gathers the routers, refusing two of one chain.
func NewRouters(routers ...*Router) (*Routers, error) {
	rs := &Routers{byChain: map[uint64]*Router{}}
	for _, r := range routers {
		if r.ChainID == nil || !r.ChainID.IsUint64() || r.ChainID.Sign() == 0 {
			return nil, fmt.Errorf("a router has chain id %v: want a positive 64-bit chain id", r.ChainID)
		}
		id := r.ChainID.Uint64()
		if _, dup := rs.byChain[id]; dup {
			return nil, fmt.Errorf("two routers for chain %d", id)
		}
		rs.byChain[id] = r
	}
	if len(rs.byChain) == 0 {
		return nil, errors.New("no router: at least one chain is needed")
	}
	rs.ids = slices.Sorted(maps.Keys(rs.byChain))
	return rs, nil
}

// ChainIDs lists the chains served, in increasing order.
func (rs *Routers) ChainIDs() []uint64 { return slices.Clone(rs.ids) }

// Router is the router of chainID.
func (rs *Routers) Router(chainID uint64) (*Router, bool) {
	r, ok := rs.byChain[chainID]
	return r, ok
}

// Broadcast sends the request through the router of its transactions'
// chain. All transactions of one request must be of one chain: a mix is
// refused (errs.Invalid) naming which transactions are of which chain, and
// so is a chain this mevrouterd does not serve.
func (rs *Routers) Broadcast(ctx context.Context, req Request) ([]Result, error) {
	txs, err := decode(req.Raw)
	if err != nil {
		return nil, err
	}
	byChain := map[uint64][]int{}
	for i, tx := range txs {
		id := tx.ChainId()
		if !id.IsUint64() {
			return nil, errs.Errorf(errs.Invalid, "transactions[%d]: chain id %s, but this mevrouterd broadcasts on %s", i, id, rs.served())
		}
		byChain[id.Uint64()] = append(byChain[id.Uint64()], i)
	}
	if len(byChain) > 1 {
		var parts []string
		for _, id := range slices.Sorted(maps.Keys(byChain)) {
			parts = append(parts, fmt.Sprintf("chain %d: transactions%s", id, indexes(byChain[id])))
		}
		return nil, errs.Errorf(errs.Invalid, "the transactions are of %d chains (%s): one broadcast carries the transactions of one chain", len(byChain), strings.Join(parts, "; "))
	}
	id := txs[0].ChainId().Uint64()
	r, ok := rs.byChain[id]
	if !ok {
		return nil, errs.Errorf(errs.Invalid, "transactions[0]: chain id %d, but this mevrouterd broadcasts on %s", id, rs.served())
	}
	return r.broadcast(ctx, req, txs)
}

// served names the chains served: "chain 1", "chains 1, 10".
func (rs *Routers) served() string {
	ids := make([]string, len(rs.ids))
	for i, id := range rs.ids {
		ids[i] = fmt.Sprint(id)
	}
	if len(ids) == 1 {
		return "chain " + ids[0]
	}
	return "chains " + strings.Join(ids, ", ")
}

// indexes writes [0,2,5].
func indexes(idx []int) string {
	parts := make([]string, len(idx))
	for i, n := range idx {
		parts[i] = fmt.Sprint(n)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// HasPrivate reports whether any chain has a private route.
func (rs *Routers) HasPrivate() bool {
	for _, r := range rs.byChain {
		if r.Private != nil {
			return true
		}
	}
	return false
}

// PrivateStatus finds a private send in whichever chain's router made it.
func (rs *Routers) PrivateStatus(hash common.Hash) (Status, bool) {
	if r := rs.privateOf(hash); r != nil {
		return r.Private.Status(hash)
	}
	return Status{}, false
}

// CancelPrivate cancels a private send in whichever chain's router made it.
func (rs *Routers) CancelPrivate(ctx context.Context, hash common.Hash) (Status, error) {
	r := rs.privateOf(hash)
	if r == nil {
		return Status{}, errs.Errorf(errs.NotFound, "no private send of %s by this mevrouterd", hash.Hex())
	}
	return r.Private.Cancel(ctx, hash)
}

// privateOf is the router whose private route made the send of hash, or
// nil. A transaction hash covers its chain id, so one chain at most has it.
func (rs *Routers) privateOf(hash common.Hash) *Router {
	for _, id := range rs.ids {
		r := rs.byChain[id]
		if r.Private == nil {
			continue
		}
		if _, ok := r.Private.Status(hash); ok {
			return r
		}
	}
	return nil
}
