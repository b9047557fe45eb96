package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// CreateSubscription makes a subscription for tenant; the answer carries
// its secret, the only time it is shown.
func (d *Dispatcher) CreateSubscription(ctx context.Context, tenant uuid.UUID, in NewSubscription) (SubscriptionWithSecret, error) {
	sub, secret, err := d.store.CreateSubscription(ctx, tenant, in, d.rule)
	if err != nil {
		return SubscriptionWithSecret{}, err
	}
	d.log.Info("webhook subscription created", "tenant_id", tenant, "subscription_id", sub.ID, "event_types", sub.EventTypes,
		"signers", sub.Signers, "enabled", sub.Enabled)
	return SubscriptionWithSecret{Subscription: sub, Secret: secret}, nil
}

// Subscription reads one of tenant's subscriptions.
func (d *Dispatcher) Subscription(ctx context.Context, tenant, id uuid.UUID) (Subscription, error) {
	return d.store.Subscription(ctx, tenant, id)
}

// Subscriptions lists a page of tenant's subscriptions, oldest first.
func (d *Dispatcher) Subscriptions(ctx context.Context, tenant uuid.UUID, cursor string, limit int) (SubscriptionPage, error) {
	subs, next, err := d.store.Subscriptions(ctx, tenant, cursor, limit)
	if err != nil {
		return SubscriptionPage{}, err
	}
	return SubscriptionPage{Subscriptions: subs, NextCursor: nextCursor(next)}, nil
}

func nextCursor(next string) *string {
	if next == "" {
		return nil
	}
	return &next
}

// UpdateSubscription changes the fields p names. Pending deliveries go to
// the new URL; filters apply to events fanned out from now on.
func (d *Dispatcher) UpdateSubscription(ctx context.Context, tenant, id uuid.UUID, p SubscriptionPatch) (Subscription, error) {
	sub, err := d.store.UpdateSubscription(ctx, tenant, id, p, d.rule)
	if err != nil {
		return sub, err
	}
	d.log.Info("webhook subscription updated", "tenant_id", tenant, "subscription_id", id, "event_types", sub.EventTypes,
		"signers", sub.Signers, "enabled", sub.Enabled)
	if p.Enabled != nil && *p.Enabled {
		d.wakeWorkers() // its waiting deliveries are due again
	}
	return sub, nil
}

// DeleteSubscription deletes one of tenant's subscriptions with its secrets
// and delivery log.
func (d *Dispatcher) DeleteSubscription(ctx context.Context, tenant, id uuid.UUID) error {
	if err := d.store.DeleteSubscription(ctx, tenant, id); err != nil {
		return err
	}
	d.log.Info("webhook subscription deleted", "tenant_id", tenant, "subscription_id", id)
	return nil
}

// RotateSecret adds a new secret, returned this once; the older ones keep
// signing for grace (0 retires them at once).
func (d *Dispatcher) RotateSecret(ctx context.Context, tenant, id uuid.UUID, grace time.Duration) (SubscriptionWithSecret, error) {
	sub, secret, err := d.store.RotateSubscriptionSecret(ctx, tenant, id, grace)
	if err != nil {
		return SubscriptionWithSecret{}, err
	}
	d.log.Info("webhook secret rotated", "tenant_id", tenant, "subscription_id", id, "grace", grace)
	return SubscriptionWithSecret{Subscription: sub, Secret: secret}, nil
}

// Deliveries lists a page of a subscription's delivery log, newest event
// first, each with its latest attempts.
func (d *Dispatcher) Deliveries(ctx context.Context, tenant, id uuid.UUID, f DeliveryFilter) (DeliveryPage, error) {
	ds, next, err := d.store.Deliveries(ctx, tenant, id, f)
	if err != nil {
		return DeliveryPage{}, err
	}
	return DeliveryPage{Deliveries: ds, NextCursor: nextCursor(next)}, nil
}

// testEvent is the synthetic event of a test delivery. Its type is not a
// feed event type, so receivers that ignore unknown types (as they must)
// ignore it too.
type testEvent struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
}

// TestEventType is the type of the synthetic event Test sends.
const TestEventType = "webhook.test"

