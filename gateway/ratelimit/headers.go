package ratelimit

import (
	"net/http"
	"strconv"
	"time"
)

// WriteHeaders sets the rate limit headers of the IETF httpapi draft on w:
// RateLimit-Limit (the burst, the most a quiet key may send at once),
// RateLimit-Remaining, and RateLimit-Reset (seconds until the full burst is
// back, rounded up), plus Retry-After (whole seconds, at least 1) when the
// request is refused. An open decision counted nothing, so it writes
// nothing rather than invent numbers. Call it before w.WriteHeader.
func (d Decision) WriteHeaders(w http.ResponseWriter) {
	if d.Source != SourceRedis && d.Source != SourceLocal {
		return
	}
	h := w.Header()
	h.Set("RateLimit-Limit", strconv.Itoa(d.Limit.Burst))
	h.Set("RateLimit-Remaining", strconv.Itoa(d.Remaining))
	h.Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(d.ResetAfter), 10))
	if !d.Allowed {
		h.Set("Retry-After", strconv.FormatInt(retryAfterSeconds(d.RetryAfter), 10))
	}
}

// ceilSeconds rounds d up to whole seconds, so that a client waiting that
// long is never early.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// retryAfterSeconds is ceilSeconds but at least 1: Retry-After: 0 would
// invite an immediate retry that is refused again.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, ceilSeconds(d))
}
