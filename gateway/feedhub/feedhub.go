// Package feedhub is a gateway process's one reader of txmanager's event
// feed. Every open event stream of the process reads from it in memory,
// so a thousand streams cost txmanager what one does: one long poll, woken
// by a commit, and one read of the new events.
//
// The hub keeps the most recent events in a window. A stream whose
// position is inside the window is served from memory; one that starts
// or falls behind it (a resume from an old Last-Event-ID, a slow client)
// catches up by reading txmanager itself, a bounded number of such reads
// at a time, until it reaches the window. Either way a stream sees every
// event after its position once, in seq order.
package feedhub

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/shared/errs"
)

// Event is one event of the feed with its Server-Sent Events message,
// encoded once for every stream that passes it on.
type Event struct {
	components.Event
	// Message is "id: <seq>\nevent: <type>\ndata: <the event as JSON>\n\n".
	Message []byte
}

// message encodes e as a Server-Sent Events message.
func message(e *components.Event) ([]byte, error) {
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode event %d: %w", e.Seq, err)
	}
	return fmt.Appendf(nil, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Type, data), nil
}

// withMessages pairs each of events with its message.
func withMessages(events []components.Event) ([]Event, error) {
	out := make([]Event, len(events))
	for i := range events {
		m, err := message(&events[i])
		if err != nil {
			return nil, err
		}
		out[i] = Event{Event: events[i], Message: m}
	}
	return out, nil
}

// Source is txmanager's feed: up to limit events after seq after, waiting
// up to wait for the first, with the feed's head.
type Source interface {
	Feed(ctx context.Context, after uint64, limit int, wait time.Duration) (components.EventList, error)
}

// Options tune a Hub; zero values take the defaults.
type Options struct {
	// Window is how many recent events the hub keeps (default 8192).
	Window int
	// Page is how many events one read of the feed takes (default 500).
	Page int
	// Wait is the hub's long poll of the feed (default 10 s); it must stay
	// under the source's client timeout.
	Wait time.Duration
	// CatchUps bounds the reads of the feed streams behind the window
	// make at once (default 4).
	CatchUps int
	// RetryAfter is the pause after a failed read (default 1 s).
	RetryAfter time.Duration
	Logger     *slog.Logger
}

// Hub reads the feed once for the whole process and fans it out.
type Hub struct {
	src      Source
	opts     Options
	catchUps chan struct{}

	mu sync.Mutex
	// events are the window, in seq order; they cover the feed after
	// floor up to head: every event with floor < seq <= head is in it.
	events      []Event
	floor, head uint64
	started     bool
	// failure is the last read's error, nil once a read succeeds again.
	failure error
	// changed is closed, and replaced, whenever the hub learns something
	// new: events, its start, a failure.
	changed chan struct{}
}

