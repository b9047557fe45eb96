package batch_test

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/txfence/txfence/shared/batch"
)

// recorder runs batches, recording them, and can hold each batch until
// released.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	running atomic.Int64
	most    atomic.Int64
	hold    chan struct{} // nil: batches do not wait
	started chan struct{}
	done    sync.WaitGroup
}

func (r *recorder) run(b []int) {
	n := r.running.Add(1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	if r.started != nil {
		r.started <- struct{}{}
	}
	if r.hold != nil {
		<-r.hold
	}
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(b))
	r.mu.Unlock()
	r.running.Add(-1)
	for range b {
		r.done.Done()
	}
}

func (r *recorder) all() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// A lone item is a batch of its own, run at once.
func TestALoneItemRunsAtOnce(t *testing.T) {
	r := &recorder{}
	q := batch.New(2, batch.UpTo[int](10), r.run)
	r.done.Add(1)
	q.Add(7)
	r.done.Wait()
	if got := r.all(); len(got) != 1 || !slices.Equal(got[0], []int{7}) {
		t.Errorf("batches %v, want [[7]]", got)
	}
}

// Items added while the batches run wait, and the next batches take them
// together, in order, each once, never more than the bound at a time and
// never more than take allows in one batch.
func TestItemsQueuedBehindRunningBatchesShareTheNext(t *testing.T) {
	r := &recorder{hold: make(chan struct{}), started: make(chan struct{}, 100)}
	q := batch.New(2, batch.UpTo[int](4), r.run)
	r.done.Add(12)
	q.Add(0)
	<-r.started
	q.Add(1)
	<-r.started // both running batches are held
	for i := 2; i < 12; i++ {
		q.Add(i)
	}
	if n := q.Len(); n != 10 {
		t.Fatalf("%d items wait behind the held batches, want 10", n)
	}
	close(r.hold)
	r.done.Wait()
	if most := r.most.Load(); most > 2 {
		t.Errorf("%d batches ran at once, want at most 2", most)
	}
	var items []int
	for _, b := range r.all() {
		if len(b) > 4 {
			t.Errorf("a batch of %d items, want at most 4: %v", len(b), b)
		}
		if !slices.IsSorted(b) {
			t.Errorf("a batch out of order: %v", b)
		}
		items = append(items, b...)
	}
	slices.Sort(items)
	want := make([]int, 12)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(items, want) {
		t.Errorf("items run %v, want each of 0..11 once", items)
	}
	if got := r.all(); len(got) > 2+3 {
		t.Errorf("%d batches for 12 items behind 2 held ones, want at most 5: %v", len(got), got)
	}
}

// Items added together go in one batch when take allows, and many
// concurrent adders each see their items run once.
func TestConcurrentAddsRunEachItemOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	q := batch.New(3, func(w []int) int { return len(w) }, func(b []int) {
		mu.Lock()
		for _, v := range b {
			seen[v]++
		}
		mu.Unlock()
		for range b {
			wg.Done()
		}
	})
	wg.Add(1000)
	var adders sync.WaitGroup
	for g := range 10 {
		adders.Go(func() {
			for i := range 50 {
				q.Add(g*100+2*i, g*100+2*i+1)
			}
		})
	}
	adders.Wait()
	wg.Wait()
	if len(seen) != 1000 {
		t.Errorf("%d distinct items run, want 1000", len(seen))
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("item %d ran %d times", v, n)
		}
	}
	if q.Len() != 0 {
		t.Errorf("%d items still wait", q.Len())
	}
}

// While paused, added items wait; Resume runs them, together.
func TestPauseGathersABatch(t *testing.T) {
	r := &recorder{}
	q := batch.New(1, batch.UpTo[int](100), r.run)
	q.Pause()
	r.done.Add(5)
	for i := range 5 {
		q.Add(i)
	}
	if n := q.Len(); n != 5 {
		t.Fatalf("%d items wait while paused, want 5", n)
	}
	if got := r.all(); len(got) != 0 {
		t.Fatalf("batches ran while paused: %v", got)
	}
	q.Resume()
	r.done.Wait()
	if got := r.all(); len(got) != 1 || !slices.Equal(got[0], []int{0, 1, 2, 3, 4}) {
		t.Errorf("batches %v, want one of 0..4", got)
	}
}
