package httpapi

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// principal is who is calling: an authenticated key, its tenant and the
// signers it may use (the tenant's, narrowed by the key's own list).
type principal struct {
	key     gateway.Key
	tenant  gateway.Tenant
	signers []gateway.SignerRef
	usable  map[gateway.SignerRef]bool
}

// mayUse reports whether the caller may see and use signer's
// transactions.
func (p *principal) mayUse(signer gateway.SignerRef) bool { return p.usable[signer] }

// operator names the key for the audit trail of operator actions.
func (p *principal) operator() string {
	return "key:" + p.key.Name + " (" + p.key.ID.String() + ")"
}

type principalKey struct{}

// caller is the request's principal; authenticate has put it there.
func caller(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	if p == nil {
		return &principal{}
	}
	return p
}

// bearerToken reads "Authorization: Bearer <token>".
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="txfence"`)
			httpserver.Error(w, r, errs.E(errs.Unauthorized, "an API key is required: Authorization: Bearer txf_..."))
			return
		}
		p, ok := a.keys.cached(token)
		if !ok {
			var buckets []string
			if a.failures != nil {
				buckets = a.failures.buckets(r, token)
				if d, refused := a.failures.refused(buckets); refused {
					d.WriteHeaders(w)
					httpserver.Error(w, r, tooManyFailures(d))
					return
				}
			}
			var err error
			if p, err = a.keys.principal(r.Context(), token); err != nil {
				if errs.Is(err, errs.Unauthorized) {
					if a.failures != nil {
						a.failures.failed(r.Context(), buckets)
					}
					w.Header().Set("WWW-Authenticate", `Bearer realm="txfence", error="invalid_token"`)
				}
				httpserver.Error(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// keyCache keeps authenticated keys for ttl, so that a client sending
// thousands of requests a second costs the database one lookup per key
// per ttl, not one per request. It is keyed by the token's hash: the
// token itself is not kept.
type keyCache struct {
	store Store
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	entries map[[32]byte]cachedPrincipal
}

type cachedPrincipal struct {
	p     *principal
	until time.Time
}

// maxCachedKeys bounds the cache; past it, expired entries are dropped,
// and if that is not enough the whole cache is.
const maxCachedKeys = 10_000

func newKeyCache(store Store, ttl time.Duration) *keyCache {
	return &keyCache{store: store, ttl: ttl, now: time.Now, entries: map[[32]byte]cachedPrincipal{}}
}

// cached is the principal of token while its cache entry lasts.
func (c *keyCache) cached(token string) (*principal, bool) {
	h := sha256.Sum256([]byte(token))
	c.mu.Lock()
	e, ok := c.entries[h]
	c.mu.Unlock()
	if ok && c.now().Before(e.until) {
		return e.p, true
	}
	return nil, false
}

// principal is token's principal, from the cache or the database.
func (c *keyCache) principal(ctx context.Context, token string) (*principal, error) {
	if p, ok := c.cached(token); ok {
		return p, nil
	}
	h := sha256.Sum256([]byte(token))
	now := c.now()
	p, err := c.load(ctx, token)
	if err != nil {
		return nil, err
	}
	until := now.Add(c.ttl)
	if p.key.ExpiresAt != nil && p.key.ExpiresAt.Before(until) {
		until = *p.key.ExpiresAt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedKeys {
		for k, e := range c.entries {
			if !now.Before(e.until) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCachedKeys {
			clear(c.entries)
		}
	}
	c.entries[h] = cachedPrincipal{p: p, until: until}
	return p, nil
}

// forgetKey drops a revoked key at once on this node; other nodes drop it
// within ttl.
func (c *keyCache) forgetKey(id uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, e := range c.entries {
		if e.p.key.ID == id {
			delete(c.entries, h)
		}
	}
}

func (c *keyCache) load(ctx context.Context, token string) (*principal, error) {
	key, err := c.store.Authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	tenant, err := c.store.GetTenant(ctx, key.Tenant)
	if err != nil {
		return nil, err
	}
	owned, err := c.store.TenantSigners(ctx, key.Tenant)
	if err != nil {
		return nil, err
	}
	p := &principal{key: key, tenant: tenant, usable: map[gateway.SignerRef]bool{}}
	for _, s := range owned {
		if key.MayUse(s) {
			p.signers = append(p.signers, s)
			p.usable[s] = true
		}
	}
	return p, nil
}
