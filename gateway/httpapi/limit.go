package httpapi

import (
	"context"
	"net/http"

	"github.com/txfence/txfence/gateway/ratelimit"
	"github.com/txfence/txfence/shared/httpserver"
)

// Limiter counts a key's requests against its limit (ratelimit.Limiter).
type Limiter interface {
	Allow(ctx context.Context, key string, limit ratelimit.Limit) (ratelimit.Decision, error)
}

// rateLimit counts the request against its key's budget and refuses it
// with 429 and Retry-After once the budget is spent. Every answer carries
// the RateLimit headers, so clients can slow down before they are
// refused.
func (a *API) rateLimit(next http.Handler) http.Handler {
	if a.cfg.Limits == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.spend(w, r, caller(r.Context()).key.ID.String(), a.cfg.Limit) {
			next.ServeHTTP(w, r)
		}
	})
}

// spend counts the request against budget under bucket, writes the
// RateLimit headers, and answers the refusal itself (429 with
// Retry-After, or 503 when Redis is down and the limiter refuses) when it
// returns false.
func (a *API) spend(w http.ResponseWriter, r *http.Request, bucket string, budget ratelimit.Limit) bool {
	d, err := a.cfg.Limits.Allow(r.Context(), bucket, budget)
	if err != nil { // Redis is down and the limiter is set to refuse
		httpserver.Error(w, r, err)
		return false
	}
	d.WriteHeaders(w)
	if err := d.Err(); err != nil {
		httpserver.Error(w, r, err)
		return false
	}
	return true
}

// replayBudget is a key's own bucket of webhook replays: each queues up to
// a page of deliveries, so the general request budget would let one key
// flood every receiver.
func (a *API) replayBudget(w http.ResponseWriter, r *http.Request) bool {
	if a.cfg.Limits == nil || a.cfg.ReplayLimit.Rate == 0 {
		return true
	}
	return a.spend(w, r, "replay:"+caller(r.Context()).key.ID.String(), a.cfg.ReplayLimit)
}
