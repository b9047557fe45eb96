// Package relay is the private route: transactions go to Flashbots-style
// relays and builders (package flashbots speaks their protocols), never to
// a public mempool, and a watcher reads our own node's new blocks to see
// them included or expired.
package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/flashbots"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/nodeerr"
	"github.com/txfence/txfence/shared/errs"
)

// Kind is the protocol a private relay speaks.
type Kind string

// The relay protocols.
const (
	// Protect: Flashbots Protect style eth_sendPrivateTransaction with
	// maxBlockNumber, and eth_cancelPrivateTransaction.
	Protect Kind = "protect"
	// MEVShare: MEV-Share mev_sendBundle (v0.1) of the one transaction,
	// valid up to the max block.
	MEVShare Kind = "mev-share"
	// Bundle: eth_sendBundle, which names one block: sent for the next
	// block, and again at each new block up to the max block.
	Bundle Kind = "bundle"
)

// Kinds are the relay protocols, for configuration checks.
var Kinds = []Kind{Protect, MEVShare, Bundle}

// Relay is one configured private relay or builder.
type Relay struct {
	Name   string
	Kind   Kind
	Client *flashbots.Client
}

// Options tunes the private route.
type Options struct {
	// Blocks is the default distance of the max block from the current one.
	Blocks uint64
	// Timeout bounds one relay's answer.
	Timeout time.Duration
	// PollInterval is how often the watcher asks our node for new blocks.
	PollInterval time.Duration
	// WatchAfter is how many blocks an expired, cancelled or failed send is
	// still looked for in new blocks (a builder may hold it yet).
	WatchAfter uint64
	// Retention is how long a finished send's status is kept in memory.
	Retention time.Duration
	// MaxTracked bounds the sends kept in memory.
	MaxTracked int
	Log        *slog.Logger
	Now        func() time.Time
}

// Private sends transactions to private relays only, never to a public
// endpoint unless a send expired and its request allowed the public
// fallback, and watches our own node for their inclusion.
type Private struct {
	relays []*Relay
	node   *rpc.Client
	// fallback is the public route for expired sends that allow it.
	fallback mevrouter.PublicRoute
	opts     Options
	metrics  *metrics.Chain
	log      *slog.Logger

	mu    sync.Mutex
	sends map[common.Hash]*privateSend
	// scanned is the last block searched for our transactions, once
	// watching has started.
	scanned  uint64
	watching bool
}

type privateSend struct {
	hash     common.Hash
	raw      []byte
	maxBlock uint64
	relays   []*Relay // those that accepted it
	fallback mevrouter.Fallback
	fellBack bool
	state    mevrouter.PrivateState
	block    uint64 // the including block
	// watchUntil is the last block searched for a late inclusion once the
	// send is no longer pending.
	watchUntil uint64
	sentAt     time.Time
	doneAt     time.Time
}

var _ mevrouter.PrivateRoute = (*Private)(nil)

