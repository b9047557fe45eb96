package ethtx

import (
	"bytes"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
)

// sample is a raw transaction with what makes it one.
type sample struct {
	name string
	raw  []byte
}

var (
	sampleKey, _ = crypto.HexToECDSA("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	sampleTo     = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	secp256k1N   = crypto.S256().Params().N
)

// signed is inner signed with go-ethereum for chainID.
func signed(t testing.TB, inner types.TxData, signer types.Signer) *types.Transaction {
	t.Helper()
	tx, err := types.SignTx(types.NewTx(inner), signer, sampleKey)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func latest(chainID *big.Int) types.Signer { return types.LatestSignerForChainID(chainID) }

func marshal(t testing.TB, tx *types.Transaction) []byte {
	t.Helper()
	b, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func rlpBytes(t testing.TB, v any) []byte {
	t.Helper()
	b, err := rlp.EncodeToBytes(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func legacySample(chainID *big.Int) *types.LegacyTx {
	return &types.LegacyTx{Nonce: 3, GasPrice: big.NewInt(20e9), Gas: 21000, To: &sampleTo, Value: big.NewInt(1e18)}
}

func dynamicSample(chainID *big.Int) *types.DynamicFeeTx {
	return &types.DynamicFeeTx{ChainID: chainID, Nonce: 4, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(30e9),
		Gas: 100000, Value: big.NewInt(0), Data: bytes.Repeat([]byte{0x60}, 100)}
}

// acceptedSamples are transactions signerd signs.
func acceptedSamples(t testing.TB) []sample {
	one, local := big.NewInt(1), big.NewInt(31337)
	maxChain := new(big.Int).SetUint64(^uint64(0))
	huge := legacySample(maxChain)
	huge.Nonce, huge.Gas, huge.GasPrice, huge.Value = ^uint64(0), ^uint64(0), maxUint256, maxUint256
	return []sample{
		{"legacy", marshal(t, signed(t, legacySample(one), latest(one)))},
		{"eip1559 contract creation", marshal(t, signed(t, dynamicSample(local), latest(local)))},
		{"legacy, every field at its largest", marshal(t, signed(t, huge, latest(maxChain)))},
		{"eip1559 on the largest chain id", marshal(t, signed(t, dynamicSample(maxChain), latest(maxChain)))},
	}
}

// refusedSamples are what signerd never signs, so what Decode refuses: the
// malformed, and the well-formed of other types or with other signatures.
func refusedSamples(t testing.TB) []sample {
	one := big.NewInt(1)
	above64 := new(big.Int).Lsh(one, 64)
	tooBig := new(big.Int).Lsh(one, 256)
	legacy := marshal(t, signed(t, legacySample(one), latest(one)))
	dynamicTx := signed(t, dynamicSample(one), latest(one))
	dynamic := marshal(t, dynamicTx)
	v, r, s := dynamicTx.RawSignatureValues()

	// withSignature is the EIP-1559 sample with the signature values given.
	withSignature := func(v, r, s *big.Int) []byte {
		inner := dynamicSample(one)
		inner.V, inner.R, inner.S = v, r, s
		return marshal(t, types.NewTx(inner))
	}
	// legacyFields is the legacy sample hand-encoded, its fields as given.
	legacyFields := func(nonce, gasPrice, to, data rlp.RawValue) []byte {
		lv, lr, ls := signed(t, legacySample(one), latest(one)).RawSignatureValues()
		return rlpBytes(t, []any{nonce, gasPrice, uint64(21000), to, big.NewInt(1e18), data, lv, lr, ls})
	}
	canonical := func(v any) rlp.RawValue { return rlpBytes(t, v) }

	accessList := dynamicSample(one)
	accessList.AccessList = types.AccessList{{Address: sampleTo, StorageKeys: []common.Hash{{1}}}}
	hugeValue := legacySample(one)
	hugeValue.Value = tooBig
	unrecoverable := legacySample(one)
	unrecoverable.V, unrecoverable.R, unrecoverable.S = big.NewInt(37), unrecoverableR(t, types.NewTx(legacySample(one)), one), big.NewInt(1)
	chainZero := dynamicSample(new(big.Int))
	chainZero.V, chainZero.R, chainZero.S = new(big.Int), r, s
	noEIP155 := legacySample(one)
	noEIP155.V, noEIP155.R, noEIP155.S = big.NewInt(35), r, s

	return []sample{
		{"empty", nil},
		{"type byte alone", []byte{0x02}},
		{"rlp string, not a list", []byte{0x83, 1, 2, 3}},
		{"empty list", []byte{0xc0}},
		{"legacy truncated", legacy[:len(legacy)-1]},
		{"eip1559 truncated", dynamic[:len(dynamic)-1]},
		{"legacy with a trailing byte", append(bytes.Clone(legacy), 0)},
		{"eip1559 with a trailing byte", append(bytes.Clone(dynamic), 0x80)},
		{"type 0x00 envelope", append([]byte{0x00}, legacy...)},
		{"access list transaction (type 0x01)", marshal(t, signed(t, &types.AccessListTx{ChainID: one, Nonce: 1,
			GasPrice: big.NewInt(1e9), Gas: 21000, To: &sampleTo, Value: one}, latest(one)))},
		// Their amounts stay zero: naming them would take holiman/uint256
		// into go.mod for a test. Signing sets their chain id.
		{"blob transaction (type 0x03)", marshal(t, signed(t, &types.BlobTx{Nonce: 1, Gas: 21000, To: sampleTo,
			BlobHashes: []common.Hash{{1}}}, latest(one)))},
		{"set-code transaction (type 0x04)", marshal(t, signed(t, &types.SetCodeTx{Nonce: 1, Gas: 50000, To: sampleTo,
			AuthList: []types.SetCodeAuthorization{{Address: sampleTo}}}, latest(one)))},
		{"eip1559 body under type 0x03", append([]byte{0x03}, dynamic[1:]...)},
		{"legacy without EIP-155 (v=27/28)", marshal(t, signed(t, legacySample(one), types.HomesteadSigner{}))},
		{"legacy for chain id 0 (v=35)", marshal(t, types.NewTx(noEIP155))},
		{"legacy for chain id 2^64", marshal(t, signed(t, legacySample(above64), latest(above64)))},
		{"eip1559 for chain id 2^64", marshal(t, signed(t, dynamicSample(above64), latest(above64)))},
		{"eip1559 for chain id 0", marshal(t, types.NewTx(chainZero))},
		{"eip1559 with an access list", marshal(t, signed(t, accessList, latest(one)))},
		{"eip1559 with y parity 2", withSignature(big.NewInt(2), r, s)},
		{"eip1559 with high s", withSignature(new(big.Int).Xor(v, one), r, new(big.Int).Sub(secp256k1N, s))},
		{"eip1559 with r zero", withSignature(v, new(big.Int), s)},
		{"eip1559 with r = N", withSignature(v, secp256k1N, s)},
		{"eip1559 with r above 256 bits", withSignature(v, tooBig, s)},
		{"legacy value of 2^256", marshal(t, signed(t, hugeValue, latest(one)))},
		{"legacy with a signature that recovers no key", marshal(t, types.NewTx(unrecoverable))},
		{"nonce with a leading zero", legacyFields(rlp.RawValue{0x82, 0x00, 0x03}, canonical(big.NewInt(20e9)), canonical(sampleTo), canonical([]byte{}))},
		{"gas price with a leading zero", legacyFields(canonical(uint64(3)), rlp.RawValue{0x86, 0x00, 0x04, 0xa8, 0x17, 0xc8, 0x00}, canonical(sampleTo), canonical([]byte{}))},
		{"single data byte written as a string", legacyFields(canonical(uint64(3)), canonical(big.NewInt(20e9)), canonical(sampleTo), rlp.RawValue{0x81, 0x05})},
		{"to of 19 bytes", legacyFields(canonical(uint64(3)), canonical(big.NewInt(20e9)), canonical(sampleTo[1:]), canonical([]byte{}))},
		{"to as an empty list", legacyFields(canonical(uint64(3)), canonical(big.NewInt(20e9)), rlp.RawValue{0xc0}, canonical([]byte{}))},
	}
}

// unrecoverableR is an r below N that is no point's x coordinate, so that
// the signature (r, 1) of tx on chainID passes the range checks but
// recovers no key.
func unrecoverableR(t testing.TB, tx *types.Transaction, chainID *big.Int) *big.Int {
	t.Helper()
	hash := latest(chainID).Hash(tx)
	for x := int64(1); x < 1000; x++ {
		sig := make([]byte, crypto.SignatureLength)
		big.NewInt(x).FillBytes(sig[:32])
		sig[63] = 1
		if _, err := crypto.Ecrecover(hash[:], sig); err != nil {
			return big.NewInt(x)
		}
	}
	t.Fatal("every small r recovers a key")
	return nil
}

// TestDecodeAcceptsWhatSignerdSigns: the samples signerd signs decode, to
// the sender that signed them.
func TestDecodeAcceptsWhatSignerdSigns(t *testing.T) {
	t.Parallel()
	want := crypto.PubkeyToAddress(sampleKey.PublicKey)
	for _, s := range acceptedSamples(t) {
		got, err := Decode(s.raw)
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		if got.Sender() != want {
			t.Errorf("%s: sender %s, want %s", s.name, got.Sender(), want)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to Decode, which audit verification
// runs on raw transactions read from the database: it never panics, and
// what it accepts re-encodes to the same bytes and is the same
// transaction, hash and sender to go-ethereum.
func FuzzDecode(f *testing.F) {
	for _, s := range append(acceptedSamples(f), refusedSamples(f)...) {
		f.Add(s.raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Decode(raw)
		if err != nil {
			if got != nil {
				t.Fatal("Decode returned a transaction with its error")
			}
			return
		}
		again, err := encodeSigned(got.Tx(), got.sig)
		if err != nil || !bytes.Equal(again, raw) || !bytes.Equal(got.Raw(), raw) {
			t.Fatalf("accepted %x, which re-encodes to %x (%v)", raw, again, err)
		}

		var ref types.Transaction
		if err := ref.UnmarshalBinary(raw); err != nil {
			t.Fatalf("accepted %x, which go-ethereum refuses: %v", raw, err)
		}
		tx := got.Tx()
		refSigner := latest(new(big.Int).SetUint64(tx.ChainID))
		from, err := types.Sender(refSigner, &ref)
		if err != nil {
			t.Fatalf("accepted %x, whose sender go-ethereum cannot recover: %v", raw, err)
		}
		if from != got.Sender() || ref.Hash() != got.Hash() {
			t.Fatalf("sender %s and hash %s; go-ethereum's %s and %s", got.Sender(), got.Hash(), from, ref.Hash())
		}
		hash, err := tx.SigningHash()
		if err != nil || hash != refSigner.Hash(&ref) {
			t.Fatalf("signing hash %s (%v), go-ethereum's %s", hash, err, refSigner.Hash(&ref))
		}
		fees := func(a, b *big.Int) bool { return a.Cmp(b) == 0 }
		feeCap, tipCap := tx.GasPrice, tx.GasPrice
		if tx.Type == DynamicFee {
			feeCap, tipCap = tx.MaxFeePerGas, tx.MaxPriorityFeePerGas
		}
		if byte(tx.Type) != ref.Type() || tx.ChainID != ref.ChainId().Uint64() || !ref.ChainId().IsUint64() ||
			tx.Nonce != ref.Nonce() || tx.Gas != ref.Gas() || !fees(tx.Value, ref.Value()) ||
			!fees(feeCap, ref.GasFeeCap()) || !fees(tipCap, ref.GasTipCap()) ||
			!bytes.Equal(tx.Data, ref.Data()) || (tx.To == nil) != (ref.To() == nil) ||
			(tx.To != nil && *tx.To != *ref.To()) || len(ref.AccessList()) != 0 {
			t.Fatalf("decoded %+v; go-ethereum decodes type %d chain %s nonce %d", tx, ref.Type(), ref.ChainId(), ref.Nonce())
		}
	})
}
