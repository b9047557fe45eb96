package postgres_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// webhookRig is a migrated store with two tenants: acme owns signerA on
// chain 31337 and on chain 1, globex owns signerB.
type webhookRig struct {
	store        *postgres.Store
	pool         *pgxpool.Pool
	acme, globex uuid.UUID
}

var signerAOnMainnet = gateway.SignerRef{ChainID: 1, Address: signerA.Address}

func newWebhookRig(t *testing.T) *webhookRig {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres.Migrations)
	r := &webhookRig{store: postgres.New(pool), pool: pool}
	for _, tenant := range []struct {
		id      *uuid.UUID
		name    string
		signers []gateway.SignerRef
	}{{&r.acme, "acme", []gateway.SignerRef{signerA, signerAOnMainnet}}, {&r.globex, "globex", []gateway.SignerRef{signerB}}} {
		tn, err := r.store.CreateTenant(ctx, tenant.name)
		if err != nil {
			t.Fatal(err)
		}
		*tenant.id = tn.ID
		for _, s := range tenant.signers {
			if err := r.store.AssignSigner(ctx, tn.ID, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

func (r *webhookRig) subscribe(t *testing.T, tenant uuid.UUID, ns gateway.NewSubscription) gateway.Subscription {
	t.Helper()
	if ns.URL == "" {
		ns.URL = "http://127.0.0.1:9/hook"
	}
	sub, _, err := r.store.CreateSubscription(context.Background(), tenant, ns, gateway.AnyHTTP)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// count runs a COUNT(*) query.
func (r *webhookRig) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// event is a feed event of tx on signer, with a body like txmanager's.
func event(seq uint64, typ, tx string, signer gateway.SignerRef) gateway.FeedEvent {
	id := fmt.Sprintf("evt_%016x", seq)
	body, _ := json.Marshal(map[string]any{"seq": seq, "id": id, "type": typ, "tx_id": tx, "chain_id": signer.ChainID,
		"signer": signer.Address.Hex(), "created_at": "2025-01-15T10:04:05.123456Z", "data": map[string]any{"state": "INIT"}})
	return gateway.FeedEvent{Seq: seq, ID: id, Type: typ, TxID: tx, ChainID: signer.ChainID, Signer: signer.Address, Body: body}
}

// TestASubscriptionLivesAndDies: made with a secret shown once, read,
// listed page by page, changed field by field, its secret rotated with a
// grace period or at once, and deleted.
func TestASubscriptionLivesAndDies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newWebhookRig(t)
	sub, secret, err := r.store.CreateSubscription(ctx, r.acme, gateway.NewSubscription{
		URL: "https://hooks.example.com/txfence?x=1", Description: "payouts", EventTypes: []string{"tx.reorged", "tx.state_changed", "tx.reorged"},
		Signers: []string{"31337:" + signerA.Address.Hex()},
	}, gateway.PublicHTTPS)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(string(secret), "whsec_"))
	if !strings.HasPrefix(string(secret), "whsec_") || err != nil || len(raw) != 32 {
		t.Fatalf("secret %q: %v", secret, err)
	}
	want := gateway.Subscription{ID: sub.ID, Tenant: r.acme, URL: "https://hooks.example.com/txfence?x=1", Description: "payouts",
		EventTypes: []string{"tx.reorged", "tx.state_changed"}, Signers: []string{signerA.String()}, Enabled: true,
		Secrets: sub.Secrets, CreatedAt: sub.CreatedAt, UpdatedAt: sub.UpdatedAt}
	if diff := cmp.Diff(want, sub); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	if len(sub.Secrets) != 1 || sub.Secrets[0].ExpiresAt != nil {
		t.Errorf("secrets %+v, want one current", sub.Secrets)
	}
	got, err := r.store.Subscription(ctx, r.acme, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sub, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if _, secrets, err := r.store.SubscriptionTarget(ctx, r.acme, sub.ID); err != nil || !slices.Equal(secrets, []gateway.WebhookSecret{secret}) {
		t.Errorf("signing secrets %d, %v; want the one made", len(secrets), err)
	}

	// Pages of two, oldest first, until the cursor runs out.
	ids := []uuid.UUID{sub.ID}
	for range 4 {
		ids = append(ids, r.subscribe(t, r.acme, gateway.NewSubscription{}).ID)
	}
	var listed []uuid.UUID
	cursor := ""
	for page := 0; ; page++ {
		subs, next, err := r.store.Subscriptions(ctx, r.acme, cursor, 2)
		if err != nil || page > 3 {
			t.Fatalf("page %d: %v", page, err)
		}
		for _, s := range subs {
			listed = append(listed, s.ID)
			if len(s.Secrets) != 1 {
				t.Errorf("listed %s with %d secrets", s.ID, len(s.Secrets))
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(ids, listed); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	if _, _, err := r.store.Subscriptions(ctx, r.acme, "bogus!", 2); errs.KindOf(err) != errs.Invalid {
		t.Errorf("a made-up cursor: %v", err)
	}

	// Each field alone; an empty signer list means every signer again.
	newURL, desc, off := "https://other.example.org/h", "", false
	types, signers := []string{}, []string{}
	up, err := r.store.UpdateSubscription(ctx, r.acme, sub.ID, gateway.SubscriptionPatch{URL: &newURL}, gateway.PublicHTTPS)
	if err != nil || up.URL != newURL || up.Description != "payouts" || len(up.EventTypes) != 2 || !up.UpdatedAt.After(sub.UpdatedAt) {
		t.Fatalf("url changed: %+v %v", up, err)
	}
	up, err = r.store.UpdateSubscription(ctx, r.acme, sub.ID, gateway.SubscriptionPatch{Description: &desc, EventTypes: &types,
		Signers: &signers, Enabled: &off}, gateway.PublicHTTPS)
	if err != nil || up.URL != newURL || up.Description != "" || len(up.EventTypes) != 0 || up.Signers != nil || up.Enabled {
		t.Fatalf("the rest changed: %+v %v", up, err)
	}

	// Rotation with a grace period: both sign, newest first; the old one
	// has an end.
	rot, secret2, err := r.store.RotateSubscriptionSecret(ctx, r.acme, sub.ID, time.Hour)
	if err != nil || secret2 == secret || len(rot.Secrets) != 2 || rot.Secrets[0].ExpiresAt == nil || rot.Secrets[1].ExpiresAt != nil {
		t.Fatalf("rotated: %+v %v", rot.Secrets, err)
	}
	if _, secrets, _ := r.store.SubscriptionTarget(ctx, r.acme, sub.ID); !slices.Equal(secrets, []gateway.WebhookSecret{secret2, secret}) {
		t.Errorf("during the grace period %d secrets sign, want the new then the old", len(secrets))
	}
	// Rotation at once (a leaked secret): only the newest signs, and the
	// next rotation clears the expired ones away.
	_, secret3, err := r.store.RotateSubscriptionSecret(ctx, r.acme, sub.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, secrets, _ := r.store.SubscriptionTarget(ctx, r.acme, sub.ID); !slices.Equal(secrets, []gateway.WebhookSecret{secret3}) {
		t.Errorf("after an immediate rotation %d secrets sign, want only the newest", len(secrets))
	}
	rot, _, err = r.store.RotateSubscriptionSecret(ctx, r.acme, sub.ID, time.Minute)
	if err != nil || len(rot.Secrets) != 2 {
		t.Errorf("expired secrets not cleared: %+v %v", rot.Secrets, err)
	}
	if _, _, err := r.store.RotateSubscriptionSecret(ctx, r.acme, sub.ID, 8*24*time.Hour); errs.KindOf(err) != errs.Invalid {
		t.Errorf("an eight-day grace: %v", err)
	}

	if err := r.store.DeleteSubscription(ctx, r.acme, sub.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Subscription(ctx, r.acme, sub.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("deleted, then read: %v", err)
	}
	if err := r.store.DeleteSubscription(ctx, r.acme, sub.ID); errs.KindOf(err) != errs.NotFound {
		t.Errorf("deleted twice: %v", err)
	}
	if n := r.count(t, `SELECT count(*) FROM webhook_secret WHERE subscription_id = $1`, sub.ID); n != 0 {
		t.Errorf("%d secrets outlive their subscription", n)
	}
}

// TestSubscriptionsKeepToTheirTenant: another tenant's subscription is
// not found by any operation, and stays as it was.
func TestSubscriptionsKeepToTheirTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newWebhookRig(t)
	sub := r.subscribe(t, r.acme, gateway.NewSubscription{Description: "acme's"})
	if _, _, err := r.store.FanOut(ctx, 0, 1, []gateway.FeedEvent{event(1, "tx.state_changed", "tx-1", signerA)}); err != nil {
		t.Fatal(err)
	}
	u, d, on := "http://127.0.0.1:9/stolen", "globex's now", false
	checks := map[string]func() error{
		"get": func() error { _, err := r.store.Subscription(ctx, r.globex, sub.ID); return err },
		"update": func() error {
			_, err := r.store.UpdateSubscription(ctx, r.globex, sub.ID, gateway.SubscriptionPatch{URL: &u, Description: &d, Enabled: &on}, gateway.AnyHTTP)
			return err
		},
		"delete": func() error { return r.store.DeleteSubscription(ctx, r.globex, sub.ID) },
		"rotate": func() error { _, _, err := r.store.RotateSubscriptionSecret(ctx, r.globex, sub.ID, 0); return err },
		"target": func() error { _, _, err := r.store.SubscriptionTarget(ctx, r.globex, sub.ID); return err },
		"deliveries": func() error {
			_, _, err := r.store.Deliveries(ctx, r.globex, sub.ID, gateway.DeliveryFilter{})
			return err
		},
		"replay": func() error {
			_, err := r.store.ReplayDeliveries(ctx, r.globex, sub.ID, []gateway.FeedEvent{event(1, "tx.state_changed", "tx-1", signerA)})
			return err
		},
	}
	for name, call := range checks {
		if err := call(); errs.KindOf(err) != errs.NotFound {
			t.Errorf("globex %s: %v, want not found", name, err)
		}
	}
	if subs, _, err := r.store.Subscriptions(ctx, r.globex, "", 0); err != nil || len(subs) != 0 {
		t.Errorf("globex lists %d subscriptions, %v", len(subs), err)
	}
	got, err := r.store.Subscription(ctx, r.acme, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sub, got); diff != "" {
		t.Errorf("acme's subscription changed (-want +got):\n%s", diff)
	}
	if ds, _, err := r.store.Deliveries(ctx, r.acme, sub.ID, gateway.DeliveryFilter{}); err != nil || len(ds) != 1 || ds[0].Attempts != 0 {
		t.Errorf("acme's deliveries %+v %v", ds, err)
	}
}

// TestBadSubscriptionsAreRefused: every bad field is named, and nothing is
// stored or changed.
func TestBadSubscriptionsAreRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newWebhookRig(t)
	long := "https://example.com/" + strings.Repeat("a", 2048)
	for _, tt := range []struct {
		name string
		in   gateway.NewSubscription
		rule gateway.URLRule
		want []string // pointers
	}{
		{"no url", gateway.NewSubscription{}, gateway.AnyHTTP, []string{"/url"}},
		{"relative url", gateway.NewSubscription{URL: "/hooks"}, gateway.AnyHTTP, []string{"/url"}},
		{"ftp", gateway.NewSubscription{URL: "ftp://example.com/x"}, gateway.AnyHTTP, []string{"/url"}},
		{"not a url", gateway.NewSubscription{URL: "https://exa mple.com:x/"}, gateway.AnyHTTP, []string{"/url"}},
		{"too long", gateway.NewSubscription{URL: long}, gateway.AnyHTTP, []string{"/url"}},
		{"credentials", gateway.NewSubscription{URL: "https://u:p@example.com/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"fragment", gateway.NewSubscription{URL: "https://example.com/#x"}, gateway.PublicHTTPS, []string{"/url"}},
		{"plain http in production", gateway.NewSubscription{URL: "http://example.com/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"loopback in production", gateway.NewSubscription{URL: "https://127.0.0.1/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"private in production", gateway.NewSubscription{URL: "https://10.1.2.3:8443/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"metadata service in production", gateway.NewSubscription{URL: "https://169.254.169.254/latest"}, gateway.PublicHTTPS, []string{"/url"}},
		{"localhost in production", gateway.NewSubscription{URL: "https://localhost:8443/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"bare name in production", gateway.NewSubscription{URL: "https://intranet/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"ipv6 loopback in production", gateway.NewSubscription{URL: "https://[::1]/"}, gateway.PublicHTTPS, []string{"/url"}},
		{"unknown event type", gateway.NewSubscription{URL: "https://example.com/", EventTypes: []string{"tx.state_changed", "tx.mined"}}, gateway.PublicHTTPS, []string{"/event_types/1"}},
		{"malformed signer", gateway.NewSubscription{URL: "https://example.com/", Signers: []string{"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"}}, gateway.PublicHTTPS, []string{"/signers/0"}},
		{"another tenant's signer", gateway.NewSubscription{URL: "https://example.com/", Signers: []string{signerB.String()}}, gateway.PublicHTTPS, []string{"/signers"}},
		{"long description", gateway.NewSubscription{URL: "https://example.com/", Description: strings.Repeat("é", 501)}, gateway.PublicHTTPS, []string{"/description"}},
		{"everything", gateway.NewSubscription{URL: "http://10.0.0.1/", EventTypes: []string{"nope"}, Signers: []string{"x"}}, gateway.PublicHTTPS,
			[]string{"/url", "/event_types/0", "/signers/0"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, secret, err := r.store.CreateSubscription(ctx, r.acme, tt.in, tt.rule)
			var e *errs.Error
			if !errors.As(err, &e) || e.Kind != errs.Invalid || secret != "" {
				t.Fatalf("%v, want invalid", err)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Pointer)
				if f.Detail == "" || !strings.Contains(e.Message, f.Detail) {
					t.Errorf("field %s: detail %q missing from %q", f.Pointer, f.Detail, e.Message)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
	if n := r.count(t, `SELECT count(*) FROM webhook_subscription`); n != 0 {
		t.Errorf("%d subscriptions stored after refusals", n)
	}
	if n := r.count(t, `SELECT count(*) FROM webhook_secret`); n != 0 {
		t.Errorf("%d secrets stored after refusals", n)
	}
	// The same checks on a change, which leaves the subscription as it was.
	sub := r.subscribe(t, r.acme, gateway.NewSubscription{URL: "https://example.com/"})
	bad, types, signers := "http://example.com/", []string{"tx.nope"}, []string{signerB.String()}
	_, err := r.store.UpdateSubscription(ctx, r.acme, sub.ID, gateway.SubscriptionPatch{URL: &bad, EventTypes: &types, Signers: &signers}, gateway.PublicHTTPS)
	var e *errs.Error
	if !errors.As(err, &e) || e.Kind != errs.Invalid || len(e.Fields) != 3 {
		t.Errorf("a bad change: %v", err)
	}
	if got, _ := r.store.Subscription(ctx, r.acme, sub.ID); !got.UpdatedAt.Equal(sub.UpdatedAt) || got.URL != sub.URL {
		t.Errorf("a refused change changed %+v", got)
	}
	// Good URLs under each rule, normalized.
	for _, good := range []struct {
		in, want string
		rule     gateway.URLRule
	}{
		{"HTTPS://Example.COM/a?b=1", "https://Example.COM/a?b=1", gateway.PublicHTTPS},
		{"https://[2606:4700::1111]:8443/x", "https://[2606:4700::1111]:8443/x", gateway.PublicHTTPS},
		{"https://8.8.8.8/", "https://8.8.8.8/", gateway.PublicHTTPS},
		{"http://localhost:8080/dev", "http://localhost:8080/dev", gateway.AnyHTTP},
	} {
		s, _, err := r.store.CreateSubscription(ctx, r.acme, gateway.NewSubscription{URL: good.in}, good.rule)
		if err != nil || s.URL != good.want {
			t.Errorf("%s: %q %v, want %q", good.in, s.URL, err, good.want)
		}
	}
}

// TestFanOutMatchesAndMovesTheCursorOnce: each event becomes a delivery
// for exactly the subscriptions it matches, and the cursor moves by
// compare-and-set: of many nodes fanning out the same page at once,
// exactly one does, and a stale one writes nothing.
func TestFanOutMatchesAndMovesTheCursorOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newWebhookRig(t)
	off := false
	all := r.subscribe(t, r.acme, gateway.NewSubscription{})
	states := r.subscribe(t, r.acme, gateway.NewSubscription{EventTypes: []string{"tx.state_changed"}})
	mainnet := r.subscribe(t, r.acme, gateway.NewSubscription{Signers: []string{signerAOnMainnet.String()}})
	disabled := r.subscribe(t, r.acme, gateway.NewSubscription{Enabled: &off})
	other := r.subscribe(t, r.globex, gateway.NewSubscription{})
	events := []gateway.FeedEvent{
		event(1, "tx.state_changed", "tx-1", signerA),
		event(2, "tx.attempt", "tx-1", signerA),
		event(3, "tx.state_changed", "tx-2", signerB),
		event(4, "tx.confirmation", "tx-3", signerAOnMainnet),
		event(5, "tx.state_changed", "tx-4", gateway.SignerRef{ChainID: 31337, Address: common.HexToAddress("0x00000000000000000000000000000000000000aa")}),
	}
	var wg sync.WaitGroup
	results := make([]bool, 8)
	for i := range results {
		wg.Go(func() {
			advanced, _, err := r.store.FanOut(ctx, 0, 5, events)
			if err != nil {
				t.Error(err)
			}
			results[i] = advanced
		})
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(results, func(b bool) bool { return !b })); n != 1 {
		t.Fatalf("%d of 8 concurrent fan-outs advanced, want 1", n)
	}
	if c, err := r.store.WebhookFeedCursor(ctx); err != nil || c != 5 {
		t.Fatalf("cursor %d %v, want 5", c, err)
	}
	// A node still at 0 writes nothing and learns it is behind.
	if advanced, queued, err := r.store.FanOut(ctx, 0, 5, events); err != nil || advanced || queued != 0 {
		t.Errorf("a stale fan-out: %v %d %v", advanced, queued, err)
	}
	want := map[uuid.UUID][]int64{all.ID: {1, 2, 4}, states.ID: {1}, mainnet.ID: {4}, disabled.ID: nil, other.ID: {3}}
	for sub, seqs := range want {
		var got []int64
		rows, err := r.pool.Query(ctx, `SELECT event_seq FROM webhook_delivery WHERE subscription_id = $1 ORDER BY event_seq`, sub)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s int64
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		if diff := cmp.Diff(seqs, got); diff != "" {
			t.Errorf("subscription %s deliveries (-want +got):\n%s", sub, diff)
		}
	}
	// The body is the event as given, byte for byte.
	var body string
	if err := r.pool.QueryRow(ctx, `SELECT event::text FROM webhook_delivery WHERE subscription_id = $1 AND event_seq = 4`, all.ID).Scan(&body); err != nil || body != string(events[3].Body) {
		t.Errorf("stored body %s %v, want %s", body, err, events[3].Body)
	}
}

// claimed claims the next due delivery and fails the test when there is
// none.
func claimed(t *testing.T, s *postgres.Store, lease time.Duration) *gateway.DeliveryClaim {
	t.Helper()
	c, err := s.ClaimDelivery(context.Background(), lease)
	if err != nil || c == nil {
		t.Fatalf("claim: %v %v", c, err)
	}
	return c
}

func noneDue(t *testing.T, s *postgres.Store) {
	t.Helper()
	if c, err := s.ClaimDelivery(context.Background(), time.Minute); err != nil || c != nil {
		t.Fatalf("claimed %+v %v, want nothing due", c, err)
	}
}

// TestClaimsKeepEachTransactionInOrder: a delivery is due only when no
// earlier one of its transaction is pending; a dead one no longer holds
// the rest back; a lapsed claim is taken over and its late result
// refused; a disabled subscription's deliveries wait.
func TestClaimsKeepEachTransactionInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newWebhookRig(t)
	sub := r.subscribe(t, r.acme, gateway.NewSubscription{})
	if _, _, err := r.store.FanOut(ctx, 0, 4, []gateway.FeedEvent{
		event(1, "tx.state_changed", "tx-x", signerA), event(2, "tx.attempt", "tx-x", signerA),
		event(3, "tx.state_changed", "tx-x", signerA), event(4, "tx.state_changed", "tx-y", signerA),
	}); err != nil {
		t.Fatal(err)
	}
	// Only the head of each transaction is due.
	first, second := claimed(t, r.store, time.Minute), claimed(t, r.store, time.Minute)
	heads := []uint64{first.EventSeq, second.EventSeq}
	slices.Sort(heads)
	if !slices.Equal(heads, []uint64{1, 4}) || first.URL != sub.URL || len(first.Secrets) != 1 || len(first.Body) == 0 {
		t.Fatalf("claimed %v (%+v), want the heads 1 and 4", heads, first)
	}
	noneDue(t, r.store)
	x, y := first, second
	if x.EventSeq != 1 {
		x, y = second, first
	}
	// tx-y delivered; tx-x's head fails and waits an hour: 2 stays behind it.
	if st, err := r.store.RecordAttempt(ctx, y, gateway.AttemptResult{At: time.Now(), StatusCode: 204, Delivered: true, DeadAfter: time.Hour}); err != nil || st != gateway.DeliveryDelivered {
		t.Fatalf("delivered: %v %v", st, err)
	}
	if st, err := r.store.RecordAttempt(ctx, x, gateway.AttemptResult{At: time.Now(), StatusCode: 500, Error: "HTTP 500", RetryIn: time.Hour, DeadAfter: time.Hour}); err != nil || st != gateway.DeliveryPending {
		t.Fatalf("failed: %v %v", st, err)
	}
	noneDue(t, r.store)
	// The deliveries behind it are not due before its retry, nor is one
	// of the same transaction fanned out meanwhile, so that claims need
	// not look at them.
	if _, _, err := r.store.FanOut(ctx, 4, 5, []gateway.FeedEvent{event(5, "tx.state_changed", "tx-x", signerA)}); err != nil {
		t.Fatal(err)
	}
	pending, _, err := r.store.Deliveries(ctx, r.acme, sub.ID, gateway.DeliveryFilter{Status: gateway.DeliveryPending})
	if err != nil || len(pending) != 4 || pending[3].EventSeq != 1 {
		t.Fatalf("pending %+v %v", pending, err)
	}
	retry := *pending[3].NextAttemptAt
	if !retry.After(time.Now().Add(50 * time.Minute)) {
		t.Errorf("retry at %s, want in an hour", retry)
	}
	for _, d := range pending[:3] {
		if d.NextAttemptAt.Before(retry) {
			t.Errorf("delivery %d due at %s, before the retry of the one ahead of it at %s", d.EventSeq, d.NextAttemptAt, retry)
		}
	}
	// Time passes: the retry comes, fails past the horizon and goes
	// dead; the next of tx-x proceeds.
	if _, err := r.pool.Exec(ctx, `UPDATE webhook_delivery SET next_attempt_at = now() WHERE tx_id = 'tx-x'`); err != nil {
		t.Fatal(err)
	}
	x = claimed(t, r.store, time.Minute)
	if x.EventSeq != 1 || x.Attempts != 1 {
		t.Fatalf("retry claimed %d after %d attempts", x.EventSeq, x.Attempts)
	}
	if st, err := r.store.RecordAttempt(ctx, x, gateway.AttemptResult{At: time.Now(), Error: "no answer within 10s", RetryIn: time.Hour}); err != nil || st != gateway.DeliveryDead {
		t.Fatalf("past the horizon: %v %v", st, err)
	}
	// A lapsed claim is taken over, and the first holder's late result is
	// refused.
	late := claimed(t, r.store, 200*time.Millisecond)
	if late.EventSeq != 2 {
		t.Fatalf("after the dead head, claimed %d, want 2", late.EventSeq)
	}
	noneDue(t, r.store)
	var taken *gateway.DeliveryClaim
	deadline := time.Now().Add(10 * time.Second)
	for taken == nil {
		var err error
		if taken, err = r.store.ClaimDelivery(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a lapsed claim was never taken over")
		}
		if taken == nil {
			<-time.After(20 * time.Millisecond)
		}
	}
	if taken.DeliveryID != late.DeliveryID {
		t.Fatalf("took over %d, want 2", taken.EventSeq)
	}
	if _, err := r.store.RecordAttempt(ctx, late, gateway.AttemptResult{At: time.Now(), StatusCode: 200, Delivered: true}); !errors.Is(err, gateway.ErrClaimLost) {
		t.Errorf("a late result: %v, want ErrClaimLost", err)
	}
	// Given back unattempted, it is due at once.
	if err := r.store.ReleaseClaim(ctx, taken); err != nil {
		t.Fatal(err)
	}
	// A disabled subscription's deliveries wait for it.
	off, on := false, true
	if _, err := r.store.UpdateSubscription(ctx, r.acme, sub.ID, gateway.SubscriptionPatch{Enabled: &off}, gateway.AnyHTTP); err != nil {
		t.Fatal(err)
	}
	noneDue(t, r.store)
	if _, err := r.store.UpdateSubscription(ctx, r.acme, sub.ID, gateway.SubscriptionPatch{Enabled: &on}, gateway.AnyHTTP); err != nil {
		t.Fatal(err)
	}
	if again := claimed(t, r.store, time.Minute); again.DeliveryID != late.DeliveryID || again.Attempts != 0 {
		t.Errorf("released claim came back as %d after %d attempts", again.EventSeq, again.Attempts)
	}

	// The log, newest first, page by page, with each attempt.
	dead, next, err := r.store.Deliveries(ctx, r.acme, sub.ID, gateway.DeliveryFilter{Status: gateway.DeliveryDead})
	if err != nil || next != "" || len(dead) != 1 || dead[0].EventSeq != 1 || dead[0].Attempts != 2 || len(dead[0].AttemptLog) != 2 {
		t.Fatalf("dead letters %+v %q %v", dead, next, err)
	}
	if a := dead[0].AttemptLog; a[0].StatusCode != nil || a[0].Error == nil || *a[0].Error != "no answer within 10s" || a[1].StatusCode == nil || *a[1].StatusCode != 500 {
		t.Errorf("attempt log %+v", a)
	}
	if dead[0].NextAttemptAt != nil || dead[0].DeliveredAt != nil || dead[0].FirstAttemptAt == nil || *dead[0].LastError != "no answer within 10s" {
		t.Errorf("dead delivery %+v", dead[0])
	}
	var seqs []uint64
	cursor := ""
	for {
		page, next, err := r.store.Deliveries(ctx, r.acme, sub.ID, gateway.DeliveryFilter{Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			seqs = append(seqs, d.EventSeq)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(seqs, []uint64{5, 4, 3, 2, 1}) {
		t.Errorf("log order %v, want newest first", seqs)
	}
	if _, _, err := r.store.Deliveries(ctx, r.acme, sub.ID, gateway.DeliveryFilter{Status: "lost"}); errs.KindOf(err) != errs.Invalid {
		t.Errorf("an unknown status: %v", err)
	}
}

// TestReplayRequeuesAndFillsIn: replay resets the deliveries that exist,
// keeping their attempts, and creates those a subscription made later
// never had, for the events it matches today only.
func TestReplayRequeuesAndFillsIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newWebhookRig(t)
	early := r.subscribe(t, r.acme, gateway.NewSubscription{})
	events := []gateway.FeedEvent{
		event(1, "tx.state_changed", "tx-1", signerA), event(2, "tx.attempt", "tx-1", signerA),
		event(3, "tx.state_changed", "tx-2", signerB),
	}
	if _, _, err := r.store.FanOut(ctx, 0, 3, events); err != nil {
		t.Fatal(err)
	}
	c := claimed(t, r.store, time.Minute)
	if _, err := r.store.RecordAttempt(ctx, c, gateway.AttemptResult{At: time.Now(), StatusCode: 200, Delivered: true}); err != nil {
		t.Fatal(err)
	}
	late := r.subscribe(t, r.acme, gateway.NewSubscription{EventTypes: []string{"tx.attempt"}})
	if n, err := r.store.ReplayDeliveries(ctx, r.acme, early.ID, events); err != nil || n != 2 {
		t.Errorf("replayed %d for the early subscription %v, want 2", n, err)
	}
	if n, err := r.store.ReplayDeliveries(ctx, r.acme, late.ID, events); err != nil || n != 1 {
		t.Errorf("replayed %d for the late subscription %v, want 1 (its type only)", n, err)
	}
	ds, _, err := r.store.Deliveries(ctx, r.acme, early.ID, gateway.DeliveryFilter{})
	if err != nil || len(ds) != 2 {
		t.Fatal(ds, err)
	}
	for _, d := range ds {
		if d.Status != gateway.DeliveryPending || d.Attempts != 0 || d.DeliveredAt != nil {
			t.Errorf("replayed %+v", d)
		}
		if d.EventSeq == 1 && len(d.AttemptLog) != 1 {
			t.Errorf("the replayed delivery lost its history: %+v", d.AttemptLog)
		}
	}
	if ds, _, _ := r.store.Deliveries(ctx, r.acme, late.ID, gateway.DeliveryFilter{}); len(ds) != 1 || ds[0].EventSeq != 2 {
		t.Errorf("late subscription deliveries %+v", ds)
	}
}

// FuzzSubscriptionURL: whatever a tenant sends, the check does not panic,
// and what it accepts in production is an https URL of a public host that
// parses back to itself within the length bound.
func FuzzSubscriptionURL(f *testing.F) {
	for _, s := range []string{"https://example.com/hook", "http://127.0.0.1:8080/", "https://[::1]/", "https://u@h.io/",
		"https://10.0.0.1/", "HTTPS://EXAMPLE.COM", "https://example.com:99999/", "https://%41.com/", "https://a.b/#f", "javascript:alert(1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := gateway.CheckWebhookURL(raw, gateway.PublicHTTPS)
		if err != nil {
			if errs.KindOf(err) != errs.Invalid {
				t.Fatalf("%q: %v, want invalid", raw, err)
			}
			return
		}
		u, err := url.Parse(got)
		if err != nil || u.Scheme != "https" || u.User != nil || len(got) > gateway.MaxWebhookURL {
			t.Fatalf("accepted %q as %q", raw, got)
		}
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !gateway.PublicIP(ip) {
			t.Fatalf("accepted %q with a non-public address", raw)
		}
		if again, err := gateway.CheckWebhookURL(got, gateway.PublicHTTPS); err != nil || again != got {
			t.Fatalf("%q normalized to %q, which checks as %q %v", raw, got, again, err)
		}
	})
}
