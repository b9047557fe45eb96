package token_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/ledgertest/token"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// The token keeps balances balanceOf reads at any block, logs each
// movement as the Transfer the ledger books, refuses a transfer beyond the
// balance and a mint by anyone but its deployer.
func TestTokenMintsTransfersAndLogs(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	accts := node.Accounts()
	owner, alice, bob := accts[0], accts[1], accts[2]

	tok := token.Deploy(t, node, owner.Key)
	minted := token.Mint(t, node, owner.Key, tok, alice.Address, big.NewInt(1000))
	requireTransferLog(t, minted, tok, common.Address{}, alice.Address, 1000)

	sent := token.Transfer(t, node, alice.Key, tok, bob.Address, big.NewInt(300))
	if sent.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("transfer reverted")
	}
	requireTransferLog(t, sent, tok, alice.Address, bob.Address, 300)

	for _, c := range []struct {
		who   common.Address
		block common.Hash
		want  int64
	}{
		{alice.Address, minted.BlockHash, 1000},
		{bob.Address, minted.BlockHash, 0},
		{alice.Address, sent.BlockHash, 700},
		{bob.Address, sent.BlockHash, 300},
	} {
		if got := token.BalanceOf(t, node, tok, c.who, c.block); got.Cmp(big.NewInt(c.want)) != 0 {
			t.Errorf("balanceOf(%s) at %s = %s, want %d", c.who, c.block, got, c.want)
		}
	}

	if r := token.Transfer(t, node, bob.Key, tok, alice.Address, big.NewInt(301)); r.Status != types.ReceiptStatusFailed || len(r.Logs) != 0 {
		t.Errorf("a transfer beyond the balance: status %d, %d logs; want a revert without logs", r.Status, len(r.Logs))
	}
	data := token.TransferCalldata(alice.Address, big.NewInt(1))
	data[0] ^= 0xff // not transfer's selector: no function, no fallback
	if r := chaintest.SendCall(t, node, bob.Key, chaintest.Call{To: &tok, Data: data, Gas: 100_000}); r.Status != types.ReceiptStatusFailed {
		t.Errorf("a call of no function succeeded")
	}
	strangerMint := chaintest.SendCall(t, node, alice.Key, chaintest.Call{To: &tok, Data: mintCalldata(t, alice.Address), Gas: 100_000})
	if strangerMint.Status != types.ReceiptStatusFailed {
		t.Errorf("a mint by someone other than the deployer succeeded")
	}
	head, err := node.Client().HeaderByNumber(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := token.BalanceOf(t, node, tok, alice.Address, head.Hash()); got.Int64() != 700 {
		t.Errorf("alice's balance after the refused calls: %s, want 700", got)
	}
}

// mintCalldata is mint(to, 1), packed by hand: the package packs only for
// the deployer.
func mintCalldata(t *testing.T, to common.Address) []byte {
	t.Helper()
	selector := crypto.Keccak256([]byte("mint(address,uint256)"))[:4]
	return append(append(selector, common.LeftPadBytes(to.Bytes(), 32)...), common.LeftPadBytes([]byte{1}, 32)...)
}

func requireTransferLog(t *testing.T, r *types.Receipt, tok, from, to common.Address, amount int64) {
	t.Helper()
	if len(r.Logs) != 1 {
		t.Fatalf("%d logs, want one Transfer", len(r.Logs))
	}
	l := r.Logs[0]
	want := []common.Hash{booking.TransferTopic, common.BytesToHash(from.Bytes()), common.BytesToHash(to.Bytes())}
	if l.Address != tok || len(l.Topics) != 3 || l.Topics[0] != want[0] || l.Topics[1] != want[1] || l.Topics[2] != want[2] ||
		new(big.Int).SetBytes(l.Data).Cmp(big.NewInt(amount)) != 0 {
		t.Errorf("log %+v, want Transfer(%s, %s, %d) of %s", l, from, to, amount, tok)
	}
}
