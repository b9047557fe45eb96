package follow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/txmanager"
)

// Silent drops. A node may answer a send with the transaction's hash and
// forget the transaction afterwards: gas too low for its data, an empty
// authorization list (both checked by some nodes only when they build a
// block), pool eviction. Nothing else would notice before the resubmission
// interval, minutes on a slow chain. So, at each of the first
// drop_check_blocks new blocks after a send, the follower asks whether the
// attempt is known (eth_getTransactionByHash: pooled or mined): one
// batched request per block for every recent send of every signer of the
// chain, through the chain's pool. Only the hashes that answer did not
// know, the rare path, are asked of each endpoint of the pool, pinned to
// it (rpcpool.On). An attempt unknown to every endpoint at two lookups in
// a row (two different blocks: a lagging endpoint's "not found" is never
// a verdict on its own) is dropped: a tx.attempt event of kind
// dropped, and a resend at once, until the attempt was dropped max_drops
// times; then the transaction is left stuck (dropped_by_node) with an
// alert, BROADCASTED and tracked, for an operator to act on.
//
// Which sends are recent is the follower's own record, in memory: the
// sends made while it held the lease (the worker's first
// broadcasts, its resends, new replacement attempts). The attempts a new
// lease finds (a start, a restart, a takeover) are not looked up until
// their next send, which the resubmission timer makes: a restart costs no
// lookup of everything tracked, and the cost per block is one request for
// the sends of the last few blocks, never a call per tracked transaction.
//
// Private routes are never looked up: a private transaction is in no
// public pool, so every public endpoint would call it dropped.

// probe is the follower's record of one send of an attempt.
type probe struct {
	lookups int // blocks it was looked up at since the send
	unknown int // lookups in a row at which no endpoint knew it
}

// verdict is what the endpoints said of one hash at one lookup.
type verdict int

const (
	noAnswer verdict = iota // an endpoint failed to answer, none knew it
	known
	unknown // every endpoint answered, none knew it
)

// probesAtStart records the attempts a new lease finds as looked up
// already: only their next send is.
func (fl *Follower) probesAtStart(f txmanager.Fence, tracked []txmanager.Tracked) {
	probes := make(map[common.Hash]*probe, len(tracked))
	for i := range tracked {
		if h, ok := currentHash(&tracked[i]); ok && waitingToBeMined(&tracked[i]) {
			probes[h] = &probe{lookups: fl.cfg.Chain.DropCheckBlocks}
		}
	}
	fl.probes[f.Key] = probes
	fl.probedFrom[f.Key] = time.Now()
}

// sentAgain starts a new record for t's current attempt: sent again, it
// is looked up from the next block on.
func (fl *Follower) sentAgain(f txmanager.Fence, t *txmanager.Tracked) {
	if h, ok := currentHash(t); ok {
		delete(fl.probes[f.Key], h)
	}
}

// leftToOperator: t's current attempt was dropped max_drops times; the
// follower sends it no more (the operator's resend still does).
func (fl *Follower) leftToOperator(t *txmanager.Tracked) bool {
	return fl.cfg.Chain.DropChecking() && t.Drops >= fl.cfg.Chain.MaxDrops
}

// currentHash is the hash of t's current attempt.
func currentHash(t *txmanager.Tracked) (common.Hash, bool) {
	for h, a := range t.Attempts {
		if a == t.Current {
			return h, true
		}
	}
	return common.Hash{}, false
}

// lookForDrops is a new block's lookup of the recent sends of every held
// signer of the chain, and what follows from it.
func (fl *Follower) lookForDrops(ctx context.Context) error {
	if !fl.cfg.Chain.DropChecking() {
		return nil
	}
	type recent struct {
		f    txmanager.Fence
		id   uuid.UUID
		hash common.Hash
		p    *probe
	}
	var sends []recent
	for _, f := range fl.fences() {
		v := fl.views[f.Key]
		if v == nil || v.token != f.Token || fl.caughtUp[f.Key] != f.Token {
			continue // not stepped under this lease yet
		}
		txs := slices.SortedFunc(func(yield func(txmanager.Tracked) bool) {
			for _, t := range v.txs {
				if !yield(t) {
					return
				}
			}
		}, func(a, b txmanager.Tracked) int { return cmp.Compare(a.Nonce, b.Nonce) })
		// What is no longer a current attempt waiting to be mined is
		// forgotten.
		was, now := fl.probes[f.Key], make(map[common.Hash]*probe)
		for i := range txs {
			t := &txs[i]
			h, ok := currentHash(t)
			if !ok || !waitingToBeMined(t) || t.CurrentRoute == txmanager.RoutePrivate {
				continue
			}
			p := was[h]
			switch {
			case p == nil && t.SentAt.Before(fl.probedFrom[f.Key]):
				// Sent before this lease began, though its events reached
				// the view only now (numbered late in the feed): one the
				// lease found, looked up from its next send on.
				p = &probe{lookups: fl.cfg.Chain.DropCheckBlocks}
			case p == nil:
				p = &probe{} // a send made since the last block
			}
			now[h] = p
			if p.lookups < fl.cfg.Chain.DropCheckBlocks {
				sends = append(sends, recent{f: f, id: t.TxID, hash: h, p: p})
			}
		}
		fl.probes[f.Key] = now
	}
	if len(sends) == 0 {
		return nil
	}
	hashes := make([]common.Hash, len(sends))
	for i, s := range sends {
		hashes[i] = s.hash
	}
	verdicts, err := fl.lookUp(ctx, hashes)
	if err != nil {
		return fmt.Errorf("look up the %d recent sends: %w", len(hashes), err)
	}
	var errs []error
	fenced := map[txmanager.SignerKey]bool{}
	for _, s := range sends {
		s.p.lookups++
		switch verdicts[s.hash] {
		case known:
			s.p.unknown = 0
		case unknown:
			s.p.unknown++
		}
		if s.p.unknown < 2 || fenced[s.f.Key] {
			continue
		}
		if err := fl.dropped(ctx, s.f, s.id, s.p); err != nil {
			if errors.Is(err, txmanager.ErrFenced) {
				fenced[s.f.Key] = true
				if fl.cfg.Fenced != nil {
					fl.cfg.Fenced(s.f)
				}
			}
			errs = append(errs, fmt.Errorf("%s: %w", s.f.Key, err))
		}
	}
	return errors.Join(errs...)
}

