package follow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/remote"
)

// Config is one chain's follower.
type Config struct {
	Chain txmanager.Chain
	// RPC reads the chain's blocks and receipts.
	RPC *RPC
	// Store is txmanager's; the follower learns of new and changed
	// transactions from its event feed, so the feed must be numbered
	// (txmanagerd's sequencer does it every SEQUENCE_EVERY).
	Store txmanager.FollowStore
	// Router sends attempts again (resubmission, after a reorg) and
	// sends replacements.
	Router *remote.Router
	// Signer signs replacements (fee bumps, cancels) and Reader prices
	// them; without them no replacement is made.
	Signer *remote.Signer
	Reader *chain.Reader
	// AfterStep, when set, is called after each write-ahead step of a
	// replacement (fault injection: TEST_CRASH_AFTER).
	AfterStep func(Step)
	// Fences are the leases this node holds (lease.Manager's Fences); the
	// follower works on this chain's signers among them.
	Fences func() []txmanager.Fence
	// Fenced is told when a write was fenced (lease.Manager's Fenced).
	Fenced    func(txmanager.Fence)
	PollEvery time.Duration
	Log       *slog.Logger
	// Blocks, when set, counts the new canonical blocks processed, by
	// chain (with the RPC's Counted, the cost per block); Stuck counts
	// transactions marked stuck, and BumpsRefused automatic fee bumps the
	// caps left no room for, by chain and signer.
	Blocks, Stuck, BumpsRefused *prometheus.CounterVec
	// Dropped counts attempts found dropped by every endpoint after their
	// send, and DropRefusals transactions left stuck (dropped_by_node)
	// after max_drops drops, by chain and signer.
	Dropped, DropRefusals *prometheus.CounterVec
}

// Metrics are the followers' counters: new canonical blocks and RPC calls
// by method, per chain, so that the cost per block can be watched.
type Metrics struct {
	Blocks *prometheus.CounterVec
	Calls  *prometheus.CounterVec
	Stuck  *prometheus.CounterVec
	// BumpsRefused counts automatic fee bumps not made.
	BumpsRefused *prometheus.CounterVec
	// Dropped counts silent drops found; DropRefusals the transactions
	// left to an operator after max_drops of them.
	Dropped, DropRefusals *prometheus.CounterVec
}

// NewMetrics registers the followers' metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Blocks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_follower_blocks_total",
			Help: "New canonical blocks the chain follower processed.",
		}, []string{"chain_id"}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_follower_rpc_calls_total",
			Help: "RPC calls the chain follower made, by method: divided by blocks, the cost per block, which must not grow with the transactions tracked.",
		}, []string{"chain_id", "method"}),
		Stuck: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_stuck_total",
			Help: "Transactions marked stuck: not mined past the chain's stuck timeout, or waiting behind a stuck nonce.",
		}, []string{"chain_id", "signer"}),
		BumpsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_fee_bumps_refused_total",
			Help: "Automatic fee bumps not made: the caps left no room for a 10% rise, or signerd refused the replacement.",
		}, []string{"chain_id", "signer"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_dropped_total",
			Help: "Attempts a node answered with a hash and dropped: unknown to every read endpoint at two blocks in a row after their send (each is resent, up to the chain's max_drops).",
		}, []string{"chain_id", "signer"}),
		DropRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "txfence_txmanager_dropped_refusals_total",
			Help: "Transactions left stuck with reason dropped_by_node: their attempt was dropped the chain's max_drops times; an operator acts.",
		}, []string{"chain_id", "signer"}),
	}
	for _, c := range []prometheus.Collector{m.Blocks, m.Calls, m.Stuck, m.BumpsRefused, m.Dropped, m.DropRefusals} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Follower takes one chain's broadcast transactions to a final state:
