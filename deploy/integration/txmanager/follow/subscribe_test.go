package follow_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/follow"
)

// TestNewHeadsWakeTheFollower: a follower that would poll once an hour
// still takes a transaction to CONFIRMED block by block when the chain's
// newHeads subscription (anvil's WebSocket endpoint) wakes it.
func TestNewHeadsWakeTheFollower(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	cfg := r.cfg
	cfg.Chain.NewHeads = "ws://" + strings.TrimPrefix(r.node.URL(), "http://")
	cfg.PollEvery = time.Hour
	fl := follow.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fl.Run(ctx) }()
	go func() { // txmanagerd's sequencer: the follower reads the numbered feed
		for ctx.Err() == nil {
			_, _ = r.store.Sequence(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })

	id, _ := r.broadcast(t, "woken", r.transfer(t))
	deadline := time.Now().Add(60 * time.Second)
	for {
		// A block at a time: each wakes the follower, which needs 2 to
		// confirm (and the first may come before it tracks the transaction).
		if err := r.node.Mine(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if st, _ := r.state(t, id); st == txmanager.StateConfirmed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("not CONFIRMED within 60 s: the subscription did not wake the follower")
		}
		<-time.After(200 * time.Millisecond)
	}
}
