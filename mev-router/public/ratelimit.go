package public

import (
	"net/http"
	"sync"
	"time"

	"github.com/txfence/txfence/shared/httpclient"
)

// The back-off of an endpoint that answers with a rate limit and no
// Retry-After: 1s, doubling at each rate limit in a row, up to 1m.
const (
	minRateBackoff = time.Second
	maxRateBackoff = time.Minute
	// maxRetryAfter bounds the wait an endpoint may ask for: a Retry-After
	// of a day (a provider's daily quota, or a broken proxy's date) keeps
	// the endpoint out for this long, and the next send asks again.
	maxRetryAfter = 10 * time.Minute
)

// limiter keeps one endpoint out of sends while it is rate limited: until
// the Retry-After of its last 429, or for the back-off when it gave none.
// A rate limit is no failure of the endpoint (its breaker does not count
// it) and no verdict on any transaction (they are Transient).
type limiter struct {
	now func() time.Time

	mu         sync.Mutex
	until      time.Time     // out of sends until then
	backoff    time.Duration // the last back-off applied; 0 after an answer that was no rate limit
	retryAfter time.Time     // the Retry-After of the last 429, not yet applied
}

// allow reports whether the endpoint may be sent to now.
func (l *limiter) allow() bool {
	return l.wait() <= 0
}

// wait is the time until the endpoint may be sent to again, zero or less
// when it may be now.
func (l *limiter) wait() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until.Sub(l.now())
}

// sawRetryAfter notes the Retry-After header of a 429 answer: the
// transport sees it, the sender that gets the answer's error applies it.
func (l *limiter) sawRetryAfter(header string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.retryAfter = time.Time{}
	if d, ok := parseRetryAfter(header, now); ok {
		l.retryAfter = now.Add(d)
	}
}

// limited keeps the endpoint out after a rate-limited answer: until its
// Retry-After when the 429 carried one, else for the back-off, which
// doubles at each rate limit after the endpoint is back. A rate limit
// while the endpoint is out already (an answer to a request sent before)
// is the same episode and does not double it again. It returns how long
// the endpoint is out, and whether it was in before.
func (l *limiter) limited() (wait time.Duration, wasIn bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	wasIn = !now.Before(l.until)
	switch {
	case l.retryAfter.After(now):
		l.until = later(l.until, l.retryAfter)
		l.backoff = 0
	case wasIn:
		l.backoff = nextBackoff(l.backoff)
		l.until = now.Add(l.backoff)
	}
	l.retryAfter = time.Time{}
	return l.until.Sub(now), wasIn
}

// answered notes an answer that was no rate limit: the next rate limit's
// back-off starts from the shortest again.
func (l *limiter) answered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.backoff = 0
}

// nextBackoff is the back-off after prev: minRateBackoff first, then
// twice the last, up to maxRateBackoff.
func nextBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return minRateBackoff
	}
	return min(2*prev, maxRateBackoff)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// parseRetryAfter reads a Retry-After header (RFC 9110, 10.2.3): a number
// of seconds or an HTTP date. It is false when the header is absent,
// unreadable, zero or in the past: the back-off applies then. A wait
// above maxRetryAfter is cut to it.
func parseRetryAfter(header string, now time.Time) (time.Duration, bool) {
	d := httpclient.RetryAfter(header, now)
	if d <= 0 {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// retryAfterTransport tells an endpoint's limiter the Retry-After of every
// 429 the endpoint answers: go-ethereum's rpc.HTTPError keeps an answer's
// status and body, not its headers.
type retryAfterTransport struct {
	base    http.RoundTripper
	limiter *limiter
}

func (t *retryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		t.limiter.sawRetryAfter(resp.Header.Get("Retry-After"))
	}
	return resp, err
}

// withRetryAfter is client (a default one when nil) with its transport
// wrapped to tell l of Retry-After headers.
func withRetryAfter(client *http.Client, l *limiter) *http.Client {
	var c http.Client
	if client != nil {
		c = *client
	}
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &retryAfterTransport{base: base, limiter: l}
	return &c
}
