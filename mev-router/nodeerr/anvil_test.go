package nodeerr_test

import (
	"context"
	"crypto/ecdsa"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/nodeerr"
	"github.com/txfence/txfence/shared/anvil"
	"github.com/txfence/txfence/shared/chaintest"
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
