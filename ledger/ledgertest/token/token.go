// Package token deploys and drives a real ERC-20 (Token.sol) on a test
// anvil, so the ledger's tests book token movements from real Transfer
// logs and reconcile them with a real balanceOf.
//
// Token.sol is compiled by generate.sh into token.gen.go.
package token

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// Name and Symbol are what Deploy names the token.
const (
	Name   = "Test Token"
	Symbol = "TEST"
)

// contract is Token's ABI, parsed once.
var contract = func() abi.ABI {
	a, err := abi.JSON(strings.NewReader(abiJSON))
	if err != nil {
		panic("token: the generated ABI does not parse: " + err.Error())
	}
	return a
}()

// Gas limits, set rather than estimated: a call meant to revert cannot be
// estimated, and fixed limits keep the tests' fees predictable.
const (
	deployGas = 2_000_000
	callGas   = 100_000
)

// callTimeout bounds an eth_call, as chaintest bounds its waits.
const callTimeout = 30 * time.Second

// Deploy deploys a Token from deployer, who alone may mint, and returns
// its address. It needs a node that mines.
func Deploy(t testing.TB, node *anvil.Node, deployer *ecdsa.PrivateKey) common.Address {
	t.Helper()
	args, err := contract.Pack("", Name, Symbol)
	if err != nil {
		t.Fatalf("pack the token's constructor: %v", err)
	}
	r := chaintest.SendCall(t, node, deployer, chaintest.Call{Data: append(common.FromHex(creationCode), args...), Gas: deployGas})
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("deploy the token: reverted in block %d", r.BlockNumber)
	}
	return r.ContractAddress
}

// Mint mints amount of token to to, from owner (the deployer), and waits
// for it to succeed.
func Mint(t testing.TB, node *anvil.Node, owner *ecdsa.PrivateKey, token, to common.Address, amount *big.Int) *types.Receipt {
	t.Helper()
	data, err := contract.Pack("mint", to, amount)
	if err != nil {
		t.Fatalf("pack mint: %v", err)
	}
	r := chaintest.SendCall(t, node, owner, chaintest.Call{To: &token, Data: data, Gas: callGas})
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("mint %s of %s to %s: reverted in block %d", amount, token, to, r.BlockNumber)
	}
	return r
}

// Transfer sends amount of token from the holder of from to to and returns
// the receipt, whatever its status: a transfer beyond the balance reverts.
func Transfer(t testing.TB, node *anvil.Node, from *ecdsa.PrivateKey, token, to common.Address, amount *big.Int) *types.Receipt {
	t.Helper()
	return chaintest.SendCall(t, node, from, chaintest.Call{To: &token, Data: TransferCalldata(to, amount), Gas: callGas})
}

// TransferCalldata is the input of transfer(to, amount), for a test that
// signs or sends the call itself.
func TransferCalldata(to common.Address, amount *big.Int) []byte {
	data, err := contract.Pack("transfer", to, amount)
	if err != nil {
		panic("token: pack transfer: " + err.Error()) // only a nil amount gets here
	}
	return data
}

// BalanceOf is who's balance of token at block blockHash (eth_call pinned
// by hash, EIP-1898).
func BalanceOf(t testing.TB, node *anvil.Node, token, who common.Address, blockHash common.Hash) *big.Int {
	t.Helper()
	data, err := contract.Pack("balanceOf", who)
	if err != nil {
		t.Fatalf("pack balanceOf: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var out hexutil.Bytes
	call := map[string]any{"to": token, "data": hexutil.Bytes(data)}
	if err := node.RPC().CallContext(ctx, &out, "eth_call", call, rpc.BlockNumberOrHashWithHash(blockHash, true)); err != nil {
		t.Fatalf("balanceOf(%s) of token %s at %s: %v", who, token, blockHash, err)
	}
	values, err := contract.Unpack("balanceOf", out)
	if err != nil {
		t.Fatalf("balanceOf(%s) of token %s at %s: %v", who, token, blockHash, err)
	}
	return values[0].(*big.Int)
}
