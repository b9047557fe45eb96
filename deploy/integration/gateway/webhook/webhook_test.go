package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/shared/errs"
)

// checkDeliveries: rc acknowledged exactly the events of want, every
// request carried a signature that verified, the body was the feed's
// event and the headers the Standard Webhooks ones, and each
// transaction's events were first acknowledged in sequence order.
func checkDeliveries(t *testing.T, rc *receiver, want []components.Event) {
	t.Helper()
	byID := map[string]components.Event{}
	for _, e := range want {
		byID[e.Id] = e
	}
	for _, q := range rc.requests() {
		if q.answer == http.StatusUnauthorized {
			t.Errorf("%s: no secret verified the signature %q", q.id, q.header.Get("webhook-signature"))
		}
		e, ok := byID[q.id]
		if !ok {
			t.Errorf("received %s, which is not for this subscription: %s", q.id, q.body)
			continue
		}
		if diff := cmp.Diff(e, q.event(t)); diff != "" {
			t.Errorf("%s: body differs from the feed's event (-want +got):\n%s", q.id, diff)
		}
		if ct, ua := q.header.Get("Content-Type"), q.header.Get("User-Agent"); ct != "application/json" || !strings.Contains(ua, "txfence") {
			t.Errorf("%s: content type %q, user agent %q", q.id, ct, ua)
		}
		if _, err := strconv.ParseInt(q.header.Get("webhook-timestamp"), 10, 64); err != nil {
			t.Errorf("%s: webhook-timestamp %q", q.id, q.header.Get("webhook-timestamp"))
		}
	}
	accepted := rc.acceptedIDs()
	if len(accepted) != len(want) {
		t.Errorf("%d distinct events acknowledged, want %d", len(accepted), len(want))
	}
	last := map[string]int64{}
	for _, id := range accepted {
		e := byID[id]
		if e.Seq <= last[e.TxId] {
			t.Errorf("tx %s: event %d arrived after %d", e.TxId, e.Seq, last[e.TxId])
		}
		last[e.TxId] = e.Seq
	}
}