// New makes the private route; node is our own node, used to learn the
// current block and to watch for inclusion; fallback is the public route
// for expired sends whose request allows it (nil: none).
func New(relays []*Relay, node *rpc.Client, fallback mevrouter.PublicRoute, opts Options, m *metrics.Chain) (*Private, error) {
	if len(relays) == 0 {
		return nil, errors.New("no private relay configured")
	}
	if opts.Blocks == 0 {
		opts.Blocks = 25
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.WatchAfter == 0 {
		opts.WatchAfter = 64
	}
	if opts.Retention <= 0 {
		opts.Retention = time.Hour
	}
	if opts.MaxTracked <= 0 {
		opts.MaxTracked = 100_000
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Private{relays: relays, node: node, fallback: fallback, opts: opts, metrics: m, log: opts.Log,
		sends: map[common.Hash]*privateSend{}}, nil
}

// Names lists the relays.
func (p *Private) Names() []string {
	names := make([]string, len(p.relays))
	for i, r := range p.relays {
		names[i] = r.Name
	}
	return names
}

// selectRelays resolves names to relays, refusing unknown names.
func (p *Private) selectRelays(names []string) ([]*Relay, error) {
	if len(names) == 0 {
		return p.relays, nil
	}
	var out []*Relay
	for _, n := range names {
		i := slices.IndexFunc(p.relays, func(r *Relay) bool { return r.Name == n })
		if i < 0 {
			return nil, errs.Errorf(errs.Invalid, "builders: %q is not a configured relay (configured: %v)", n, p.Names())
		}
		if !slices.Contains(out, p.relays[i]) {
			out = append(out, p.relays[i])
		}
	}
	return out, nil
}

// Prepare checks a request before anything is sent: the relays exist and
// the max block lies ahead. The request it returns names its relays and
// its max block.
func (p *Private) Prepare(ctx context.Context, req mevrouter.PrivateRequest) (mevrouter.PrivateRequest, error) {
	relays, err := p.selectRelays(req.Relays)
	if err != nil {
		return req, err
	}
	var head hexutil.Uint64
	if err := p.node.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
		return req, errs.Wrap(errs.Unavailable, "our node does not answer: cannot set or check the max block", err)
	}
	switch {
	case req.MaxBlock == 0:
		req.MaxBlock = uint64(head) + p.opts.Blocks
	case req.MaxBlock <= uint64(head):
		return req, errs.Errorf(errs.Invalid, "max_block %d is not after the current block %d", req.MaxBlock, uint64(head))
	}
	req.Relays = make([]string, len(relays))
	for i, r := range relays {
		req.Relays[i] = r.Name
	}
	p.mu.Lock()
	if !p.watching {
		p.scanned, p.watching = uint64(head), true // the watcher searches the blocks after this one
	}
	p.mu.Unlock()
	return req, nil
}

// Send sends each transaction to every relay of a prepared request
// concurrently and starts watching the ones any relay accepted.
func (p *Private) Send(ctx context.Context, raws [][]byte, hashes []common.Hash, req mevrouter.PrivateRequest) []mevrouter.Sent {
	out := make([]mevrouter.Sent, len(raws))
	relays, err := p.selectRelays(req.Relays)
	if err != nil { // Prepare named them: cannot happen
		for i := range out {
			out[i] = mevrouter.Sent{Hash: hashes[i], Err: &mevrouter.SendError{Category: nodeerr.Rejected, Message: err.Error()}}
		}
		return out
	}
	var wg sync.WaitGroup
	for i := range raws {
		wg.Go(func() { out[i] = p.sendOne(ctx, raws[i], hashes[i], relays, req.MaxBlock, req) })
	}
	wg.Wait()
	return out
}

func (p *Private) sendOne(ctx context.Context, raw []byte, hash common.Hash, relays []*Relay, maxBlock uint64, req mevrouter.PrivateRequest) mevrouter.Sent {
	type answer struct {
		relay *Relay
		err   error
	}
	answers := make([]answer, len(relays))
	var wg sync.WaitGroup
	for i, r := range relays {
		wg.Go(func() { answers[i] = answer{r, p.sendToRelay(ctx, r, raw, hash, maxBlock, req)} })
	}
	wg.Wait()

	sent := mevrouter.Sent{Hash: hash}
	s := &privateSend{hash: hash, raw: raw, maxBlock: maxBlock, fallback: req.Fallback, sentAt: p.opts.Now()}
	for _, a := range answers {
		cat := nodeerr.Classify(a.err)
		if a.err == nil || cat.Accepted() {
			sent.Accepted = true
			sent.AcceptedBy = append(sent.AcceptedBy, a.relay.Name)
			s.relays = append(s.relays, a.relay)
			continue
		}
		sent.Err = mevrouter.MoreTelling(sent.Err, &mevrouter.SendError{Category: cat, Message: a.err.Error(), Endpoint: a.relay.Name})
	}
	if sent.Accepted {
		sent.Err = nil
		s.state = mevrouter.PrivatePending
	} else {
		s.state = mevrouter.PrivateFailed
		s.doneAt = s.sentAt
		s.watchUntil = maxBlock + p.opts.WatchAfter
		p.metrics.PrivateOutcome(string(mevrouter.PrivateFailed))
	}
	if err := p.track(s); err != nil {
		sent.Err = &mevrouter.SendError{Category: nodeerr.Transient, Message: err.Error()}
	}
	return sent
}

// sendToRelay sends one transaction to one relay in its protocol.
func (p *Private) sendToRelay(ctx context.Context, r *Relay, raw []byte, hash common.Hash, maxBlock uint64, req mevrouter.PrivateRequest) error {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	start := time.Now()
	var err error
	switch r.Kind {
	case Protect:
		_, err = r.Client.SendPrivateTransaction(ctx, raw, maxBlock, protectPreferences(req))
	case MEVShare:
		var head hexutil.Uint64
		if err = p.node.CallContext(ctx, &head, "eth_blockNumber"); err == nil {
			_, err = r.Client.SendBundle(ctx, mevShareBundle(raw, uint64(head)+1, maxBlock, req))
		}
	case Bundle:
		err = p.sendEthBundle(ctx, r, raw)
	default:
		err = fmt.Errorf("relay %s has unknown kind %q", r.Name, r.Kind)
	}
	p.metrics.EndpointLatency(r.Name, mevrouter.RoutePrivate, time.Since(start))
	result := "accepted"
	if err != nil {
		result = string(nodeerr.Classify(err))
		p.log.Warn("private relay refused", "relay", r.Name, "tx_hash", hash, "err", err)
	}
	p.metrics.EndpointSends(r.Name, mevrouter.RoutePrivate, result, 1)
	return err
}

// protectPreferences are the eth_sendPrivateTransaction preferences of
// a request: its hints, and fast mode.
func protectPreferences(req mevrouter.PrivateRequest) *flashbots.Preferences {
	prefs := &flashbots.Preferences{Fast: req.Fast}
	if len(req.Hints) > 0 {
		prefs.Privacy = &flashbots.Privacy{Hints: hints(req.Hints)}
	}
	return prefs
}

// mevShareBundle is the mev_sendBundle (v0.1) of one transaction, valid
// from the next block to maxBlock, that must not revert.
func mevShareBundle(raw []byte, next, maxBlock uint64, req mevrouter.PrivateRequest) *flashbots.MevBundle {
	b := &flashbots.MevBundle{
		Version:   flashbots.BundleVersion,
		Inclusion: flashbots.Inclusion{Block: next, MaxBlock: maxBlock},
		Body:      []flashbots.BundleItem{{Tx: raw}},
	}
	if len(req.Hints) > 0 {
		b.Privacy = &flashbots.Privacy{Hints: hints(req.Hints)}
	}
	return b
}

func hints(names []string) []flashbots.Hint {
	out := make([]flashbots.Hint, len(names))
	for i, n := range names {
		out[i] = flashbots.Hint(n)
	}
	return out
}

// sendEthBundle sends a one-transaction eth_sendBundle for the next block.
func (p *Private) sendEthBundle(ctx context.Context, r *Relay, raw []byte) error {
	var head hexutil.Uint64
	if err := p.node.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
		return err
	}
	_, err := r.Client.SendEthBundle(ctx, flashbots.EthBundle{Txs: [][]byte{raw}, BlockNumber: uint64(head) + 1})
	return err
}

