package postgres

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/keyset"
	"github.com/txfence/txfence/shared/pg"
)

// The statements of queries/webhooks.sql.
var (
	qCreateSubscription   = Queries.Use("CreateSubscription")
	qAddWebhookSecret     = Queries.Use("AddWebhookSecret")
	qGetSubscription      = Queries.Use("GetSubscription")
	qSubscriptionExists   = Queries.Use("SubscriptionExists")
	qSubscriptions        = Queries.Use("Subscriptions")
	qUpdateSubscription   = Queries.Use("UpdateSubscription")
	qDeleteSubscription   = Queries.Use("DeleteSubscription")
	qLockSubscription     = Queries.Use("LockSubscription")
	qDeleteExpiredSecrets = Queries.Use("DeleteExpiredSecrets")
	qRetireSecrets        = Queries.Use("RetireSecrets")
	qSubscriptionTarget   = Queries.Use("SubscriptionTarget")
	qSubscriptionSecrets  = Queries.Use("SubscriptionSecrets")
	qDeliveryLog          = Queries.Use("DeliveryLog")
	qDeliveryLogByStatus  = Queries.Use("DeliveryLogByStatus")
	qLatestAttempts       = Queries.Use("LatestAttempts")
	qFeedCursor           = Queries.Use("FeedCursor")
	qAdvanceFeedCursor    = Queries.Use("AdvanceFeedCursor")
	qFanOut               = Queries.Use("FanOut")
	qReplayDeliveries     = Queries.Use("ReplayDeliveries")
	qClaimDelivery        = Queries.Use("ClaimDelivery")
	qRecordAttempt        = Queries.Use("RecordAttempt")
	qReleaseClaim         = Queries.Use("ReleaseClaim")
)

// Limits of what is kept of an attempt.
const (
	// maxAttemptError bounds the error text kept per attempt (the column's
	// CHECK).
	maxAttemptError = 1000
	// attemptLogLimit is how many attempts of one delivery the log shows,
	// the latest first: a delivery retried for a day has dozens.
	attemptLogLimit = 50
)

// ownedSigners adds a field error unless tenant owns every one of refs.
func (s *Store) ownedSigners(ctx context.Context, tenant uuid.UUID, refs []gateway.SignerRef, fields *[]errs.FieldError) error {
	err := s.requireOwned(ctx, tenant, refs)
	if errs.Is(err, errs.Invalid) {
		*fields = append(*fields, errs.FieldError{Pointer: "/signers", Detail: strings.TrimPrefix(err.Error(), "signers: ")})
		return nil
	}
	return err
}

// CreateSubscription makes a subscription for tenant and returns it with
// its signing secret, the only time the secret is returned. Invalid
// fields are errs.Invalid naming each of them (errs.FieldError); the
// signers must be the tenant's.
func (s *Store) CreateSubscription(ctx context.Context, tenant uuid.UUID, ns gateway.NewSubscription, rule gateway.URLRule) (gateway.Subscription, gateway.WebhookSecret, error) {
	var fields []errs.FieldError
	url, problem := gateway.CheckSubscriptionURL(ns.URL, rule)
	if problem != "" {
		fields = append(fields, errs.FieldError{Pointer: "/url", Detail: problem})
	}
	gateway.CheckDescription(ns.Description, &fields)
	eventTypes := gateway.CheckEventTypes(ns.EventTypes, &fields)
	signers, refs := gateway.CheckSigners(ns.Signers, &fields)
	if err := s.ownedSigners(ctx, tenant, refs, &fields); err != nil {
		return gateway.Subscription{}, "", err
	}
	if len(fields) > 0 {
		return gateway.Subscription{}, "", gateway.InvalidSubscription(fields)
	}
	enabled := ns.Enabled == nil || *ns.Enabled
	secret, err := gateway.NewWebhookSecret()
	if err != nil {
		return gateway.Subscription{}, "", err
	}
	id := uuid.New()
	var sub gateway.Subscription
	err = pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		sub, err = scanSubscription(tx.QueryRow(ctx, qCreateSubscription.SQL, id, tenant, url, ns.Description, eventTypes, signers, enabled))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qAddWebhookSecret.SQL, uuid.New(), id, string(secret))
		return err
	})
	if err != nil {
		return gateway.Subscription{}, "", fmt.Errorf("create webhook subscription: %w", err)
	}
	if err := s.attachSecrets(ctx, []*gateway.Subscription{&sub}); err != nil {
		return gateway.Subscription{}, "", err
	}
	return sub, secret, nil
}

