package public

import (
	"sync"
	"time"
)

// breaker is one endpoint's circuit breaker. After threshold consecutive
// transient failures (timeouts, connection errors, 5xx) it opens: the
// endpoint is skipped, so a dead endpoint costs nothing, until cooldown has
// passed; then one send is let through (half open), and its outcome closes
// the breaker or opens it again for twice the cooldown, up to maxCooldown.
// An answer from the node, even a refusal, is a sign of health.
type breaker struct {
	threshold   int
	cooldown    time.Duration
	maxCooldown time.Duration
	now         func() time.Time

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	backoff   time.Duration
	probing   bool
}

func newBreaker(threshold int, cooldown time.Duration, now func() time.Time) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, maxCooldown: 16 * cooldown, now: now}
}

// allow reports whether a send may go to the endpoint now. While half
// open, only one send at a time probes it.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < b.threshold {
		return true
	}
	if b.now().Before(b.openUntil) || b.probing {
		return false
	}
	b.probing = true
	return true
}

// record notes the outcome of an allowed send: healthy when the endpoint
// answered, whatever it said.
func (b *breaker) record(healthy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if healthy {
		b.failures, b.backoff = 0, 0
		return
	}
	b.failures++
	if b.failures >= b.threshold {
		switch {
		case b.backoff == 0:
			b.backoff = b.cooldown
		case b.backoff < b.maxCooldown:
			b.backoff *= 2
		}
		b.openUntil = b.now().Add(b.backoff)
	}
}

// closed reports whether the endpoint is in use (closed breaker).
func (b *breaker) closed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failures < b.threshold
}
