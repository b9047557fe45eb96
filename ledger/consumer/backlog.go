package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/openapi/components"
)

// The backlog. txmanager's feed is one ordered stream for every chain and
// the consumer has one cursor in it, so an event it cannot book would hold
// every chain behind it. Some events cannot be booked now for a reason of
// their chain alone: the chain is halted (ledgerd stopped following it),
// its endpoint does not answer or does not have the receipt in the block
// the event names yet (down, behind, or serving another chain), none is
// configured, or a wallet it moves is not opened yet (the scanner opens
// it). Such an event is moved to its chain's backlog (postgres
// feed_backlog) in the transaction that moves the cursor past it, and the
// feed goes on for the other chains.
//
// Why a durable backlog rather than skipping, or one cursor per chain:
// skipping would lose settled facts; a cursor per chain would read the
// whole feed once per chain, and the feed's transit links (INIT events of
// two chains) need one order across chains. With the backlog, each event
// is in exactly one place at each commit: before the cursor, booked;
// before the cursor, in the backlog; or after the cursor. A crash books
// nothing twice and loses nothing, and reading the feed again is still a
// no-op (an event in the backlog already stays as it is; a journal booked
// already is a replay).
//
// Order is kept per chain: once a chain has a backlog, every later event
// of it that books something (settlements, reorgs) goes to the backlog
// too, and the backlog is booked oldest first, before any newer event of
// the chain, up to the first event that still cannot be booked. A
// reversal must follow the booking it reverses, and a re-inclusion the
// reversal. Events that book nothing of their chain (a transit's INIT
// link, the states on the way) are never set aside: a transit's link must
// be read in feed order across chains.
//
// A halted chain's events are not read at all: its endpoint may serve
// another chain, and its scanner opens no wallet. A chain whose endpoint
// failed is tried again after a pause that doubles from retryMin to
// retryMax: an endpoint that does not answer costs the other chains one
// ReadTimeout per try, not one per event.

// Pauses before a chain's backlog is tried again after a failed try.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
)

// defaultBacklogAlertAfter is a Consumer's BacklogAlertAfter by default.
const defaultBacklogAlertAfter = time.Minute

// heldError says an event's chain cannot book it now: it goes to the
// backlog, for reason.
type heldError struct {
	reason string
	err    error
	// seq and txID name the event, once known.
	seq  uint64
	txID string
}

func (h *heldError) Error() string { return h.err.Error() }
func (h *heldError) Unwrap() error { return h.err }

// at is h, of event seq of transaction txID.
func (h *heldError) at(seq uint64, txID string) *heldError {
	out := *h
	out.seq, out.txID = seq, txID
	return &out
}

// hold is what this process knows of a chain with a backlog.
type hold struct {
	// since is when this process found the chain with a backlog.
	since time.Time
	// why is the latest reason the chain's events could not be booked;
	// nil while none is known (a backlog found at start, not tried yet).
	why *heldError
	// alerted says the alert has been raised for this backlog.
	alerted bool
	// next is when the backlog is tried next; pause the last pause.
	next  time.Time
	pause time.Duration
}

// drain is a chain's backlog events to try in a step, oldest first.
type drain struct {
	rows   []ledger.BacklogEvent
	events []components.Event
}

func (c *Consumer) halted(chainID uint64) bool { return c.Halted != nil && c.Halted(chainID) }

// dueBacklogs reads the backlog, up to size events per chain, of every
// chain that is not halted and whose next try is due, and shortens wait,
// the feed's long poll, to the next try of the others (whole seconds: the
// feed waits by those). A step with backlogs to try does not wait.
func (c *Consumer) dueBacklogs(ctx context.Context, backlogs map[uint64]ledger.BacklogChain, size int, wait time.Duration) (map[uint64]drain, time.Duration, error) {
	now := time.Now()
	next := map[uint64]time.Time{}
	c.mu.Lock()
	for id, h := range c.holds {
		next[id] = h.next
	}
	c.mu.Unlock()
	drains := map[uint64]drain{}
	for id := range backlogs {
		if c.halted(id) {
			continue
		}
		if d := next[id].Sub(now); d > 0 {
			wait = min(wait, max(d, time.Second))
			continue
		}
		rows, err := c.Store.Backlog(ctx, Feed, id, size)
		if err != nil {
			return nil, 0, err
		}
		d := drain{rows: rows, events: make([]components.Event, len(rows))}
		for i, row := range rows {
			if err := json.Unmarshal(row.Event, &d.events[i]); err != nil {
				return nil, 0, fmt.Errorf("chain %d's backlog event %d: %w", id, row.Seq, err)
			}
		}
		if len(rows) > 0 {
			drains[id] = d
		}
	}
	if len(drains) > 0 {
		wait = 0
	}
	return drains, wait, nil
}

