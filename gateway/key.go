package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// Scope is what an API key may do.
type Scope string

// The scopes.
const (
	ScopeTxWrite    Scope = "tx:write"
	ScopeTxRead     Scope = "tx:read"
	ScopeApprovals  Scope = "approvals"
	ScopeWebhooks   Scope = "webhooks"
	ScopeAdmin      Scope = "admin"
	ScopeLedgerRead Scope = "ledger:read"
)

// Scopes lists every scope.
var Scopes = []Scope{ScopeTxWrite, ScopeTxRead, ScopeApprovals, ScopeWebhooks, ScopeAdmin, ScopeLedgerRead}

// NewKey is what a key is made with.
type NewKey struct {
	Tenant uuid.UUID
	Name   string
	Scopes []Scope
	// Signers limits the key to some of its tenant's signers; empty: all.
	Signers   []SignerRef
	ExpiresAt *time.Time
}

// Key is a stored API key, without its secret.
type Key struct {
	ID        uuid.UUID
	Tenant    uuid.UUID
	Name      string
	Scopes    []Scope
	Signers   []SignerRef
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
	// LastUsedAt is when the key last authenticated, to LastUsedEvery.
	LastUsedAt *time.Time
}

// Has reports whether the key carries scope.
func (k *Key) Has(scope Scope) bool { return slices.Contains(k.Scopes, scope) }

// MayUse reports whether the key may act for signer (its tenant must own
// the signer as well: see Tenants.TenantSigners).
func (k *Key) MayUse(signer SignerRef) bool {
	return len(k.Signers) == 0 || slices.Contains(k.Signers, signer)
}

// Restricted reports whether the key is limited to some of its tenant's
// signers.
func (k *Key) Restricted() bool { return len(k.Signers) > 0 }

// CoversSigners reports whether a signer filter is within the key's
// reach: every signer of it is one the key may use. An empty filter means
// every signer of the tenant, now and later, which only an unrestricted
// key covers.
func (k *Key) CoversSigners(filter []SignerRef) bool {
	if !k.Restricted() {
		return true
	}
	if len(filter) == 0 {
		return false
	}
	for _, s := range filter {
		if !k.MayUse(s) {
			return false
		}
	}
	return true
}

// Covers reports whether the key may grant, see and revoke other: other
// has no scope the key lacks and no signer beyond the key's reach. A key
// limited to signer A cannot mint an unrestricted key, nor see or revoke
// the tenant's wider keys.
func (k *Key) Covers(other Key) bool {
	for _, sc := range other.Scopes {
		if !k.Has(sc) {
			return false
		}
	}
	return k.CoversSigners(other.Signers)
}

// Check names every way nk is not a key that can be made at now.
func (nk *NewKey) Check(now time.Time) error {
	var problems []string
	if nk.Name == "" || len(nk.Name) > 100 {
		problems = append(problems, "name: 1 to 100 characters")
	}
	if len(nk.Scopes) == 0 {
		problems = append(problems, "scopes: at least one")
	}
	for _, sc := range nk.Scopes {
		if !slices.Contains(Scopes, sc) {
			problems = append(problems, fmt.Sprintf("scopes: %q is not a scope", sc))
		}
	}
	if nk.ExpiresAt != nil && !nk.ExpiresAt.After(now) {
		problems = append(problems, "expires_at: in the past")
	}
	if len(problems) > 0 {
		return errs.E(errs.Invalid, strings.Join(problems, "; "))
	}
	return nil
}

// ErrBadKey: the token is not a live key (malformed, unknown, wrong
// secret, revoked or expired). Callers answer 401 without saying which.
var ErrBadKey = errs.E(errs.Unauthorized, "the API key is not valid")

// LastUsedEvery is how often at most a key's last_used_at is written: a
// flood of requests with one key writes once a minute.
const LastUsedEvery = time.Minute

// keyPrefix starts every API key, so that a leaked one is recognisable
// (secret scanners) and a wrong string is refused before any lookup.
const keyPrefix = "txf_"

// NewToken makes the token of key id: "txf_<key id>_<secret>", the secret
// 32 random bytes. Only secretHash is kept; the token is shown once.
func NewToken(id uuid.UUID) (token string, secretHash []byte, err error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", nil, err
	}
	hash := sha256.Sum256(secret)
	return keyPrefix + base64.RawURLEncoding.EncodeToString(id[:]) + "_" + base64.RawURLEncoding.EncodeToString(secret), hash[:], nil
}

// SecretMatches reports, in constant time, whether secret is the one
// whose hash was kept.
func SecretMatches(secret, secretHash []byte) bool {
	hash := sha256.Sum256(secret)
	return subtle.ConstantTimeCompare(hash[:], secretHash) == 1
}

// TokenKeyID is the key id a well-formed token names, whether or not its
// secret is right: what failed attempts are counted by.
func TokenKeyID(token string) (uuid.UUID, bool) {
	id, _, ok := ParseToken(token)
	return id, ok
}

// ParseToken splits "txf_<key id>_<secret>", both base64url (whose
// alphabet has "_" too: the key id's 22 characters are counted, not cut
// at a separator).
func ParseToken(token string) (uuid.UUID, []byte, bool) {
	const idLen = 22 // 16 bytes, unpadded base64
	rest, ok := strings.CutPrefix(token, keyPrefix)
	if !ok || len(rest) < idLen+1 || rest[idLen] != '_' {
		return uuid.UUID{}, nil, false
	}
	idPart, secretPart := rest[:idLen], rest[idLen+1:]
	raw, err := base64.RawURLEncoding.DecodeString(idPart)
	if err != nil || len(raw) != 16 {
		return uuid.UUID{}, nil, false
	}
	secret, err := base64.RawURLEncoding.DecodeString(secretPart)
	if err != nil || len(secret) != 32 {
		return uuid.UUID{}, nil, false
	}
	return uuid.UUID(raw), secret, true
}
