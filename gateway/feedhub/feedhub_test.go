package feedhub_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/txfence/txfence/gateway/feedhub"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/testinfra/wait"
)

// feed is an in-memory txmanager feed: gap-free seqs from 1, long polls
// woken by appends, reads counted, and a switch that makes reads fail.
type feed struct {
	mu      sync.Mutex
	events  []components.Event
	grew    chan struct{}
	failing bool
	reads   atomic.Int64
}

func newFeed() *feed { return &feed{grew: make(chan struct{})} }

func (f *feed) append(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.events = append(f.events, components.Event{Seq: int64(len(f.events) + 1), Type: "tx.state_changed"})
	}
	close(f.grew)
	f.grew = make(chan struct{})
}

func (f *feed) fail(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = on
	close(f.grew)
	f.grew = make(chan struct{})
}

func (f *feed) Feed(ctx context.Context, after uint64, limit int, wait time.Duration) (components.EventList, error) {
	f.reads.Add(1)
	deadline := time.After(wait)
	for {
		f.mu.Lock()
		failing, n, grew := f.failing, uint64(len(f.events)), f.grew
		var page []components.Event
		if after < n {
			page = append(page, f.events[after:min(n, after+uint64(limit))]...)
		}
		f.mu.Unlock()
		head := int64(n)
		switch {
		case failing:
			return components.EventList{}, errors.New("txmanager did not answer")
		case len(page) > 0 || wait == 0:
			return components.EventList{Events: page, HeadSeq: &head}, nil
		}
		select {
		case <-ctx.Done():
			return components.EventList{}, ctx.Err()
		case <-deadline:
			return components.EventList{Events: []components.Event{}, HeadSeq: &head}, nil
		case <-grew:
		}
	}
}

// run starts h for the test's duration.
func run(t *testing.T, h *feedhub.Hub) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// follow reads h from after until it has want events, and reports what
// it saw in order.
func follow(ctx context.Context, h *feedhub.Hub, after uint64, want int) ([]uint64, error) {
	var seen []uint64
	for len(seen) < want {
		events, err := h.Next(ctx, after, 100, time.Second)
		if err != nil {
			return seen, err
		}
		for _, e := range events {
			seen = append(seen, uint64(e.Seq))
			after = uint64(e.Seq)
		}
	}
	return seen, nil
}

func inOrderFrom(t *testing.T, seen []uint64, first uint64) {
	t.Helper()
	for i, s := range seen {
		if s != first+uint64(i) {
			t.Fatalf("event %d is seq %d, want %d: %v", i, s, first+uint64(i), seen)
		}
	}
}

// Many streams read at once while the feed grows: each sees every event
// after its position once, in order, and the feed is read by the hub
// alone, not once per stream.
func TestEveryStreamSeesEveryEventOnceWhileOneReaderReads(t *testing.T) {
	src := newFeed()
	src.append(10) // before the hub starts: streams from 0 catch up
	h := feedhub.New(src, feedhub.Options{Window: 2048, Page: 16, Wait: time.Second})
	run(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if head, err := h.Head(ctx); err != nil || head != 10 {
		t.Fatalf("head %d, %v; want 10", head, err)
	}
	// The hub starts at the head it reads first; on a loaded machine its
	// goroutine may read it late. Its first long poll (the third read,
	// after this test's and its own reads of the head) shows it started
	// at 10, before anything else is appended.
	wait.For(t, 30*time.Second, "the hub's first long poll", func() bool { return src.reads.Load() >= 3 })

	const streams, total = 200, 1000
	var wg sync.WaitGroup
	errc := make(chan error, streams)
	for i := range streams {
		after := uint64(i % 11) // 0..10: some behind the hub's start
		wg.Go(func() {
			seen, err := follow(ctx, h, after, total-int(after))
			if err != nil {
				errc <- err
				return
			}
			for j, s := range seen {
				if s != after+1+uint64(j) {
					errc <- errors.New("a stream saw an event out of order, twice or not at all")
					return
				}
			}
		})
	}
	readsBefore := src.reads.Load()
	for range (total - 10) / 10 {
		src.append(10)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	// The hub reads each append at most once (pages of 16 over appends of
	// 10), plus the catch-up reads of the 200 streams started behind it
	// (one each: 10 events fit a page); 200 streams polling themselves
	// would have read the feed 99 times each.
	if reads := src.reads.Load() - readsBefore; reads > 2*99+streams {
		t.Fatalf("the feed was read %d times for 99 appends and %d streams", reads, streams)
	}
}

// A stream that falls behind the window, and one that resumes from long
// ago, read the source until they reach the window, and miss nothing.
func TestAStreamBehindTheWindowCatchesUpFromTheSource(t *testing.T) {
	src := newFeed()
	h := feedhub.New(src, feedhub.Options{Window: 8, Page: 4, Wait: time.Second})
	run(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.Head(ctx); err != nil {
		t.Fatal(err)
	}
	src.append(100)
	// Wait for the hub to hold the end of the feed: its window is then
	// seqs 93 to 100.
	if seen, err := follow(ctx, h, 99, 1); err != nil || seen[0] != 100 {
		t.Fatalf("%v, %v", seen, err)
	}
	seen, err := follow(ctx, h, 3, 97)
	if err != nil {
		t.Fatal(err)
	}
	inOrderFrom(t, seen, 4)
}

// While the feed cannot be read, a waiting stream is told so rather than
// kept waiting; once it can, the hub resumes where it was.
func TestAFailingFeedEndsWaitsAndTheHubResumes(t *testing.T) {
	src := newFeed()
	h := feedhub.New(src, feedhub.Options{Wait: 200 * time.Millisecond, RetryAfter: 10 * time.Millisecond})
	run(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.Head(ctx); err != nil {
		t.Fatal(err)
	}
	src.fail(true)
	for {
		_, err := h.Next(ctx, 0, 10, time.Second)
		if err != nil && ctx.Err() == nil {
			break // the failure reached the stream
		}
		if ctx.Err() != nil {
			t.Fatal("a stream never learned that the feed failed")
		}
	}
	src.fail(false)
	src.append(3)
	seen, err := follow(ctx, h, 0, 3)
	for err != nil && ctx.Err() == nil { // the failure may stand until the hub's next read
		seen, err = follow(ctx, h, 0, 3)
	}
	if err != nil {
		t.Fatal(err)
	}
	inOrderFrom(t, seen, 1)
}

// A stream that starts now starts after the feed's head as it is now,
// even before the hub has read that far, and a stream that starts before
// the hub runs waits for it and misses nothing.
func TestAStreamStartsAtTheFeedsHeadNotTheHubs(t *testing.T) {
	src := newFeed()
	src.append(5)
	h := feedhub.New(src, feedhub.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	head, err := h.Head(ctx)
	if err != nil || head != 5 {
		t.Fatalf("head %d, %v; want 5", head, err)
	}
	src.append(2)
	seen := make(chan []uint64, 1)
	go func() {
		s, _ := follow(ctx, h, head, 2)
		seen <- s
	}()
	run(t, h)
	inOrderFrom(t, <-seen, 6)
}
