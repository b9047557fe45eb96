package signer

import (
	"math/big"
	"slices"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/shared/errs"
)

func testTx(nonce uint64) (*types.Transaction, types.Signer) {
	chainID := big.NewInt(31337)
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	tx := types.NewTx(&types.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, To: &to, Value: big.NewInt(1), Gas: 21000,
		GasFeeCap: big.NewInt(30e9), GasTipCap: big.NewInt(1e9),
	})
	return tx, types.LatestSignerForChainID(chainID)
}

// TestDestroyedKeyCannotSign: once a backend drops and destroys a key, a
// caller still holding it gets no signature, only an error a caller
// reports as the key backend being unavailable; and the scalar's own
// memory reads zero.
func TestDestroyedKeyCannotSign(t *testing.T) {
	t.Parallel()
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the test looks at the memory Destroy must overwrite
	words := priv.D.Bits()
	k, err := NewKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	tx, chainSigner := testTx(0)
	if _, err := k.signTx(tx, chainSigner); err != nil {
		t.Fatalf("sign before Destroy: %v", err)
	}
	if k.Destroyed() {
		t.Fatal("a fresh key reports itself destroyed")
	}
	k.Destroy()
	if !k.Destroyed() {
		t.Error("Destroyed is false after Destroy")
	}
	signed, err := k.signTx(tx, chainSigner)
	if err == nil || signed != nil {
		t.Fatal("a destroyed key signed")
	}
	if !errs.Is(err, errs.Unavailable) {
		t.Errorf("signing with a destroyed key: %v, want kind Unavailable", err)
	}
	if !slices.Equal(words, make([]big.Word, len(words))) {
		t.Error("the private scalar's words still hold the key after Destroy")
	}
	k.Destroy() // twice is harmless
}

// TestDestroyWhileSigning drops a key while requests sign with it, as a
// Vault re-check does: each signature either completes with the whole key
// (it recovers to the key's address) or is refused; none is made from a
// half-zeroed scalar. Run with -race to see Destroy wait for signers.
func TestDestroyWhileSigning(t *testing.T) {
	t.Parallel()
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	addr := k.Address()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			<-start
			for n := uint64(0); ; n++ {
				tx, chainSigner := testTx(uint64(g)<<32 | n)
				signed, err := k.signTx(tx, chainSigner)
				if err != nil {
					return // destroyed
				}
				if from, err := types.Sender(chainSigner, signed); err != nil || from != addr {
					t.Errorf("a signature made while the key was destroyed recovers to %s (%v), want %s", from.Hex(), err, addr.Hex())
					return
				}
			}
		})
	}
	close(start)
	k.Destroy()
	wg.Wait()
}