// lookUp asks the endpoints which of hashes they know: the pool's pick
// for all of them, in one batched request; then each endpoint of the
// chain in turn, pinned to it, only for those no endpoint asked before
// knew. An error from the first is the lookup's. An endpoint out of the
// pool (down, rate limited, on another chain) is not asked; one that
// fails leaves its hashes without a verdict.
func (fl *Follower) lookUp(ctx context.Context, hashes []common.Hash) (map[common.Hash]verdict, error) {
	first, err := fl.cfg.RPC.KnownTransactions(ctx, hashes)
	if err != nil {
		return nil, err
	}
	out := make(map[common.Hash]verdict, len(hashes))
	unknownSoFar := judge(out, hashes, first)
	if len(fl.cfg.Chain.RPC) < 2 {
		return out, nil // the pool's pick was the only endpoint
	}
	for _, e := range fl.cfg.Chain.RPC {
		if len(unknownSoFar) == 0 {
			break
		}
		// Any endpoint's pool may know the transaction, whatever its head:
		// asking one behind the follower only makes a drop rarer.
		answers, err := fl.cfg.RPC.KnownTransactions(rpcpool.On(rpcpool.AtHead(ctx, 0), e.Name), unknownSoFar)
		if errors.Is(err, rpcpool.ErrNoEndpoint) {
			continue
		}
		if err != nil {
			fl.cfg.Log.Warn("an endpoint did not answer the lookup of recent sends: no drop is concluded for them this block",
				"endpoint", e.Name, "transactions", len(unknownSoFar), "err", err)
			for _, h := range unknownSoFar {
				out[h] = noAnswer
			}
			break
		}
		unknownSoFar = judge(out, unknownSoFar, answers)
	}
	return out, nil
}

// judge records in out what one endpoint's answers say of hashes (known,
// unknown, or no answer for a hash it left out) and returns those it did
// not know.
func judge(out map[common.Hash]verdict, hashes []common.Hash, answers map[common.Hash]bool) []common.Hash {
	var unknownHere []common.Hash
	for _, h := range hashes {
		switch k, answered := answers[h]; {
		case !answered:
			out[h] = noAnswer
		case k:
			out[h] = known
		default:
			out[h] = unknown
			unknownHere = append(unknownHere, h)
		}
	}
	return unknownHere
}

// dropped acts on a drop of the current attempt of id (f's signer): the
// drop recorded (Store.Dropped), then a resend at once, or, at max_drops,
// the transaction left stuck for an operator with an alert.
func (fl *Follower) dropped(ctx context.Context, f txmanager.Fence, id uuid.UUID, p *probe) error {
	v := fl.views[f.Key]
	t, ok := v.txs[id]
	if !ok {
		return nil
	}
	hash, _ := currentHash(&t)
	d, err := fl.cfg.Store.Dropped(ctx, f, id, t.Current, fl.cfg.Chain.MaxDrops)
	if errors.Is(err, txmanager.ErrNotFollowed) {
		return nil // mined or changed meanwhile: the next step reads it again
	}
	if err != nil {
		return err
	}
	if fl.cfg.Dropped != nil {
		fl.cfg.Dropped.WithLabelValues(chainLabel(f.Key), f.Key.Signer.Hex()).Inc()
	}
	t.Drops = d.Drops
	log := fl.cfg.Log.With("tx_id", id, "signer", f.Key.Signer, "nonce", t.Nonce, "attempt", t.Current, "hash", hash, "drops", d.Drops,
		"max_drops", fl.cfg.Chain.MaxDrops)
	if !d.Refused {
		log.Warn("attempt dropped: unknown to every read endpoint at two blocks in a row after its send; sent again")
		// The resend starts a new record; should it not be made, another
		// drop of this send takes two more unknown answers.
		p.unknown = 0
		fl.claimAndSend(ctx, f, &t, "resend after a drop refused; resubmission tries again")
	} else {
		log.Error("transaction left stuck for an operator: the nodes dropped its attempt every time it was sent", "reason", d.Reason, "alert", true)
		if fl.cfg.DropRefusals != nil {
			fl.cfg.DropRefusals.WithLabelValues(chainLabel(f.Key), f.Key.Signer.Hex()).Inc()
		}
		t.Stuck = true
		p.lookups = fl.cfg.Chain.DropCheckBlocks // this send is settled
	}
	v.txs[id] = t
	return nil
}
