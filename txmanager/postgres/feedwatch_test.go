package postgres_test

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// TestTheFeedWatchWakesOnlyForItsOwnFeed: a long poll's wait ends when
// the sequencer numbers an event of this store's feed, announced by
// NOTIFY, and not when another schema's sequencer announces its own head
// on the shared channel; a head numbered before the watch listened is
// seen at once.
func TestTheFeedWatchWakesOnlyForItsOwnFeed(t *testing.T) {
	t.Parallel()
	s, _ := store(t, 4)
	other, _ := store(t, 4)
	watchCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if _, _, err := s.Create(ctx(t), intent("before", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SequenceAll(ctx(t)); err != nil {
		t.Fatal(err)
	}
	w := s.WatchFeed(watchCtx, slog.New(slog.DiscardHandler))
	if err := w.Wait(ctx(t), 0); err != nil {
		t.Fatalf("a head numbered before the watch: %v", err)
	}
	head, err := s.HeadSeq(ctx(t))
	if err != nil {
		t.Fatal(err)
	}

	woke := make(chan error, 1)
	go func() { woke <- w.Wait(ctx(t), head) }()
	// Another schema's feed moves (and moves far): no reason to wake.
	for i := range 3 {
		if _, _, err := other.Create(ctx(t), intent("elsewhere-"+string(rune('a'+i)), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := other.SequenceAll(ctx(t)); err != nil {
		t.Fatal(err)
	}
	quiet, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	if err := w.Wait(quiet, head); err == nil {
		t.Fatal("the watch woke for another schema's feed")
	}
	if _, _, err := s.Create(ctx(t), intent("after", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SequenceAll(ctx(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx(t).Done():
		t.Fatal("the watch did not wake for its own feed")
	}
}
