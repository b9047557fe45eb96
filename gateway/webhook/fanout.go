package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/openapi/components"
)

// Bounds of the fan-out's and the workers' retries of the feed and the
// database: quick at first, since most failures are a restart nearby, and
// no slower than a few seconds, since deliveries wait on them.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 5 * time.Second
)

// retryDelay is the wait before retry n (1, 2, …) of a failing
// dependency, with jitter so that nodes do not retry in step.
func retryDelay(n int) time.Duration {
	ceiling := retryFirst
	for i := 1; i < n && ceiling < retryMax; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, retryMax)
	return ceiling/2 + rand.N(ceiling/2)
}

// fanOut reads the feed after the durable cursor and turns each page of
// events into deliveries, until ctx ends. It never moves past an event it
// has not fanned out: a failure retries the same page.
func (d *Dispatcher) fanOut(ctx context.Context) error {
	var cursor, highest uint64
	known := false // whether cursor is the database's, as far as this node knows
	failures := 0
	retry := func(what string, err error, args ...any) {
		failures++
		wait := retryDelay(failures)
		d.log.Warn("webhook fan-out: "+what, append(args, "err", err, "failures", failures, "retry_in", wait)...)
		pause(ctx, wait)
	}
	for ctx.Err() == nil {
		if !known {
			c, err := d.store.WebhookFeedCursor(ctx)
			if err != nil {
				if ctx.Err() == nil {
					retry("read the feed cursor", err)
				}
				continue
			}
			cursor, known = c, true
			d.metrics.fanoutCursor.Set(float64(cursor))
			d.metrics.fanoutLag.Set(float64(max(highest, cursor) - cursor))
		}
		asked := time.Now()
		events, head, err := d.readFeed(ctx, cursor)
		if err != nil {
			if ctx.Err() == nil {
				retry("read the event feed", err, "after", cursor)
			}
			continue
		}
		highest = max(highest, head)
		d.metrics.fanoutLag.Set(float64(max(highest, cursor) - cursor))
		if len(events) == 0 {
			failures = 0
			// A feed that answers at once instead of waiting must not
			// turn this loop into a busy one.
			if time.Since(asked) < d.opts.FeedWait/2 {
				pause(ctx, d.opts.PollInterval)
			}
			continue
		}
		if gap := checkContiguous(cursor, events); gap != nil {
			// txmanager's feed is gap-free by contract: skipping ahead
			// would lose events for good, so stop here and shout.
			failures++
			wait := retryDelay(failures)
			d.log.Error("webhook fan-out: the event feed skipped a sequence; not moving past it", "after", cursor, "err", gap,
				"alert", true, "retry_in", wait)
			pause(ctx, wait)
			continue
		}
		through := uint64(events[len(events)-1].Seq)
		highest = max(highest, through)
		d.metrics.fanoutLag.Set(float64(highest - cursor))
		rows := d.feedEvents(events)
		advanced, queued, err := d.writeFanOut(ctx, cursor, through, rows)
		if err != nil {
			if ctx.Err() == nil {
				retry("queue deliveries", err, "after", cursor, "through", through)
			}
			continue
		}
		failures = 0
		if !advanced {
			// Another node fanned these out first: carry on from where
			// it got to.
			known = false
			continue
		}
		cursor = through
		d.metrics.fanoutCursor.Set(float64(cursor))
		d.metrics.fanoutLag.Set(float64(highest - cursor))
		d.metrics.fannedOut.Add(float64(len(events)))
		d.metrics.queued.Add(float64(queued))
		if queued > 0 {
			d.log.Debug("webhook deliveries queued", "through_seq", through, "events", len(events), "deliveries", queued)
			d.wakeWorkers()
		}
	}
	return nil
}

// headFeed is a Feed that also says where its head is, as
// remote.TxManager's Feed does: the fan-out lag is then the distance to
// the newest event rather than to the newest this node has read.
type headFeed interface {
	Feed(ctx context.Context, after uint64, limit int, wait time.Duration) (components.EventList, error)
}

// readFeed reads a page of events after cursor and the feed's head as far
// as known (0 when the feed does not say).
func (d *Dispatcher) readFeed(ctx context.Context, cursor uint64) ([]components.Event, uint64, error) {
	hf, ok := d.feed.(headFeed)
	if !ok {
		events, err := d.feed.EventsAfter(ctx, cursor, d.opts.FeedBatch, d.opts.FeedWait)
		return events, 0, err
	}
	page, err := hf.Feed(ctx, cursor, d.opts.FeedBatch, d.opts.FeedWait)
	var head uint64
	if page.HeadSeq != nil && *page.HeadSeq > 0 {
		head = uint64(*page.HeadSeq)
	}
	return page.Events, head, err
}

// checkContiguous verifies that events are after+1, after+2, ….
func checkContiguous(after uint64, events []components.Event) error {
	for i, e := range events {
		if want := after + 1 + uint64(i); e.Seq < 1 || uint64(e.Seq) != want {
			return fmt.Errorf("got event %d where %d was due", e.Seq, want)
		}
	}
	return nil
}

// feedEvents turns feed events into the rows the store matches against
// subscriptions. An event whose signer is not an address can be
// attributed to no tenant, so it is left out (and reported): holding the
// feed back for it would stop every tenant's webhooks.
func (d *Dispatcher) feedEvents(events []components.Event) []gateway.FeedEvent {
	rows := make([]gateway.FeedEvent, 0, len(events))
	for _, e := range events {
		body, err := json.Marshal(e)
		if err != nil || e.ChainId < 1 || !common.IsHexAddress(e.Signer) {
			d.log.Error("webhook fan-out: an event names no valid chain and signer; no subscription gets it",
				"event_seq", e.Seq, "event_id", e.Id, "chain_id", e.ChainId, "signer", e.Signer, "err", err, "alert", true)
			continue
		}
		rows = append(rows, gateway.FeedEvent{
			Seq: uint64(e.Seq), ID: e.Id, Type: string(e.Type), TxID: e.TxId,
			ChainID: uint64(e.ChainId), Signer: common.HexToAddress(e.Signer), Body: body,
		})
	}
	return rows
}

// fanOutWriteTimeout bounds one page's fan-out write once it has started.
const fanOutWriteTimeout = 30 * time.Second

// writeFanOut queues one page's deliveries and moves the cursor past it. A
// stop does not cut the write short: cancelled during COMMIT, pgx reports
// an error for a transaction the server may have committed, and this node
// would then neither count the page (its metrics undercounting what it
// fanned out) nor know where the cursor stands. The write runs to its end,
// bounded by fanOutWriteTimeout, and the loop stops after it.
func (d *Dispatcher) writeFanOut(ctx context.Context, after, through uint64, rows []gateway.FeedEvent) (advanced bool, queued int64, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fanOutWriteTimeout)
	defer cancel()
	return d.store.FanOut(ctx, after, through, rows)
}