// allDelivered waits until the log shows every delivery of sub delivered,
// and returns the log.
func allDelivered(t *testing.T, n *node, tenant, sub uuid.UUID, count int) []webhook.Delivery {
	t.Helper()
	var log []webhook.Delivery
	waitFor(t, "the delivery log to show every delivery delivered", func() bool {
		page, err := n.Deliveries(context.Background(), tenant, sub, webhook.DeliveryFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		log = page.Deliveries
		return len(log) == count && !slices.ContainsFunc(log, func(d webhook.Delivery) bool { return d.Status != webhook.DeliveryDelivered })
	})
	return log
}

// TestEveryEventReachesTheSubscriptionsItMatches: each event reaches every
// matching subscription once, signed, in order per transaction; the
// subscriptions of another tenant, of another event type, of another
// signer, or disabled get nothing, not even a queued delivery.
func TestEveryEventReachesTheSubscriptionsItMatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	n := r.node(nil, webhook.Options{})
	all, states, globex := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	attempts, mainnet, disabled := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	off := false
	subAll := r.subscribe(n, r.acme, all, webhook.NewSubscription{})
	subStates := r.subscribe(n, r.acme, states, webhook.NewSubscription{EventTypes: []string{"tx.state_changed"}, Signers: []string{"31337:" + acmeSigner}})
	r.subscribe(n, r.globex, globex, webhook.NewSubscription{})
	quiet := []webhook.Subscription{
		r.subscribe(n, r.acme, attempts, webhook.NewSubscription{EventTypes: []string{"tx.attempt"}}),
		r.subscribe(n, r.acme, mainnet, webhook.NewSubscription{Signers: []string{"1:" + acmeSigner}}),
		r.subscribe(n, r.acme, disabled, webhook.NewSubscription{Enabled: &off}),
	}
	// Events waiting before the dispatcher starts (both of a transaction's
	// deliveries are due at once, so order is the claim's doing), and more
	// while it runs (the long poll).
	r.transactions(acmeSigner, 5)
	r.transactions(globexSigner, 3)
	r.run(n)
	r.transactions(acmeSigner, 2)
	feed := r.events()
	acmeEvents, globexEvents := eventsOf(feed, acmeSigner), eventsOf(feed, globexSigner)
	if len(acmeEvents) != 14 || len(globexEvents) != 6 {
		t.Fatalf("the feed has %d and %d events, want 14 and 6", len(acmeEvents), len(globexEvents))
	}
	all.waitAccepted(acmeEvents)
	states.waitAccepted(acmeEvents)
	globex.waitAccepted(globexEvents)
	waitFor(t, "the fan-out to reach the end of the feed", func() bool {
		c, err := r.store.WebhookFeedCursor(ctx)
		return err == nil && c == uint64(len(feed))
	})
	for rc, want := range map[*receiver][]components.Event{all: acmeEvents, states: acmeEvents, globex: globexEvents} {
		checkDeliveries(t, rc, want)
		// A receiver that always answers gets each event exactly once.
		if got := len(rc.requests()); got != len(want) {
			t.Errorf("%s: %d requests for %d events", rc.url(), got, len(want))
		}
	}
	for i, rc := range []*receiver{attempts, mainnet, disabled} {
		if got := rc.requests(); len(got) != 0 {
			t.Errorf("a subscription its events do not match received %d requests", len(got))
		}
		page, err := n.Deliveries(ctx, r.acme, quiet[i].ID, webhook.DeliveryFilter{})
		if err != nil || len(page.Deliveries) != 0 {
			t.Errorf("a subscription its events do not match has deliveries %+v %v", page.Deliveries, err)
		}
	}
	for _, sub := range []webhook.Subscription{subAll, subStates} {
		for _, d := range allDelivered(t, n, r.acme, sub.ID, len(acmeEvents)) {
			if d.Attempts != 1 || len(d.AttemptLog) != 1 || *d.AttemptLog[0].StatusCode != 200 || d.DeliveredAt == nil || *d.LastStatusCode != 200 {
				t.Errorf("delivery %+v", d)
			}
		}
	}
	waitMetric(t, float64(2*len(acmeEvents)+len(globexEvents)), func() float64 {
		return n.metric(t, "txfence_gateway_webhook_deliveries_total", "outcome", "delivered")
	})
	waitFor(t, "the cursor metric at the end of the feed, and no lag", func() bool {
		return n.metric(t, "txfence_gateway_webhook_fanout_cursor") == float64(len(feed)) &&
			n.metric(t, "txfence_gateway_webhook_fanout_lag_events") == 0
	})
}

// TestFailuresAndTimeoutsAreRetriedInOrder: the receiver fails, then
// does not answer, then recovers; every event still arrives, in order per
// transaction, and every attempt is in the log with what went wrong.
func TestFailuresAndTimeoutsAreRetriedInOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rc := newReceiver(t, func(n int) int {
		switch {
		case n <= 4:
			return http.StatusInternalServerError
		case n <= 7:
			return hang
		}
		return http.StatusNoContent
	})
	n := r.node(nil, webhook.Options{Timeout: 300 * time.Millisecond})
	sub := r.subscribe(n, r.acme, rc, webhook.NewSubscription{})
	r.transactions(acmeSigner, 3)
	r.run(n)
	want := eventsOf(r.events(), acmeSigner)
	rc.waitAccepted(want)
	checkDeliveries(t, rc, want)
	log := allDelivered(t, n, r.acme, sub.ID, len(want))
	logged, failed, timedOut := 0, 0, 0
	for _, d := range log {
		logged += len(d.AttemptLog)
		if d.Attempts != len(d.AttemptLog) || *d.AttemptLog[0].StatusCode != http.StatusNoContent || d.LastError != nil {
			t.Errorf("delivery %d: %d attempts, log %+v, last error %v", d.EventSeq, d.Attempts, d.AttemptLog, d.LastError)
		}
		for _, a := range d.AttemptLog[1:] {
			switch {
			case a.StatusCode != nil && *a.StatusCode == 500 && a.Error != nil && strings.HasPrefix(*a.Error, "HTTP 500"):
				failed++
			case a.StatusCode == nil && a.Error != nil && *a.Error == "no answer within 300ms":
				timedOut++
			default:
				t.Errorf("delivery %d: unexpected failed attempt %+v", d.EventSeq, a)
			}
		}
	}
	if failed != 4 || timedOut != 3 {
		t.Errorf("the log has %d failures and %d timeouts, want 4 and 3", failed, timedOut)
	}
	if got := len(rc.requests()); logged != got {
		t.Errorf("the log has %d attempts, the receiver saw %d", logged, got)
	}
	waitMetric(t, 7, func() float64 { return n.metric(t, "txfence_gateway_webhook_deliveries_total", "outcome", "retry") })
}

