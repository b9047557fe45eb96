package chaintest_test

import (
	"context"
	"errors"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

func frontClient(t *testing.T, f *chaintest.Front) *ethclient.Client {
	t.Helper()
	c, err := rpc.DialOptions(ctx(t), f.URL, rpc.WithHTTPClient(&http.Client{Timeout: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return ethclient.NewClient(c)
}

func TestALaggingFrontKnowsNothingAboveItsHead(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	from := node.Accounts()[0]
	early := chaintest.Transfer(t, node, from.Key, stranger, ether(1)) // block 1
	if err := node.Mine(ctx(t), 12); err != nil {
		t.Fatal(err)
	}
	late := chaintest.Transfer(t, node, from.Key, stranger, ether(2)) // block 14
	f := chaintest.NewFront(t, node.URL())
	f.Lag(10)
	c := frontClient(t, f)
	if head, err := c.BlockNumber(ctx(t)); err != nil || head != 4 {
		t.Errorf("head %d, %v; want 4 (14 less 10)", head, err)
	}
	if b, err := c.BlockByNumber(ctx(t), big.NewInt(5)); !errors.Is(err, ethereum.NotFound) {
		t.Errorf("block 5: %v, %v; want not found", b, err)
	}
	if _, err := c.TransactionReceipt(ctx(t), late.TxHash); !errors.Is(err, ethereum.NotFound) {
		t.Errorf("the receipt of block 14: %v; want not found", err)
	}
	if r, err := c.TransactionReceipt(ctx(t), early.TxHash); err != nil || r.BlockNumber.Uint64() != 1 {
		t.Errorf("the receipt of block 1: %v, %v", r, err)
	}
	if bal, err := c.BalanceAt(ctx(t), stranger, nil); err != nil || bal.Cmp(ether(1)) != 0 {
		t.Errorf("latest balance %v, %v; want 1 ether (block 4's)", bal, err)
	}
	if n, err := c.PendingNonceAt(ctx(t), from.Address); err != nil || n != 1 {
		t.Errorf("pending nonce %d, %v; want 1 (block 4's)", n, err)
	}
	if _, err := c.BalanceAt(ctx(t), stranger, big.NewInt(9)); err == nil {
		t.Error("a balance above the head was answered")
	}
	f.Heal()
	if head, err := c.BlockNumber(ctx(t)); err != nil || head != 14 {
		t.Errorf("healed: head %d, %v; want 14", head, err)
	}
	if f.Calls()["eth_blockNumber"] != 2 || f.Total() != 8 {
		t.Errorf("calls %v", f.Calls())
	}
}

func TestAFrontMisbehaves(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	f := chaintest.NewFront(t, node.URL())
	c := frontClient(t, f)
	f.RateLimit(3 * time.Second)
	var httpErr rpc.HTTPError
	if _, err := c.BlockNumber(ctx(t)); !errors.As(err, &httpErr) || httpErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("rate limited: %v, want a 429", err)
	}
	f.Hang()
	short, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	if _, err := c.BlockNumber(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hung: %v, want the caller's deadline", err)
	}
	f.Heal()
	if _, err := c.BlockNumber(ctx(t)); err != nil {
		t.Errorf("healed: %v", err)
	}
	f.Kill()
	if _, err := c.BlockNumber(ctx(t)); err == nil {
		t.Error("killed, and it answered")
	}
	if most := f.MostIn(time.Minute); most != 3 {
		t.Errorf("MostIn %d, want the 3 calls taken before the kill", most)
	}
}
