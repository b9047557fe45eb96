package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// localShards spreads keys over locks so that concurrent requests for
// different keys rarely wait for each other.
const localShards = 32

// sweepEvery is how often a shard drops the keys whose budget is full
// again. Such a key holds no information (a missing key means a full
// budget), so memory stays bounded by the keys active within their reset
// time plus this period.
const sweepEvery = 10 * time.Second

// localStore is a per-process GCRA, the same algorithm and arithmetic as
// redis_rate's script, in integer nanoseconds rather than float seconds.
// For each key it keeps the theoretical arrival time (TAT): when the key
// would be back to an empty bucket if it sent nothing more.
type localStore struct {
	seed   maphash.Seed
	shards [localShards]localShard
}

type localShard struct {
	mu        sync.Mutex
	tat       map[string]time.Time
	nextSweep time.Time
}

func newLocalStore() *localStore {
	s := &localStore{seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].tat = make(map[string]time.Time)
	}
	return s
}

// allow counts one request for key at now. limit must be valid.
func (s *localStore) allow(key string, limit Limit, now time.Time) Decision {
	t := limit.interval()
	burstOffset := t * time.Duration(limit.Burst)

	sh := &s.shards[maphash.String(s.seed, key)%localShards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !now.Before(sh.nextSweep) {
		sh.sweep(now)
	}

	tat, ok := sh.tat[key]
	if !ok || tat.Before(now) {
		tat = now
	}
	newTAT := tat.Add(t)
	// The request fits when the bucket, after taking it, holds no more
	// than burst intervals: newTAT - now <= burstOffset.
	slack := burstOffset - newTAT.Sub(now)
	if slack < 0 {
		return Decision{
			Limit:      limit,
			RetryAfter: -slack,
			ResetAfter: tat.Sub(now),
			Source:     SourceLocal,
		}
	}
	sh.tat[key] = newTAT
	return Decision{
		Allowed:    true,
		Limit:      limit,
		Remaining:  int(slack / t),
		ResetAfter: newTAT.Sub(now),
		Source:     SourceLocal,
	}
}

// sweep drops the keys whose budget is full again at now. The caller holds
// sh.mu.
func (sh *localShard) sweep(now time.Time) {
	for k, tat := range sh.tat {
		if !tat.After(now) {
			delete(sh.tat, k)
		}
	}
	sh.nextSweep = now.Add(sweepEvery)
}

// len counts the keys held, for tests.
func (s *localStore) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.tat)
		sh.mu.Unlock()
	}
	return n
}
