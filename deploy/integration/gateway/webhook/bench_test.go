package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// synthFeed is a feed of made-up events of one signer, spread over 64
// transactions, that waits like txmanager's when it has nothing new: the
// benchmark measures the engine, not txmanager.
type synthFeed struct{ events []components.Event }

func newSynthFeed(n int) *synthFeed {
	f := &synthFeed{events: make([]components.Event, n)}
	now := time.Now().UTC()
	for i := range f.events {
		seq := int64(i + 1)
		f.events[i] = components.Event{Seq: seq, Id: fmt.Sprintf("evt_%016x", seq), Type: components.EventTxStateChanged,
			TxId: fmt.Sprintf("00000000-0000-7000-8000-%012d", i%64), ChainId: 31337, Signer: acmeSigner, CreatedAt: now,
			Data: json.RawMessage(`{"from_state":"INIT","to_state":"CANCELLED"}`)}
	}
	return f
}

func (f *synthFeed) EventsAfter(ctx context.Context, after uint64, limit int, wait time.Duration) ([]components.Event, error) {
	if after >= uint64(len(f.events)) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
			return nil, nil
		}
	}
	return f.events[after:min(after+uint64(limit), uint64(len(f.events)))], nil
}

// BenchmarkDelivery: fan-out and delivery of b.N events to one
// subscription on a local receiver that verifies every signature, with the
// default 8 workers; reported as deliveries per second.
func BenchmarkDelivery(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Migrated(b, postgres.Migrations)
	store := postgres.New(pool)
	tenant, err := store.CreateTenant(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if err := store.AssignSigner(ctx, tenant.ID, gateway.SignerRef{ChainID: 31337, Address: common.HexToAddress(acmeSigner)}); err != nil {
		b.Fatal(err)
	}
	var delivered, bad atomic.Int64
	var verifier atomic.Pointer[standardwebhooks.Webhook]
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Load().Verify(body, r.Header); err != nil {
			bad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	d, err := webhook.New(store, newSynthFeed(b.N), webhook.Options{AllowInsecureURLs: true, PollInterval: 50 * time.Millisecond,
		FeedWait: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	sub, err := d.CreateSubscription(ctx, tenant.ID, webhook.NewSubscription{URL: rc.URL})
	if err != nil {
		b.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(string(sub.Secret))
	if err != nil {
		b.Fatal(err)
	}
	verifier.Store(wh)

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { done <- d.Run(runCtx) }()
	deadline := time.Now().Add(10 * time.Minute)
	for delivered.Load() < int64(b.N) && bad.Load() == 0 && time.Now().Before(deadline) {
		<-time.After(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	if bad.Load() != 0 || delivered.Load() < int64(b.N) {
		b.Fatalf("%d of %d delivered, %d with bad signatures", delivered.Load(), b.N, bad.Load())
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
}

// aheadFeed is a synthFeed whose head is further than the events it hands
// out, as when the fan-out has fallen behind.
type aheadFeed struct {
	*synthFeed
	head int64
}

func (f aheadFeed) Feed(ctx context.Context, after uint64, limit int, wait time.Duration) (components.EventList, error) {
	events, err := f.EventsAfter(ctx, after, limit, wait)
	return components.EventList{Events: events, HeadSeq: &f.head}, err
}

// TestFanOutLagIsTheDistanceToTheHead: the lag metric is how far the
// durable cursor is behind the feed's head, and the cursor metric follows
// the cursor.
func TestFanOutLagIsTheDistanceToTheHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres.Migrations)
	store := postgres.New(pool)
	reg := prometheus.NewRegistry()
	d, err := webhook.New(store, aheadFeed{newSynthFeed(7), 1007}, webhook.Options{FeedWait: time.Second, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Dispatcher: d, registry: reg}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitFor(t, "the fan-out of the 7 events, 1000 behind the head", func() bool {
		c, err := store.WebhookFeedCursor(ctx)
		return err == nil && c == 7 && n.metric(t, "txfence_gateway_webhook_fanout_cursor") == 7 &&
			n.metric(t, "txfence_gateway_webhook_fanout_lag_events") == 1000
	})
	if got := n.metric(t, "txfence_gateway_webhook_fanout_events_total"); got != 7 {
		t.Errorf("fanned out %v events, want 7", got)
	}
}
