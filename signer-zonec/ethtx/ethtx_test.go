package ethtx

import (
	"bytes"
	"crypto/ecdsa"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/go-cmp/cmp"
)

// go-ethereum's core/types is the reference these tests hold ethtx to. Test
// files may import it: it is not linked into the signer's binaries.

var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// compareTx compares transactions by value; an empty and a nil Data are
// the same transaction (bytes.Equal, which also spares cmp a reflective
// walk of large data).
var compareTx = cmp.Options{
	cmp.Comparer(func(a, b *big.Int) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.Cmp(b) == 0
	}),
	cmp.Comparer(bytes.Equal),
}

// randomKey is a key drawn from rng, so that a failure reproduces.
func randomKey(t testing.TB, rng *rand.Rand) *ecdsa.PrivateKey {
	t.Helper()
	for {
		var b [32]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if k, err := crypto.ToECDSA(b[:]); err == nil {
			return k
		}
	}
}

// randomAmount favours the values at RLP's length boundaries and the
// ends of uint256.
func randomAmount(rng *rand.Rand) *big.Int {
	switch rng.IntN(12) {
	case 0:
		return new(big.Int)
	case 1:
		return big.NewInt(1)
	case 2:
		return big.NewInt(int64(126 + rng.IntN(4))) // 0x7e..0x81: one byte, or a string of one
	case 3:
		return new(big.Int).Set(maxUint256)
	case 4:
		return new(big.Int).Lsh(big.NewInt(1), uint(rng.IntN(256)))
	default:
		b := make([]byte, 1+rng.IntN(32))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return new(big.Int).SetBytes(b)
	}
}

// randomUint64 favours zero, the single-byte encodings and the top.
func randomUint64(rng *rand.Rand) uint64 {
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return uint64(rng.IntN(200))
	case 2:
		return ^uint64(0)
	default:
		return rng.Uint64() >> rng.IntN(64)
	}
}

// randomChainID covers real chains and ids whose EIP-155 v exceeds 64
// bits.
func randomChainID(rng *rand.Rand) uint64 {
	known := []uint64{1, 10, 56, 137, 8453, 31337, 11155111, 1<<32 - 1, 1<<63 - 1, 1 << 63, ^uint64(0)}
	if rng.IntN(2) == 0 {
		return known[rng.IntN(len(known))]
	}
	return 1 + rng.Uint64N(^uint64(0))
}