// track remembers a send, making room by forgetting the oldest finished
// ones when the table is full. A table full of pending sends refuses.
func (p *Private) track(s *privateSend) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.sends[s.hash]; ok && old.state == mevrouter.PrivatePending {
		// The same transaction again: keep the first send's watch, add
		// the relays that took it this time.
		for _, r := range s.relays {
			if !slices.Contains(old.relays, r) {
				old.relays = append(old.relays, r)
			}
		}
		old.maxBlock = max(old.maxBlock, s.maxBlock)
		return nil
	}
	if len(p.sends) >= p.opts.MaxTracked {
		p.forgetLocked(p.opts.Now(), true)
		if len(p.sends) >= p.opts.MaxTracked {
			return fmt.Errorf("%d private sends are pending: no room to watch another", len(p.sends))
		}
	}
	p.sends[s.hash] = s
	return nil
}

// Status reports a send this process made.
func (p *Private) Status(hash common.Hash) (mevrouter.Status, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.sends[hash]
	if !ok {
		return mevrouter.Status{}, false
	}
	return s.status(), true
}

func (s *privateSend) status() mevrouter.Status {
	st := mevrouter.Status{Hash: s.hash, State: s.state, Block: s.block, MaxBlock: s.maxBlock, Fallback: s.fallback, FellBack: s.fellBack, SentAt: s.sentAt}
	for _, r := range s.relays {
		st.Relays = append(st.Relays, r.Name)
	}
	return st
}