// Subscription reads one of tenant's subscriptions; another tenant's is
// errs.NotFound, as if it did not exist.
func (s *Store) Subscription(ctx context.Context, tenant, id uuid.UUID) (gateway.Subscription, error) {
	sub, err := scanSubscription(s.pool.QueryRow(ctx, qGetSubscription.SQL, id, tenant))
	if errors.Is(err, pgx.ErrNoRows) {
		return sub, noSubscription(id)
	}
	if err != nil {
		return sub, fmt.Errorf("webhook subscription %s: %w", id, err)
	}
	return sub, s.attachSecrets(ctx, []*gateway.Subscription{&sub})
}

func noSubscription(id uuid.UUID) error {
	return errs.Errorf(errs.NotFound, "no webhook subscription %s", id)
}

// requireSubscription is errs.NotFound unless tenant has subscription id.
func (s *Store) requireSubscription(ctx context.Context, tenant, id uuid.UUID) error {
	var ok bool
	err := s.pool.QueryRow(ctx, qSubscriptionExists.SQL, id, tenant).Scan(&ok)
	switch {
	case err != nil:
		return fmt.Errorf("webhook subscription %s: %w", id, err)
	case !ok:
		return noSubscription(id)
	}
	return nil
}

// Subscriptions lists a page of tenant's subscriptions, oldest first,
// after cursor ("" for the first page), with the next page's cursor ("" at
// the end). limit is 1 to 1000; 0 means 100.
func (s *Store) Subscriptions(ctx context.Context, tenant uuid.UUID, cursor string, limit int) ([]gateway.Subscription, string, error) {
	limit, bad := gateway.PageLimit(limit)
	if bad != nil {
		return nil, "", errs.InvalidFields("limit: "+bad.Detail, *bad)
	}
	var afterAt *time.Time
	var afterID *uuid.UUID
	if cursor != "" {
		at, key, ok := keyset.Decode(cursor)
		if !ok {
			return nil, "", badCursor()
		}
		id := uuid.UUID(key)
		afterAt, afterID = &at, &id
	}
	rows, err := s.pool.Query(ctx, qSubscriptions.SQL, tenant, afterAt, afterID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("webhook subscriptions: %w", err)
	}
	subs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (gateway.Subscription, error) { return scanSubscription(r) })
	if err != nil {
		return nil, "", fmt.Errorf("webhook subscriptions: %w", err)
	}
	next := ""
	if len(subs) > limit {
		subs = subs[:limit]
		last := subs[len(subs)-1]
		next = keyset.Encode(last.CreatedAt, last.ID)
	}
	ptrs := make([]*gateway.Subscription, len(subs))
	for i := range subs {
		ptrs[i] = &subs[i]
	}
	return subs, next, s.attachSecrets(ctx, ptrs)
}

func badCursor() error {
	return errs.InvalidFields("cursor: not a cursor this list issued", errs.FieldError{Pointer: "cursor", Detail: "not a cursor this list issued"})
}

