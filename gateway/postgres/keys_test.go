package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/gatewaytest"
	"github.com/txfence/txfence/gateway/postgres"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func newStore(t *testing.T) *postgres.Store {
	t.Helper()
	pool := pgtest.Migrated(t, postgres.Migrations)
	return postgres.New(pool)
}

var (
	signerA = gateway.SignerRef{ChainID: 31337, Address: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")}
	signerB = gateway.SignerRef{ChainID: 31337, Address: common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")}
)

// TestAKeyIsShownOnceAndChecked: a key authenticates with its token only:
// not with a changed secret, another key's id, after revocation or expiry;
// its scopes and signers come back as made.
func TestAKeyIsShownOnceAndChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	// Tokens are random base64url, "_" included: many of them must all
	// authenticate.
	many, err := s.CreateTenant(ctx, "many")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		_, token, err := s.CreateKey(ctx, gateway.NewKey{Tenant: many.ID, Name: fmt.Sprint("k", i), Scopes: []gateway.Scope{gateway.ScopeTxRead}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Authenticate(ctx, token); err != nil {
			t.Fatalf("token %q: %v", token, err)
		}
	}
	acme, err := s.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AssignSigner(ctx, acme.ID, signerA); err != nil {
		t.Fatal(err)
	}
	k, token, err := s.CreateKey(ctx, gateway.NewKey{Tenant: acme.ID, Name: "payouts", Scopes: []gateway.Scope{gateway.ScopeTxWrite, gateway.ScopeTxRead},
		Signers: []gateway.SignerRef{signerA}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "txf_") {
		t.Fatalf("token %q", token)
	}
	got, err := s.Authenticate(ctx, token)
	if err != nil || got.ID != k.ID || got.Tenant != acme.ID || !got.Has(gateway.ScopeTxWrite) || got.Has(gateway.ScopeAdmin) ||
		!got.MayUse(signerA) || got.MayUse(signerB) {
		t.Fatalf("authenticated %+v %v", got, err)
	}
	// One changed character of the secret, a truncated token, garbage.
	flipped := []byte(token)
	last := len(flipped) - 2
	if flipped[last] == 'A' {
		flipped[last] = 'B'
	} else {
		flipped[last] = 'A'
	}
	for _, bad := range []string{string(flipped), token[:len(token)-4], "", "txf_", "Bearer " + token, strings.Replace(token, "txf_", "txg_", 1)} {
		if _, err := s.Authenticate(ctx, bad); !errors.Is(err, gateway.ErrBadKey) || errs.KindOf(err) != errs.Unauthorized {
			t.Errorf("token %q: %v, want ErrBadKey", bad, err)
		}
	}
	// Revoked: refused at once; revoking again keeps the first time.
	r1, err := s.RevokeKey(ctx, acme.ID, k.ID, anyKey)
	if err != nil || r1.RevokedAt == nil {
		t.Fatal(r1, err)
	}
	if _, err := s.Authenticate(ctx, token); !errors.Is(err, gateway.ErrBadKey) {
		t.Errorf("a revoked key: %v", err)
	}
	if r2, err := s.RevokeKey(ctx, acme.ID, k.ID, anyKey); err != nil || !r2.RevokedAt.Equal(*r1.RevokedAt) {
		t.Errorf("revoked again: %v %v", r2.RevokedAt, err)
	}
	// Expired: refused once its time has passed (the database's clock).
	soon := time.Now().Add(300 * time.Millisecond)
	_, short, err := s.CreateKey(ctx, gateway.NewKey{Tenant: acme.ID, Name: "short", Scopes: []gateway.Scope{gateway.ScopeTxRead}, ExpiresAt: &soon})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, short); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := s.Authenticate(ctx, short); errors.Is(err, gateway.ErrBadKey) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an expired key still authenticates")
		}
		<-time.After(50 * time.Millisecond)
	}
}