// randomData covers empty data, single bytes (below 0x80 RLP writes them
// as themselves), the 55/56-byte header boundary and large payloads.
func randomData(rng *rand.Rand) []byte {
	var n int
	switch rng.IntN(8) {
	case 0:
		return nil
	case 1:
		n = 1
	case 2:
		n = 54 + rng.IntN(4)
	case 3:
		n = 1<<16 + rng.IntN(3)
	default:
		n = rng.IntN(600)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func randomTx(rng *rand.Rand) Tx {
	tx := Tx{
		ChainID: randomChainID(rng),
		Nonce:   randomUint64(rng),
		Gas:     randomUint64(rng),
		Value:   randomAmount(rng),
		Data:    randomData(rng),
	}
	if rng.IntN(4) != 0 {
		var to common.Address
		for i := range to {
			to[i] = byte(rng.Uint32())
		}
		tx.To = &to
	}
	if rng.IntN(2) == 0 {
		tx.Type, tx.GasPrice = Legacy, randomAmount(rng)
	} else {
		tx.Type, tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = DynamicFee, randomAmount(rng), randomAmount(rng)
	}
	return tx
}

// reference is tx as go-ethereum builds it, with the signer that
// LatestSignerForChainID picks for its chain.
func reference(tx Tx) (*types.Transaction, types.Signer) {
	chainID := new(big.Int).SetUint64(tx.ChainID)
	var inner types.TxData
	switch tx.Type {
	case Legacy:
		inner = &types.LegacyTx{Nonce: tx.Nonce, GasPrice: tx.GasPrice, Gas: tx.Gas, To: tx.To, Value: tx.Value, Data: tx.Data}
	case DynamicFee:
		inner = &types.DynamicFeeTx{ChainID: chainID, Nonce: tx.Nonce, GasTipCap: tx.MaxPriorityFeePerGas,
			GasFeeCap: tx.MaxFeePerGas, Gas: tx.Gas, To: tx.To, Value: tx.Value, Data: tx.Data}
	default:
		panic("no reference for this type")
	}
	return types.NewTx(inner), types.LatestSignerForChainID(chainID)
}

// TestMatchesGoEthereum signs random transactions of both types with ethtx
// and with go-ethereum's core/types and requires the same bytes
// throughout: signing hash, unsigned encoding (request digests hash it),
// raw signed transaction, transaction hash and recovered sender; then
// decodes the raw transaction back to the same fields and sender.
func TestMatchesGoEthereum(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	n := 1500
	if testing.Short() {
		n = 200
	}
	for i := range n {
		tx := randomTx(rng)
		key := randomKey(t, rng)
		addr := crypto.PubkeyToAddress(key.PublicKey)
		ref, refSigner := reference(tx)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("tx %d (type %d, chain %d, nonce %d, to %v, %d data bytes): "+format,
				append([]any{i, tx.Type, tx.ChainID, tx.Nonce, tx.To, len(tx.Data)}, args...)...)
		}

		hash, err := tx.SigningHash()
		if err != nil {
			fail("signing hash: %v", err)
		}
		if want := refSigner.Hash(ref); hash != want {
			fail("signing hash %s, go-ethereum's %s", hash, want)
		}
		unsigned, err := tx.EncodeUnsigned()
		if err != nil {
			fail("unsigned encoding: %v", err)
		}
		if want, err := ref.MarshalBinary(); err != nil || !bytes.Equal(unsigned, want) {
			fail("unsigned encoding %x, go-ethereum's %x (%v)", unsigned, want, err)
		}

		signed, err := tx.Sign(key)
		if err != nil {
			fail("sign: %v", err)
		}
		refSigned, err := types.SignTx(ref, refSigner, key)
		if err != nil {
			fail("go-ethereum sign: %v", err)
		}
		wantRaw, err := refSigned.MarshalBinary()
		if err != nil {
			fail("go-ethereum encode: %v", err)
		}
		if !bytes.Equal(signed.Raw(), wantRaw) {
			fail("raw transaction\n %x\ngo-ethereum's\n %x", signed.Raw(), wantRaw)
		}
		if signed.Hash() != refSigned.Hash() {
			fail("hash %s, go-ethereum's %s", signed.Hash(), refSigned.Hash())
		}
		refFrom, err := types.Sender(refSigner, refSigned)
		if err != nil || refFrom != addr || signed.Sender() != addr {
			fail("sender %s, go-ethereum's %s (%v), key's %s", signed.Sender(), refFrom, err, addr)
		}

		decoded, err := Decode(wantRaw)
		if err != nil {
			fail("decode go-ethereum's raw transaction: %v", err)
		}
		if diff := cmp.Diff(tx, decoded.Tx(), compareTx); diff != "" {
			fail("decoded fields differ (-signed +decoded):\n%s", diff)
		}
		if decoded.Sender() != addr || decoded.Hash() != refSigned.Hash() || !bytes.Equal(decoded.Raw(), wantRaw) {
			fail("decoded: sender %s, hash %s", decoded.Sender(), decoded.Hash())
		}
	}
}

// TestSigningIsDeterministic: RFC 6979 nonces make a transaction signed
// twice by one key the same bytes, which lets signerd answer a repeated
// request with the signature it already gave.
func TestSigningIsDeterministic(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		tx, key := randomTx(rng), randomKey(t, rng)
		a, err := tx.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := tx.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Raw(), b.Raw()) {
			t.Fatalf("two signatures of one transaction differ:\n%x\n%x", a.Raw(), b.Raw())
		}
	}
}

// TestSignedIsACopy: what Sign returns does not change when the caller
// edits the transaction it signed, or the bytes Raw gave it.
func TestSignedIsACopy(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	tx := randomTx(rng)
	tx.Data = []byte{1, 2, 3}
	to := common.Address{1}
	tx.To = &to
	signed, err := tx.Sign(randomKey(t, rng))
	if err != nil {
		t.Fatal(err)
	}
	raw := signed.Raw()
	want := signed.Tx()
	tx.Value.Add(tx.Value, big.NewInt(1))
	tx.Data[0] = 9
	to[0] = 9
	raw[0] ^= 0xff
	got := signed.Tx()
	got.Value.SetInt64(-1)
	if diff := cmp.Diff(want, signed.Tx(), compareTx); diff != "" {
		t.Errorf("the signed transaction changed with its caller's copy (-before +after):\n%s", diff)
	}
	if again := signed.Raw(); again[0] == raw[0] {
		t.Error("Raw hands out the signed transaction's own bytes")
	}
}