// UpdateSubscription changes the fields p names and returns the result.
// Pending deliveries go to the new URL; the filters apply to events fanned
// out from now on. Another tenant's subscription is errs.NotFound.
func (s *Store) UpdateSubscription(ctx context.Context, tenant, id uuid.UUID, p gateway.SubscriptionPatch, rule gateway.URLRule) (gateway.Subscription, error) {
	var fields []errs.FieldError
	var newURL *string
	if p.URL != nil {
		u, problem := gateway.CheckSubscriptionURL(*p.URL, rule)
		if problem != "" {
			fields = append(fields, errs.FieldError{Pointer: "/url", Detail: problem})
		}
		newURL = &u
	}
	if p.Description != nil {
		gateway.CheckDescription(*p.Description, &fields)
	}
	var types, signers []string
	if p.EventTypes != nil {
		types = gateway.CheckEventTypes(*p.EventTypes, &fields)
	}
	if p.Signers != nil {
		var refs []gateway.SignerRef
		signers, refs = gateway.CheckSigners(*p.Signers, &fields)
		if err := s.ownedSigners(ctx, tenant, refs, &fields); err != nil {
			return gateway.Subscription{}, err
		}
	}
	if len(fields) > 0 {
		return gateway.Subscription{}, gateway.InvalidSubscription(fields)
	}
	// One statement: concurrent updates of different fields both stick.
	sub, err := scanSubscription(s.pool.QueryRow(ctx, qUpdateSubscription.SQL,
		id, tenant, newURL, p.Description, p.EventTypes != nil, types, p.Signers != nil, signers, p.Enabled))
	if errors.Is(err, pgx.ErrNoRows) {
		return sub, noSubscription(id)
	}
	if err != nil {
		return sub, fmt.Errorf("update webhook subscription %s: %w", id, err)
	}
	return sub, s.attachSecrets(ctx, []*gateway.Subscription{&sub})
}

// DeleteSubscription deletes one of tenant's subscriptions with its
// secrets and delivery log: nothing more is sent for it (an attempt in
// flight finishes, and its result is dropped). Another tenant's is
// errs.NotFound.
func (s *Store) DeleteSubscription(ctx context.Context, tenant, id uuid.UUID) error {
	tag, err := s.pool.Exec(ctx, qDeleteSubscription.SQL, id, tenant)
	if err != nil {
		return fmt.Errorf("delete webhook subscription %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return noSubscription(id)
	}
	return nil
}

// RotateSubscriptionSecret adds a new signing secret and returns it, the
// only time it is returned. The secrets signing until now keep signing for
// grace (at most MaxSecretGrace), so that receivers can switch without
// rejecting a delivery; a grace of 0 retires them at once, for a leaked
// secret. Secrets expired before now are deleted. Another tenant's
// subscription is errs.NotFound.
func (s *Store) RotateSubscriptionSecret(ctx context.Context, tenant, id uuid.UUID, grace time.Duration) (gateway.Subscription, gateway.WebhookSecret, error) {
	if grace < 0 || grace > gateway.MaxSecretGrace {
		return gateway.Subscription{}, "", errs.InvalidFields(fmt.Sprintf("grace: 0 to %s", gateway.MaxSecretGrace),
			errs.FieldError{Pointer: "/grace_seconds", Detail: fmt.Sprintf("0 to %d seconds", int(gateway.MaxSecretGrace/time.Second))})
	}
	secret, err := gateway.NewWebhookSecret()
	if err != nil {
		return gateway.Subscription{}, "", err
	}
	var sub gateway.Subscription
	err = pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		// The row lock orders concurrent rotations of one subscription.
		var err error
		sub, err = scanSubscription(tx.QueryRow(ctx, qLockSubscription.SQL, id, tenant))
		if errors.Is(err, pgx.ErrNoRows) {
			return noSubscription(id)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qDeleteExpiredSecrets.SQL, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qRetireSecrets.SQL, id, grace.Seconds()); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, qAddWebhookSecret.SQL, uuid.New(), id, string(secret))
		return err
	})
	if errs.Is(err, errs.NotFound) {
		return gateway.Subscription{}, "", err
	}
	if err != nil {
		return gateway.Subscription{}, "", fmt.Errorf("rotate the secret of webhook subscription %s: %w", id, err)
	}
	return sub, secret, s.attachSecrets(ctx, []*gateway.Subscription{&sub})
}

// SubscriptionTarget returns where one of tenant's subscriptions is
// delivered and the secrets that sign for it now, newest first (a test
// delivery uses them). Another tenant's is errs.NotFound.
func (s *Store) SubscriptionTarget(ctx context.Context, tenant, id uuid.UUID) (string, []gateway.WebhookSecret, error) {
	var u string
	var secrets []string
	err := s.pool.QueryRow(ctx, qSubscriptionTarget.SQL, id, tenant).Scan(&u, &secrets)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil, noSubscription(id)
	}
	if err != nil {
		return "", nil, fmt.Errorf("webhook subscription %s: %w", id, err)
	}
	return u, webhookSecrets(secrets), nil
}

