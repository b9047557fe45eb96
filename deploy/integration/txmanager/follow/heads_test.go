package follow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/txmanager/follow"
)

// fakeChain is a tree of blocks and a head the "node" reports.
type fakeChain struct {
	byHash map[common.Hash]follow.Block
	head   follow.Block
	calls  int
}

func newFakeChain() *fakeChain {
	genesis := follow.Block{Number: 0, Hash: crypto.Keccak256Hash([]byte("genesis"))}
	return &fakeChain{byHash: map[common.Hash]follow.Block{genesis.Hash: genesis}, head: genesis}
}

// extend adds n blocks on top of parent (fork names the branch) and makes
// the last the head; it returns them.
func (c *fakeChain) extend(parent follow.Block, n int, fork string) []follow.Block {
	var out []follow.Block
	for range n {
		b := follow.Block{Number: parent.Number + 1, Parent: parent.Hash,
			Hash: crypto.Keccak256Hash([]byte(fmt.Sprintf("%s-%d-%s", fork, parent.Number+1, parent.Hash)))}
		c.byHash[b.Hash] = b
		out = append(out, b)
		parent = b
	}
	c.head = parent
	return out
}

func (c *fakeChain) Latest(context.Context) (follow.Block, error) { c.calls++; return c.head, nil }

func (c *fakeChain) ByHash(_ context.Context, h common.Hash) (follow.Block, error) {
	c.calls++
	b, ok := c.byHash[h]
	if !ok {
		return follow.Block{}, errors.New("unknown block")
	}
	return b, nil
}

func numbers(bs []follow.Block) []uint64 {
	out := []uint64{}
	for _, b := range bs {
		out = append(out, b.Number)
	}
	return out
}

func TestWindowFollowsExtendsAndReorgs(t *testing.T) {
	ctx := context.Background()
	c := newFakeChain()
	main := c.extend(c.head, 10, "main")
	w := follow.NewWindow(8)
	update := func() follow.Change {
		t.Helper()
		ch, err := w.Update(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	if ch := update(); !cmp.Equal(numbers(ch.Added), []uint64{10}) || ch.Reorg() {
		t.Fatalf("first update: %+v", ch)
	}
	if ch := update(); len(ch.Added) != 0 || ch.Reorg() {
		t.Errorf("the same head again: %+v", ch)
	}

	// A gap of three blocks: all three come, in order, one call each.
	c.calls = 0
	c.extend(c.head, 3, "main")
	if ch := update(); !cmp.Equal(numbers(ch.Added), []uint64{11, 12, 13}) || ch.Reorg() {
		t.Errorf("a gap: %+v", ch)
	}
	if c.calls != 3 {
		t.Errorf("%d calls for three new blocks, want 3 (the head, then two parents by hash)", c.calls)
	}

	// Reorgs of depth 1 to 5 replace exactly the orphaned blocks.
	for depth := 1; depth <= 5; depth++ {
		head, _ := w.Head()
		forkAt, _ := w.At(head.Number - uint64(depth))
		c.extend(forkAt, depth+1, fmt.Sprintf("fork-%d", depth))
		ch := update()
		var wantRemoved, wantAdded []uint64
		for n := head.Number; n > forkAt.Number; n-- {
			wantRemoved = append(wantRemoved, n)
		}
		for n := forkAt.Number + 1; n <= forkAt.Number+uint64(depth)+1; n++ {
			wantAdded = append(wantAdded, n)
		}
		if !cmp.Equal(numbers(ch.Removed), wantRemoved) || !cmp.Equal(numbers(ch.Added), wantAdded) {
			t.Errorf("reorg of depth %d: removed %v, added %v; want %v, %v", depth, numbers(ch.Removed), numbers(ch.Added), wantRemoved, wantAdded)
		}
		if canonical, known := w.Canonical(ch.Removed[0].Number, ch.Removed[0].Hash); canonical || !known {
			t.Errorf("reorg of depth %d: an orphaned block still canonical (%v, %v)", depth, canonical, known)
		}
	}

	// A lagging node reports an older block of our chain: nothing changes.
	head, _ := w.Head()
	c.head, _ = w.At(head.Number - 2)
	if ch := update(); len(ch.Added) != 0 || ch.Reorg() {
		t.Errorf("a lagging node taken as a change: %+v", ch)
	}
	// One further behind than the window: nothing concluded either.
	c.head = main[0]
	if ch := update(); len(ch.Added) != 0 || ch.Reorg() {
		t.Errorf("a node far behind taken as a change: %+v", ch)
	}
	// An older height with another hash is a reorg to a shorter chain.
	back, _ := w.At(head.Number - 2)
	parent, _ := w.At(back.Number - 1)
	other := c.extend(parent, 1, "short")
	ch := update()
	if !cmp.Equal(numbers(ch.Removed), []uint64{head.Number, head.Number - 1, head.Number - 2}) || !cmp.Equal(numbers(ch.Added), []uint64{other[0].Number}) {
		t.Errorf("a shorter chain: removed %v, added %v", numbers(ch.Removed), numbers(ch.Added))
	}
}

func TestWindowRestartsPastItsDepth(t *testing.T) {
	ctx := context.Background()
	c := newFakeChain()
	c.extend(c.head, 20, "main")
	w := follow.NewWindow(4)
	for range 2 { // the window fills as blocks come: 4 of them
		if _, err := w.Update(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.extend(c.head, 3, "main")
	}
	if _, err := w.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	head, _ := w.Head()
	// Forked 6 blocks down, deeper than the 4 kept.
	fork := c.byHash[head.Parent]
	for range 5 {
		fork = c.byHash[fork.Parent]
	}
	c.extend(fork, 7, "deep")
	ch, err := w.Update(ctx, c)
	if !errors.Is(err, follow.ErrDeepReorg) {
		t.Fatalf("a reorg deeper than the window: %v", err)
	}
	if got, _ := w.Head(); got.Hash != c.head.Hash || len(ch.Removed) != 4 || len(ch.Added) != 1 {
		t.Errorf("after a deep reorg: head %d, removed %v, added %v", got.Number, numbers(ch.Removed), numbers(ch.Added))
	}
	// It follows on from there.
	c.extend(c.head, 2, "deep")
	if ch, err := w.Update(ctx, c); err != nil || len(ch.Added) != 2 {
		t.Errorf("after the restart: %+v %v", ch, err)
	}
}
