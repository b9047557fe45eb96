package httpapi

import (
	"context"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/shared/errs"
)

// authFailures bounds failed authentications per key id and per client
// address. Each failure spends from both budgets (shared by the nodes
// through the limiter); once one is spent, this node refuses that key id
// or address with 429 before any database work until the budget allows
// again. A key whose token is right and whose principal is cached is
// never held up: the cache answers before this guard is asked. A key id
// under attack may be refused to its owner too on a cache miss, for as
// long as the attack lasts: that is the price of bounding the guesses.
type authFailures struct {
	limits Limiter
	limit  ratelimit.Limit
	// addressHeader, when set, names the header a trusted proxy in front
	// of the gateway puts the client's address in (its last value counts).
	addressHeader string
	now           func() time.Time

	mu    sync.Mutex
	until map[string]time.Time // bucket -> refused until
}

// maxRefused bounds the refusals remembered; past it, expired ones are
// dropped, and if that is not enough, all of them (the limiter still
// counts).
const maxRefused = 100_000

// buckets are the budgets a request's failures spend: its client address,
// and the key id its token names, when it names one.
func (f *authFailures) buckets(r *http.Request, token string) []string {
	b := []string{"authfail:addr:" + f.clientAddress(r)}
	if id, ok := gateway.TokenKeyID(token); ok {
		b = append(b, "authfail:key:"+id.String())
	}
	return b
}

func (f *authFailures) clientAddress(r *http.Request) string {
	if f.addressHeader != "" {
		if v := r.Header.Values(f.addressHeader); len(v) > 0 {
			hops := strings.Split(v[len(v)-1], ",")
			if a := strings.TrimSpace(hops[len(hops)-1]); a != "" {
				return a
			}
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// refused is the rate-limit decision for a request whose buckets this
// node saw spent, and whether it is refused.
func (f *authFailures) refused(buckets []string) (ratelimit.Decision, bool) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	var wait time.Duration
	for _, b := range buckets {
		if until, ok := f.until[b]; ok {
			if now.Before(until) {
				wait = max(wait, until.Sub(now))
			} else {
				delete(f.until, b)
			}
		}
	}
	return ratelimit.Decision{Allowed: false, Limit: f.limit, RetryAfter: wait, ResetAfter: wait, Source: ratelimit.SourceLocal}, wait > 0
}

// failed spends one failure from each bucket and remembers the spent
// ones. The limiter's own trouble (Redis down and set to deny) counts as
// nothing: it is about the limiter, not this caller.
func (f *authFailures) failed(ctx context.Context, buckets []string) {
	for _, b := range buckets {
		d, err := f.limits.Allow(ctx, b, f.limit)
		if err != nil || d.Allowed {
			continue
		}
		f.mu.Lock()
		if len(f.until) >= maxRefused {
			now := f.now()
			for k, until := range f.until {
				if !now.Before(until) {
					delete(f.until, k)
				}
			}
			if len(f.until) >= maxRefused {
				clear(f.until)
			}
		}
		f.until[b] = f.now().Add(d.RetryAfter)
		f.mu.Unlock()
	}
}

// tooManyFailures is the answer to a refused caller.
func tooManyFailures(d ratelimit.Decision) error {
	return errs.Errorf(errs.RateLimited, "too many failed authentications from this address or for this key: retry in %s s",
		strconv.FormatFloat(math.Ceil(d.RetryAfter.Seconds()), 'f', 0, 64))
}
