package api

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
		d, err := a.cfg.Limits.Allow(r.Context(), caller(r.Context()).key.ID.String(), a.cfg.Limit)
		if err != nil { // Redis is down and the limiter is set to refuse
			httpserver.Error(w, r, err)
			return
		}
		d.WriteHeaders(w)
		if err := d.Err(); err != nil {
			httpserver.Error(w, r, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