func webhookSecrets(ss []string) []gateway.WebhookSecret {
	out := make([]gateway.WebhookSecret, len(ss))
	for i, s := range ss {
		out[i] = gateway.WebhookSecret(s)
	}
	return out
}

// scanSubscription reads a subscription's columns as
// queries/webhooks.sql lists them (subscription_id to updated_at).
func scanSubscription(row pgx.Row) (gateway.Subscription, error) {
	var sub gateway.Subscription
	err := row.Scan(&sub.ID, &sub.Tenant, &sub.URL, &sub.Description, &sub.EventTypes, &sub.Signers, &sub.Enabled, &sub.CreatedAt, &sub.UpdatedAt)
	if sub.EventTypes == nil {
		sub.EventTypes = []string{}
	}
	if len(sub.Signers) == 0 {
		sub.Signers = nil
	}
	return sub, err
}

// attachSecrets reads the secrets' metadata of subs in one query.
func (s *Store) attachSecrets(ctx context.Context, subs []*gateway.Subscription) error {
	if len(subs) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(subs))
	byID := make(map[uuid.UUID]*gateway.Subscription, len(subs))
	for i, sub := range subs {
		ids[i], byID[sub.ID] = sub.ID, sub
		sub.Secrets = []gateway.SubscriptionSecret{}
	}
	rows, err := s.pool.Query(ctx, qSubscriptionSecrets.SQL, ids)
	if err != nil {
		return fmt.Errorf("webhook secrets: %w", err)
	}
	var sub uuid.UUID
	var sec gateway.SubscriptionSecret
	_, err = pgx.ForEachRow(rows, []any{&sub, &sec.ID, &sec.CreatedAt, &sec.ExpiresAt}, func() error {
		byID[sub].Secrets = append(byID[sub].Secrets, sec)
		return nil
	})
	if err != nil {
		return fmt.Errorf("webhook secrets: %w", err)
	}
	return nil
}

// Deliveries lists a page of a subscription's delivery log, newest event
// first, each with its latest attempts. Another tenant's subscription is
// errs.NotFound.
func (s *Store) Deliveries(ctx context.Context, tenant, subscription uuid.UUID, f gateway.DeliveryFilter) ([]gateway.Delivery, string, error) {
	limit, bad := gateway.PageLimit(f.Limit)
	if bad != nil {
		return nil, "", errs.InvalidFields("limit: "+bad.Detail, *bad)
	}
	switch f.Status {
	case "", gateway.DeliveryPending, gateway.DeliveryDelivered, gateway.DeliveryDead:
	default:
		return nil, "", errs.InvalidFields(fmt.Sprintf("status: %q is not pending, delivered or dead", f.Status),
			errs.FieldError{Pointer: "status", Detail: "pending, delivered or dead"})
	}
	var before *int64 // no cursor: from the newest
	if f.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(f.Cursor)
		if err != nil || len(b) != 8 {
			return nil, "", badCursor()
		}
		// A cursor beyond int64, which no page issues (sequences are
		// positive bigints), lists from the newest, as it always has.
		if seq := int64(binary.BigEndian.Uint64(b)); seq >= 0 {
			before = &seq
		}
	}
	if err := s.requireSubscription(ctx, tenant, subscription); err != nil {
		return nil, "", err
	}
	// Two statements rather than an optional status, so that each keeps
	// its index under a generic plan (see the query file).
	q, args := qDeliveryLog, []any{subscription, before, limit + 1}
	if f.Status != "" {
		q, args = qDeliveryLogByStatus, append(args, string(f.Status))
	}
	rows, err := s.pool.Query(ctx, q.SQL, args...)
	if err != nil {
		return nil, "", fmt.Errorf("webhook deliveries of %s: %w", subscription, err)
	}
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (gateway.Delivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, "", fmt.Errorf("webhook deliveries of %s: %w", subscription, err)
	}
	next := ""
	if len(ds) > limit {
		ds = ds[:limit]
		next = base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, ds[len(ds)-1].EventSeq))
	}
	return ds, next, s.attachAttempts(ctx, ds)
}

