package worker

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
)

// clockSlack is how far a block's timestamp may trail the database's
// clock at acceptance for the block to hold that intent: chain and
// database clocks differ, and block timestamps are whole seconds.
const clockSlack = time.Minute

// reportedOneByOne bounds the unknown nonces logged one line each; the
// rest are summed up in one line.
const reportedOneByOne = 20

// chainAhead runs before a new owner's first allocation and returns the
// signer's nonce at the chain's head, below which nothing is allocated.
// When the chain consumed nonces at or above the stored cursor (the
// database restored from a backup taken before they were sent), each of
// those transactions is looked up in its block: one that matches an intent
// the database holds without a nonce (same destination, value and data,
// accepted before its block) is recorded as sent (AdoptFound) and never
// sent again; any other is reported with an alert as a nonce consumed
// outside what the database knows. A signer never allocated here (no
// cursor) has no history of ours to explain, and is not searched.
func (w *worker) chainAhead(ctx context.Context) (uint64, error) {
	r, err := w.reader()
	if err != nil {
		return 0, err
	}
	key := w.fence.Key
	head, err := r.Head(ctx)
	if err != nil {
		return 0, err
	}
	mined, err := r.NonceAt(ctx, key.Signer, head)
	if err != nil {
		return 0, err
	}
	cursor, allocated, err := w.Store.NonceCursor(ctx, key)
	if err != nil || !allocated || mined <= cursor {
		return mined, err
	}
	log := w.log.With("cursor", cursor, "mined_nonce", mined, "head", head)
	log.Error("the chain is ahead of the database: nonces were consumed that it never assigned (restored from a backup?); identifying them before allocating",
		"alert", true)
	to := min(mined, cursor+txmanager.MaxRestoreScan)
	held, err := w.Store.NoncesHeld(ctx, key, cursor, to)
	if err != nil {
		return 0, err
	}
	found, err := r.MinedBetween(ctx, key.Signer, cursor, to, head)
	if err != nil {
		return 0, fmt.Errorf("identify the nonces %d to %d the chain consumed: %w", cursor, to-1, err)
	}
	waiting, err := w.Store.Open(ctx, key, []txmanager.State{txmanager.StateInit, txmanager.StateSimulated, txmanager.StatePendingApproval},
		txmanager.MaxRestoreScan)
	if err != nil {
		return 0, err
	}
	adopted, unknown := 0, 0
	for _, m := range found {
		if held[m.Tx.Nonce()] {
			continue // ours already: the follower and the worker take it from there
		}
		i := matchIntent(waiting, m)
		if i < 0 {
			unknown++
			if unknown <= reportedOneByOne {
				log.Error("nonce consumed outside what the database knows", "reason", txmanager.ReasonNonceConsumedExternally,
					"nonce", m.Tx.Nonce(), "hash", m.Tx.Hash(), "block", m.Block, "to", m.Tx.To(), "value", m.Tx.Value(), "alert", true)
			}
			continue
		}
		f, err := foundOf(waiting[i], m)
		if err != nil {
			return 0, err
		}
		if _, err := w.Store.AdoptFound(ctx, w.fence, f); err != nil {
			return 0, err
		}
		log.Warn("an intent waiting for a nonce was found mined: recorded as sent, not sent again",
			"tx_id", f.TxID, "nonce", f.Nonce, "hash", f.Hash, "block", m.Block)
		waiting = append(waiting[:i], waiting[i+1:]...)
		w.Metrics.foundMined(key)
		adopted++
	}
	unknown += int(mined - to) // past the scan's bound: skipped unidentified
	w.Metrics.unknownMined(key, unknown)
	log.Error("the chain was ahead of the database: settled", "found_mined", adopted, "unknown_mined", unknown,
		"unidentified_past_bound", mined-to, "alert", unknown > 0)
	return mined, nil
}

// matchIntent is the index of the first intent of waiting (acceptance
// order) that m carries out, -1 for none: the same destination, value and
// data, and accepted before m's block was made.
func matchIntent(waiting []txmanager.Tx, m chain.MinedTx) int {
	for i := range waiting {
		t := &waiting[i]
		sameTo := (t.To == nil) == (m.Tx.To() == nil) && (t.To == nil || *t.To == *m.Tx.To())
		if sameTo && t.Value.Cmp(m.Tx.Value()) == 0 && bytes.Equal(t.Data, m.Tx.Data()) &&
			!t.CreatedAt.After(m.BlockTime.Add(clockSlack)) {
			return i
		}
	}
	return -1
}

// foundOf is what AdoptFound stores of t found mined as m.
func foundOf(t txmanager.Tx, m chain.MinedTx) (txmanager.Found, error) {
	raw, err := m.Tx.MarshalBinary()
	if err != nil {
		return txmanager.Found{}, fmt.Errorf("encode %s: %w", m.Tx.Hash(), err)
	}
	f := txmanager.Found{TxID: t.ID, Nonce: m.Tx.Nonce(), Hash: m.Tx.Hash(), Raw: raw, GasLimit: m.Tx.Gas(), Block: m.Block}
	if m.Tx.Type() == types.LegacyTxType || m.Tx.Type() == types.AccessListTxType {
		f.Fees.GasPrice = m.Tx.GasPrice()
	} else {
		f.Fees.MaxFeePerGas, f.Fees.MaxPriorityFeePerGas = m.Tx.GasFeeCap(), m.Tx.GasTipCap()
	}
	return f, nil
}