// TestDeadLettersCanBeReplayed: deliveries the receiver never takes go
// dead at the horizon, each transaction's later event only after its
// earlier one died; a replay brings them back, keeping their history, and
// fills in a subscription made after the events.
func TestDeadLettersCanBeReplayed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	rc := newReceiver(t, func(int) int { return http.StatusServiceUnavailable })
	n := r.node(nil, webhook.Options{DeadAfter: 300 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 60 * time.Millisecond})
	sub := r.subscribe(n, r.acme, rc, webhook.NewSubscription{})
	r.transactions(acmeSigner, 2)
	r.run(n)
	want := eventsOf(r.events(), acmeSigner)
	waitFor(t, "every delivery to go dead", func() bool {
		page, err := n.Deliveries(ctx, r.acme, sub.ID, webhook.DeliveryFilter{Status: webhook.DeliveryDead})
		return err == nil && len(page.Deliveries) == len(want)
	})
	waitMetric(t, float64(len(want)), func() float64 { return n.metric(t, "txfence_gateway_webhook_dead_letters_total") })
	// Order held while the earlier event was pending: the later one was
	// first tried after the earlier one's last try.
	first, last := map[string]int{}, map[string]int{}
	for i, q := range rc.requests() {
		if _, ok := first[q.id]; !ok {
			first[q.id] = i
		}
		last[q.id] = i
	}
	for i, e := range want {
		for _, later := range want[i+1:] {
			if later.TxId == e.TxId && first[later.Id] < last[e.Id] {
				t.Errorf("tx %s: event %d tried before event %d died", e.TxId, later.Seq, e.Seq)
			}
		}
	}

	rc.set(func(int) int { return http.StatusOK })
	res, err := n.Replay(ctx, r.acme, sub.ID, uint64(want[0].Seq))
	if err != nil || res.Queued != int64(len(want)) || res.ThroughSeq != uint64(want[len(want)-1].Seq) {
		t.Fatalf("replay: %+v %v", res, err)
	}
	rc.waitAccepted(want)
	checkDeliveries(t, rc, want)
	for _, d := range allDelivered(t, n, r.acme, sub.ID, len(want)) {
		if d.Attempts != 1 || len(d.AttemptLog) < 2 || *d.AttemptLog[0].StatusCode != 200 || *d.AttemptLog[len(d.AttemptLog)-1].StatusCode != 503 {
			t.Errorf("replayed delivery %d: %d attempts, log %+v", d.EventSeq, d.Attempts, d.AttemptLog)
		}
	}

	// A subscription made after the events gets them by replay, for its
	// filter only.
	lateRC := newReceiver(t, nil)
	late := r.subscribe(n, r.acme, lateRC, webhook.NewSubscription{EventTypes: []string{"tx.state_changed"}})
	if res, err := n.Replay(ctx, r.acme, late.ID, 1); err != nil || res.Queued != int64(len(want)) {
		t.Fatalf("replay into a new subscription: %+v %v", res, err)
	}
	lateRC.waitAccepted(want)
	checkDeliveries(t, lateRC, want)
	narrow := r.subscribe(n, r.acme, newReceiver(t, nil), webhook.NewSubscription{EventTypes: []string{"tx.confirmation"}})
	if res, err := n.Replay(ctx, r.acme, narrow.ID, 1); err != nil || res.Queued != 0 {
		t.Errorf("replay into a subscription no event matches: %+v %v", res, err)
	}
	if res, err := n.Replay(ctx, r.acme, sub.ID, res.ThroughSeq+1); err != nil || res.Queued != 0 {
		t.Errorf("replay past the cursor: %+v %v", res, err)
	}
	// One page per call: a replay of the whole stretch two events at a
	// time takes a call per page, each naming where the next continues,
	// and queues every event once.
	paged := r.node(nil, webhook.Options{ReplayPage: 2})
	var calls int
	var queued int64
	for from := uint64(want[0].Seq); from != 0; calls++ {
		res, err := paged.Replay(ctx, r.acme, late.ID, from)
		if err != nil || res.FromSeq != from || res.ThroughSeq < from || res.ThroughSeq > from+1 {
			t.Fatalf("paged replay from %d: %+v %v", from, res, err)
		}
		queued += res.Queued
		from = res.NextFromSeq
	}
	if pages := (len(want) + 1) / 2; calls < pages || queued != int64(len(want)) {
		t.Errorf("paged replay: %d calls queued %d; want at least %d calls queuing %d", calls, queued, pages, len(want))
	}
	// A disabled subscription queues nothing.
	disabled := false
	if _, err := n.UpdateSubscription(ctx, r.acme, narrow.ID, webhook.SubscriptionPatch{Enabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	if res, err := n.Replay(ctx, r.acme, narrow.ID, 1); errs.KindOf(err) != errs.Conflict || res.Queued != 0 {
		t.Errorf("replay of a disabled subscription: %+v %v, want a conflict", res, err)
	}
	bounded := r.node(nil, webhook.Options{MaxReplayEvents: 2})
	for _, from := range []uint64{0, 1} {
		_, err := bounded.Replay(ctx, r.acme, sub.ID, from)
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Fields) != 1 || e.Fields[0].Pointer != "/from_seq" {
			t.Errorf("replay from %d with at most 2 events: %v", from, err)
		}
	}
}

