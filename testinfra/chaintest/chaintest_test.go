package chaintest_test

import (
	"context"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

var stranger = common.HexToAddress("0x000000000000000000000000000000000000bEEF")

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), chaintest.Ether) }

func TestFundedAccounts(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{Accounts: 3, Balance: 42})
	accounts := node.Accounts()
	if len(accounts) != 3 {
		t.Fatalf("%d accounts, want 3", len(accounts))
	}
	for _, a := range accounts {
		bal, err := node.Client().BalanceAt(ctx(t), a.Address, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bal.Cmp(ether(42)) != 0 {
			t.Errorf("balance of %s is %s wei, want 42 ether", a.Address, bal)
		}
	}
	// The default mnemonic gives the accounts every Foundry user knows.
	if want := common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"); accounts[0].Address != want {
		t.Errorf("first account %s, want %s", accounts[0].Address, want)
	}

	r := chaintest.Transfer(t, node, accounts[0].Key, stranger, ether(1))
	bal, err := node.Client().BalanceAt(ctx(t), stranger, r.BlockNumber)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Cmp(ether(1)) != 0 {
		t.Errorf("recipient balance %s wei after the transfer, want 1 ether", bal)
	}
}

func TestMine(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	before, err := node.BlockNumber(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Mine(ctx(t), 3); err != nil {
		t.Fatal(err)
	}
	after, err := node.BlockNumber(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after != before+3 {
		t.Errorf("block number %d after mining 3 from %d, want %d", after, before, before+3)
	}
}

func TestIntervalMining(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{BlockTime: 100 * time.Millisecond})
	ctx := ctx(t)
	for {
		n, err := node.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 2 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("block number still %d with a 100 ms block time", n)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestPoolAndDrop(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	from := node.Accounts()[1]
	if err := node.SetAutomine(ctx(t), false); err != nil {
		t.Fatal(err)
	}
	tx := chaintest.SendTransfer(t, node, from.Key, stranger, ether(1))

	pool, err := node.TxPoolContent(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := pool.Pending[from.Address][tx.Nonce()]
	if !ok {
		t.Fatalf("transfer %s not pending under %s nonce %d; pool: %+v", tx.Hash(), from.Address, tx.Nonce(), pool)
	}
	if got.Hash != tx.Hash() || got.From != from.Address || *got.To != stranger || got.Value.Cmp(ether(1)) != 0 ||
		got.GasFeeCap.Cmp(tx.GasFeeCap()) != 0 || got.GasTipCap.Cmp(tx.GasTipCap()) != 0 || got.Type != 2 {
		t.Errorf("pool holds %+v, want the fields of %s", got, tx.Hash())
	}

	dropped, err := node.DropTransaction(ctx(t), tx.Hash())
	if err != nil || !dropped {
		t.Fatalf("DropTransaction: %t, %v; want true", dropped, err)
	}
	if pool, err = node.TxPoolContent(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if pool.Contains(tx.Hash()) {
		t.Errorf("pool still holds %s after DropTransaction", tx.Hash())
	}
	if dropped, err = node.DropTransaction(ctx(t), tx.Hash()); err != nil || dropped {
		t.Errorf("second DropTransaction: %t, %v; want false", dropped, err)
	}
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Client().TransactionReceipt(ctx(t), tx.Hash()); !errors.Is(err, ethereum.NotFound) {
		t.Errorf("receipt of the dropped transfer: %v, want not found", err)
	}

	if err := node.SetAutomine(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	chaintest.Transfer(t, node, from.Key, stranger, ether(1)) // mines again
}

func TestReorg(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	if err := node.Mine(ctx(t), 3); err != nil {
		t.Fatal(err)
	}
	// A transaction in the lowest replaced block makes that block's
	// contents, and so every hash above it, differ whatever anvil puts in
	// the empty replacement blocks.
	r := chaintest.Transfer(t, node, node.Accounts()[0].Key, stranger, ether(1))
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	top, err := node.BlockNumber(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.BlockNumber.Uint64() != top-1 {
		t.Fatalf("transfer mined in block %d, want %d", r.BlockNumber, top-1)
	}
	before := hashes(t, node, top-2, top)

	if err := node.Reorg(ctx(t), 2); err != nil {
		t.Fatal(err)
	}
	after, err := node.BlockNumber(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if after != top {
		t.Errorf("height %d after a reorg of depth 2, want %d (unchanged)", after, top)
	}
	now := hashes(t, node, top-2, top)
	if now[0] != before[0] {
		t.Errorf("block %d changed (%s -> %s), but lies below the reorg", top-2, before[0], now[0])
	}
	for i := 1; i <= 2; i++ {
		if now[i] == before[i] {
			t.Errorf("block %d kept its hash %s through a reorg of depth 2", top-2+uint64(i), now[i])
		}
	}
	if _, err := node.Client().TransactionReceipt(ctx(t), r.TxHash); !errors.Is(err, ethereum.NotFound) {
		t.Errorf("receipt of the reorged-out transfer: %v, want not found", err)
	}

	if err := node.Reorg(ctx(t), int(top)+1); err == nil {
		t.Errorf("a reorg deeper than the chain succeeded")
	}
}

func hashes(t *testing.T, node *anvil.Node, from, to uint64) []common.Hash {
	t.Helper()
	var hs []common.Hash
	for n := from; n <= to; n++ {
		h, err := node.Client().HeaderByNumber(ctx(t), new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatalf("header %d: %v", n, err)
		}
		hs = append(hs, h.Hash())
	}
	return hs
}

func TestTwoNodes(t *testing.T) {
	t.Parallel()
	a := chaintest.Anvil(t, anvil.Options{ChainID: 1001})
	b := chaintest.Anvil(t, anvil.Options{ChainID: 1002})
	if a.URL() == b.URL() {
		t.Fatalf("both nodes at %s", a.URL())
	}
	for node, want := range map[*anvil.Node]uint64{a: 1001, b: 1002} {
		id, err := node.Client().ChainID(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if id.Uint64() != want || node.ChainID() != want {
			t.Errorf("%s answers chain id %s (ChainID() %d), want %d", node.URL(), id, node.ChainID(), want)
		}
	}
	// Signed for its own chain id, a transfer lands on one node only.
	chaintest.Transfer(t, a, a.Accounts()[0].Key, stranger, ether(1))
	bal, err := b.Client().BalanceAt(ctx(t), stranger, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Sign() != 0 {
		t.Errorf("transfer on %s shows on %s: balance %s", a.URL(), b.URL(), bal)
	}
}

func TestSetBalanceAndBaseFee(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true})
	if err := node.SetBalance(ctx(t), stranger, big.NewInt(12345)); err != nil {
		t.Fatal(err)
	}
	bal, err := node.Client().BalanceAt(ctx(t), stranger, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Cmp(big.NewInt(12345)) != 0 {
		t.Errorf("balance %s after SetBalance 12345", bal)
	}

	fee := big.NewInt(7_000_000_000)
	if err := node.SetNextBlockBaseFee(ctx(t), fee); err != nil {
		t.Fatal(err)
	}
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	head, err := node.Client().HeaderByNumber(ctx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if head.BaseFee.Cmp(fee) != 0 {
		t.Errorf("base fee %s in the next block, want %s", head.BaseFee, fee)
	}
}
