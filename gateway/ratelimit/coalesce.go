package ratelimit

import (
	"context"
	"sync"

	"github.com/go-redis/redis_rate/v10"
)

// A busy key sends many requests at once, and a Redis round trip each
// would cost more than the rest of the gateway's work for them. So the
// requests of one key share calls: while a call for the key is in flight,
// new requests queue, and when it returns, one call takes a token for each
// of them (redis_rate's AllowAtMost) and the tokens it got go to the
// earliest. A lone request calls at once, so a quiet key waits for nothing,
// and a queued one waits at most for the call ahead of it.
//
// AllowAtMost charges a fraction of a token when fewer whole tokens are
// left than asked for, and that fraction is lost: at most one token per
// call, and only at the edge of the limit, where calls are frequent and
// the fraction small. The limit is never exceeded.

// queueKey names the queue of a key and limit: requests share a call only
// when they draw on the same budget in the same way.
type queueKey struct {
	key   string
	limit Limit
}

// callQueues holds a queue for every key with a call in flight.
type callQueues struct {
	mu    sync.Mutex
	byKey map[queueKey]*callQueue
}

type callQueue struct {
	waiting []*waiter
}

type waiter struct {
	done chan callResult // buffered: a call never blocks on a caller who left
}

type callResult struct {
	decision Decision
	err      error
}

// allowRedis takes one token for key in Redis, sharing the call with the
// key's other requests of the moment.
func (l *Limiter) allowRedis(ctx context.Context, key string, limit Limit) (Decision, error) {
	k := queueKey{key, limit}
	q := &l.calls
	q.mu.Lock()
	if busy, ok := q.byKey[k]; ok {
		w := &waiter{done: make(chan callResult, 1)}
		busy.waiting = append(busy.waiting, w)
		q.mu.Unlock()
		select {
		case r := <-w.done:
			return r.decision, r.err
		case <-ctx.Done():
			// The call may still take this request's token: a request
			// that gave up counts as sent.
			return Decision{}, ctx.Err()
		}
	}
	q.byKey[k] = &callQueue{}
	q.mu.Unlock()
	ds, err := l.callRedis(ctx, k, 1)
	l.serveQueued(k)
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// serveQueued hands the requests that queued behind a call to a call of
// their own, or ends the key's queue when none did.
func (l *Limiter) serveQueued(k queueKey) {
	q := &l.calls
	q.mu.Lock()
	queued := q.byKey[k].waiting
	if len(queued) == 0 {
		delete(q.byKey, k)
		q.mu.Unlock()
		return
	}
	q.byKey[k].waiting = nil
	q.mu.Unlock()
	go func() {
		// No one caller owns the call, so none of their contexts bounds it.
		ds, err := l.callRedis(context.Background(), k, len(queued))
		for i, w := range queued {
			if err != nil {
				w.done <- callResult{err: err}
				continue
			}
			w.done <- callResult{decision: ds[i]}
		}
		l.serveQueued(k)
	}()
}

// callRedis asks Redis for n tokens of k in one call and returns a
// decision for each of the n requests, the allowed ones first.
func (l *Limiter) callRedis(ctx context.Context, k queueKey, n int) ([]Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.RedisTimeout)
	defer cancel()
	limit := redis_rate.Limit{Rate: k.limit.Rate, Burst: k.limit.Burst, Period: k.limit.Period}
	// For one request AllowAtMost is Allow: a whole token or none.
	res, err := l.rate.AllowAtMost(ctx, l.opts.Prefix+k.key, limit, n)
	if err != nil {
		return nil, err
	}
	ds := make([]Decision, n)
	for i := range ds {
		d := Decision{Limit: k.limit, ResetAfter: res.ResetAfter, Source: SourceRedis}
		if i < res.Allowed {
			d.Allowed = true
			// The requests after this one in the call took tokens too.
			d.Remaining = res.Remaining + res.Allowed - 1 - i
		} else {
			d.RetryAfter = res.RetryAfter
			if d.RetryAfter <= 0 {
				// The call took the last whole token: the next comes one
				// emission interval later at most.
				d.RetryAfter = k.limit.interval()
			}
		}
		ds[i] = d
	}
	return ds, nil
}
