package follow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
)

// Config is one chain's follower.
type Config struct {
	Chain txmanager.Chain
	// RPC reads the chain's blocks and receipts.
	RPC   *RPC
	Store *postgres.Store
	// Router re-sends an attempt a reorg took out of the chain.
	Router *remote.Router
	// Fences are the leases this node holds (lease.Manager's Fences); the
	// follower works on this chain's signers among them.
	Fences func() []txmanager.Fence
	// Fenced is told when a write was fenced (lease.Manager's Fenced).
	Fenced    func(txmanager.Fence)
	PollEvery time.Duration
	Log       *slog.Logger
	// Blocks, when set, counts the new canonical blocks processed, by
	// chain (with the RPC's Counted, the cost per block).
	Blocks *prometheus.CounterVec
}

// Metrics are the followers' counters: new canonical blocks and RPC calls
// by method, per chain, so that the cost per block can be watched.
type Metrics struct {
	Blocks *prometheus.CounterVec
	Calls  *prometheus.CounterVec
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
	}
	for _, c := range []prometheus.Collector{m.Blocks, m.Calls} {
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
}

// New makes a follower; Run drives it, Step is one pass.
func New(cfg Config) *Follower {
	depth := max(cfg.Chain.Confirmations, 1)
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Log = cfg.Log.With("chain_id", cfg.Chain.ID)
	// Deep enough to see a reorg of a transaction CONFIRMED a while ago.
	return &Follower{cfg: cfg, depth: depth, window: NewWindow(int(max(4*depth, 64)))}
}

// Run steps every PollEvery until ctx ends.
func (fl *Follower) Run(ctx context.Context) {
	tick := time.NewTicker(fl.cfg.PollEvery)
	defer tick.Stop()
	for {
		if err := fl.Step(ctx); err != nil && ctx.Err() == nil {
			fl.cfg.Log.Warn("chain follower step failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Step reads the chain's head once and acts on what changed: reorged
// receipts re-open their transactions, new blocks are matched against
// every tracked attempt, confirmations are counted and final ones end.
func (fl *Follower) Step(ctx context.Context) error {
	ch, err := fl.window.Update(ctx, fl.cfg.RPC)
	deep := errors.Is(err, ErrDeepReorg)
	if err != nil && !deep {
		return err
	}
	if len(ch.Added) == 0 && !ch.Reorg() {
		return nil
	}
	if fl.cfg.Blocks != nil {
		fl.cfg.Blocks.WithLabelValues(strconv.FormatUint(fl.cfg.Chain.ID, 10)).Add(float64(len(ch.Added)))
	}
	head, _ := fl.window.Head()
	if deep {
		fl.cfg.Log.Error("the chain changed deeper than the follower's window: checking every receipt again", "head", head.Number, "alert", true)
	}
	removed := make(map[common.Hash]bool, len(ch.Removed))
	for _, b := range ch.Removed {
		removed[b.Hash] = true
	}
	var errs []error
	for _, f := range fl.fences() {
		if err := fl.stepSigner(ctx, f, ch, removed, deep, head); err != nil {
			if errors.Is(err, txmanager.ErrFenced) && fl.cfg.Fenced != nil {
				fl.cfg.Fenced(f)
			}
			errs = append(errs, fmt.Errorf("%s: %w", f.Key, err))
		}
	}
	return errors.Join(errs...)
}

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
func (fl *Follower) stepSigner(ctx context.Context, f txmanager.Fence, ch Change, removed map[common.Hash]bool, deep bool, head Block) error {
	from := uint64(0)
	if head.Number > uint64(fl.window.depth) {
		from = head.Number - uint64(fl.window.depth)
	}
	tracked, err := fl.cfg.Store.Tracking(ctx, f.Key, from)
	if err != nil {
		return err
	}
	byHash := make(map[common.Hash]*postgres.Tracked)
	reopened := make(map[uuid.UUID]bool)
	for i := range tracked {
		t := &tracked[i]
		if t.Mined != nil && (removed[t.Mined.BlockHash] || (deep && !fl.stillMined(ctx, t))) {
			if err := fl.reopen(ctx, f, t); err != nil {
				return err
			}
			reopened[t.TxID] = true
		}
		if t.State == txmanager.StateBroadcasted && t.Mined == nil {
			for h := range t.Attempts {
				byHash[h] = t
			}
		}
	}
	// New blocks, lowest first: what of ours each holds.
	for _, b := range ch.Added {
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
			rec := postgres.Receipt{Attempt: t.Attempts[r.TxHash], Hash: r.TxHash, BlockNumber: r.BlockNumber, BlockHash: r.BlockHash,
				Status: r.Status, GasUsed: r.GasUsed, EffectiveGasPrice: r.EffectiveGasPrice}
			confirmations := head.Number - r.BlockNumber + 1
			if err := fl.cfg.Store.Mined(ctx, f, t.TxID, rec, confirmations); err != nil {
				return err
			}
			t.Mined, t.Confirmations = &rec, confirmations
			delete(reopened, t.TxID)
		}
	}
	// Confirmations of everything mined, and the end at the depth.
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
		case confirmations >= fl.depth:
			if _, err := fl.cfg.Store.Final(ctx, f, t.TxID, *t.Mined); err != nil {
				return err
			}
		case confirmations != t.Confirmations:
			if err := fl.cfg.Store.Confirmed(ctx, f, t.TxID, *t.Mined, confirmations); err != nil {
				return err
			}
		}
	}
	// Re-opened and not found again in the new blocks: sent again.
	for id := range reopened {
		for i := range tracked {
			if tracked[i].TxID == id {
				fl.resend(ctx, &tracked[i])
			}
		}
	}
	return nil
}

// stillMined tells, after a change deeper than the window, whether t's
// receipt is still on the canonical chain (one receipt call).
func (fl *Follower) stillMined(ctx context.Context, t *postgres.Tracked) bool {
	rs, err := fl.cfg.RPC.BlockReceipts(ctx, t.Mined.BlockHash, []common.Hash{t.Mined.Hash})
	return err == nil && len(rs) == 1
}

// reopen forgets t's orphaned receipt.
func (fl *Follower) reopen(ctx context.Context, f txmanager.Fence, t *postgres.Tracked) error {
	fl.cfg.Log.Warn("reorg: a receipt left the canonical chain; transaction re-opened",
		"tx_id", t.TxID, "hash", t.Mined.Hash, "block", t.Mined.BlockNumber, "block_hash", t.Mined.BlockHash, "was", t.State)
	if err := fl.cfg.Store.Reorged(ctx, f, t.TxID, *t.Mined); err != nil {
		return err
	}
	t.State, t.Mined, t.Confirmations = txmanager.StateBroadcasted, nil, 0
	return nil
}

// resend sends t's last attempt again after a reorg took it out of the
// chain; a node that still has it answers "already known".
func (fl *Follower) resend(ctx context.Context, t *postgres.Tracked) {
	if fl.cfg.Router == nil {
		return
	}
	raws, err := fl.cfg.Store.RawAttempts(ctx, []uuid.UUID{t.TxID})
	if err != nil || raws[t.TxID] == nil {
		fl.cfg.Log.Warn("resend after a reorg: no raw attempt", "tx_id", t.TxID, "err", err)
		return
	}
	sent, err := fl.cfg.Router.Broadcast(ctx, remote.Broadcast{Raw: [][]byte{raws[t.TxID]}, Route: t.Route})
	if err != nil || len(sent) != 1 || !sent[0].Accepted {
		fl.cfg.Log.Warn("resend after a reorg refused; resubmission tries again", "tx_id", t.TxID, "err", err, "answer", sent)
	}
}
