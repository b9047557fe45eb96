// Package webhook delivers txmanager's events to tenants' webhook
// subscriptions, following the Standard Webhooks convention
// (https://www.standardwebhooks.com) as openapi/components.yaml's Event
// schema describes it.
//
// A Dispatcher runs on every gateway node; PostgreSQL coordinates them.
// Its fan-out reads txmanager's ordered event feed after a durable cursor
// and, for each event, queues one delivery per matching subscription; the
// deliveries and the cursor's move commit in one transaction, a
// compare-and-set on the cursor, so no event is skipped or doubled however
// many nodes fan out at once. Its workers claim due deliveries (SKIP
// LOCKED, with a lease so that a crashed node's claims come back) and POST
// them, signed with every unexpired secret of the subscription. Delivery
// is at least once and in order per transaction: a delivery waits while an
// earlier event of the same subscription and transaction is pending. A
// failure is retried with exponential backoff and full jitter until the
// dead letter horizon (the transaction's later deliveries wait for the
// retry with it); a dead delivery no longer holds later ones back, and
// Replay queues it again.
//
// The Dispatcher is also the Service the HTTP layer calls to manage
// subscriptions, read their delivery logs, send a test event and replay.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/openapi/components"
)

// Feed is txmanager's event feed: the events after a sequence, in order
// and without gaps, waiting up to wait for the first one when there are
// none yet.
type Feed interface {
	EventsAfter(ctx context.Context, after uint64, limit int, wait time.Duration) ([]components.Event, error)
}

var _ Feed = (*remote.TxManager)(nil)

// The types the Service speaks, named here so that its callers need only
// this package.
type (
	// Subscription is a webhook subscription without its secrets' values.
	Subscription = gateway.Subscription
	// NewSubscription is what a subscription is made with.
	NewSubscription = gateway.NewSubscription
	// SubscriptionPatch changes a subscription; nil fields stay.
	SubscriptionPatch = gateway.SubscriptionPatch
	// Delivery is one event to deliver to one subscription, with its log.
	Delivery = gateway.Delivery
	// DeliveryFilter selects a page of a delivery log.
	DeliveryFilter = gateway.DeliveryFilter
	// DeliveryStatus is pending, delivered or dead.
	DeliveryStatus = gateway.DeliveryStatus
	// Secret is a signing secret; it never appears in logs.
	Secret = gateway.WebhookSecret
)

// The delivery statuses.
const (
	DeliveryPending   = gateway.DeliveryPending
	DeliveryDelivered = gateway.DeliveryDelivered
	DeliveryDead      = gateway.DeliveryDead
)

// SubscriptionWithSecret is a subscription and the secret just made for it,
// the only answer that carries a secret.
type SubscriptionWithSecret struct {
	Subscription
	Secret Secret `json:"secret"`
}

