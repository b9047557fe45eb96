package signer

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/signer-zonec/ethtx"
)

func testTx(nonce uint64) ethtx.Tx {
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	return ethtx.Tx{
		Type: ethtx.DynamicFee, ChainID: 31337, Nonce: nonce, To: &to, Value: big.NewInt(1), Gas: 21000,
		MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9),
	}
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
	tx := testTx(0)
	if _, err := k.signTx(tx); err != nil {
		t.Fatalf("sign before Destroy: %v", err)
	}
	if k.Destroyed() {
		t.Fatal("a fresh key reports itself destroyed")
	}
	k.Destroy()
	if !k.Destroyed() {
		t.Error("Destroyed is false after Destroy")
	}
	signed, err := k.signTx(tx)
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

// newTestKey is a fresh random key.
func newTestKey(t *testing.T) *Key {
	t.Helper()
	priv, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k, err := NewKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestDestroyWhileSigning drops a key while requests sign with it, as a
// Vault re-check does: each signature either completes with the whole key
// (it recovers to the key's address) or is refused; none is made from a
// half-zeroed scalar. Run with -race to see Destroy wait for signers.
func TestDestroyWhileSigning(t *testing.T) {
	t.Parallel()
	k := newTestKey(t)
	addr := k.Address()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			<-start
			for n := uint64(0); ; n++ {
				signed, err := k.signTx(testTx(uint64(g)<<32 | n))
				if err != nil {
					return // destroyed
				}
				// Decode recovers the sender from the raw bytes afresh.
				decoded, err := ethtx.Decode(signed.Raw())
				if err != nil || decoded.Sender() != addr {
					t.Errorf("a signature made while the key was destroyed does not recover to %s (%v)", addr.Hex(), err)
					return
				}
			}
		})
	}
	close(start)
	k.Destroy()
	wg.Wait()
}

// TestCheckSignatureRefusesWhatIsNotTheRequest: the last check before a
// signature leaves signerd refuses one by another key, one of another
// transaction, and bytes that do not decode.
func TestCheckSignatureRefusesWhatIsNotTheRequest(t *testing.T) {
	t.Parallel()
	k, other := newTestKey(t), newTestKey(t)
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	r := &Request{TxID: "tx-1", ChainID: 31337, From: k.Address(), Nonce: 5, Type: DynamicFee, To: &to,
		Value: big.NewInt(1), Gas: 21000, MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9)}
	sign := func(k *Key, edit func(*ethtx.Tx)) []byte {
		tx := r.Transaction()
		edit(&tx)
		signed, err := k.signTx(tx)
		if err != nil {
			t.Fatal(err)
		}
		return signed.Raw()
	}
	good := sign(k, func(*ethtx.Tx) {})
	if err := checkSignature(good, r); err != nil {
		t.Fatalf("the request's own signature: %v", err)
	}
	for name, raw := range map[string][]byte{
		"another key":   sign(other, func(*ethtx.Tx) {}),
		"another nonce": sign(k, func(tx *ethtx.Tx) { tx.Nonce++ }),
		"another chain": sign(k, func(tx *ethtx.Tx) { tx.ChainID = 1 }),
		"another value": sign(k, func(tx *ethtx.Tx) { tx.Value = big.NewInt(2) }),
		"as legacy": sign(k, func(tx *ethtx.Tx) {
			tx.Type, tx.GasPrice, tx.MaxFeePerGas, tx.MaxPriorityFeePerGas = ethtx.Legacy, tx.MaxFeePerGas, nil, nil
		}),
		"truncated":            good[:len(good)-1],
		"with a trailing byte": append(slices.Clone(good), 0),
	} {
		if err := checkSignature(raw, r); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}

func TestParseHexKeyNeverQuotesInput(t *testing.T) {
	t.Parallel()
	const knownKey = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
	for _, in := range []string{"", "zz", strings.Repeat("g", 64), "0x" + strings.Repeat("0", 64), knownKey + "00"} {
		_, err := ParseHexKey([]byte(in))
		if err == nil {
			t.Errorf("%q parsed", in)
			continue
		}
		if in != "" && strings.Contains(err.Error(), in) {
			t.Errorf("error quotes its input: %v", err)
		}
	}
	in := []byte("  0x" + knownKey + "\r\n")
	priv, err := ParseHexKey(in)
	if err != nil || hex.EncodeToString(crypto.FromECDSA(priv)) != knownKey {
		t.Errorf("valid key: %v", err)
	}
	if !bytes.Equal(in, make([]byte, len(in))) {
		t.Error("the input was not cleared")
	}
}