// New returns a hub over src; Run reads the feed.
func New(src Source, opts Options) *Hub {
	if opts.Window <= 0 {
		opts.Window = 8192
	}
	if opts.Page <= 0 {
		opts.Page = 500
	}
	if opts.Wait <= 0 {
		opts.Wait = 10 * time.Second
	}
	if opts.CatchUps <= 0 {
		opts.CatchUps = 4
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Hub{src: src, opts: opts, catchUps: make(chan struct{}, opts.CatchUps), changed: make(chan struct{})}
}

// Run reads the feed until ctx ends, starting at its head: the hub serves
// what happens from now on, and streams from earlier positions catch up
// from the source.
func (h *Hub) Run(ctx context.Context) error {
	var at uint64
	for {
		var err error
		if at, err = h.Head(ctx); err == nil {
			break
		}
		if !h.fail(ctx, err) {
			return ctx.Err()
		}
	}
	h.mu.Lock()
	h.floor, h.head, h.started, h.failure = at, at, true, nil
	h.announce()
	h.mu.Unlock()

	for {
		page, err := h.src.Feed(ctx, at, h.opts.Page, h.opts.Wait)
		if err != nil {
			if !h.fail(ctx, err) {
				return ctx.Err()
			}
			continue
		}
		events, err := withMessages(page.Events)
		if err != nil { // an event the feed answered and JSON cannot hold again
			return err
		}
		if n := len(events); n > 0 {
			at = uint64(events[n-1].Seq)
		}
		h.add(events, at)
	}
}

// fail records a failed read, waits RetryAfter and reports whether to go
// on: false once ctx has ended.
func (h *Hub) fail(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	h.opts.Logger.Warn("the event feed failed; retrying", "err", err, "retry_after", h.opts.RetryAfter)
	h.mu.Lock()
	if h.failure == nil {
		h.failure = err
		h.announce()
	}
	h.mu.Unlock()
	select {
	case <-ctx.Done():
		return false
	case <-time.After(h.opts.RetryAfter):
		return true
	}
}

// add appends the events read up to head to the window, drops what falls
// out of it, and wakes the waiting streams.
func (h *Hub) add(events []Event, head uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failure = nil
	if len(events) == 0 && head == h.head {
		return
	}
	h.events = append(h.events, events...)
	h.head = head
	if over := len(h.events) - h.opts.Window; over > 0 {
		h.floor = uint64(h.events[over-1].Seq)
		// A fresh array: the streams still reading the old one keep it
		// until they are done, and it does not grow without end.
		h.events = append(make([]Event, 0, h.opts.Window+h.opts.Page), h.events[over:]...)
	}
	h.announce()
}

// announce wakes every waiting stream; h.mu is held.
func (h *Hub) announce() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// Head is the seq a stream that starts now starts after: the feed's
// head as the source answers it now, not as the hub last read it, so that
// an event committed before the stream opened is not passed on as new.
// It costs the source one read per stream opened, never one per wait.
func (h *Hub) Head(ctx context.Context) (uint64, error) {
	page, err := h.src.Feed(ctx, math.MaxInt64>>1, 1, 0)
	if err != nil {
		return 0, err
	}
	if page.HeadSeq == nil {
		return 0, nil
	}
	return uint64(*page.HeadSeq), nil
}

// Next returns up to limit events after seq after, in seq order, waiting
// up to wait for the first. No events and no error means none came in
// time. Once the hub's reads fail, a stream inside the window gets the
// failure, so that its client reconnects rather than waits on a feed that
// may be gone.
func (h *Hub) Next(ctx context.Context, after uint64, limit int, wait time.Duration) ([]Event, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		h.mu.Lock()
		started, floor, head, failure, changed := h.started, h.floor, h.head, h.failure, h.changed
		var events []Event
		if started && after >= floor && after < head {
			events = h.window(after, limit)
		}
		h.mu.Unlock()
		switch {
		case len(events) > 0:
			return events, nil
		case started && after < floor:
			return h.catchUp(ctx, after, limit)
		case failure != nil:
			return nil, failure
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		case <-changed:
		}
	}
}

// window is up to limit events of the window after seq after; h.mu is
// held. The slice shares the window's array, which add never writes
// below its length.
func (h *Hub) window(after uint64, limit int) []Event {
	i := sort.Search(len(h.events), func(i int) bool { return uint64(h.events[i].Seq) > after })
	end := min(len(h.events), i+limit)
	return h.events[i:end:end]
}

// catchUp reads events behind the window from the source, CatchUps
// streams at a time.
func (h *Hub) catchUp(ctx context.Context, after uint64, limit int) ([]Event, error) {
	select {
	case h.catchUps <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-h.catchUps }()
	page, err := h.src.Feed(ctx, after, limit, 0)
	if err != nil {
		return nil, err
	}
	if len(page.Events) == 0 {
		// The source has nothing after a position behind the window: the
		// feed does not hold it any more, or never did.
		return nil, errs.Errorf(errs.Internal, "the event feed has no events after %d, which is behind the events this gateway holds", after)
	}
	return withMessages(page.Events)
}