// SubscriptionPage is a page of subscriptions.
type SubscriptionPage struct {
	Subscriptions []Subscription `json:"subscriptions"`
	// NextCursor is nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// DeliveryPage is a page of a delivery log, newest event first.
type DeliveryPage struct {
	Deliveries []Delivery `json:"deliveries"`
	// NextCursor is nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// TestResult is the outcome of a test delivery.
type TestResult struct {
	// EventID is the synthetic event's id, its webhook-id.
	EventID string `json:"event_id"`
	// Delivered: the receiver answered 2xx.
	Delivered bool `json:"delivered"`
	// StatusCode is the answer's status, 0 when none came.
	StatusCode int   `json:"status_code"`
	DurationMS int64 `json:"duration_ms"`
	// Error says what went wrong; empty when delivered.
	Error string `json:"error,omitempty"`
}

// ReplayResult says what a replay queued.
type ReplayResult struct {
	// Queued counts the deliveries queued: existing ones reset to pending
	// and new ones for events that had none.
	Queued int64 `json:"queued"`
	// FromSeq and ThroughSeq bound the events this call replayed: one
	// page of the feed at most, never past the fan-out cursor.
	FromSeq    uint64 `json:"from_seq"`
	ThroughSeq uint64 `json:"through_seq"`
	// NextFromSeq is where the next call continues, when events up to the
	// fan-out cursor remain; 0 when the replay reached it.
	NextFromSeq uint64 `json:"next_from_seq,omitempty"`
}

// Service is what the HTTP layer calls. Every method takes the tenant
// first and sees that tenant's subscriptions only: another tenant's is
// errs.NotFound, as if it did not exist. Invalid input is errs.Invalid
// naming the fields (errs.FieldError).
type Service interface {
	// CreateSubscription makes a subscription; the answer carries its
	// secret, shown this once.
	CreateSubscription(ctx context.Context, tenant uuid.UUID, in NewSubscription) (SubscriptionWithSecret, error)
	Subscription(ctx context.Context, tenant, id uuid.UUID) (Subscription, error)
	// Subscriptions lists a page, oldest first; cursor "" is the first
	// page, limit 0 means 100.
	Subscriptions(ctx context.Context, tenant uuid.UUID, cursor string, limit int) (SubscriptionPage, error)
	UpdateSubscription(ctx context.Context, tenant, id uuid.UUID, p SubscriptionPatch) (Subscription, error)
	// DeleteSubscription deletes a subscription, its secrets and its
	// delivery log; nothing more is sent for it.
	DeleteSubscription(ctx context.Context, tenant, id uuid.UUID) error
	// RotateSecret adds a secret, returned this once; the older ones keep
	// signing for grace (DefaultSecretGrace when the client named none; 0
	// retires them at once).
	RotateSecret(ctx context.Context, tenant, id uuid.UUID, grace time.Duration) (SubscriptionWithSecret, error)
	// Test sends a synthetic, signed "webhook.test" event now and reports
	// the answer; nothing is stored.
	Test(ctx context.Context, tenant, id uuid.UUID) (TestResult, error)
	Deliveries(ctx context.Context, tenant, id uuid.UUID, f DeliveryFilter) (DeliveryPage, error)
	// Replay queues the subscription's matching events from fromSeq up to
	// the fan-out cursor again.
	Replay(ctx context.Context, tenant, id uuid.UUID, fromSeq uint64) (ReplayResult, error)
}

var _ Service = (*Dispatcher)(nil)

// DefaultSecretGrace is how long replaced secrets keep signing when the
// client did not say.
const DefaultSecretGrace = 24 * time.Hour

// Options configure a Dispatcher. The zero value is the production
// configuration, less Logger and Registerer.
type Options struct {
	// Workers is how many deliveries this node attempts at once. Default 8.
	Workers int
	// Timeout bounds one attempt, answer included. Default 10s.
	Timeout time.Duration
	// BackoffBase and BackoffMax shape retries: attempt n waits a random
	// time below min(BackoffMax, BackoffBase·2^(n-1)) (full jitter).
	// Defaults 5s and 1h.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// DeadAfter is the dead letter horizon: a failure this long after the
	// delivery's first attempt makes it dead. Default 24h.
	DeadAfter time.Duration
	// AllowInsecureURLs accepts plain http URLs and loopback or private
	// hosts, and lets deliveries connect to such addresses: development and
	// tests only. Without it, URLs are https to a public host, and a
	// delivery refuses to connect to a non-public address whatever its
	// host name resolves to.
	AllowInsecureURLs bool
	// PollInterval is how often an idle worker looks for due deliveries
	// (retries whose time came, deliveries other nodes queued); this
	// node's fan-out and replays wake its workers at once. Default 1s.
	PollInterval time.Duration
	// FeedWait is how long one read of the feed waits for new events, 1s
	// to 30s (txmanager counts whole seconds). Default 5s.
	FeedWait time.Duration
	// FeedBatch is the most events one fan-out transaction takes, 1 to
	// 1000. Default 500.
	FeedBatch int
	// ReplayPage bounds how many events of the feed one Replay reads, 1 to
	// 1000, so that a replay request stays a request-sized job; a longer
	// replay takes a call per page. Default 1000.
	ReplayPage int
	// MaxReplayEvents bounds how far behind the fan-out cursor a replay
	// may start. Default 100,000.
	MaxReplayEvents int
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers them on a fresh
	// registry of their own (tests).
	Registerer prometheus.Registerer
}

// Default option values.
const (
	DefaultWorkers         = 8
	DefaultTimeout         = 10 * time.Second
	DefaultBackoffBase     = 5 * time.Second
	DefaultBackoffMax      = time.Hour
	DefaultDeadAfter       = 24 * time.Hour
	DefaultPollInterval    = time.Second
	DefaultFeedWait        = 5 * time.Second
	DefaultFeedBatch       = 500
	DefaultReplayPage      = 1000
	DefaultMaxReplayEvents = 100_000
)

func (o *Options) setDefaults() error {
	if o.Workers < 0 || o.Timeout < 0 || o.BackoffBase < 0 || o.BackoffMax < 0 || o.DeadAfter < 0 || o.PollInterval < 0 ||
		o.FeedWait < 0 || o.FeedBatch < 0 || o.ReplayPage < 0 || o.ReplayPage > 1000 || o.MaxReplayEvents < 0 {
		return errors.New("webhook: options must not be negative (and ReplayPage at most 1000)")
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.Timeout, DefaultTimeout)
	def(&o.BackoffBase, DefaultBackoffBase)
	def(&o.BackoffMax, DefaultBackoffMax)
	def(&o.DeadAfter, DefaultDeadAfter)
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.FeedWait, DefaultFeedWait)
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.FeedBatch == 0 {
		o.FeedBatch = DefaultFeedBatch
	}
	if o.ReplayPage == 0 {
		o.ReplayPage = DefaultReplayPage
	}
	if o.MaxReplayEvents == 0 {
		o.MaxReplayEvents = DefaultMaxReplayEvents
	}
	switch {
	case o.BackoffMax < o.BackoffBase:
		return fmt.Errorf("webhook: BackoffMax %s is below BackoffBase %s", o.BackoffMax, o.BackoffBase)
	case o.FeedWait < time.Second || o.FeedWait > 30*time.Second:
		return fmt.Errorf("webhook: FeedWait %s is not 1s to 30s", o.FeedWait)
	case o.FeedBatch > 1000:
		return fmt.Errorf("webhook: FeedBatch %d is above 1000", o.FeedBatch)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	return nil
}

// Dispatcher fans txmanager's events out into deliveries and delivers
// them; it is also the Service. Its methods are safe for concurrent use;
// Run is called once.
type Dispatcher struct {
	store   Store
	feed    Feed
	opts    Options
	log     *slog.Logger
	rule    gateway.URLRule
	client  *http.Client
	metrics *metrics
	// wake tells idle workers that deliveries were queued here.
	wake chan struct{}
	// lease is how long a claim lasts: an attempt's timeout twice over
	// and a second for the database, so that only a node that stopped
	// (or stalled far beyond an attempt) loses its claims.
	lease time.Duration
}

// Store is what the dispatcher keeps: the subscriptions it serves the
// API and the queue of their deliveries (postgres.Store).
type Store interface {
	gateway.Subscriptions
	gateway.DeliveryQueue
}

// New is a dispatcher over store, reading feed (production passes
// *remote.TxManager).
func New(store Store, feed Feed, opts Options) (*Dispatcher, error) {
	if store == nil || feed == nil {
		return nil, errors.New("webhook: a store and a feed are required")
	}
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	rule := gateway.PublicHTTPS
	if opts.AllowInsecureURLs {
		rule = gateway.AnyHTTP
	}
	return &Dispatcher{
		store:   store,
		feed:    feed,
		opts:    opts,
		log:     opts.Logger,
		rule:    rule,
		client:  newHTTPClient(opts.AllowInsecureURLs, opts.Workers),
		metrics: m,
		wake:    make(chan struct{}, opts.Workers),
		lease:   2*opts.Timeout + time.Second,
	}, nil
}

// Run fans out and delivers until ctx ends, then returns nil once the
// attempts in flight have finished (each within Options.Timeout): they are
// let finish rather than cut, so that a stopping node does not make its
// receivers see those events twice. Failures of the feed or the database
// are logged and retried with backoff; they never end Run.
func (d *Dispatcher) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.fanOut(ctx) })
	for i := range d.opts.Workers {
		g.Go(func() error { return d.work(ctx, i) })
	}
	return g.Wait()
}

// wakeWorkers tells every idle worker to look for due deliveries now.
func (d *Dispatcher) wakeWorkers() {
	for range d.opts.Workers {
		select {
		case d.wake <- struct{}{}:
		default:
			return // every worker has a wake-up waiting already
		}
	}
}

// pause waits for wait or ctx's end, and reports whether ctx is still
// live.
func pause(ctx context.Context, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