// Cancel asks the relays that took a pending send and speak Protect to
// drop it. The send stays watched: a builder may include it anyway.
func (p *Private) Cancel(ctx context.Context, hash common.Hash) (mevrouter.Status, error) {
	p.mu.Lock()
	s, ok := p.sends[hash]
	var relays []*Relay
	if ok {
		relays = slices.Clone(s.relays)
	}
	state := mevrouter.PrivateState("")
	if ok {
		state = s.state
	}
	p.mu.Unlock()
	switch {
	case !ok:
		return mevrouter.Status{}, errs.Errorf(errs.NotFound, "no private send of %s by this mevrouterd", hash.Hex())
	case state == mevrouter.PrivateIncluded:
		return mevrouter.Status{}, errs.Errorf(errs.Conflict, "%s is already included", hash.Hex())
	case state != mevrouter.PrivatePending:
		return p.mustStatus(hash), nil
	}
	var problems []error
	for _, r := range relays {
		if r.Kind != Protect {
			continue // bundles lapse at their block; nothing to cancel
		}
		cctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
		_, err := r.Client.CancelPrivateTransaction(cctx, hash)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", r.Name, err))
		}
	}
	p.mu.Lock()
	if s.state == mevrouter.PrivatePending {
		s.state, s.doneAt = mevrouter.PrivateCancelled, p.opts.Now()
		s.watchUntil = s.maxBlock + p.opts.WatchAfter
		p.metrics.PrivateOutcome(string(mevrouter.PrivateCancelled))
	}
	st := s.status()
	p.mu.Unlock()
	if len(problems) > 0 {
		p.log.Warn("private cancel not confirmed by every relay", "tx_hash", hash, "err", errors.Join(problems...))
	}
	return st, nil
}

func (p *Private) mustStatus(hash common.Hash) mevrouter.Status {
	st, _ := p.Status(hash)
	return st
}