// TestRotatedSecretsOverlap: during the grace period every delivery
// verifies with the old secret and with the new one, so receivers can
// switch at any time; once it ends only the new one verifies.
func TestRotatedSecretsOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	rc := newReceiver(t, nil)
	n := r.node(nil, webhook.Options{})
	sub := r.subscribe(n, r.acme, rc, webhook.NewSubscription{}) // the old secret, "initial"
	rot, err := n.RotateSecret(ctx, r.acme, sub.ID, time.Hour)
	if err != nil || len(rot.Secrets) != 2 {
		t.Fatalf("rotate: %+v %v", rot, err)
	}
	rc.trust("new", rot.Secret)
	r.transactions(acmeSigner, 1)
	r.run(n)
	during := eventsOf(r.events(), acmeSigner)
	rc.waitAccepted(during)
	test, err := n.Test(ctx, r.acme, sub.ID)
	if err != nil || !test.Delivered {
		t.Fatalf("test: %+v %v", test, err)
	}
	for _, q := range rc.requests() {
		if !q.verified["initial"] || !q.verified["new"] || len(strings.Fields(q.header.Get("webhook-signature"))) != 2 {
			t.Errorf("%s during the grace period: verified %v, signature %q", q.id, q.verified, q.header.Get("webhook-signature"))
		}
	}
	// The grace period ends: moved to now rather than waited for.
	var old *gateway.SubscriptionSecret
	for i, s := range rot.Secrets {
		if s.ExpiresAt != nil {
			old = &rot.Secrets[i]
		}
	}
	if _, err := r.pool.Exec(ctx, `UPDATE webhook_secret SET expires_at = now() WHERE secret_id = $1`, old.ID); err != nil {
		t.Fatal(err)
	}
	seen := len(rc.requests())
	r.transactions(acmeSigner, 1)
	after := eventsOf(r.events(), acmeSigner)[len(during):]
	rc.waitAccepted(after)
	for _, q := range rc.requests()[seen:] {
		if q.verified["initial"] || !q.verified["new"] || len(strings.Fields(q.header.Get("webhook-signature"))) != 1 {
			t.Errorf("%s after the grace period: verified %v, signature %q", q.id, q.verified, q.header.Get("webhook-signature"))
		}
	}
}