// TestTenantsKeepToTheirOwn: a signer has one owner, a key names only its
// tenant's signers, and one tenant can neither list nor revoke another's
// keys.
func TestTenantsKeepToTheirOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	acme, err := s.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	globex, err := s.CreateTenant(ctx, "globex")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTenant(ctx, "acme"); errs.KindOf(err) != errs.Conflict {
		t.Errorf("a second acme: %v", err)
	}
	// Both tenants race for signer A: exactly one gets it.
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i, tenant := range []gateway.Tenant{acme, globex} {
		wg.Go(func() { results[i] = s.AssignSigner(ctx, tenant.ID, signerA) })
	}
	wg.Wait()
	if (results[0] == nil) == (results[1] == nil) {
		t.Fatalf("both or neither got the signer: %v", results)
	}
	owner, other := acme, globex
	if results[0] != nil {
		owner, other = globex, acme
	}
	if err := s.AssignSigner(ctx, owner.ID, signerA); err != nil {
		t.Errorf("assigning to the owner again: %v", err)
	}
	if _, _, err := s.CreateKey(ctx, gateway.NewKey{Tenant: other.ID, Name: "steal", Scopes: []gateway.Scope{gateway.ScopeTxWrite},
		Signers: []gateway.SignerRef{signerA}}); errs.KindOf(err) != errs.Invalid {
		t.Errorf("a key for another tenant's signer: %v", err)
	}
	k, _, err := s.CreateKey(ctx, gateway.NewKey{Tenant: owner.ID, Name: "ops", Scopes: []gateway.Scope{gateway.ScopeAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := s.Keys(ctx, other.ID); err != nil || len(keys) != 0 {
		t.Errorf("the other tenant lists %v %v", keys, err)
	}
	if _, err := s.RevokeKey(ctx, other.ID, k.ID, anyKey); errs.KindOf(err) != errs.NotFound {
		t.Errorf("the other tenant revokes: %v", err)
	}
	if keys, err := s.Keys(ctx, owner.ID); err != nil || len(keys) != 1 || keys[0].RevokedAt != nil {
		t.Errorf("the owner's keys %+v %v", keys, err)
	}
	// Bad keys are refused, naming every problem, and nothing is stored.
	past := time.Now().Add(-time.Hour)
	_, _, err = s.CreateKey(ctx, gateway.NewKey{Tenant: owner.ID, Scopes: []gateway.Scope{"root"}, ExpiresAt: &past})
	for _, want := range []string{"name:", `"root" is not a scope`, "expires_at: in the past"} {
		if errs.KindOf(err) != errs.Invalid || !strings.Contains(err.Error(), want) {
			t.Errorf("bad key: %v, want %q", err, want)
		}
	}
	if keys, _ := s.Keys(ctx, owner.ID); len(keys) != 1 {
		t.Errorf("%d keys after a refused one, want 1", len(keys))
	}
}

// TestAuthenticationWritesOnlyAfterItVerifies: a wrong secret for a real
// key id, however often, writes nothing; the right one records the use,
// at most once a minute however often it comes.
func TestAuthenticationWritesOnlyAfterItVerifies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	tenant, err := s.CreateTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	k, token, err := s.CreateKey(ctx, gateway.NewKey{Tenant: tenant.ID, Name: "k", Scopes: []gateway.Scope{gateway.ScopeTxRead}})
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() *time.Time {
		t.Helper()
		keys, err := s.Keys(ctx, tenant.ID)
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys: %v %v", keys, err)
		}
		return keys[0].LastUsedAt
	}
	wrong := gatewaytest.WrongSecret(token)
	for range 50 {
		if _, err := s.Authenticate(ctx, wrong); err == nil {
			t.Fatal("a wrong secret authenticated")
		}
	}
	if got := lastUsed(); got != nil {
		t.Fatalf("50 failed attempts wrote last_used_at %v", got)
	}
	if id, ok := gateway.TokenKeyID(wrong); !ok || id != k.ID {
		t.Errorf("TokenKeyID(wrong secret) = %v %v, want the key's id", id, ok)
	}
	if _, err := s.Authenticate(ctx, token); err != nil {
		t.Fatal(err)
	}
	first := lastUsed()
	if first == nil {
		t.Fatal("a successful authentication recorded no use")
	}
	for range 20 {
		if _, err := s.Authenticate(ctx, token); err != nil {
			t.Fatal(err)
		}
	}
	if again := lastUsed(); again == nil || !again.Equal(*first) {
		t.Errorf("last_used_at moved from %v to %v within a minute", first, again)
	}
}

// anyKey is the reach of an unrestricted admin key.
func anyKey(gateway.Key) bool { return true }