// TestEncoderRefusesWhatIsNoTransaction: an amount that is missing,
// negative or above 256 bits, fees of the other type, chain id 0 or an
// unknown type is an error from every entry point, never a panic nor bytes
// that mean something else.
func TestEncoderRefusesWhatIsNoTransaction(t *testing.T) {
	t.Parallel()
	to := common.Address{0xaa}
	legacy := func(edit func(*Tx)) Tx {
		tx := Tx{Type: Legacy, ChainID: 1, Gas: 21000, To: &to, Value: big.NewInt(1), GasPrice: big.NewInt(1e9)}
		edit(&tx)
		return tx
	}
	dynamic := func(edit func(*Tx)) Tx {
		tx := Tx{Type: DynamicFee, ChainID: 1, Gas: 21000, To: &to, Value: big.NewInt(1),
			MaxPriorityFeePerGas: big.NewInt(1e9), MaxFeePerGas: big.NewInt(30e9)}
		edit(&tx)
		return tx
	}
	tooBig := new(big.Int).Lsh(big.NewInt(1), 256)
	for name, tx := range map[string]Tx{
		"legacy value missing":         legacy(func(tx *Tx) { tx.Value = nil }),
		"legacy value negative":        legacy(func(tx *Tx) { tx.Value = big.NewInt(-1) }),
		"legacy value 2^256":           legacy(func(tx *Tx) { tx.Value = tooBig }),
		"legacy gas price missing":     legacy(func(tx *Tx) { tx.GasPrice = nil }),
		"legacy gas price negative":    legacy(func(tx *Tx) { tx.GasPrice = big.NewInt(-5) }),
		"legacy gas price 2^256":       legacy(func(tx *Tx) { tx.GasPrice = tooBig }),
		"legacy with a max fee":        legacy(func(tx *Tx) { tx.MaxFeePerGas = big.NewInt(1) }),
		"legacy with a priority fee":   legacy(func(tx *Tx) { tx.MaxPriorityFeePerGas = big.NewInt(1) }),
		"legacy chain id 0":            legacy(func(tx *Tx) { tx.ChainID = 0 }),
		"eip1559 value 2^256":          dynamic(func(tx *Tx) { tx.Value = tooBig }),
		"eip1559 max fee missing":      dynamic(func(tx *Tx) { tx.MaxFeePerGas = nil }),
		"eip1559 max fee negative":     dynamic(func(tx *Tx) { tx.MaxFeePerGas = big.NewInt(-1) }),
		"eip1559 priority fee missing": dynamic(func(tx *Tx) { tx.MaxPriorityFeePerGas = nil }),
		"eip1559 priority fee 2^256":   dynamic(func(tx *Tx) { tx.MaxPriorityFeePerGas = tooBig }),
		"eip1559 with a gas price":     dynamic(func(tx *Tx) { tx.GasPrice = big.NewInt(1) }),
		"eip1559 chain id 0":           dynamic(func(tx *Tx) { tx.ChainID = 0 }),
		"access list type":             dynamic(func(tx *Tx) { tx.Type = 0x01 }),
		"blob type":                    dynamic(func(tx *Tx) { tx.Type = 0x03 }),
	} {
		if _, err := tx.SigningHash(); err == nil {
			t.Errorf("%s: SigningHash gave a hash", name)
		}
		if _, err := tx.EncodeUnsigned(); err == nil {
			t.Errorf("%s: EncodeUnsigned gave bytes", name)
		}
		key, _ := crypto.GenerateKey()
		if s, err := tx.Sign(key); err == nil || s != nil {
			t.Errorf("%s: Sign gave a signature", name)
		}
	}
	// The largest amounts are amounts.
	for _, tx := range []Tx{
		legacy(func(tx *Tx) { tx.Value, tx.GasPrice = maxUint256, maxUint256 }),
		dynamic(func(tx *Tx) { tx.Value, tx.MaxFeePerGas, tx.MaxPriorityFeePerGas = maxUint256, maxUint256, maxUint256 }),
	} {
		if _, err := tx.SigningHash(); err != nil {
			t.Errorf("type %d with 2^256-1 amounts: %v", tx.Type, err)
		}
	}
}

// TestDecodeRefuses: everything signerd never signs is refused, though
// go-ethereum decodes most of it.
func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	for _, s := range refusedSamples(t) {
		if got, err := Decode(s.raw); err == nil {
			t.Errorf("%s: decoded to a %d transaction from %s", s.name, got.Tx().Type, got.Sender())
		}
	}
}
