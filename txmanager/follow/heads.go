// Package follow follows a chain's canonical blocks for the transactions
// txmanager broadcast: a window of recent canonical blocks by height,
// reorg detection by parent hash with a walk back to the fork point, and
// (in the follower built on it) receipts found from blocks rather than by
// polling each pending transaction.
package follow

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ethereum/go-ethereum/common"
)

// Block is what the follower needs of a block: where it stands in the
// chain and the hashes of its transactions.
type Block struct {
	Number uint64
	Hash   common.Hash
	Parent common.Hash
	Time   uint64
	Txs    []common.Hash
}

// Source reads blocks from a node. Walking back goes by hash, so a walk
// always stays on one chain even when the node switches forks meanwhile.
type Source interface {
	// Latest is the node's head block.
	Latest(ctx context.Context) (Block, error)
	// ByHash is the block with this hash; an error when the node does not
	// have it.
	ByHash(ctx context.Context, hash common.Hash) (Block, error)
}

// Change is what one update of the window found: the blocks that left the
// canonical chain (a reorg), highest first, then those that joined it,
// lowest first. Both empty: no new head.
type Change struct {
	Removed []Block
	Added   []Block
}

// Reorg reports whether canonical blocks were replaced.
func (c Change) Reorg() bool { return len(c.Removed) > 0 }

// ErrDeepReorg: the new head does not connect to any block of the window:
// the reorg (or the gap since the last update) goes deeper than the
// window. The caller must look again at everything it tracks; the window
// starts over from the new head.
var ErrDeepReorg = errors.New("the chain changed deeper than the window of blocks kept")

// Window is the canonical chain's last Depth blocks as last seen, by
// height, contiguous. Not safe for concurrent use: one per chain, owned by
// its follower.
type Window struct {
	depth  int
	blocks []Block // ascending, contiguous, each the parent of the next
}

// NewWindow keeps depth blocks (at least 2).
func NewWindow(depth int) *Window { return &Window{depth: max(depth, 2)} }

// Head is the newest block seen, ok false before the first update.
func (w *Window) Head() (Block, bool) {
	if len(w.blocks) == 0 {
		return Block{}, false
	}
	return w.blocks[len(w.blocks)-1], true
}

// Blocks are the window's blocks, lowest first. The slice is the window's
// own: read it before the next Update.
func (w *Window) Blocks() []Block { return w.blocks }

// At is the canonical block at height n, if the window holds it.
func (w *Window) At(n uint64) (Block, bool) {
	if len(w.blocks) == 0 {
		return Block{}, false
	}
	first := w.blocks[0].Number
	if n < first || n > w.blocks[len(w.blocks)-1].Number {
		return Block{}, false
	}
	return w.blocks[n-first], true
}

// Canonical reports whether the block hash is at height n on the chain as
// last seen; known is false when n is outside the window.
func (w *Window) Canonical(n uint64, hash common.Hash) (canonical, known bool) {
	b, ok := w.At(n)
	return ok && b.Hash == hash, ok
}

// Update reads the node's head and brings the window to it: the new
// blocks in order, and on a reorg the blocks replaced. A node whose head
// is behind the window's (a lagging node behind a load balancer) changes
// nothing while its head is a block the window holds, or older than the
// window: only a hash that differs at a height is a reorg. A head that connects to nothing in the
// window returns ErrDeepReorg, with the window restarted at that head and
// the change holding it as the one block added.
func (w *Window) Update(ctx context.Context, src Source) (Change, error) {
	latest, err := src.Latest(ctx)
	if err != nil {
		return Change{}, fmt.Errorf("head block: %w", err)
	}
	head, ok := w.Head()
	if !ok {
		w.blocks = []Block{latest}
		return Change{Added: []Block{latest}}, nil
	}
	if latest.Hash == head.Hash {
		return Change{}, nil
	}
	if canonical, _ := w.Canonical(latest.Number, latest.Hash); canonical {
		return Change{}, nil // a node behind us, on our chain
	}
	if latest.Number < w.blocks[0].Number {
		// A node further behind than the window: no hash to check it
		// against, so nothing is concluded from it.
		return Change{}, nil
	}
	// Walk back by parent hash from the new head to a block of the window.
	added := []Block{latest}
	cur := latest
	for {
		if cur.Number == 0 {
			return w.restart(latest)
		}
		parent, known := w.At(cur.Number - 1)
		if known && parent.Hash == cur.Parent {
			break
		}
		if !known && cur.Number-1 < w.blocks[0].Number {
			return w.restart(latest)
		}
		parentBlock, err := src.ByHash(ctx, cur.Parent)
		if err != nil {
			return Change{}, fmt.Errorf("walk back to block %d (%s): %w", cur.Number-1, cur.Parent.Hex(), err)
		}
		cur = parentBlock
		added = append(added, cur)
	}
	fork := cur.Number - 1 // the last block both chains share
	var removed []Block
	for i := len(w.blocks) - 1; i >= 0 && w.blocks[i].Number > fork; i-- {
		removed = append(removed, w.blocks[i])
	}
	w.blocks = w.blocks[:int(fork-w.blocks[0].Number)+1]
	for i := len(added) - 1; i >= 0; i-- {
		w.blocks = append(w.blocks, added[i])
	}
	if over := len(w.blocks) - w.depth; over > 0 {
		w.blocks = append([]Block(nil), w.blocks[over:]...)
	}
	slices.Reverse(added)
	return Change{Removed: removed, Added: added}, nil
}

// restart starts the window over at head after a change it cannot follow.
func (w *Window) restart(head Block) (Change, error) {
	removed := make([]Block, 0, len(w.blocks))
	for i := len(w.blocks) - 1; i >= 0; i-- {
		removed = append(removed, w.blocks[i])
	}
	w.blocks = []Block{head}
	return Change{Removed: removed, Added: []Block{head}}, ErrDeepReorg
}