// booksFromChain reports whether ev books something of its chain: a
// settlement (read from the chain) or a reorg (the reversal of what the
// chain's settlement booked). Such events keep their order per chain.
func booksFromChain(ev components.Event) bool {
	switch ev.Type {
	case components.EventTxStateChanged:
		_, ok := settlementOf(ev)
		return ok
	case components.EventTxReorged:
		var d reorged
		return json.Unmarshal(ev.Data, &d) == nil
	}
	return false
}

// backlogEvent is ev as its chain's backlog keeps it.
func backlogEvent(ev components.Event, reason, why string) ledger.BacklogEvent {
	// An event decoded from the feed encodes again: its data is JSON.
	raw, _ := json.Marshal(ev)
	return ledger.BacklogEvent{Seq: uint64(ev.Seq), ChainID: uint64(ev.ChainId), TxID: ev.TxId, Event: raw, EventAt: ev.CreatedAt,
		Reason: reason, Error: why}
}

// chainSet is the chains of backlogs.
func chainSet(backlogs map[uint64]ledger.BacklogChain) map[uint64]bool {
	out := make(map[uint64]bool, len(backlogs))
	for id := range backlogs {
		out[id] = true
	}
	return out
}

// holdsAfter records what a step left: backlogged are the chains with a
// backlog now; failed the chains whose backlog could not be booked, and
// newly those whose events the step could not book, with why. It paces
// the next tries, and logs when a chain starts and stops backlogging,
// with an alert once per backlog: at once when the chain is halted or has
// no endpoint, which do not pass by themselves, and after
// BacklogAlertAfter otherwise (an endpoint a few blocks behind, a wallet
// the scanner opens within a second, are part of normal work).
func (c *Consumer) holdsAfter(backlogged map[uint64]bool, failed, newly map[uint64]*heldError) {
	now := time.Now()
	alertAfter := c.BacklogAlertAfter
	if alertAfter <= 0 {
		alertAfter = defaultBacklogAlertAfter
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds == nil {
		c.holds = map[uint64]*hold{}
	}
	for id := range backlogged {
		h, known := c.holds[id]
		if !known {
			h = &hold{since: now}
			c.holds[id] = h
		}
		tried := failed[id]
		if tried == nil {
			tried = newly[id]
		}
		if tried == nil && c.halted(id) && (h.why == nil || h.why.reason != ledger.BacklogHalted) {
			tried = &heldError{reason: ledger.BacklogHalted, err: fmt.Errorf("chain %d is halted", id)}
		}
		if tried != nil {
			h.why = tried
			h.pause = min(max(2*h.pause, retryMin), retryMax)
			h.next = now.Add(h.pause)
		}
		log := c.log().With("chain_id", id)
		if h.why != nil {
			log = log.With("reason", h.why.reason, "err", h.why.err.Error())
			if h.why.seq != 0 {
				log = log.With("seq", h.why.seq, "tx_id", h.why.txID)
			}
		}
		lasting := h.why != nil && (h.why.reason == ledger.BacklogHalted || h.why.reason == ledger.BacklogNoEndpoint)
		const msg = "ledger: a chain's events wait in the feed backlog; the feed goes on for the other chains"
		switch {
		case h.alerted:
		case lasting || now.Sub(h.since) >= alertAfter:
			log.Error(msg, "alert", true, "backlogged_for", now.Sub(h.since).Round(time.Second).String(),
				"runbook", "docs/operations.md, ledger: a chain's events wait in the feed backlog")
			h.alerted = true
		case !known && h.why != nil:
			log.Warn(msg)
		case !known:
			log.Info("ledger: a chain has events in the feed backlog; they are booked before its newer ones")
		}
	}
	for id, h := range c.holds {
		if !backlogged[id] {
			c.log().Info("ledger: a chain's feed backlog is booked; the chain follows the feed again", "chain_id", id,
				"backlogged_for", now.Sub(h.since).Round(time.Second).String())
			delete(c.holds, id)
		}
	}
}