// TestTwoNodesFanOutEachEventOnce: two gateway nodes on one database and
// one feed fan every event out exactly once (one delivery per subscription
// and event, and the nodes' fan-out counts add up to the feed) and deliver
// all of it; when one node stops mid-way, the other finishes.
func TestTwoNodesFanOutEachEventOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	acmeRC, globexRC := newReceiver(t, nil), newReceiver(t, nil)
	a := r.node(postgres.New(r.openPool()), webhook.Options{})
	b := r.node(postgres.New(r.openPool()), webhook.Options{})
	acmeSub := r.subscribe(a, r.acme, acmeRC, webhook.NewSubscription{})
	globexSub := r.subscribe(b, r.globex, globexRC, webhook.NewSubscription{})
	r.run(a)
	r.run(b)
	r.transactions(acmeSigner, 10)
	r.transactions(globexSigner, 5)
	waitFor(t, "some deliveries before a node stops", func() bool { return len(acmeRC.acceptedIDs()) >= 10 })
	a.stop()
	r.transactions(acmeSigner, 10)
	r.transactions(globexSigner, 5)
	feed := r.events()
	acmeEvents, globexEvents := eventsOf(feed, acmeSigner), eventsOf(feed, globexSigner)
	acmeRC.waitAccepted(acmeEvents)
	globexRC.waitAccepted(globexEvents)
	checkDeliveries(t, acmeRC, acmeEvents)
	checkDeliveries(t, globexRC, globexEvents)
	allDelivered(t, b, r.acme, acmeSub.ID, len(acmeEvents))
	allDelivered(t, b, r.globex, globexSub.ID, len(globexEvents))
	if c, err := r.store.WebhookFeedCursor(ctx); err != nil || c != uint64(len(feed)) {
		t.Errorf("cursor %d %v, want %d", c, err, len(feed))
	}
	// Between them the nodes fanned out each event once, and queued one
	// delivery for each.
	waitMetric(t, float64(len(feed)), func() float64 {
		return a.metric(t, "txfence_gateway_webhook_fanout_events_total") + b.metric(t, "txfence_gateway_webhook_fanout_events_total")
	})
	waitMetric(t, float64(len(feed)), func() float64 {
		return a.metric(t, "txfence_gateway_webhook_fanout_deliveries_total") + b.metric(t, "txfence_gateway_webhook_fanout_deliveries_total")
	})
	var rows int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_delivery`).Scan(&rows); err != nil || rows != len(feed) {
		t.Errorf("%d delivery rows %v, want one per subscription and event: %d", rows, err, len(feed))
	}
}

// TestACrashedNodeLosesNothing: a node fans out and starts attempts, then
// dies without a word (its database connections gone, its requests cut);
// nothing was delivered, and a node started on the same database delivers
// everything, the claims of the dead node included once they lapse.
func TestACrashedNodeLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	rc := newReceiver(t, func(int) int { return hang })
	poolA := r.openPool()
	a := r.node(postgres.New(poolA), webhook.Options{Timeout: time.Second})
	sub := r.subscribe(a, r.acme, rc, webhook.NewSubscription{})
	r.transactions(acmeSigner, 3)
	want := eventsOf(r.events(), acmeSigner)
	r.run(a)
	waitFor(t, "the fan-out, and attempts in flight", func() bool {
		c, err := r.store.WebhookFeedCursor(ctx)
		return err == nil && c == uint64(len(want)) && len(rc.requests()) >= 1
	})
	poolA.Close()
	a.stop()
	page, _, err := r.store.Deliveries(ctx, r.acme, sub.ID, gateway.DeliveryFilter{})
	if err != nil || len(page) != len(want) {
		t.Fatalf("after the crash: %d deliveries %v, want %d", len(page), err, len(want))
	}
	for _, d := range page {
		if d.Status != gateway.DeliveryPending || d.Attempts != 0 {
			t.Errorf("after the crash: delivery %d is %s after %d attempts", d.EventSeq, d.Status, d.Attempts)
		}
	}
	rc.set(func(int) int { return http.StatusOK })
	b := r.node(nil, webhook.Options{Timeout: time.Second})
	r.run(b)
	rc.waitAccepted(want)
	checkDeliveries(t, rc, want)
	allDelivered(t, b, r.acme, sub.ID, len(want))
}

// TestTenantsCannotReachEachOthersSubscriptions: every operation on
// another tenant's subscription is not found, as if it did not exist, and
// changes nothing.
func TestTenantsCannotReachEachOthersSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	rc := newReceiver(t, nil)
	n := r.node(nil, webhook.Options{})
	sub := r.subscribe(n, r.acme, rc, webhook.NewSubscription{Description: "acme's"})
	r.transactions(acmeSigner, 1)
	u, d, off := rc.url()+"/globex", "globex's now", false
	for name, call := range map[string]func() error{
		"get": func() error { _, err := n.Subscription(ctx, r.globex, sub.ID); return err },
		"update": func() error {
			_, err := n.UpdateSubscription(ctx, r.globex, sub.ID, webhook.SubscriptionPatch{URL: &u, Description: &d, Enabled: &off})
			return err
		},
		"delete": func() error { return n.DeleteSubscription(ctx, r.globex, sub.ID) },
		"rotate": func() error { _, err := n.RotateSecret(ctx, r.globex, sub.ID, 0); return err },
		"test":   func() error { _, err := n.Test(ctx, r.globex, sub.ID); return err },
		"deliveries": func() error {
			_, err := n.Deliveries(ctx, r.globex, sub.ID, webhook.DeliveryFilter{})
			return err
		},
		"replay": func() error { _, err := n.Replay(ctx, r.globex, sub.ID, 1); return err },
	} {
		if err := call(); errs.KindOf(err) != errs.NotFound {
			t.Errorf("globex %s: %v, want not found", name, err)
		}
	}
	if page, err := n.Subscriptions(ctx, r.globex, "", 0); err != nil || len(page.Subscriptions) != 0 || page.NextCursor != nil {
		t.Errorf("globex lists %+v %v", page, err)
	}
	got, err := n.Subscription(ctx, r.acme, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sub, got); diff != "" {
		t.Errorf("acme's subscription changed (-want +got):\n%s", diff)
	}
	if len(rc.requests()) != 0 {
		t.Errorf("globex's test reached acme's receiver")
	}
	// acme's own deliveries still flow.
	r.run(n)
	want := eventsOf(r.events(), acmeSigner)
	rc.waitAccepted(want)
	checkDeliveries(t, rc, want)
}

// TestBadInputIsRefused: a bad URL (plain http or a loopback host without
// AllowInsecureURLs included), an unknown event type, a signer the tenant
// does not own: errs.Invalid naming the field, and nothing stored.
func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	strict := r.nodeAsIs(nil, webhook.Options{})
	for _, tt := range []struct {
		name string
		in   webhook.NewSubscription
		want string
	}{
		{"not a URL", webhook.NewSubscription{URL: "hooks.example.com/x"}, "/url"},
		{"plain http", webhook.NewSubscription{URL: "http://hooks.example.com/x"}, "/url"},
		{"loopback", webhook.NewSubscription{URL: "https://127.0.0.1:8443/x"}, "/url"},
		{"unknown event type", webhook.NewSubscription{URL: "https://hooks.example.com/x", EventTypes: []string{"tx.exploded"}}, "/event_types/0"},
		{"another tenant's signer", webhook.NewSubscription{URL: "https://hooks.example.com/x", Signers: []string{"31337:" + globexSigner}}, "/signers"},
		{"not a signer", webhook.NewSubscription{URL: "https://hooks.example.com/x", Signers: []string{acmeSigner}}, "/signers/0"},
	} {
		_, err := strict.CreateSubscription(ctx, r.acme, tt.in)
		var e *errs.Error
		if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Fields) != 1 || e.Fields[0].Pointer != tt.want {
			t.Errorf("%s: %v, want invalid naming %s", tt.name, err, tt.want)
		}
	}
	if page, err := strict.Subscriptions(ctx, r.acme, "", 0); err != nil || len(page.Subscriptions) != 0 {
		t.Errorf("refused subscriptions stored: %+v %v", page, err)
	}
	// A good one, then a bad change to it, which changes nothing.
	good, err := strict.CreateSubscription(ctx, r.acme, webhook.NewSubscription{URL: "https://hooks.example.com/x"})
	if err != nil {
		t.Fatal(err)
	}
	bad := "http://hooks.example.com/y"
	if _, err := strict.UpdateSubscription(ctx, r.acme, good.ID, webhook.SubscriptionPatch{URL: &bad}); errs.KindOf(err) != errs.Invalid {
		t.Errorf("a change to plain http: %v", err)
	}
	if got, _ := strict.Subscription(ctx, r.acme, good.ID); got.URL != "https://hooks.example.com/x" {
		t.Errorf("a refused change stuck: %s", got.URL)
	}
	// Development allows plain http to loopback.
	dev := r.node(nil, webhook.Options{})
	if _, err := dev.CreateSubscription(ctx, r.acme, webhook.NewSubscription{URL: "http://127.0.0.1:8080/x"}); err != nil {
		t.Errorf("plain http to loopback with AllowInsecureURLs: %v", err)
	}
}

// TestTestSendsASignedSyntheticEvent: a test delivery is a signed
// webhook.test event sent at once, whose outcome (success, an error
// status, a redirect not followed, no answer) comes back in the answer and
// nowhere else.
func TestTestSendsASignedSyntheticEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRig(t)
	rc := newReceiver(t, nil)
	n := r.node(nil, webhook.Options{Timeout: 500 * time.Millisecond})
	sub := r.subscribe(n, r.acme, rc, webhook.NewSubscription{})
	res, err := n.Test(ctx, r.acme, sub.ID)
	if err != nil || !res.Delivered || res.StatusCode != 200 || res.Error != "" || !strings.HasPrefix(res.EventID, "test_") {
		t.Fatalf("test: %+v %v", res, err)
	}
	q := rc.requests()[0]
	var body struct {
		Type      string    `json:"type"`
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(q.body, &body); err != nil || body.Type != "webhook.test" || body.ID != res.EventID || body.CreatedAt.IsZero() ||
		q.id != res.EventID || !q.verified["initial"] {
		t.Errorf("test request %s %+v: %v", q.body, q, err)
	}
	rc.set(func(int) int { return http.StatusInternalServerError })
	if res, err := n.Test(ctx, r.acme, sub.ID); err != nil || res.Delivered || res.StatusCode != 500 || !strings.HasPrefix(res.Error, "HTTP 500") {
		t.Errorf("test against a failing receiver: %+v %v", res, err)
	}
	rc.set(func(int) int { return hang })
	if res, err := n.Test(ctx, r.acme, sub.ID); err != nil || res.Delivered || res.StatusCode != 0 || res.Error != "no answer within 500ms" {
		t.Errorf("test against a silent receiver: %+v %v", res, err)
	}
	// A redirect is an answer, not a new destination.
	seen := len(rc.requests())
	redirect := httptest.NewServer(http.RedirectHandler(rc.url(), http.StatusFound))
	t.Cleanup(redirect.Close)
	to := redirect.URL + "/moved"
	if _, err := n.UpdateSubscription(ctx, r.acme, sub.ID, webhook.SubscriptionPatch{URL: &to}); err != nil {
		t.Fatal(err)
	}
	if res, err := n.Test(ctx, r.acme, sub.ID); err != nil || res.Delivered || res.StatusCode != 302 || !strings.Contains(res.Error, "redirects are not followed") {
		t.Errorf("test against a redirect: %+v %v", res, err)
	}
	if len(rc.requests()) != seen {
		t.Errorf("the redirect was followed")
	}
	// Nobody listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String() + "/"
	l.Close()
	if _, err := n.UpdateSubscription(ctx, r.acme, sub.ID, webhook.SubscriptionPatch{URL: &gone}); err != nil {
		t.Fatal(err)
	}
	if res, err := n.Test(ctx, r.acme, sub.ID); err != nil || res.Delivered || res.StatusCode != 0 || !strings.Contains(res.Error, "refused") {
		t.Errorf("test against a closed port: %+v %v", res, err)
	}
	// Tests leave no trace in the delivery log.
	if page, err := n.Deliveries(ctx, r.acme, sub.ID, webhook.DeliveryFilter{}); err != nil || len(page.Deliveries) != 0 {
		t.Errorf("tests in the delivery log: %+v %v", page, err)
	}
	var attempts int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_attempt`).Scan(&attempts); err != nil || attempts != 0 {
		t.Errorf("%d attempts stored for tests %v", attempts, err)
	}
}
