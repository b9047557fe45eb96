// Package consumer books txmanager's event feed: each transaction that
// ends CONFIRMED, REVERTED or CANCELLED by a mined cancel is read from the
// ledger's own chain endpoint, pinned to the block the event names, and
// booked by the booking rules; a tx.reorged event for a booked block books
// the reversal. The two transactions of a transfer between chains, which
// their INIT events link by a transit id, are booked through in_transit
// accounts (transit.go). Each page of events is booked in one transaction
// with the feed's cursor (ledger.ConsumerStore.BookFeed), so a crash anywhere
// books nothing twice and skips nothing. An event that one chain's
// trouble keeps from being booked goes to that chain's backlog, in the
// same transaction, and the feed goes on for the other chains
// (backlog.go).
package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"golang.org/x/sync/errgroup"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/ledger/internal/retry"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/feed"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/rpcpool"
)

// Feed names txmanager's feed in the ledger's cursors.
const Feed = "txmanager"

// Consumer books the feed. Run one per ledger deployment: a second one is
// harmless (the cursor refuses it) but idle.
type Consumer struct {
	Store ledger.ConsumerStore
	// API reads the feed, as identity ledger.
	API *txmanagerapi.ClientWithResponses
	// Readers read each chain, by chain id.
	Readers map[uint64]*chain.Reader
	Log     *slog.Logger
	// PageSize bounds a page of events; Wait how long an empty read
	// waits for new ones. Defaults 500 and 10 s.
	PageSize int
	Wait     time.Duration
	// AfterBook, when set, runs right after a page's booking commits,
	// before anything else: fault injection for the crash tests
	// (ledgerd's TEST_CRASH_AFTER).
	AfterBook func()
	// Halted, when set, reports whether ledgerd has halted a chain: its
	// settlements and reorgs go to the backlog unread, until a ledgerd
	// that has not halted it books them.
	Halted func(chainID uint64) bool
	// ReadTimeout bounds each read of a chain (default 10 s): an endpoint
	// that does not answer delays the other chains' events by that much,
	// once, and then its chain's backlog is tried again only now and then
	// (backlog.go).
	ReadTimeout time.Duration
	// BacklogAlertAfter is how long a chain may have a backlog for a
	// reason that normally passes (its endpoint behind, a wallet not
	// opened yet) before an alert; default a minute.
	BacklogAlertAfter time.Duration

	mu sync.Mutex
	// wallets is the registry: each wallet's opening block, nil until the
	// scanner opens it.
	wallets map[ledger.WalletKey]*ledger.Block
	// holds are the chains with a backlog, as this process knows them.
	holds map[uint64]*hold
}

func (c *Consumer) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// BooksAt reports whether addr is a wallet of chain opened before block:
// one whose movements in block the ledger books.
func (c *Consumer) BooksAt(chainID uint64, addr common.Address, block uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	opened := c.wallets[ledger.WalletKey{ChainID: chainID, Address: addr}]
	return opened != nil && opened.Number < block
}

// pageBooking is what a page being booked has made so far.
type pageBooking struct {
	keys     map[string]bool           // journals
	reversed map[string]bool           // keys of the journals it reverses
	signers  map[ledger.WalletKey]bool // wallets it registers
	settled  map[settlementPin]settlementRead
	transits *transitPage
}

// settlementPin names a transaction settled in a block, at its height.
type settlementPin struct {
	chainID uint64
	hash    common.Hash
	block   common.Hash
	number  uint64
}

// settlementRead is what the chain said of one.
type settlementRead struct {
	s   *booking.Settled
	err error
}

// readAhead bounds the settlements read from the chain at once.
const readAhead = 8

// defaultReadTimeout is a Consumer's ReadTimeout by default.
const defaultReadTimeout = 10 * time.Second

