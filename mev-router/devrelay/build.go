package devrelay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/mev-router/flashbots"
)

// BuildBlock "builds" the next block: orders whose last block is before it
// fail (FAILED), orders whose window has not begun wait, and every other
// held order is sent to the node, after which the node mines exactly one
// block with them and whatever public transactions it holds. An order is
// sent only if the block can hold all of it (the senders' next nonces, the
// next base fee), so a bundle is sent whole or not at all and nothing is
// left waiting in the node's pool; a transaction sent but still not mined
// (the block was full) is taken back out of the pool at once and stays
// held for the next block. It returns the block mined and the held
// transactions it included, whose receipts it checked.
//
// BuildBlock holds the relay's lock throughout, so requests wait for it;
// tests call it to mine deterministically, Run calls it on a timer.
func (r *Relay) BuildBlock(ctx context.Context) (uint64, []common.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	head, err := r.eth.BlockNumber(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("build block: head: %w", err)
	}
	next := head + 1
	now := uint64(r.now().Unix())

	// From the first send on, the node calls must finish even if ctx
	// ends: held transactions must not be left in the node's pool.
	nodeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeTimeout)
	defer cancel()

	var ready []*order
	for _, o := range slices.Clone(r.pending) {
		switch {
		case o.last < next:
			r.fail(o, fmt.Sprintf("not included by its last block %d", o.last))
		case o.maxTime != 0 && now > o.maxTime:
			r.fail(o, fmt.Sprintf("maxTimestamp %d passed", o.maxTime))
		case o.first > next, o.minTime != 0 && now < o.minTime:
			// its window has not begun
		default:
			ready = append(ready, o)
		}
	}
	sent, err := r.sendReady(nodeCtx, ready)
	if err != nil {
		return 0, nil, fmt.Errorf("build block %d: %w", next, err)
	}

	if err := r.rpc.CallContext(nodeCtx, nil, "evm_mine"); err != nil {
		for _, o := range sent {
			r.withdraw(nodeCtx, o.txs)
		}
		return 0, nil, fmt.Errorf("build block %d: evm_mine: %w", next, err)
	}
	mined, err := r.eth.BlockNumber(nodeCtx)
	if err != nil {
		// The block is mined; the receipts below still say what is in it.
		r.log.Error("head after mining", "err", err)
		mined = next
	}

	var included []common.Hash
	for _, o := range sent {
		var missing []*txRecord
		for _, rec := range o.txs {
			receipt, err := r.eth.TransactionReceipt(nodeCtx, rec.tx.Hash())
			switch {
			case err == nil:
				rec.state, rec.block = flashbots.StateIncluded, receipt.BlockNumber.Uint64()
				rec.reverted = receipt.Status == types.ReceiptStatusFailed
				rec.simError = ""
				included = append(included, rec.tx.Hash())
			case errors.Is(err, ethereum.NotFound):
				rec.simError = fmt.Sprintf("sent to the node but not mined in block %d", mined)
				missing = append(missing, rec)
			default:
				// Unknown: take it back out rather than leave it public.
				rec.simError = fmt.Sprintf("receipt: %v", err)
				missing = append(missing, rec)
			}
		}
		r.withdraw(nodeCtx, missing)
		switch {
		case len(missing) == 0:
			r.finish(o)
			r.log.Info("included", "kind", o.kind, "hash", o.hash, "block_number", mined, "txs", len(o.txs))
		case len(missing) < len(o.txs):
			// Part of a bundle was mined (the block filled up): what is
			// on chain cannot be taken back, and the rest cannot follow
			// on its own without breaking the bundle.
			for _, rec := range missing {
				rec.state = flashbots.StateFailed
				rec.simError = "bundle split: the rest of the bundle was mined without it"
			}
			r.finish(o)
			r.log.Error("bundle split across blocks", "hash", o.hash, "block_number", mined, "missing", len(missing))
		default:
			r.log.Info("sent but not mined; taken back out of the node's pool", "kind", o.kind, "hash", o.hash, "block_number", mined)
		}
	}
	return mined, included, nil
}