// Run watches for inclusion and expiry until ctx ends.
func (p *Private) Run(ctx context.Context) {
	tick := time.NewTicker(p.opts.PollInterval)
	defer tick.Stop()
	for {
		if err := p.Poll(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("private watch: our node did not answer", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// maxBlocksPerPoll bounds the blocks one poll reads, so a long outage of
// our node is caught up over several polls rather than one huge batch.
const maxBlocksPerPoll = 64

// Poll reads the blocks mined since the last poll from our node, marks the
// sends found in them included, expires pending sends whose max block has
// passed (sending them publicly when their request allowed it), re-sends
// eth_sendBundle sends for the next block, and forgets old finished sends.
func (p *Private) Poll(ctx context.Context) error {
	var head hexutil.Uint64
	if err := p.node.CallContext(ctx, &head, "eth_blockNumber"); err != nil {
		return err
	}
	p.mu.Lock()
	if !p.watching {
		p.scanned, p.watching = uint64(head), true // nothing sent yet: start with the next block
	}
	from := p.scanned + 1
	p.mu.Unlock()
	to := min(uint64(head), from+maxBlocksPerPoll-1)
	if from <= to {
		if err := p.scan(ctx, from, to); err != nil {
			return err
		}
	}
	p.expire(ctx)
	p.resendBundles(ctx, uint64(head))
	p.mu.Lock()
	p.forgetLocked(p.opts.Now(), false)
	p.mu.Unlock()
	return nil
}

// scan reads blocks from..to (their transaction hashes only) in one batch
// and marks our sends found in them.
func (p *Private) scan(ctx context.Context, from, to uint64) error {
	type block struct {
		Transactions []common.Hash `json:"transactions"`
	}
	blocks := make([]*block, to-from+1)
	elems := make([]rpc.BatchElem, len(blocks))
	for i := range elems {
		blocks[i] = &block{}
		elems[i] = rpc.BatchElem{Method: "eth_getBlockByNumber", Args: []any{hexutil.Uint64(from + uint64(i)), false}, Result: &blocks[i]}
	}
	if err := p.node.BatchCallContext(ctx, elems); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range elems {
		n := from + uint64(i)
		if e.Error != nil || blocks[i] == nil {
			// Not there yet (a node behind its own head): scan it next time.
			if e.Error != nil {
				return e.Error
			}
			return nil
		}
		for _, h := range blocks[i].Transactions {
			s, ok := p.sends[h]
			if !ok || s.state == mevrouter.PrivateIncluded {
				continue
			}
			outcome := string(mevrouter.PrivateIncluded)
			if s.state != mevrouter.PrivatePending {
				outcome = "late_included"
			}
			s.state, s.block, s.doneAt = mevrouter.PrivateIncluded, n, p.opts.Now()
			p.metrics.PrivateOutcome(outcome)
		}
		p.scanned = n
	}
	return nil
}

// expire ends the pending sends whose max block has been searched, and
// sends publicly those whose request allowed it.
func (p *Private) expire(ctx context.Context) {
	var fallbacks []*privateSend
	p.mu.Lock()
	for _, s := range p.sends {
		if s.state != mevrouter.PrivatePending || p.scanned < s.maxBlock {
			continue
		}
		s.state, s.doneAt, s.watchUntil = mevrouter.PrivateExpired, p.opts.Now(), s.maxBlock+p.opts.WatchAfter
		p.metrics.PrivateOutcome(string(mevrouter.PrivateExpired))
		if s.fallback == mevrouter.FallbackPublic && p.fallback != nil {
			s.fellBack = true
			fallbacks = append(fallbacks, s)
		}
	}
	p.mu.Unlock()
	for _, s := range fallbacks {
		sent := p.fallback.Send(ctx, [][]byte{s.raw}, []common.Hash{s.hash})[0]
		result := "accepted"
		if !sent.Accepted {
			result = string(sent.Err.Category)
		}
		p.metrics.PrivateOutcome("fell_back")
		p.metrics.Broadcast(mevrouter.RoutePublic, result)
		p.log.Info("private send expired; sent publicly as its request allowed", "tx_hash", s.hash, "max_block", s.maxBlock, "accepted", sent.Accepted)
	}
}

// resendBundles sends pending eth_sendBundle sends again for the block
// after head, as long as it is within their max block.
func (p *Private) resendBundles(ctx context.Context, head uint64) {
	type resend struct {
		relay *Relay
		raw   []byte
	}
	var due []resend
	p.mu.Lock()
	for _, s := range p.sends {
		if s.state != mevrouter.PrivatePending || head+1 > s.maxBlock {
			continue
		}
		for _, r := range s.relays {
			if r.Kind == Bundle {
				due = append(due, resend{r, s.raw})
			}
		}
	}
	p.mu.Unlock()
	for _, t := range due {
		cctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
		if _, err := t.relay.Client.SendEthBundle(cctx, flashbots.EthBundle{Txs: [][]byte{t.raw}, BlockNumber: head + 1}); err != nil {
			p.log.Warn("eth_sendBundle re-send refused", "relay", t.relay.Name, "block", head+1, "err", err)
		}
		cancel()
	}
}

// forgetLocked drops finished sends past both their watch window and the
// retention time; when full, the oldest finished sends regardless.
func (p *Private) forgetLocked(now time.Time, full bool) {
	var finished []*privateSend
	for h, s := range p.sends {
		if s.state == mevrouter.PrivatePending {
			continue
		}
		watched := s.state != mevrouter.PrivateIncluded && p.scanned <= s.watchUntil
		if !watched && now.Sub(s.doneAt) > p.opts.Retention {
			delete(p.sends, h)
			continue
		}
		finished = append(finished, s)
	}
	if !full || len(p.sends) < p.opts.MaxTracked || len(finished) == 0 {
		return
	}
	slices.SortFunc(finished, func(a, b *privateSend) int { return a.doneAt.Compare(b.doneAt) })
	for _, s := range finished[:max(1, len(finished)/10)] {
		delete(p.sends, s.hash)
	}
}
