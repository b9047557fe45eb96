package nodeerr_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/google/go-cmp/cmp"
	"github.com/holiman/uint256"

	"github.com/txfence/txfence/mev-router/nodeerr"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

var recipient = common.HexToAddress("0x000000000000000000000000000000000000bEEF")

// TestProvokedOnAnvil makes a real anvil refuse transactions for each
// reason it has, and checks what Classify makes of its real errors. Mining
// is off so that sent transactions stay pending, which "already known" and
// "replacement underpriced" need. Each case sends from its own dev
// account, so that no case sees another's nonces.
func TestProvokedOnAnvil(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true, Accounts: 10})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := node.Client()
	accounts := node.Accounts()
	chainID := new(big.Int).SetUint64(node.ChainID())

	head, err := client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	gwei := big.NewInt(params.GWei)
	// Ten times the base fee: valid for every case but the fee cap one.
	feeCap := new(big.Int).Mul(head.BaseFee, big.NewInt(10))

	transfer := func(nonce, gas uint64, value *big.Int) *types.DynamicFeeTx {
		return &types.DynamicFeeTx{
			ChainID:   chainID,
			Nonce:     nonce,
			GasTipCap: gwei,
			GasFeeCap: feeCap,
			Gas:       gas,
			To:        &recipient,
			Value:     value,
		}
	}
	sign := func(key *ecdsa.PrivateKey, signerChainID *big.Int, data types.TxData) *types.Transaction {
		t.Helper()
		tx, err := types.SignTx(types.NewTx(data), types.LatestSignerForChainID(signerChainID), key)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	send := func(tx *types.Transaction) error { return client.SendTransaction(ctx, tx) }
	mustSend := func(tx *types.Transaction) {
		t.Helper()
		if err := send(tx); err != nil {
			t.Fatalf("send %s: %v", tx.Hash(), err)
		}
	}

	tests := []struct {
		name string
		want nodeerr.Category
		// provoke returns the node's answer to the offending transaction,
		// sent from key.
		provoke func(key *ecdsa.PrivateKey) error
	}{
		{"nonce too low", nodeerr.NonceTooLow, func(key *ecdsa.PrivateKey) error {
			mustSend(sign(key, chainID, transfer(0, params.TxGas, big.NewInt(1))))
			if err := node.Mine(ctx, 1); err != nil {
				t.Fatal(err)
			}
			return send(sign(key, chainID, transfer(0, params.TxGas, big.NewInt(2))))
		}},
		{"already known", nodeerr.AlreadyKnown, func(key *ecdsa.PrivateKey) error {
			tx := sign(key, chainID, transfer(0, params.TxGas, big.NewInt(1)))
			mustSend(tx)
			return send(tx)
		}},
		{"replacement underpriced", nodeerr.ReplacementUnderpriced, func(key *ecdsa.PrivateKey) error {
			mustSend(sign(key, chainID, transfer(0, params.TxGas, big.NewInt(1))))
			// Same nonce and fees, so no price bump.
			return send(sign(key, chainID, transfer(0, params.TxGas, big.NewInt(2))))
		}},
		{"insufficient funds", nodeerr.InsufficientFunds, func(key *ecdsa.PrivateKey) error {
			tooMuch := new(big.Int).Mul(big.NewInt(1_000_000), chaintest.Ether) // the accounts hold 10,000
			return send(sign(key, chainID, transfer(0, params.TxGas, tooMuch)))
		}},
		{"intrinsic gas too low", nodeerr.IntrinsicGasTooLow, func(key *ecdsa.PrivateKey) error {
			return send(sign(key, chainID, transfer(0, params.TxGas-1, big.NewInt(1))))
		}},
		{"gas limit above the block's", nodeerr.GasLimitExceeded, func(key *ecdsa.PrivateKey) error {
			return send(sign(key, chainID, transfer(0, head.GasLimit+1, big.NewInt(1))))
		}},
		{"signed for another chain", nodeerr.InvalidSenderOrSignature, func(key *ecdsa.PrivateKey) error {
			other := big.NewInt(1)
			data := transfer(0, params.TxGas, big.NewInt(1))
			data.ChainID = other
			return send(sign(key, other, data))
		}},
		{"signature that recovers no key", nodeerr.InvalidSenderOrSignature, func(key *ecdsa.PrivateKey) error {
			// r = 0 is outside the curve's scalar range: no public key
			// recovers from it.
			sig := make([]byte, 65)
			sig[63] = 1 // s = 1
			tx, err := types.NewTx(transfer(0, params.TxGas, big.NewInt(1))).WithSignature(types.LatestSignerForChainID(chainID), sig)
			if err != nil {
				t.Fatal(err)
			}
			return send(tx)
		}},
		{"tip above the fee cap", nodeerr.Rejected, func(key *ecdsa.PrivateKey) error {
			data := transfer(0, params.TxGas, big.NewInt(1))
			data.GasTipCap = new(big.Int).Add(feeCap, big.NewInt(1))
			return send(sign(key, chainID, data))
		}},
		// Last: the raised base fee holds for the pending block, and the
		// cases above must not see it.
		{"fee cap below the base fee", nodeerr.FeeCapTooLow, func(key *ecdsa.PrivateKey) error {
			if err := node.SetNextBlockBaseFee(ctx, new(big.Int).Mul(feeCap, big.NewInt(2))); err != nil {
				t.Fatal(err)
			}
			return send(sign(key, chainID, transfer(0, params.TxGas, big.NewInt(1))))
		}},
	}
	if len(tests) > len(accounts) {
		t.Fatalf("%d cases, %d accounts", len(tests), len(accounts))
	}

	want := make(map[string]nodeerr.Category, len(tests))
	got := make(map[string]nodeerr.Category, len(tests))
	answers := make(map[string]string, len(tests))
	for i, tt := range tests {
		err := tt.provoke(accounts[i].Key)
		want[tt.name] = tt.want
		got[tt.name] = nodeerr.Classify(err)
		answers[tt.name] = "<accepted>"
		if err != nil {
			answers[tt.name] = err.Error()
		}
	}
	for _, tt := range tests {
		t.Logf("%s: anvil %s answered %q", tt.name, anvil.Version, answers[tt.name])
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Classify of anvil's answers (-want +got):\n%s", diff)
	}
}

