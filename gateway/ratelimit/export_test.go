package ratelimit

// QueuedBehind reports how many requests of key wait for its call in
// flight.
func QueuedBehind(l *Limiter, key string, limit Limit) int {
	l.calls.mu.Lock()
	defer l.calls.mu.Unlock()
	if q, ok := l.calls.byKey[queueKey{key, limit}]; ok {
		return len(q.waiting)
	}
	return 0
}
