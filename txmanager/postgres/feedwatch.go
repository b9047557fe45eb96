package postgres

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/feedwatch.sql. The sequencer announces the
// feed's new head as "<schema> <head>" on the channel ListenFeed listens
// to (MoveFeedHead), which every schema of the database (other
// deployments, tests) shares.
var (
	qCurrentSchema = query("CurrentSchema")
	qListenFeed    = query("ListenFeed")
)

// feedRecheck bounds how long a head announced while the watch was not
// listening (between connections) stays unseen: the watch reads the head
// itself when no announcement came for that long.
const feedRecheck = 2 * time.Second

// FeedWatch tells the process's long polls when the feed's head moves.
// One connection LISTENs for the sequencer's announcements for every
// poll: an idle poll costs the database nothing, where each used to read
// the feed and take the event barrier every 50 ms, stalling writers.
type FeedWatch struct {
	store *Store
	log   *slog.Logger

	mu      sync.Mutex
	head    uint64
	changed chan struct{} // closed and replaced when head moves
}

var _ txmanager.FeedWaiter = (*FeedWatch)(nil)

// WatchFeed starts watching the feed's head until ctx ends.
func (s *Store) WatchFeed(ctx context.Context, log *slog.Logger) *FeedWatch {
	w := &FeedWatch{store: s, log: log, changed: make(chan struct{})}
	go w.run(ctx)
	return w
}

// Wait returns once the feed's head is above after, or with ctx's error.
func (w *FeedWatch) Wait(ctx context.Context, after uint64) error {
	for {
		w.mu.Lock()
		head, changed := w.head, w.changed
		w.mu.Unlock()
		if head > after {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

func (w *FeedWatch) moved(head uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if head > w.head {
		w.head = head
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// run listens on its own connection (not one of the pool's) and, should
// that fail, reads the head every feedRecheck until it listens again.
func (w *FeedWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := w.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("feed watch: not listening; reading the head every "+feedRecheck.String()+" until it is again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(feedRecheck):
		}
		w.readHead(ctx)
	}
}

func (w *FeedWatch) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, w.store.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, qCurrentSchema.SQL).Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, qListenFeed.SQL); err != nil {
		return err
	}
	w.readHead(ctx) // what was numbered before it listened
	for {
		wait, cancel := context.WithTimeout(ctx, feedRecheck)
		n, err := conn.WaitForNotification(wait)
		cancel()
		switch {
		case err == nil:
			from, head, _ := strings.Cut(n.Payload, " ")
			if h, perr := strconv.ParseUint(head, 10, 64); perr == nil && from == schema {
				w.moved(h)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case wait.Err() != nil:
			w.readHead(ctx) // quiet: a safety net, one read per node
		default:
			return err
		}
	}
}

func (w *FeedWatch) readHead(ctx context.Context) {
	head, err := w.store.HeadSeq(ctx)
	if err == nil {
		w.moved(head)
	}
}
