// Package batch gathers work that arrives concurrently into batches, so
// that many callers share one round trip or one commit. Items queue; while
// fewer than a set number of batches run, one more starts with what is
// queued, and each running batch looks for more when it ends. A lone item
// starts a batch at once: batching adds no wait when there is nothing to
// share, and under load the batches grow with it.
package batch

import "sync"

// Queue batches items of type T. Its zero value is not usable: use New.
type Queue[T any] struct {
	maxRunning int
	take       func(waiting []T) int
	run        func(batch []T)

	mu      sync.Mutex
	waiting []T
	running int
	paused  bool
	// idle is signalled when the last running batch ends.
	idle *sync.Cond
}

// New returns a queue that runs at most maxRunning batches at once. take
// says how many of the waiting items (never none) the next batch holds:
// len(waiting) for all, or fewer to bound a batch. run handles a batch;
// it runs on a goroutine of the queue's, and must answer every item.
func New[T any](maxRunning int, take func(waiting []T) int, run func(batch []T)) *Queue[T] {
	if maxRunning < 1 {
		maxRunning = 1
	}
	q := &Queue[T]{maxRunning: maxRunning, take: take, run: run}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// UpTo is a take function that bounds a batch to n items.
func UpTo[T any](n int) func(waiting []T) int {
	return func(waiting []T) int { return min(len(waiting), n) }
}

// Add queues items, in order and together, and starts a batch when fewer
// than maxRunning run.
func (q *Queue[T]) Add(items ...T) {
	if len(items) == 0 {
		return
	}
	q.mu.Lock()
	q.waiting = append(q.waiting, items...)
	start := q.startLocked()
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// startLocked reports whether a new batch may start, and counts it.
func (q *Queue[T]) startLocked() bool {
	if q.paused || q.running >= q.maxRunning || len(q.waiting) == 0 {
		return false
	}
	q.running++
	return true
}

// drain runs batches until nothing waits, or the queue is paused.
func (q *Queue[T]) drain() {
	for {
		q.mu.Lock()
		if q.paused || len(q.waiting) == 0 {
			q.running--
			if q.running == 0 {
				q.idle.Broadcast()
			}
			q.mu.Unlock()
			return
		}
		n := max(1, min(q.take(q.waiting), len(q.waiting)))
		batch := q.waiting[:n:n]
		q.waiting = q.waiting[n:]
		if len(q.waiting) == 0 {
			q.waiting = nil // let the backing array go
		}
		q.mu.Unlock()
		q.run(batch)
	}
}

// Len is how many items wait.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// Pause keeps what is added waiting until Resume; batches already running
// finish. It returns once none runs, so that what is added next is sure to
// wait: tests use it to gather a batch they choose.
func (q *Queue[T]) Pause() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.paused = true
	for q.running > 0 {
		q.idle.Wait()
	}
}

// Resume ends a Pause and starts the batches the waiting items need.
func (q *Queue[T]) Resume() {
	q.mu.Lock()
	q.paused = false
	var starts int
	for q.startLocked() {
		starts++
	}
	q.mu.Unlock()
	for range starts {
		go q.drain()
	}
}
