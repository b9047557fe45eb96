package follow_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager/follow"
)

// TestWindowOnAnvil follows a real node through new blocks and anvil_reorg
// of depth 1 to 5: the new blocks come in order with their transaction
// hashes, and each reorg removes exactly the orphaned heights, the block
// that held our transfer among them.
func TestWindowOnAnvil(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	src := &follow.RPC{Client: node.RPC()}
	w := follow.NewWindow(16)
	if err := node.Mine(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	for depth := 1; depth <= 5; depth++ {
		tx := chaintest.SendTransfer(t, node, node.Accounts()[0].Key, common.HexToAddress("0xb0b"), big.NewInt(int64(depth)))
		if err := node.Mine(ctx, depth); err != nil {
			t.Fatal(err)
		}
		ch, err := w.Update(ctx, src)
		if err != nil || len(ch.Added) != depth || ch.Reorg() {
			t.Fatalf("depth %d: %d blocks added, reorg %v, %v", depth, len(ch.Added), ch.Reorg(), err)
		}
		minedIn := ch.Added[0]
		if len(minedIn.Txs) != 1 || minedIn.Txs[0] != tx.Hash() {
			t.Fatalf("depth %d: the block holds %v, want the transfer", depth, minedIn.Txs)
		}
		head, _ := w.Head()
		if err := node.Reorg(ctx, depth); err != nil {
			t.Fatal(err)
		}
		ch, err = w.Update(ctx, src)
		if err != nil {
			t.Fatalf("depth %d: %v", depth, err)
		}
		if len(ch.Removed) != depth || ch.Removed[0].Hash != head.Hash || ch.Removed[depth-1].Number != minedIn.Number {
			t.Errorf("depth %d: removed %v", depth, numbers(ch.Removed))
		}
		if canonical, known := w.Canonical(minedIn.Number, minedIn.Hash); canonical || !known {
			t.Errorf("depth %d: the orphaned block is still canonical", depth)
		}
	}
}