// TestAnvilAnswersAtSend records what a real anvil answers to the refusals
// the categories TxTypeNotSupported and Malformed were made for, and to a
// reverting transaction while it automines. It runs a Cancun chain, so
// that an EIP-7702 transaction is of a type the node does not take yet.
//
// anvil accepts a reverting transaction and mines it (receipt status 0):
// unlike Hardhat, it reports no revert at send, so ExecutionReverted is
// never its answer to eth_sendRawTransaction; the case is here to notice
// should a release change that.
func TestAnvilAnswersAtSend(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{ExtraArgs: []string{"--hardfork", "cancun"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := node.Client()
	accounts := node.Accounts()
	chainID := new(big.Int).SetUint64(node.ChainID())
	head, err := client.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tip := big.NewInt(params.GWei)
	feeCap := new(big.Int).Mul(head.BaseFee, big.NewInt(10))
	sign := func(key *ecdsa.PrivateKey, data types.TxData) *types.Transaction {
		t.Helper()
		tx, err := types.SignTx(types.NewTx(data), types.LatestSignerForChainID(chainID), key)
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	sendRaw := func(raw []byte) error {
		var hash common.Hash
		return node.RPC().CallContext(ctx, &hash, "eth_sendRawTransaction", hexutil.Bytes(raw))
	}
	u256 := func(b *big.Int) *uint256.Int { return uint256.MustFromBig(b) }
	// reverts is the init code PUSH1 0 PUSH1 0 REVERT: its creation reverts.
	reverts := common.FromHex("0x60006000fd")
	var reverting *types.Transaction

	tests := []struct {
		name    string
		want    nodeerr.Category // "": accepted
		provoke func(key *ecdsa.PrivateKey) error
	}{
		{"a type byte it does not know", nodeerr.Malformed, func(key *ecdsa.PrivateKey) error {
			raw, err := sign(key, &types.DynamicFeeTx{ChainID: chainID, GasTipCap: tip, GasFeeCap: feeCap, Gas: params.TxGas, To: &recipient}).MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			raw[0] = 0x05
			return sendRaw(raw)
		}},
		{"bytes that are no transaction", nodeerr.Malformed, func(*ecdsa.PrivateKey) error {
			return sendRaw([]byte{0xc3, 0x01, 0x02, 0x03})
		}},
		{"no bytes", nodeerr.Malformed, func(*ecdsa.PrivateKey) error { return sendRaw(nil) }},
		{"EIP-7702 before Prague", nodeerr.TxTypeNotSupported, func(key *ecdsa.PrivateKey) error {
			auth, err := types.SignSetCode(key, types.SetCodeAuthorization{ChainID: *u256(chainID), Address: recipient, Nonce: 1})
			if err != nil {
				t.Fatal(err)
			}
			return client.SendTransaction(ctx, sign(key, &types.SetCodeTx{ChainID: u256(chainID), GasTipCap: u256(tip), GasFeeCap: u256(feeCap),
				Gas: 100_000, To: recipient, AuthList: []types.SetCodeAuthorization{auth}}))
		}},
		{"a creation that reverts", "", func(key *ecdsa.PrivateKey) error {
			reverting = sign(key, &types.DynamicFeeTx{ChainID: chainID, GasTipCap: tip, GasFeeCap: feeCap, Gas: 100_000, Data: reverts})
			return client.SendTransaction(ctx, reverting)
		}},
	}
	want := make(map[string]nodeerr.Category, len(tests))
	got := make(map[string]nodeerr.Category, len(tests))
	for i, tt := range tests {
		err := tt.provoke(accounts[i].Key)
		want[tt.name], got[tt.name] = tt.want, nodeerr.Classify(err)
		t.Logf("%s: anvil %s answered %v", tt.name, anvil.Version, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Classify of anvil's answers (-want +got):\n%s", diff)
	}
	if r := chaintest.WaitReceipt(t, node, reverting.Hash()); r.Status != types.ReceiptStatusFailed {
		t.Errorf("the reverting creation was mined with status %d, want %d", r.Status, types.ReceiptStatusFailed)
	}
}
