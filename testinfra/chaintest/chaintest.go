// Package chaintest gives tests a private anvil node and the few chain
// chores every chain test repeats: sending value from a dev account and
// waiting for the receipt.
//
// When anvil cannot be had the test fails if CI=true or
// TXFENCE_TEST_STRICT=1 (set by make test), and is skipped with the reason
// otherwise, as with PostgreSQL in pgtest.
package chaintest

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// Ether is 10^18 wei, for readable amounts: new(big.Int).Mul(big.NewInt(3), chaintest.Ether).
var Ether = big.NewInt(params.Ether)

// waitTimeout bounds every wait here. Anvil answers in milliseconds; the
// margin is for a loaded two-core CI machine running tests in parallel.
const waitTimeout = 30 * time.Second

// Anvil starts a node with opts, stopped when t ends. Give each test its
// own node: they start in well under a second, and tests that mine,
// reorg or change balances cannot then see each other.
func Anvil(t testing.TB, opts anvil.Options) *anvil.Node {
	t.Helper()
	// Longer than Start's own 30 s: the first use may install anvil.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node, err := anvil.Start(ctx, opts)
	if err != nil {
		pgtest.Unavailable(t, "anvil", err)
	}
	t.Cleanup(func() {
		if err := node.Stop(); err != nil {
			t.Errorf("stop anvil: %v", err)
		}
	})
	return node
}

// SendTransfer signs a value transfer from the account of from to to and
// sends it, without waiting for it to be mined (with automine off it will
// not be). The nonce is the sender's pending nonce, so several transfers in
// a row queue up in order.
func SendTransfer(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, to common.Address, wei *big.Int) *types.Transaction {
	t.Helper()
	return send(t, node, from, Call{To: &to, Value: wei, Gas: params.TxGas})
}

// send signs c at the sender's pending nonce and sends it.
func send(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, c Call) *types.Transaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sender := crypto.PubkeyToAddress(from.PublicKey)
	nonce, err := node.Client().PendingNonceAt(ctx, sender)
	if err != nil {
		t.Fatalf("pending nonce of %s: %v", sender, err)
	}
	tx := SignCall(t, node, from, c, nonce)
	if err := node.Client().SendTransaction(ctx, tx); err != nil {
		t.Fatalf("send %s from %s (nonce %d): %v", tx.Hash(), sender, nonce, err)
	}
	return tx
}

// SignTransfer signs, without sending, an EIP-1559 value transfer at nonce
// whose fee cap is twice the current base fee plus the suggested tip.
func SignTransfer(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, to common.Address, wei *big.Int, nonce uint64) *types.Transaction {
	t.Helper()
	return SignCall(t, node, from, Call{To: &to, Value: wei, Gas: params.TxGas}, nonce)
}

// Call is a transaction to sign: a call of To with Data, or a contract
// creation with Data as its init code when To is nil.
type Call struct {
	To    *common.Address
	Value *big.Int
	Data  []byte
	// Gas is the gas limit, set by the test: a call meant to revert
	// cannot be estimated.
	Gas uint64
}

// SignCall signs c, without sending it, as an EIP-1559 transaction at
// nonce whose fee cap is twice the current base fee plus the suggested tip.
func SignCall(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, c Call, nonce uint64) *types.Transaction {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	client := node.Client()
	tip, err := client.SuggestGasTipCap(ctx)
	if err != nil {
		t.Fatalf("suggest gas tip: %v", err)
	}
	head, err := client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatalf("head header: %v", err)
	}
	// Twice the base fee survives several full blocks of base fee rises
	// while the transaction waits in the pool.
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	chainID := new(big.Int).SetUint64(node.ChainID())
	value := c.Value
	if value == nil {
		value = new(big.Int)
	}
	tx, err := types.SignNewTx(from, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID:   chainID,
		Nonce:     nonce,
		GasTipCap: tip,
		GasFeeCap: feeCap,
		Gas:       c.Gas,
		To:        c.To,
		Value:     value,
		Data:      c.Data,
	})
	if err != nil {
		t.Fatalf("sign transaction: %v", err)
	}
	return tx
}

// SendCall signs c at the sender's pending nonce, sends it and waits for
// its receipt, whatever its status. It needs a node that mines.
func SendCall(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, c Call) *types.Receipt {
	t.Helper()
	return WaitReceipt(t, node, send(t, node, from, c).Hash())
}

// Transfer is SendTransfer, then WaitReceipt, and fails the test unless the
// transfer succeeded. It needs a node that mines (automine or BlockTime).
func Transfer(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, to common.Address, wei *big.Int) *types.Receipt {
	t.Helper()
	tx := SendTransfer(t, node, from, to, wei)
	r := WaitReceipt(t, node, tx.Hash())
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("transfer %s failed in block %d", tx.Hash(), r.BlockNumber)
	}
	return r
}

// WaitReceipt polls for the receipt of a transaction until it is mined,
// failing the test after 30 s.
func WaitReceipt(t testing.TB, node *anvil.Node, hash common.Hash) *types.Receipt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		r, err := node.Client().TransactionReceipt(ctx, hash)
		switch {
		case err == nil:
			return r
		case ctx.Err() != nil:
			t.Fatalf("no receipt for %s within %s: is the node mining?", hash, waitTimeout)
		case !errors.Is(err, ethereum.NotFound):
			t.Fatalf("receipt of %s: %v", hash, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ClosedURL is an HTTP URL on a loopback port nothing listens on: a node,
// or a service, that is gone.
func ClosedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}