// receipts found from blocks (the transaction hashes of each new
// canonical block against the attempts it tracks; receipts fetched only
// for matches, one call per block), confirmations counted while the
// receipt's block stays canonical, CONFIRMED or REVERTED at the chain's
// depth, and reorgs re-opening what they orphan.
type Follower struct {
	cfg    Config
	depth  uint64 // confirmations to final
	window *Window
	// caughtUp are the leases whose transactions were looked for in the
	// chain when this follower started working on them: blocks it saw
	// before (or while another node held the signer) are not matched
	// again.
	caughtUp map[txmanager.SignerKey]int64
	// views are the tracked transactions of each held signer, kept in
	// memory and refreshed from the feed: only transactions with events
	// since the last step are read again.
	views map[txmanager.SignerKey]*signerView
	// refused are, per signer, the current attempts whose automatic bump
	// was refused (alerted once each); when each attempt was first seen
	// waiting is stored with it (Tracked.WaitingSince).
	refused map[txmanager.SignerKey]map[attemptKey]bool
	// probes are, per signer, the recent sends being looked up for silent
	// drops, by attempt hash (drops.go).
	probes map[txmanager.SignerKey]map[common.Hash]*probe
	// probedFrom is, per signer, when its lease's probes began: a send
	// made before then is one the lease found, whenever the feed brings it.
	probedFrom map[txmanager.SignerKey]time.Time
}

// signerView is one signer's tracked transactions under one lease, as of
// feed sequence seq.
type signerView struct {
	token int64
	seq   uint64
	txs   map[uuid.UUID]txmanager.Tracked
}