// read reads the settlement pin names from its chain, within ReadTimeout.
func (c *Consumer) read(ctx context.Context, pin settlementPin) (*booking.Settled, error) {
	timeout := c.ReadTimeout
	if timeout <= 0 {
		timeout = defaultReadTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// An endpoint of the chain's pool behind the block would answer "no
	// receipt": only one at its height is asked.
	return c.Readers[pin.chainID].Settled(rpcpool.AtHead(ctx, pin.number), pin.hash, pin.block)
}

// prefetch reads every settlement of events (in feed order) from the
// chain, readAhead at once: read one by one as they are booked, a replay
// would wait on the node for each. Once a chain's endpoint fails to
// answer, its later settlements are not read: they go to the backlog
// behind the one that failed, and an endpoint that does not answer would
// make each wait ReadTimeout. What is not read here is read when booked.
func (c *Consumer) prefetch(ctx context.Context, events []components.Event) map[settlementPin]settlementRead {
	type pending struct {
		pin settlementPin
		seq uint64
	}
	var pins []pending
	seen := map[settlementPin]bool{}
	for _, ev := range events {
		if pin, ok := settlementOf(ev); ok && c.Readers[pin.chainID] != nil && !seen[pin] {
			seen[pin] = true
			pins = append(pins, pending{pin, uint64(ev.Seq)})
		}
	}
	out := make(map[settlementPin]settlementRead, len(pins))
	failedAt := map[uint64]uint64{} // chain -> the first seq whose read found the endpoint failing
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(readAhead)
	for _, p := range pins {
		mu.Lock()
		f, failed := failedAt[p.pin.chainID]
		mu.Unlock()
		if failed && p.seq > f {
			continue
		}
		g.Go(func() error {
			s, err := c.read(ctx, p.pin)
			mu.Lock()
			defer mu.Unlock()
			out[p.pin] = settlementRead{s: s, err: err}
			if errs.Is(err, errs.Unavailable) {
				if f, ok := failedAt[p.pin.chainID]; !ok || p.seq < f {
					failedAt[p.pin.chainID] = p.seq
				}
			}
			return nil
		})
	}
	_ = g.Wait() // each read keeps its own error
	return out
}

// settlementOf is the settlement ev announces, if it announces one.
func settlementOf(ev components.Event) (settlementPin, bool) {
	if ev.Type != components.EventTxStateChanged {
		return settlementPin{}, false
	}
	var d stateChanged
	if json.Unmarshal(ev.Data, &d) != nil || !final(d.ToState, d.Reason) || d.Hash == nil || d.BlockHash == nil {
		return settlementPin{}, false
	}
	return settlementPin{chainID: uint64(ev.ChainId), hash: *d.Hash, block: *d.BlockHash, number: d.BlockNumber}, true
}

// unopened returns the first of addrs that is a wallet of chain not opened
// yet (registered, or being registered by page), reading the registry
// again before it answers so.
func (c *Consumer) unopened(ctx context.Context, chainID uint64, addrs []common.Address, page *pageBooking) (common.Address, bool, error) {
	find := func() (common.Address, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, a := range addrs {
			w := ledger.WalletKey{ChainID: chainID, Address: a}
			if opened, ok := c.wallets[w]; (ok && opened == nil) || (!ok && page.signers[w]) {
				return a, true
			}
		}
		return common.Address{}, false
	}
	if _, ok := find(); !ok {
		return common.Address{}, false, nil
	}
	if err := c.loadWallets(ctx, true); err != nil {
		return common.Address{}, false, err
	}
	a, ok := find()
	return a, ok, nil
}

// loadWallets reads the wallet registry: once, or again when reload.
func (c *Consumer) loadWallets(ctx context.Context, reload bool) error {
	c.mu.Lock()
	loaded := c.wallets != nil
	c.mu.Unlock()
	if loaded && !reload {
		return nil
	}
	ws, err := c.Store.Wallets(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wallets = make(map[ledger.WalletKey]*ledger.Block, len(ws))
	for _, w := range ws {
		c.wallets[w.WalletKey] = w.Opened
	}
	return nil
}

// Step books the next page of the feed, and what it can of the chains'
// backlogs before it, and returns how many events it booked or moved to
// the backlog. On an error nothing of the page is booked: the next Step
// reads it again.
func (c *Consumer) Step(ctx context.Context) (int, error) {
	if err := c.loadWallets(ctx, false); err != nil {
		return 0, err
	}
	cursor, err := c.Store.Cursor(ctx, Feed)
	if err != nil {
		return 0, err
	}
	// Read in every step, not kept: another consumer may have changed
	// it. The cursor, checked when the page is booked, keeps two from
	// booking the same events; the backlog rows they book, from booking
	// the same backlog.
	backlogs, err := c.Store.BacklogChains(ctx, Feed)
	if err != nil {
		return 0, err
	}
	size, wait := c.PageSize, c.Wait
	if size <= 0 {
		size = 500
	}
	if wait <= 0 {
		wait = 10 * time.Second
	}
	drains, wait, err := c.dueBacklogs(ctx, backlogs, size, wait)
	if err != nil {
		return 0, err
	}
	page, err := feed.Read(ctx, c.API, cursor, size, wait)
	if err != nil {
		return 0, err
	}
	if len(page.Events) == 0 && len(drains) == 0 {
		c.holdsAfter(chainSet(backlogs), nil, nil)
		return 0, nil
	}

	// backlogged are the chains whose events go to the backlog: those
	// with one, until it is booked whole.
	backlogged := chainSet(backlogs)
	var drainEvents []components.Event
	for _, id := range slices.Sorted(maps.Keys(drains)) {
		drainEvents = append(drainEvents, drains[id].events...)
	}
	read := slices.Clone(drainEvents)
	for _, ev := range page.Events {
		id := uint64(ev.ChainId)
		if _, draining := drains[id]; (!backlogged[id] || draining) && !c.halted(id) {
			read = append(read, ev)
		}
	}
	// Every signer is a wallet from its first event on, before anything of
	// the page is booked: a payment between two of them is internal.
	// The registry in memory learns them once they are booked.
	var signers []ledger.WalletKey
	p := &pageBooking{keys: map[string]bool{}, reversed: map[string]bool{}, signers: map[ledger.WalletKey]bool{}, settled: c.prefetch(ctx, read)}
	if p.transits, err = c.loadTransits(ctx, append(drainEvents, page.Events...)); err != nil {
		return 0, err
	}
	c.mu.Lock()
	for _, ev := range page.Events {
		w := ledger.WalletKey{ChainID: uint64(ev.ChainId), Address: common.HexToAddress(ev.Signer)}
		if _, known := c.wallets[w]; !known && !p.signers[w] {
			p.signers[w] = true
			signers = append(signers, w)
		}
	}
	c.mu.Unlock()

	var journals []*ledger.Journal
	keep := func(b eventBooking) {
		for _, j := range b.journals {
			journals = append(journals, j)
			p.keys[j.Key] = true
		}
		if b.reverses != "" {
			p.reversed[b.reverses] = true
		}
		if b.transit != nil {
			p.transits.put(b.transit)
		}
	}
	// Each chain's backlog first, oldest first: up to the first event
	// that still cannot be booked, which keeps the rest behind it.
	var drained []uint64
	drainedSeq := map[uint64]bool{}
	failed := map[uint64]*heldError{}
	for _, id := range slices.Sorted(maps.Keys(drains)) {
		d := drains[id]
		booked := 0
		for i, ev := range d.events {
			b, err := c.bookingFor(ctx, ev, p)
			var held *heldError
			if errors.As(err, &held) {
				failed[id] = held.at(d.rows[i].Seq, ev.TxId)
				break
			}
			if err == errBookFirst {
				break // the rest with the next Step
			}
			if err != nil {
				return 0, fmt.Errorf("backlog event %d (%s of tx %s): %w", ev.Seq, ev.Type, ev.TxId, err)
			}
			keep(b)
			drained, drainedSeq[uint64(ev.Seq)] = append(drained, uint64(ev.Seq)), true
			booked++
		}
		if booked == backlogs[id].Events {
			delete(backlogged, id) // booked whole: the chain follows the feed again
		}
	}

	// Then the page, in order. An event that books something of its
	// chain goes to the backlog when the chain is halted, when it has a
	// backlog (its order is kept: a reversal follows the booking it
	// reverses), or when the chain cannot book it now.
	var moved []ledger.BacklogEvent
	newly := map[uint64]*heldError{}
	to := cursor
	for _, ev := range page.Events {
		id, seq := uint64(ev.ChainId), uint64(ev.Seq)
		if drainedSeq[seq] { // the feed read again from an earlier cursor
			to = seq
			continue
		}
		if booksFromChain(ev) {
			reason := ""
			switch {
			case backlogged[id]:
				reason = ledger.BacklogQueued
			case c.halted(id):
				reason = ledger.BacklogHalted
				newly[id] = &heldError{reason: reason, err: fmt.Errorf("chain %d is halted", id), seq: seq, txID: ev.TxId}
			}
			if reason != "" {
				moved = append(moved, backlogEvent(ev, reason, ""))
				backlogged[id], to = true, seq
				continue
			}
		}
		b, err := c.bookingFor(ctx, ev, p)
		if err == errBookFirst {
			break // the page is booked up to here; the next Step goes on
		}
		var held *heldError
		if errors.As(err, &held) {
			newly[id] = held.at(seq, ev.TxId)
			moved = append(moved, backlogEvent(ev, held.reason, held.err.Error()))
			backlogged[id], to = true, seq
			continue
		}
		if err != nil {
			if to > cursor || len(drained) > 0 {
				break // book what comes before; the next Step fails here
			}
			return 0, fmt.Errorf("event %d (%s of tx %s): %w", ev.Seq, ev.Type, ev.TxId, err)
		}
		keep(b)
		to = seq
	}
	if to == cursor && len(drained) == 0 {
		c.holdsAfter(backlogged, failed, newly)
		return 0, nil
	}
	if _, err := c.Store.BookFeed(ctx, &ledger.FeedBooking{Feed: Feed, From: cursor, To: to, Signers: signers, Journals: journals,
		Transits: p.transits.written(), Backlog: moved, Drained: drained}); err != nil {
		return 0, err
	}
	if c.AfterBook != nil {
		c.AfterBook()
	}
	c.mu.Lock()
	for _, w := range signers {
		if _, known := c.wallets[w]; !known {
			c.wallets[w] = nil
		}
	}
	c.mu.Unlock()
	c.holdsAfter(backlogged, failed, newly)
	return int(to-cursor) + len(drained), nil
}

// undoneLater reports whether the feed, after settlement event ev,
// holds a tx.reorged of the same transaction and block: the settlement was
// undone. It reads the feed up to its head, without waiting.
func (c *Consumer) undoneLater(ctx context.Context, ev components.Event) (bool, error) {
	var settled stateChanged
	if err := json.Unmarshal(ev.Data, &settled); err != nil || settled.BlockHash == nil {
		return false, err
	}
	after := uint64(ev.Seq)
	for {
		page, err := feed.Read(ctx, c.API, after, 500, 0)
		if err != nil || len(page.Events) == 0 {
			return false, err
		}
		for _, later := range page.Events {
			if later.Type != components.EventTxReorged || later.TxId != ev.TxId {
				continue
			}
			var d reorged
			if err := json.Unmarshal(later.Data, &d); err != nil {
				return false, err
			}
			if d.BlockHash == *settled.BlockHash {
				return true, nil
			}
		}
		after = uint64(page.Events[len(page.Events)-1].Seq)
	}
}

// errBookFirst says an event needs what the page before it books: a
// reversal of a journal the same page made, or a settlement booked again
// after a reversal the same page makes (ConsumerStore.BookFeed tells a
// booking again from a replay by the reversal booked before it).
var errBookFirst = fmt.Errorf("book the events before this one first")

// waitOpening says a settled transaction moves a wallet the scanner has
// not opened yet: which of its legs are the wallet's depends on the block
// it is opened at.
type waitOpening struct {
	chainID uint64
	wallet  common.Address
}

func (w *waitOpening) Error() string {
	return fmt.Sprintf("waiting for the scanner to open wallet %s of chain %d", w.wallet.Hex(), w.chainID)
}

// stateChanged and reorged are the parts of the events' data the ledger
// reads.
type stateChanged struct {
	FromState string       `json:"from_state"`
	ToState   string       `json:"to_state"`
	Reason    string       `json:"reason"`
	Hash      *common.Hash `json:"hash"`
	BlockHash *common.Hash `json:"block_hash"`
	// BlockNumber is BlockHash's height: the settlement is read only from
	// an endpoint at that height or above.
	BlockNumber uint64 `json:"block_number"`
	// DependsOn and TransitID are on the INIT event: they link the two
	// ends of a transfer between chains, within TransitNamespace (the
	// tenant's, put there by the gateway). DependsOn is an array, or a
	// bare id in events txmanager wrote before a transaction could have
	// several parents.
	DependsOn        dependson.List `json:"depends_on"`
	TransitID        string         `json:"transit_id"`
	TransitNamespace string         `json:"transit_namespace"`
}

// transit is the ledger's id of the transit d names (ledger.TransitKey),
// "" when it names none or names one malformed.
func (d *stateChanged) transit() (key string, ok bool) {
	if d.TransitID == "" {
		return "", true
	}
	if !ledger.ValidClientTransitID(d.TransitID) || (d.TransitNamespace != "" && !ledger.ValidTransitNamespace(d.TransitNamespace)) {
		return "", false
	}
	return ledger.TransitKey(d.TransitNamespace, d.TransitID), true
}

// accepted reports whether d is the INIT event reporting a transaction's
// acceptance.
func (d *stateChanged) accepted() bool { return d.FromState == "" && d.ToState == "INIT" }

type reorged struct {
	Hash      common.Hash `json:"hash"`
	BlockHash common.Hash `json:"block_hash"`
	FromState string      `json:"from_state"`
}

// final reports whether a transaction in state (with reason) was settled
// on chain in a block: what the ledger books.
func final(state, reason string) bool {
	return state == "CONFIRMED" || state == "REVERTED" || (state == "CANCELLED" && reason == "cancel_mined")
}

// eventBooking is what an event books: journals, and the transit it links
// or moves, as it leaves it.
type eventBooking struct {
	journals []*ledger.Journal
	transit  *ledger.TransitWrite
	// reverses is the key of the settlement a reversal reverses.
	reverses string
}

// book is an eventBooking of journal j, or of nothing when j is nil.
func book(j *ledger.Journal) eventBooking {
	if j == nil {
		return eventBooking{}
	}
	return eventBooking{journals: []*ledger.Journal{j}}
}

// bookingFor is what ev books: a settled transaction's journal, a
// reversal, and what they do to a transit; or nothing. It changes no state
// of page: the caller keeps what it returns once the event is sure to be
// booked with the page. A *heldError says the event's chain cannot book it
// now.
func (c *Consumer) bookingFor(ctx context.Context, ev components.Event, page *pageBooking) (eventBooking, error) {
	chainID := uint64(ev.ChainId)
	switch ev.Type {
	case components.EventTxStateChanged:
		var d stateChanged
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return eventBooking{}, err // a malformed event holds the feed
		}
		if d.accepted() {
			return c.link(ev, &d, page), nil
		}
		pin, ok := settlementOf(ev)
		if !ok {
			return eventBooking{}, nil
		}
		if page.reversed[ledger.TxKey(chainID, pin.hash, pin.block)] {
			return eventBooking{}, errBookFirst // the block came back
		}
		if c.Readers[chainID] == nil {
			return eventBooking{}, &heldError{reason: ledger.BacklogNoEndpoint, err: fmt.Errorf("no chain endpoint is configured for chain %d", chainID)}
		}
		read, ok := page.settled[pin]
		if !ok {
			read.s, read.err = c.read(ctx, pin)
		}
		s, err := read.s, read.err
		if err != nil {
			if ctx.Err() != nil {
				return eventBooking{}, ctx.Err() // stopping: no trouble of the chain's
			}
			if errs.Is(err, errs.Conflict) {
				// The receipt is not in the block the event names. When
				// the feed says later that the block left the chain,
				// there is nothing to book; otherwise the node may be
				// behind: the chain waits.
				undone, lerr := c.undoneLater(ctx, ev)
				if lerr != nil {
					return eventBooking{}, lerr
				}
				if undone {
					c.log().Info("ledger: a settlement was undone by a reorg before it could be read; nothing to book",
						"seq", ev.Seq, "tx_id", fmt.Sprint(ev.TxId))
					return eventBooking{}, nil
				}
			}
			return eventBooking{}, &heldError{reason: ledger.BacklogEndpoint, err: err}
		}
		if w, ok, err := c.unopened(ctx, chainID, s.Parties(), page); err != nil || ok {
			if err != nil {
				return eventBooking{}, err
			}
			return eventBooking{}, &heldError{reason: ledger.BacklogWalletNotOpened, err: &waitOpening{chainID: chainID, wallet: w}}
		}
		if t := page.transits.ofTx(ev.TxId); t != nil && d.ToState == "CONFIRMED" {
			return c.bookEnd(ev, s, t), nil
		}
		return book(booking.Journal(s, c)), nil
	case components.EventTxReorged:
		var d reorged
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return eventBooking{}, err
		}
		// The reason is not in a reorg's data; a booked journal says what
		// was final.
		key := ledger.TxKey(chainID, d.Hash, d.BlockHash)
		if page.keys[key] {
			return eventBooking{}, errBookFirst
		}
		id, j, err := c.Store.LiveJournal(ctx, key)
		if errs.Is(err, errs.NotFound) {
			return eventBooking{}, nil // nothing was booked from that block
		}
		if err != nil {
			return eventBooking{}, err
		}
		b := book(booking.Reverse(id, j))
		b.reverses = key
		if t := page.transits.ofTx(ev.TxId); t != nil {
			return c.reopen(ctx, ev, id, t, b)
		}
		return b, nil
	}
	return eventBooking{}, nil
}

// Run books the feed until ctx ends. A failing step is retried with a
// growing pause, up to ten seconds; a failure that lasts a minute is an
// alert (ledger/internal/retry).
func (c *Consumer) Run(ctx context.Context) error {
	return retry.Run(ctx, c.log(), "booking the feed", func(ctx context.Context) error {
		_, err := c.Step(ctx)
		return err
	})
}