// scanDelivery reads a delivery's columns as queries/webhooks.sql lists
// them (delivery_id to delivered_at).
func scanDelivery(row pgx.Row) (gateway.Delivery, error) {
	var d gateway.Delivery
	var seq int64
	var next time.Time
	err := row.Scan(&d.ID, &d.SubscriptionID, &seq, &d.EventID, &d.EventType, &d.TxID, &d.Status, &d.Attempts,
		&next, &d.LastStatusCode, &d.LastError, &d.FirstAttemptAt, &d.CreatedAt, &d.DeliveredAt)
	d.EventSeq = uint64(seq)
	if d.Status == gateway.DeliveryPending {
		d.NextAttemptAt = &next
	}
	d.AttemptLog = []gateway.DeliveryAttempt{}
	return d, err
}

// attachAttempts reads the latest attempts of ds in one query.
func (s *Store) attachAttempts(ctx context.Context, ds []gateway.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(ds))
	index := make(map[uuid.UUID]int, len(ds))
	for i, d := range ds {
		ids[i], index[d.ID] = d.ID, i
	}
	rows, err := s.pool.Query(ctx, qLatestAttempts.SQL, ids, attemptLogLimit)
	if err != nil {
		return fmt.Errorf("webhook attempts: %w", err)
	}
	var id uuid.UUID
	var a gateway.DeliveryAttempt
	_, err = pgx.ForEachRow(rows, []any{&id, &a.At, &a.StatusCode, &a.Error, &a.DurationMS}, func() error {
		ds[index[id]].AttemptLog = append(ds[index[id]].AttemptLog, a)
		return nil
	})
	if err != nil {
		return fmt.Errorf("webhook attempts: %w", err)
	}
	return nil
}

// WebhookFeedCursor is the last feed sequence fanned out into deliveries.
func (s *Store) WebhookFeedCursor(ctx context.Context) (uint64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, qFeedCursor.SQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("webhook feed cursor: %w", err)
	}
	return uint64(seq), nil
}

// FanOut queues, in one transaction, a delivery of each of events for
// every enabled subscription it matches, and moves the feed cursor from
// after to through. The move is a compare-and-set: when the cursor is no
// longer after (another node fanned these events out first), nothing is
// written and advanced is false. events are those of after+1..through the
// caller could attribute to a signer; the others match no subscription.
func (s *Store) FanOut(ctx context.Context, after, through uint64, events []gateway.FeedEvent) (advanced bool, queued int64, err error) {
	if through <= after {
		return false, 0, fmt.Errorf("fan out: cursor %d to %d does not advance", after, through)
	}
	err = pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		advanced, queued = false, 0
		// The cursor row is locked first: a concurrent fan-out waits here,
		// then finds the cursor moved and writes nothing.
		tag, err := tx.Exec(ctx, qAdvanceFeedCursor.SQL, int64(after), int64(through))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		advanced = true
		if len(events) == 0 {
			return nil
		}
		tag, err = tx.Exec(ctx, qFanOut.SQL, eventArgs(events)...)
		if err != nil {
			return err
		}
		queued = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return false, 0, fmt.Errorf("fan out events %d to %d: %w", after+1, through, err)
	}
	return advanced, queued, nil
}

// eventArgs are events as the parameters $1 to $8 of FanOut and
// ReplayDeliveries: parallel arrays, one per column of their table e.
func eventArgs(events []gateway.FeedEvent) []any {
	n := len(events)
	seqs, chains := make([]int64, n), make([]int64, n)
	ids, types, txs, refs, bodies := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	signers := make([][]byte, n)
	for i, e := range events {
		seqs[i], ids[i], types[i], txs[i], chains[i] = int64(e.Seq), e.ID, e.Type, e.TxID, int64(e.ChainID)
		signers[i], refs[i], bodies[i] = e.Signer.Bytes(), gateway.SignerRef{ChainID: e.ChainID, Address: e.Signer}.String(), string(e.Body)
	}
	return []any{seqs, ids, types, txs, chains, signers, refs, bodies}
}