// Test sends a synthetic {"type":"webhook.test","id":"test_…","created_at":…}
// event to one of tenant's subscriptions now, signed like any delivery,
// and reports the answer. It is sent once, whether the subscription is
// enabled or not, and nothing is stored: the delivery log is the feed's
// events only, and the caller gets the outcome in the answer.
func (d *Dispatcher) Test(ctx context.Context, tenant, id uuid.UUID) (TestResult, error) {
	target, secrets, err := d.store.SubscriptionTarget(ctx, tenant, id)
	if err != nil {
		return TestResult{}, err
	}
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return TestResult{}, err
	}
	ev := testEvent{Type: TestEventType, ID: "test_" + hex.EncodeToString(b), CreatedAt: time.Now().UTC()}
	body, err := json.Marshal(ev)
	if err != nil {
		return TestResult{}, err
	}
	res := d.send(ctx, target, ev.ID, body, secrets)
	d.log.Info("webhook test sent", "tenant_id", tenant, "subscription_id", id, "event_id", ev.ID,
		"status_code", res.statusCode, "delivered", res.delivered, "err", res.err)
	return TestResult{EventID: ev.ID, Delivered: res.delivered, StatusCode: res.statusCode, DurationMS: res.duration.Milliseconds(), Error: res.err}, nil
}

// Replay queues again the events from fromSeq that the subscription
// matches today (its tenant owns the signer, its filters let the type and
// signer through): one page of the feed (Options.ReplayPage events) per
// call, never past the fan-out cursor; NextFromSeq says where the next
// call continues. A delivery that exists goes back to pending with its
// attempts reset and its attempt history kept; an event that has none
// (from before the subscription, or filtered out then) gets one. Each
// transaction's events are re-queued lowest first, so they are delivered
// in order again. A disabled subscription is errs.Conflict and queues
// nothing: its deliveries would only wait, holding rows. A fromSeq more
// than Options.MaxReplayEvents behind the cursor is errs.Invalid.
func (d *Dispatcher) Replay(ctx context.Context, tenant, id uuid.UUID, fromSeq uint64) (ReplayResult, error) {
	if fromSeq < 1 {
		return ReplayResult{}, errs.InvalidFields("from_seq: an event sequence, 1 or more",
			errs.FieldError{Pointer: "/from_seq", Detail: "an event sequence, 1 or more"})
	}
	// Before reading the feed, so that another tenant's subscription is
	// not found rather than costly.
	sub, err := d.store.Subscription(ctx, tenant, id)
	if err != nil {
		return ReplayResult{}, err
	}
	if !sub.Enabled {
		return ReplayResult{}, errs.Errorf(errs.Conflict, "webhook %s is disabled: enable it, then replay", id)
	}
	cursor, err := d.store.WebhookFeedCursor(ctx)
	if err != nil {
		return ReplayResult{}, err
	}
	res := ReplayResult{FromSeq: fromSeq}
	if fromSeq > cursor {
		return res, nil
	}
	if n := cursor - fromSeq + 1; n > uint64(d.opts.MaxReplayEvents) {
		detail := fmt.Sprintf("at most %d events back: the fan-out cursor is at %d", d.opts.MaxReplayEvents, cursor)
		return res, errs.InvalidFields("from_seq: "+detail, errs.FieldError{Pointer: "/from_seq", Detail: detail})
	}
	after := fromSeq - 1
	events, err := d.feed.EventsAfter(ctx, after, int(min(uint64(d.opts.ReplayPage), cursor-after)), 0)
	if err != nil {
		return res, fmt.Errorf("replay: read the event feed after %d: %w", after, err)
	}
	if len(events) == 0 {
		return res, fmt.Errorf("replay: the event feed ends at %d, before the fan-out cursor %d", after, cursor)
	}
	if err := checkContiguous(after, events); err != nil {
		return res, fmt.Errorf("replay: the event feed after %d: %w", after, err)
	}
	if last := uint64(events[len(events)-1].Seq); last > cursor {
		events = events[:len(events)-int(last-cursor)]
	}
	if res.Queued, err = d.store.ReplayDeliveries(ctx, tenant, id, d.feedEvents(events)); err != nil {
		return res, err
	}
	if res.Queued > 0 {
		d.wakeWorkers()
	}
	res.ThroughSeq = uint64(events[len(events)-1].Seq)
	if res.ThroughSeq < cursor {
		res.NextFromSeq = res.ThroughSeq + 1
	}
	d.log.Info("webhook deliveries replayed", "tenant_id", tenant, "subscription_id", id, "from_seq", fromSeq,
		"through_seq", res.ThroughSeq, "next_from_seq", res.NextFromSeq, "queued", res.Queued)
	return res, nil
}