// sendReady sends the orders that the next block can hold in full. The
// node's pool would take a transaction with a nonce gap or a fee cap below
// the base fee and simply not mine it, which would leave a private
// transaction public and split a bundle; so each order is checked first
// against the senders' next nonces and the next base fee, and passes are
// repeated while they make progress, so orders that arrived out of nonce
// order still go into one block.
func (r *Relay) sendReady(ctx context.Context, ready []*order) ([]*order, error) {
	if len(ready) == 0 {
		return nil, nil
	}
	history, err := r.eth.FeeHistory(ctx, 1, nil, []float64{}) // anvil refuses null percentiles
	if err != nil {
		return nil, fmt.Errorf("next base fee: %w", err)
	}
	var baseFee *big.Int // eth_feeHistory's last base fee is the next block's
	if n := len(history.BaseFee); n > 0 {
		baseFee = history.BaseFee[n-1]
	}
	nonces := map[common.Address]uint64{} // next nonce per sender, this block
	var sent []*order
	for progress := true; progress; {
		progress = false
		var waiting []*order
		for _, o := range ready {
			claimed, why, err := r.fits(ctx, o, nonces, baseFee)
			if err != nil {
				for _, s := range sent {
					r.withdraw(ctx, s.txs)
				}
				return nil, err
			}
			if why != "" {
				for _, rec := range o.txs {
					rec.simError = why
				}
				waiting = append(waiting, o)
				continue
			}
			if err := r.submit(ctx, o); err != nil {
				r.log.Info("node refused held order; kept for the next block", "kind", o.kind, "hash", o.hash, "err", err)
				continue
			}
			maps.Copy(nonces, claimed)
			sent = append(sent, o)
			progress = true
		}
		ready = waiting
	}
	return sent, nil
}

// fits says why o cannot go into the next block in full, or "" and the
// next nonces its senders would have after it.
func (r *Relay) fits(ctx context.Context, o *order, nonces map[common.Address]uint64, baseFee *big.Int) (map[common.Address]uint64, string, error) {
	claimed := map[common.Address]uint64{}
	for _, rec := range o.txs {
		want, ok := claimed[rec.from]
		if !ok {
			if want, ok = nonces[rec.from]; !ok {
				// The pending nonce counts the sender's public
				// transactions already in the node's pool.
				n, err := r.eth.PendingNonceAt(ctx, rec.from)
				if err != nil {
					return nil, "", fmt.Errorf("nonce of %s: %w", rec.from, err)
				}
				want = n
				nonces[rec.from] = n
			}
		}
		if rec.tx.Nonce() != want {
			return nil, fmt.Sprintf("nonce %d of %s is not its next nonce %d", rec.tx.Nonce(), rec.from, want), nil
		}
		if baseFee != nil && rec.tx.GasFeeCap().Cmp(baseFee) < 0 {
			return nil, fmt.Sprintf("fee cap %s is below the next block's base fee %s", rec.tx.GasFeeCap(), baseFee), nil
		}
		claimed[rec.from] = want + 1
	}
	return claimed, "", nil
}

// submit sends an order's transactions to the node, all or none.
func (r *Relay) submit(ctx context.Context, o *order) error {
	for i, rec := range o.txs {
		err := r.rpc.CallContext(ctx, nil, "eth_sendRawTransaction", hexutil.Bytes(rec.raw))
		if err != nil && !alreadyKnown(err) {
			rec.simError = err.Error()
			r.withdraw(ctx, o.txs[:i])
			return fmt.Errorf("send %s: %w", rec.tx.Hash(), err)
		}
	}
	return nil
}

// alreadyKnown: the node holds the transaction already, sent publicly by
// someone else; it will be mined like any pooled transaction.
func alreadyKnown(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "already known") || strings.Contains(msg, "already imported")
}

// withdraw takes transactions back out of the node's pool. Failing to is
// logged loudly: the transaction is then public.
func (r *Relay) withdraw(ctx context.Context, recs []*txRecord) {
	for _, rec := range recs {
		var dropped *common.Hash
		if err := r.rpc.CallContext(ctx, &dropped, "anvil_dropTransaction", rec.tx.Hash()); err != nil {
			r.log.Error("could not take a private transaction back out of the node's pool: it is now public",
				"tx_hash", rec.tx.Hash(), "err", err)
		}
	}
}

// fail ends an order whose window has passed.
func (r *Relay) fail(o *order, why string) {
	for _, rec := range o.txs {
		if rec.state == flashbots.StatePending {
			rec.state = flashbots.StateFailed
			if rec.simError == "" {
				rec.simError = why
			}
		}
	}
	r.finish(o)
	r.log.Info("expired", "kind", o.kind, "hash", o.hash, "why", why)
}

// finish takes an order off the pending list. Its transactions keep their
// records for the status API.
func (r *Relay) finish(o *order) {
	o.done = true
	r.pending = slices.DeleteFunc(r.pending, func(p *order) bool { return p == o })
}
