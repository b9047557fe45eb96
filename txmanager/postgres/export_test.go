package postgres

import "runtime"

// EventBarrier is the advisory lock event writers hold shared, for tests
// that write events by hand.
const EventBarrier = eventBarrier

// HoldCreates keeps every create queued, as if the flushes were all busy,
// until release: a test can then gather a batch of the creates it wants.
// queued reports how many wait.
func HoldCreates(s *Store) (queued func() int, release func()) {
	q := &s.creates
	for {
		// A flush still finishing would take what queues next.
		q.mu.Lock()
		if q.flushing == 0 {
			q.flushing += maxCreateFlushes
			q.mu.Unlock()
			break
		}
		q.mu.Unlock()
		runtime.Gosched()
	}
	queued = func() int {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.waiting)
	}
	release = func() {
		q.mu.Lock()
		q.flushing -= maxCreateFlushes - 1 // the one drain started here
		q.mu.Unlock()
		go s.drainCreates()
	}
	return queued, release
}
