package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/shared/errs"
)

var (
	signerA = gateway.SignerRef{ChainID: 1, Address: common.HexToAddress("0x00000000000000000000000000000000000000aa")}
	signerB = gateway.SignerRef{ChainID: 1, Address: common.HexToAddress("0x00000000000000000000000000000000000000bb")}
	signerC = gateway.SignerRef{ChainID: 10, Address: common.HexToAddress("0x00000000000000000000000000000000000000aa")}
)

// TestAKeyReachesNoFurtherThanItself: a key grants, sees and revokes only
// keys within its scopes and its signers; a restricted key never covers
// an unrestricted one, nor an empty (every signer) filter.
func TestAKeyReachesNoFurtherThanItself(t *testing.T) {
	t.Parallel()
	admin := gateway.Key{Scopes: gateway.Scopes}
	limitedA := gateway.Key{Scopes: []gateway.Scope{gateway.ScopeAdmin, gateway.ScopeTxRead}, Signers: []gateway.SignerRef{signerA}}
	for _, c := range []struct {
		name  string
		key   gateway.Key
		other gateway.Key
		want  bool
	}{
		{"unrestricted covers restricted", admin, limitedA, true},
		{"unrestricted covers unrestricted", admin, admin, true},
		{"restricted covers itself", limitedA, limitedA, true},
		{"restricted covers fewer scopes on its signer", limitedA, gateway.Key{Scopes: []gateway.Scope{gateway.ScopeTxRead}, Signers: []gateway.SignerRef{signerA}}, true},
		{"restricted does not cover unrestricted", limitedA, gateway.Key{Scopes: []gateway.Scope{gateway.ScopeTxRead}}, false},
		{"restricted does not cover another signer", limitedA, gateway.Key{Scopes: []gateway.Scope{gateway.ScopeTxRead}, Signers: []gateway.SignerRef{signerB}}, false},
		{"the same address on another chain is another signer", limitedA, gateway.Key{Scopes: []gateway.Scope{gateway.ScopeTxRead}, Signers: []gateway.SignerRef{signerC}}, false},
		{"restricted does not cover a scope it lacks", limitedA, gateway.Key{Scopes: []gateway.Scope{gateway.ScopeWebhooks}, Signers: []gateway.SignerRef{signerA}}, false},
	} {
		if got := c.key.Covers(c.other); got != c.want {
			t.Errorf("%s: Covers = %v, want %v", c.name, got, c.want)
		}
	}
	if limitedA.CoversSigners(nil) {
		t.Error("a restricted key covers the empty filter, which means every signer of the tenant")
	}
	if !admin.CoversSigners(nil) || !limitedA.CoversSigners([]gateway.SignerRef{signerA}) || limitedA.CoversSigners([]gateway.SignerRef{signerA, signerB}) {
		t.Error("CoversSigners: an unrestricted key covers everything, a restricted one its own signers only")
	}
	if !admin.MayUse(signerB) || !limitedA.MayUse(signerA) || limitedA.MayUse(signerB) {
		t.Error("MayUse: a restricted key uses only its signers")
	}
}

func TestANewKeyIsChecked(t *testing.T) {
	t.Parallel()
	now := time.Now()
	past := now.Add(-time.Second)
	err := (&gateway.NewKey{Name: "", Scopes: []gateway.Scope{"root"}, ExpiresAt: &past}).Check(now)
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("a bad key: %v, want Invalid", err)
	}
	for _, want := range []string{"name", `"root" is not a scope`, "expires_at"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if err := (&gateway.NewKey{Name: "ci", Scopes: []gateway.Scope{gateway.ScopeTxRead}}).Check(now); err != nil {
		t.Errorf("a good key: %v", err)
	}
	if err := (&gateway.NewKey{Name: "none"}).Check(now); err == nil || !strings.Contains(err.Error(), "scopes") {
		t.Errorf("a key without scopes: %v", err)
	}
}

// TestATokenNamesItsKeyAndOnlyItsSecretMatches: a token reads back to its
// key id and secret; the hash kept matches that secret only; a token
// altered anywhere is not one.
func TestATokenNamesItsKeyAndOnlyItsSecretMatches(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	token, hash, err := gateway.NewToken(id)
	if err != nil {
		t.Fatal(err)
	}
	got, secret, ok := gateway.ParseToken(token)
	if !ok || got != id {
		t.Fatalf("ParseToken(%q) = %v, %v", token, got, ok)
	}
	if !gateway.SecretMatches(secret, hash) {
		t.Error("the token's secret does not match its hash")
	}
	if _, other, err := gateway.NewToken(id); err != nil || gateway.SecretMatches(secret, other) {
		t.Error("a secret matches another token's hash")
	}
	if kid, ok := gateway.TokenKeyID(token); !ok || kid != id {
		t.Errorf("TokenKeyID = %v, %v", kid, ok)
	}
	for _, bad := range []string{"", token[:len(token)-1], "txg_" + token[4:], token + "A", strings.Replace(token, "_", "-", 2)} {
		if _, _, ok := gateway.ParseToken(bad); ok {
			t.Errorf("ParseToken(%q) accepted a malformed token", bad)
		}
	}
}