// New makes a follower; Run drives it, Step is one pass.
func New(cfg Config) *Follower {
	depth := max(cfg.Chain.Confirmations, 1)
	if cfg.Chain.ResubmitInterval.Duration <= 0 {
		cfg.Chain.ResubmitInterval.Duration = txmanager.DefaultResubmitInterval
	}
	if cfg.Chain.StuckTimeout.Duration <= 0 {
		cfg.Chain.StuckTimeout.Duration = txmanager.DefaultStuckTimeout
	}
	if cfg.Chain.DropCheckBlocks < 2 {
		cfg.Chain.DropCheckBlocks = txmanager.DefaultDropCheckBlocks
	}
	if cfg.Chain.MaxDrops <= 0 {
		cfg.Chain.MaxDrops = txmanager.DefaultMaxDrops
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Log = cfg.Log.With("chain_id", cfg.Chain.ID)
	// Deep enough to see a reorg of a transaction CONFIRMED a while ago.
	return &Follower{cfg: cfg, depth: depth, window: NewWindow(int(max(4*depth, 64))), caughtUp: map[txmanager.SignerKey]int64{},
		views: map[txmanager.SignerKey]*signerView{}, refused: map[txmanager.SignerKey]map[attemptKey]bool{},
		probes: map[txmanager.SignerKey]map[common.Hash]*probe{}, probedFrom: map[txmanager.SignerKey]time.Time{}}
}

// Run steps every PollEvery until ctx ends, and at once on each new head
// when the chain has a newHeads subscription (Chain.NewHeads). After a
// failed step (the node or the database unreachable) it waits twice as
// long each time, up to maxBackoff, and back to PollEvery once a step
// succeeds.
func (fl *Follower) Run(ctx context.Context) {
	wake := make(chan struct{}, 1)
	if url := fl.cfg.Chain.NewHeads; url != "" {
		go fl.subscribeHeads(ctx, url, wake)
	}
	wait := fl.cfg.PollEvery
	for {
		if err := fl.Step(ctx); err != nil && ctx.Err() == nil {
			wait = min(2*wait, max(maxBackoff, fl.cfg.PollEvery))
			fl.cfg.Log.Warn("chain follower step failed; retrying", "err", err, "retry_in", wait)
		} else {
			wait = fl.cfg.PollEvery
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		case <-wake:
		}
	}
}

// maxBackoff bounds the wait between failed steps.
const maxBackoff = 30 * time.Second

// Step reads the chain's head once and acts on what changed: reorged
// receipts re-open their transactions, new blocks are matched against
// every tracked attempt, confirmations are counted and final ones end,
// and the recent sends are looked up for silent drops (drops.go).
//
// Every read of a step goes to an endpoint at the head the follower has
// seen (rpcpool.AtHead): a receipt "not found" on an endpoint behind it,
// or a head below it, would be that endpoint's lag, not the chain's word.
func (fl *Follower) Step(ctx context.Context) error {
	if seen, ok := fl.window.Head(); ok {
		ctx = rpcpool.AtHead(ctx, seen.Number)
	}
	ch, err := fl.window.Update(ctx, fl.cfg.RPC)
	deep := errors.Is(err, ErrDeepReorg)
	if err != nil && !deep {
		return err
	}
	if len(ch.Added) == 0 && !ch.Reorg() {
		return fl.timers(ctx)
	}
	if fl.cfg.Blocks != nil {
		fl.cfg.Blocks.WithLabelValues(strconv.FormatUint(fl.cfg.Chain.ID, 10)).Add(float64(len(ch.Added)))
	}
	head, _ := fl.window.Head()
	ctx = rpcpool.AtHead(ctx, head.Number)
	if deep {
		fl.cfg.Log.Error("the chain changed deeper than the follower's window: checking every receipt again", "head", head.Number, "alert", true)
	}
	removed := make(map[common.Hash]bool, len(ch.Removed))
	for _, b := range ch.Removed {
		removed[b.Hash] = true
	}
	err = fl.eachSigner(ctx, func(f txmanager.Fence) error {
		tracked, err := fl.view(ctx, f, head)
		if err != nil {
			return err
		}
		defer fl.keep(f, tracked)
		if err := fl.stepSigner(ctx, f, tracked, removed, deep, head); err != nil {
			return err
		}
		if err := fl.timed(ctx, f, tracked); err != nil {
			return err
		}
		return fl.replacements(ctx, f, tracked, head, len(ch.Added) > 0)
	})
	if len(ch.Added) == 0 {
		return err
	}
	// Once per new head, after the blocks were matched (what is mined is
	// not looked up) and the resends made (a send made now is looked up
	// from the next block on): one lookup for every signer.
	return errors.Join(err, fl.lookForDrops(ctx))
}

// eachSigner runs fn for every signer of the chain this node holds, each
// caught up first when the lease is new to the follower; a fenced signer
// is reported and the others go on.
func (fl *Follower) eachSigner(ctx context.Context, fn func(txmanager.Fence) error) error {
	var errs []error
	fences := fl.fences()
	held := make(map[txmanager.SignerKey]bool, len(fences))
	for _, f := range fences {
		held[f.Key] = true
		err := fl.catchUp(ctx, f)
		if err == nil {
			err = fn(f)
		}
		if err != nil {
			if errors.Is(err, txmanager.ErrFenced) && fl.cfg.Fenced != nil {
				fl.cfg.Fenced(f)
			}
			errs = append(errs, fmt.Errorf("%s: %w", f.Key, err))
		}
	}
	// What the follower keeps per lease goes with the lease.
	unheld := func(k txmanager.SignerKey) bool { return !held[k] }
	forget(fl.caughtUp, unheld)
	forget(fl.views, unheld)
	forget(fl.refused, unheld)
	forget(fl.probes, unheld)
	forget(fl.probedFrom, unheld)
	return errors.Join(errs...)
}

// catchUp, once per lease, asks the node for the receipt of every attempt
// of f's signer it tracks: what was mined while no follower of this node
// watched the signer (before a start, a restart or a takeover) is found
// without scanning old blocks, and a stored receipt a reorg took away
// meanwhile re-opens its transaction. One call per attempt, in batches,
// once; afterwards blocks are matched as they come.
func (fl *Follower) catchUp(ctx context.Context, f txmanager.Fence) error {
	if fl.caughtUp[f.Key] == f.Token {
		return nil
	}
	head, ok := fl.window.Head()
	if !ok {
		return nil // nothing seen yet: the first step catches up
	}
	tracked, err := fl.view(ctx, f, head)
	if err != nil {
		return err
	}
	defer fl.keep(f, tracked)
	fl.probesAtStart(f, tracked)
	// Every attempt's receipt, asked for in batches: what was mined
	// meanwhile, and whether what the store holds as mined still is (a
	// reorg while no follower of this node watched).
	var hashes []common.Hash
	for i := range tracked {
		for h := range tracked[i].Attempts {
			hashes = append(hashes, h)
		}
	}
	receipts, err := fl.cfg.RPC.TransactionReceipts(ctx, hashes)
	if err != nil {
		return err
	}
	found, reopened := 0, 0
	for i := range tracked {
		t := &tracked[i]
		var now *txmanager.Receipt
		for h, attempt := range t.Attempts {
			r, ok := receipts[h]
			if !ok || r.BlockNumber > head.Number {
				continue // not mined, or in a block the next step brings
			}
			if canonical, known := fl.window.Canonical(r.BlockNumber, r.BlockHash); known && !canonical {
				continue
			}
			stored := r.stored(attempt)
			now = &stored
			break
		}
		if t.Mined != nil && (now == nil || now.BlockHash != t.Mined.BlockHash) {
			if err := fl.reopen(ctx, f, t); err != nil {
				return err
			}
			reopened++
			if now == nil {
				fl.resend(ctx, f, t)
			}
		}
		if now != nil && t.Mined == nil {
			if err := fl.mined(ctx, f, t, *now, head); err != nil {
				return err
			}
			found++
		}
	}
	// A replacement stored less than a resubmission interval ago may never
	// have been sent (a crash between storing and sending it): send it
	// now rather than at the next interval. The node answers "already
	// known" when it was.
	for i := range tracked {
		t := &tracked[i]
		if waitingToBeMined(t) && t.CurrentKind != txmanager.AttemptInitial && time.Since(t.SentAt) < fl.cfg.Chain.ResubmitInterval.Duration {
			fl.resendCurrent(ctx, f, t)
		}
	}
	if found+reopened > 0 {
		fl.cfg.Log.Info("caught up with the chain", "signer", f.Key.Signer, "fencing_token", f.Token, "mined_meanwhile", found, "reorged_meanwhile", reopened)
	}
	fl.caughtUp[f.Key] = f.Token
	return nil
}

// timers is a step without a new block: resends, stuck transactions and
// operator actions only.
func (fl *Follower) timers(ctx context.Context) error {
	head, ok := fl.window.Head()
	if !ok {
		return nil
	}
	return fl.eachSigner(ctx, func(f txmanager.Fence) error {
		tracked, err := fl.view(ctx, f, head)
		if err != nil {
			return err
		}
		defer fl.keep(f, tracked)
		if err := fl.timed(ctx, f, tracked); err != nil {
			return err
		}
		return fl.replacements(ctx, f, tracked, head, false)
	})
}

// timed acts on the time broadcast transactions have waited: an attempt
// not mined ResubmitInterval after it was last sent is sent again,
// unchanged (a node may have dropped it; claimed in the database first),
// unless the nodes dropped it max_drops times already (left to an
// operator: sending it for ever would change nothing); a transaction not
// mined StuckTimeout after its first send, or waiting behind a stuck
// nonce of its signer, becomes stuck with an alert.
func (fl *Follower) timed(ctx context.Context, f txmanager.Fence, tracked []txmanager.Tracked) error {
	now := time.Now()
	stuckBelow := uint64(0) // the lowest stuck nonce + 1; 0: none
	for i := range tracked {
		t := &tracked[i]
		if t.State != txmanager.StateBroadcasted || t.Mined != nil {
			continue
		}
		if stuckBelow == 0 && now.Sub(t.FirstSentAt) > fl.cfg.Chain.StuckTimeout.Duration {
			stuckBelow = t.Nonce + 1
		}
		if stuckBelow != 0 && !t.Stuck {
			why := fmt.Sprintf("not mined %s after it was first sent", now.Sub(t.FirstSentAt).Round(time.Second))
			if t.Nonce+1 > stuckBelow {
				why = fmt.Sprintf("waiting behind nonce %d, which is stuck", stuckBelow-1)
			}
			fl.cfg.Log.Error("transaction stuck", "tx_id", t.TxID, "signer", f.Key.Signer, "nonce", t.Nonce, "why", why, "alert", true)
			if _, err := fl.cfg.Store.SetSubState(ctx, f, t.TxID, txmanager.StateBroadcasted, txmanager.SubStuck, "stuck: "+why); err != nil {
				return err
			}
			t.Stuck = true
			if fl.cfg.Stuck != nil {
				fl.cfg.Stuck.WithLabelValues(chainLabel(f.Key), f.Key.Signer.Hex()).Inc()
			}
		}
		if now.Sub(t.SentAt) > fl.cfg.Chain.ResubmitInterval.Duration && !fl.leftToOperator(t) {
			fl.resendCurrent(ctx, f, t)
		}
	}
	return nil
}

// resendCurrent claims and sends t's current attempt again.
func (fl *Follower) resendCurrent(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked) {
	fl.claimAndSend(ctx, f, t, "resend refused; tried again after the interval")
}

// claimAndSend claims a resend of t's current attempt (Store.Resend: its
// sent-at and a tx.attempt event, before anything is sent) and sends it; a
// refusal is logged with refused. The send is looked up for a drop from
// the next block on.
func (fl *Follower) claimAndSend(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked, refused string) {
	if fl.cfg.Router == nil {
		return // nothing to send with: no claim
	}
	raw, err := fl.cfg.Store.Resend(ctx, f, t.TxID, t.Current)
	if err != nil {
		fl.cfg.Log.Warn("resend: claim failed", "tx_id", t.TxID, "err", err)
		return
	}
	t.SentAt = time.Now()
	fl.sentAgain(f, t)
	fl.send(ctx, t, raw, refused)
}

// send broadcasts one raw attempt of t on its route; a refusal is logged
// with refused, and the caller's own retry takes it from there.
func (fl *Follower) send(ctx context.Context, t *txmanager.Tracked, raw []byte, refused string) {
	if fl.cfg.Router == nil {
		return
	}
	sent, err := fl.cfg.Router.Broadcast(ctx, remote.Broadcast{Raw: [][]byte{raw}, Route: t.Route})
	if err != nil || len(sent) != 1 || !sent[0].Accepted {
		fl.cfg.Log.Warn(refused, "tx_id", t.TxID, "err", err, "answer", sent)
	}
}

// forget deletes m's entries whose key drop selects.
func forget[V any](m map[txmanager.SignerKey]V, drop func(txmanager.SignerKey) bool) {
	maps.DeleteFunc(m, func(k txmanager.SignerKey, _ V) bool { return drop(k) })
}

func chainLabel(k txmanager.SignerKey) string { return strconv.FormatUint(k.ChainID, 10) }

// fences are the held leases on this chain.
func (fl *Follower) fences() []txmanager.Fence {
	var out []txmanager.Fence
	for _, f := range fl.cfg.Fences() {
		if f.Key.ChainID == fl.cfg.Chain.ID {
			out = append(out, f)
		}
	}
	return out
}

// stepSigner applies one window change to one signer's transactions.
func (fl *Follower) stepSigner(ctx context.Context, f txmanager.Fence, tracked []txmanager.Tracked, removed map[common.Hash]bool, deep bool, head Block) error {
	byHash := make(map[common.Hash]*txmanager.Tracked)
	reopened := make(map[uuid.UUID]bool)
	for i := range tracked {
		t := &tracked[i]
		if t.Mined != nil && (removed[t.Mined.BlockHash] || (deep && !fl.stillMined(ctx, t))) {
			if err := fl.reopen(ctx, f, t); err != nil {
				return err
			}
			reopened[t.TxID] = true
		}
		// SIGNED ones too: a node may mine what it answered with an error,
		// and the chain's word beats the send's verdict.
		if (t.State == txmanager.StateBroadcasted || t.State == txmanager.StateSigned) && t.Mined == nil {
			for h := range t.Attempts {
				byHash[h] = t
			}
		}
	}
	// The window's blocks, lowest first: what of ours each holds. Not only
	// the new blocks: a transaction the worker records as BROADCASTED
	// just after its block was first seen is still found, from the
	// hashes kept in memory.
	for _, b := range fl.window.Blocks() {
		var matches []common.Hash
		for _, h := range b.Txs {
			if t := byHash[h]; t != nil && t.Mined == nil {
				matches = append(matches, h)
			}
		}
		if len(matches) == 0 {
			continue
		}
		receipts, err := fl.cfg.RPC.BlockReceipts(ctx, b.Hash, matches)
		if err != nil {
			return err
		}
		for _, r := range receipts {
			t := byHash[r.TxHash]
			if err := fl.mined(ctx, f, t, r.stored(t.Attempts[r.TxHash]), head); err != nil {
				return err
			}
			delete(reopened, t.TxID)
		}
	}
	// Confirmations of everything mined, and the end at the depth or at
	// the node's finalized block.
	final := func(r *txmanager.Receipt, confirmations uint64) bool { return confirmations >= fl.depth }
	if fl.cfg.Chain.Finality == txmanager.FinalityFinalized {
		finalized, err := fl.finalized(ctx, tracked)
		if err != nil {
			return err
		}
		final = func(r *txmanager.Receipt, _ uint64) bool {
			return finalized != nil && r.BlockNumber <= finalized.Number
		}
	}
	for i := range tracked {
		t := &tracked[i]
		if t.State != txmanager.StateBroadcasted || t.Mined == nil {
			continue
		}
		if canonical, known := fl.window.Canonical(t.Mined.BlockNumber, t.Mined.BlockHash); known && !canonical {
			continue // orphaned by a change this step did not see whole; the next step re-opens it
		}
		confirmations := head.Number - t.Mined.BlockNumber + 1
		switch {
		case final(t.Mined, confirmations):
			out, err := fl.cfg.Store.Final(ctx, f, t.TxID, *t.Mined)
			if err != nil {
				return err
			}
			t.State = out.State
		case confirmations != t.Confirmations:
			if err := fl.cfg.Store.Confirmed(ctx, f, t.TxID, *t.Mined, confirmations); err != nil {
				return err
			}
			t.Confirmations = confirmations
		}
	}
	if err := fl.consumedElsewhere(ctx, f, tracked, head); err != nil {
		return err
	}
	// Re-opened and not found again in the new blocks: sent again.
	for id := range reopened {
		for i := range tracked {
			if tracked[i].TxID == id {
				fl.resend(ctx, f, &tracked[i])
			}
		}
	}
	return nil
}

// mined records that t's attempt r is in a canonical block, head being
// the chain's head: a SIGNED t (its broadcast refused, held or stuck)
// becomes BROADCASTED with it, and goes on to its end like any other.
func (fl *Follower) mined(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked, r txmanager.Receipt, head Block) error {
	confirmations := head.Number - r.BlockNumber + 1
	if err := fl.cfg.Store.Mined(ctx, f, t.TxID, r, confirmations); err != nil {
		return err
	}
	if t.State == txmanager.StateSigned {
		fl.cfg.Log.Warn("mined although no route accepted its broadcast: recorded as the chain has it", "tx_id", t.TxID, "signer", f.Key.Signer,
			"nonce", t.Nonce, "hash", r.Hash, "block", r.BlockNumber, "receipt_status", r.Status)
	}
	t.State, t.Stuck, t.Mined, t.Confirmations = txmanager.StateBroadcasted, false, &r, confirmations
	return nil
}

// consumedElsewhere fails the unmined transactions (broadcast, or signed
// and not broadcast: refused, held or stuck) whose nonce the chain
// consumed at the confirmation depth with none of their attempts: the key
// was used outside txfence. One call (the signer's nonce at the depth),
// made only while some transaction of the signer waits to be mined.
func (fl *Follower) consumedElsewhere(ctx context.Context, f txmanager.Fence, tracked []txmanager.Tracked, head Block) error {
	unmined := func(t *txmanager.Tracked) bool {
		return (t.State == txmanager.StateBroadcasted || t.State == txmanager.StateSigned) && t.Mined == nil
	}
	waiting := false
	for i := range tracked {
		waiting = waiting || unmined(&tracked[i])
	}
	if !waiting || head.Number+1 < fl.depth {
		return nil
	}
	atDepth := head.Number + 1 - fl.depth
	mined, err := fl.cfg.RPC.NonceAt(ctx, f.Key.Signer, atDepth)
	if err != nil {
		return err
	}
	for i := range tracked {
		t := &tracked[i]
		if !unmined(t) || t.Nonce >= mined {
			continue
		}
		// Never a blind failure: one of our attempts may be mined in a
		// block the follower did not match (older than its window).
		if r, err := fl.minedAttempt(ctx, t); err != nil || r != nil {
			// Mined after all (SIGNED too: a node mined what it refused):
			// recorded now, as the chain has it.
			if err == nil {
				err = fl.mined(ctx, f, t, *r, head)
			}
			if err != nil {
				return err
			}
			continue
		}
		fl.cfg.Log.Error("nonce consumed outside txfence: transaction failed", "tx_id", t.TxID, "signer", f.Key.Signer,
			"nonce", t.Nonce, "mined_nonce", mined, "block", atDepth, "alert", true)
		if _, err := fl.cfg.Store.ConsumedExternally(ctx, f, t.TxID); err != nil {
			return err
		}
		t.State = txmanager.StateFailed
	}
	return nil
}

// minedAttempt asks the node for the receipts of t's attempts (one batch)
// and returns the first it has, nil when none is mined.
func (fl *Follower) minedAttempt(ctx context.Context, t *txmanager.Tracked) (*txmanager.Receipt, error) {
	hashes := make([]common.Hash, 0, len(t.Attempts))
	for h := range t.Attempts {
		hashes = append(hashes, h)
	}
	receipts, err := fl.cfg.RPC.TransactionReceipts(ctx, hashes)
	if err != nil {
		return nil, err
	}
	for h, r := range receipts {
		stored := r.stored(t.Attempts[h])
		return &stored, nil
	}
	return nil, nil
}

// finalized is the node's finalized block when one of tracked is mined
// and not final yet (one call), nil otherwise. A finalized block the
// window holds under another hash is not believed (a lagging or confused
// node): nothing becomes final on it.
func (fl *Follower) finalized(ctx context.Context, tracked []txmanager.Tracked) (*Block, error) {
	needed := false
	for i := range tracked {
		needed = needed || (tracked[i].State == txmanager.StateBroadcasted && tracked[i].Mined != nil)
	}
	if !needed {
		return nil, nil
	}
	b, err := fl.cfg.RPC.Finalized(ctx)
	if errors.Is(err, errNoBlock) {
		return nil, nil // nothing finalized yet
	}
	if err != nil {
		return nil, err
	}
	if canonical, known := fl.window.Canonical(b.Number, b.Hash); known && !canonical {
		fl.cfg.Log.Warn("the node's finalized block is not on the chain the follower sees", "block", b.Number, "hash", b.Hash)
		return nil, nil
	}
	return &b, nil
}

// trackedFrom is the lowest block whose final transactions stay tracked
// (a reorg may still take that block away).
func (fl *Follower) trackedFrom(head Block) uint64 {
	if head.Number > uint64(fl.window.depth) {
		return head.Number - uint64(fl.window.depth)
	}
	return 0
}

// view returns f's signer's tracked transactions in nonce order: read
// whole under a new lease, else brought up to date with what changed since
// the last read (the event feed says which), and the final ones whose
// block fell out of reach dropped.
func (fl *Follower) view(ctx context.Context, f txmanager.Fence, head Block) ([]txmanager.Tracked, error) {
	from := fl.trackedFrom(head)
	v := fl.views[f.Key]
	if v == nil || v.token != f.Token {
		seq, err := fl.cfg.Store.FeedHead(ctx) // first: what changes meanwhile is read again
		if err != nil {
			return nil, err
		}
		all, err := fl.cfg.Store.Tracking(ctx, f.Key, from)
		if err != nil {
			return nil, err
		}
		v = &signerView{token: f.Token, seq: seq, txs: make(map[uuid.UUID]txmanager.Tracked, len(all))}
		for _, t := range all {
			v.txs[t.TxID] = t
		}
		fl.views[f.Key] = v
	} else {
		rows, changed, seq, err := fl.cfg.Store.TrackingSince(ctx, f.Key, from, v.seq)
		if err != nil {
			return nil, err
		}
		for _, id := range changed {
			delete(v.txs, id)
		}
		for _, t := range rows {
			v.txs[t.TxID] = t
		}
		v.seq = seq
	}
	out := make([]txmanager.Tracked, 0, len(v.txs))
	for id, t := range v.txs {
		if t.State.Terminal() && (t.Mined == nil || t.Mined.BlockNumber < from) {
			delete(v.txs, id)
			continue
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b txmanager.Tracked) int { return cmp.Compare(a.Nonce, b.Nonce) })
	return out, nil
}

// keep writes a step's changes back into f's view, so that the next step
// starts from them even before their events are numbered in the feed.
func (fl *Follower) keep(f txmanager.Fence, tracked []txmanager.Tracked) {
	v := fl.views[f.Key]
	if v == nil || v.token != f.Token {
		return
	}
	for _, t := range tracked {
		switch t.State {
		case txmanager.StateBroadcasted, txmanager.StateSigned, txmanager.StateConfirmed, txmanager.StateReverted, txmanager.StateCancelled:
			v.txs[t.TxID] = t
		default:
			delete(v.txs, t.TxID)
		}
	}
}

// stillMined tells, after a change deeper than the window, whether t's
// receipt is still on the canonical chain (one receipt call).
func (fl *Follower) stillMined(ctx context.Context, t *txmanager.Tracked) bool {
	rs, err := fl.cfg.RPC.BlockReceipts(ctx, t.Mined.BlockHash, []common.Hash{t.Mined.Hash})
	return err == nil && len(rs) == 1
}

// reopen forgets t's orphaned receipt.
func (fl *Follower) reopen(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked) error {
	fl.cfg.Log.Warn("reorg: a receipt left the canonical chain; transaction re-opened",
		"tx_id", t.TxID, "hash", t.Mined.Hash, "block", t.Mined.BlockNumber, "block_hash", t.Mined.BlockHash, "was", t.State)
	if err := fl.cfg.Store.Reorged(ctx, f, t.TxID, *t.Mined); err != nil {
		return err
	}
	t.State, t.Mined, t.Confirmations, t.WaitingSince = txmanager.StateBroadcasted, nil, 0, nil
	return nil
}

// resend sends t's last attempt again after a reorg took it out of the
// chain, claimed first like any resend (with its tx.attempt event, kind
// resend, after the tx.reorged); a node that still has it answers
// "already known".
func (fl *Follower) resend(ctx context.Context, f txmanager.Fence, t *txmanager.Tracked) {
	fl.claimAndSend(ctx, f, t, "resend after a reorg refused; resubmission tries again")
}
