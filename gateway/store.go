package gateway

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// The stores below are what the API and the webhook dispatcher need of the
// gateway's database, each as small as its users; package postgres
// implements them all.

// Tenants keeps tenants and the signers each owns.
type Tenants interface {
	CreateTenant(ctx context.Context, name string) (Tenant, error)
	// AssignSigner gives a signer to a tenant; a signer another tenant
	// owns is errs.Conflict.
	AssignSigner(ctx context.Context, tenant uuid.UUID, signer SignerRef) error
	GetTenant(ctx context.Context, id uuid.UUID) (Tenant, error)
	TenantByName(ctx context.Context, name string) (Tenant, error)
	TenantSigners(ctx context.Context, tenant uuid.UUID) ([]SignerRef, error)
}

// Keys keeps API keys, only their secrets' hashes.
type Keys interface {
	// CreateKey returns the key with its token, the one time the token
	// exists outside the caller.
	CreateKey(ctx context.Context, nk NewKey) (Key, string, error)
	// Authenticate returns the live key a token names; every failure is
	// ErrBadKey.
	Authenticate(ctx context.Context, token string) (Key, error)
	// RevokeKey revokes one of tenant's keys if reach allows; any other is
	// errs.NotFound.
	RevokeKey(ctx context.Context, tenant, id uuid.UUID, reach func(Key) bool) (Key, error)
	Keys(ctx context.Context, tenant uuid.UUID) ([]Key, error)
}

// Subscriptions keeps tenants' webhook subscriptions and their delivery
// logs. Another tenant's subscription is errs.NotFound.
type Subscriptions interface {
	CreateSubscription(ctx context.Context, tenant uuid.UUID, ns NewSubscription, rule URLRule) (Subscription, WebhookSecret, error)
	Subscription(ctx context.Context, tenant, id uuid.UUID) (Subscription, error)
	Subscriptions(ctx context.Context, tenant uuid.UUID, cursor string, limit int) ([]Subscription, string, error)
	UpdateSubscription(ctx context.Context, tenant, id uuid.UUID, p SubscriptionPatch, rule URLRule) (Subscription, error)
	DeleteSubscription(ctx context.Context, tenant, id uuid.UUID) error
	RotateSubscriptionSecret(ctx context.Context, tenant, id uuid.UUID, grace time.Duration) (Subscription, WebhookSecret, error)
	// SubscriptionTarget is where a test delivery goes and what signs it.
	SubscriptionTarget(ctx context.Context, tenant, id uuid.UUID) (string, []WebhookSecret, error)
	Deliveries(ctx context.Context, tenant, subscription uuid.UUID, f DeliveryFilter) ([]Delivery, string, error)
	// ReplayDeliveries queues events again for one subscription.
	ReplayDeliveries(ctx context.Context, tenant, subscription uuid.UUID, events []FeedEvent) (int64, error)
}

// DeliveryQueue is the webhook dispatcher's queue: the feed fanned out
// into deliveries past a durable cursor, and deliveries claimed, attempted
// and recorded.
type DeliveryQueue interface {
	WebhookFeedCursor(ctx context.Context) (uint64, error)
	FanOut(ctx context.Context, after, through uint64, events []FeedEvent) (advanced bool, queued int64, err error)
	ClaimDelivery(ctx context.Context, lease time.Duration) (*DeliveryClaim, error)
	RecordAttempt(ctx context.Context, c *DeliveryClaim, r AttemptResult) (DeliveryStatus, error)
	ReleaseClaim(ctx context.Context, c *DeliveryClaim) error
}

// Adjustments keeps operators' adjustments of the ledger, from proposal
// through approval to booking, for the audit. Another tenant's
// adjustment is errs.NotFound.
type Adjustments interface {
	// ProposeAdjustment stores n, pending a second key's approval when
	// rule says so; the same proposal again returns the stored one with
	// created false, another under its id is errs.Conflict.
	ProposeAdjustment(ctx context.Context, n NewAdjustment, rule ApprovalRule) (a Adjustment, created bool, err error)
	Adjustment(ctx context.Context, tenant uuid.UUID, id string) (Adjustment, error)
	Adjustments(ctx context.Context, tenant uuid.UUID, f AdjustmentFilter) ([]Adjustment, error)
	// ApproveAdjustment and RejectAdjustment decide a pending one; its
	// proposer's key may reject it, never approve it.
	ApproveAdjustment(ctx context.Context, tenant uuid.UUID, id string, approver KeyRef) (Adjustment, error)
	RejectAdjustment(ctx context.Context, tenant uuid.UUID, id string, by KeyRef) (Adjustment, error)
	// AdjustmentBooked and AdjustmentRefused record what the ledger did
	// with an approved one.
	AdjustmentBooked(ctx context.Context, tenant uuid.UUID, id string, journal int64) (Adjustment, error)
	AdjustmentRefused(ctx context.Context, tenant uuid.UUID, id string, kind errs.Kind, detail string) (Adjustment, error)
}