// ReplayDeliveries queues again those of events (a stretch of the feed up
// to the cursor) that subscription matches today: the tenant owns the
// signer and the filters let the event through. A delivery that exists
// goes back to pending with its attempts reset (its attempt history
// stays; an attempt in flight loses its claim, so its result is dropped
// and the event is sent again); one that does not (an event from before
// the subscription, or filtered out then) is created. It returns how many
// were queued. Another tenant's subscription is errs.NotFound.
func (s *Store) ReplayDeliveries(ctx context.Context, tenant, subscription uuid.UUID, events []gateway.FeedEvent) (int64, error) {
	if err := s.requireSubscription(ctx, tenant, subscription); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, qReplayDeliveries.SQL, append(eventArgs(events), subscription, tenant)...)
	if err != nil {
		return 0, fmt.Errorf("replay webhook deliveries of %s: %w", subscription, err)
	}
	return tag.RowsAffected(), nil
}

// ClaimDelivery claims one due delivery for lease and returns it, or nil
// when none is due. Due: pending, its time has come, its subscription is
// enabled, and no earlier event of the same subscription and transaction
// is pending, so each transaction's events arrive in order (a dead one no
// longer holds the later ones back). Claims skip rows other nodes are
// claiming, and a claim not resolved within its lease makes the delivery
// due again.
func (s *Store) ClaimDelivery(ctx context.Context, lease time.Duration) (*gateway.DeliveryClaim, error) {
	c := &gateway.DeliveryClaim{Token: uuid.New()}
	var seq int64
	var secrets []string
	err := s.pool.QueryRow(ctx, qClaimDelivery.SQL, c.Token, lease.Seconds()).
		Scan(&c.DeliveryID, &c.SubscriptionID, &c.Tenant, &seq, &c.EventID, &c.EventType, &c.TxID, &c.Attempts, &c.URL, &secrets, &c.Body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim a webhook delivery: %w", err)
	}
	c.EventSeq, c.Secrets = uint64(seq), webhookSecrets(secrets)
	return c, nil
}

// RecordAttempt writes an attempt's result under its claim, and returns
// the delivery's status after it: delivered, pending again (due after
// r.RetryIn, and the transaction's later deliveries with it), or dead when
// the failure came past the horizon. It is ErrClaimLost when the claim is
// gone.
func (s *Store) RecordAttempt(ctx context.Context, c *gateway.DeliveryClaim, r gateway.AttemptResult) (gateway.DeliveryStatus, error) {
	var code *int
	if r.StatusCode != 0 {
		code = &r.StatusCode
	}
	var errText *string
	if r.Error != "" {
		t := boundText(r.Error, maxAttemptError)
		errText = &t
	}
	var status gateway.DeliveryStatus
	err := s.pool.QueryRow(ctx, qRecordAttempt.SQL,
		c.DeliveryID, c.Token, r.Delivered, r.DeadAfter.Seconds(), r.RetryIn.Seconds(), code, errText, r.At, r.Duration.Milliseconds()).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", gateway.ErrClaimLost
	}
	if err != nil {
		return "", fmt.Errorf("record an attempt of webhook delivery %s: %w", c.DeliveryID, err)
	}
	return status, nil
}

// ReleaseClaim gives a claimed delivery back unattempted (the node is
// stopping), due at once for whichever node comes next.
func (s *Store) ReleaseClaim(ctx context.Context, c *gateway.DeliveryClaim) error {
	_, err := s.pool.Exec(ctx, qReleaseClaim.SQL, c.DeliveryID, c.Token)
	if err != nil {
		return fmt.Errorf("release webhook delivery %s: %w", c.DeliveryID, err)
	}
	return nil
}

// boundText makes s storable as text of at most n characters: valid
// UTF-8, no NUL (which PostgreSQL text refuses), cut with an ellipsis.
func boundText(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
