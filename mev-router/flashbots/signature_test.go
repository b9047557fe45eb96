package flashbots_test

import (
	"crypto/ecdsa"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/mev-router/flashbots"
)

// goEthereumBookKey is the long-compromised example key of the go-ethereum
// book (goethereumbook.org/transfer-eth). Flashbots' own signature tests
// (flashbots/go-utils, signature_test.go) publish the header that `cast
// wallet sign` and ethers' wallet.signMessage(id("Hello")) produce with it,
// which makes a known answer produced by tools other than go-ethereum.
const goEthereumBookKey = "fad9c8855b740a0b7ed4c221dbad0f33a83a49cad6b3fe8d5817ac83d38b6a19"

func TestSignKnownAnswer(t *testing.T) {
	key, err := crypto.HexToECDSA(goEthereumBookKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := flashbots.Sign(key, []byte("Hello"))
	if err != nil {
		t.Fatal(err)
	}
	// RFC 6979 makes secp256k1 signatures deterministic, so ours must be
	// byte for byte what cast and ethers made.
	const want = "0x96216849c49358B10257cb55b28eA603c874b05E:" +
		"0x1446053488f02d460c012c84c4091cd5054d98c6cfca01b65f6c1a72773e80e60b8a4931aeee7ed18ce3adb45b2107e8c59e25556c1f871a8334e30e5bddbed21c"
	if got != want {
		t.Errorf("Sign(book key, Hello) =\n%s\nwant (cast, ethers)\n%s", got, want)
	}
}

// TestSignIndependently rebuilds the header from first principles, without
// accounts.TextHash: the EIP-191 personal message "\x19Ethereum Signed
// Message:\n" + decimal length + text, where the text is the 0x-prefixed
// lowercase hex of keccak256(body), hashed with keccak256 and signed, with
// 27 added to the recovery id.
func TestSignIndependently(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"", "Hello", `{"jsonrpc":"2.0","id":1,"method":"eth_sendBundle","params":[{}]}`} {
		sum := crypto.Keccak256([]byte(body))
		text := "0x" + strings.ToLower(common.Bytes2Hex(sum))
		msg := "\x19Ethereum Signed Message:\n" + strconv.Itoa(len(text)) + text
		sig, err := crypto.Sign(crypto.Keccak256([]byte(msg)), key)
		if err != nil {
			t.Fatal(err)
		}
		sig[64] += 27
		want := crypto.PubkeyToAddress(key.PublicKey).Hex() + ":0x" + common.Bytes2Hex(sig)
		got, err := flashbots.Sign(key, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("Sign(%q) =\n%s\nwant\n%s", body, got, want)
		}
	}
}

func TestVerifyToolSignatures(t *testing.T) {
	// Both published by Flashbots (flashbots/go-utils signature_test.go)
	// as signatures of keccak256("Hello")'s hex text, made with MetaMask
	// (etherscan.io/verifySig/255560) and with cast
	// (etherscan.io/verifySig/255562).
	tests := map[string]struct {
		addr, sig string
	}{
		"metamask": {"0x4bE0Cd2553356b4ABb8b6a1882325dAbC8d3013D",
			"0xbf36915334f8fa93894cd54d491c31a89dbf917e9a4402b2779b73d21ecf46e36ff07db2bef6d10e92c99a02c1c5ea700b0b674dfa5d3ce9220822a7ebcc17101b"},
		"cast": {"0x2485Aaa7C5453e04658378358f5E028150Dc7606",
			"0xff2aa92eb8d8c2ca04f1755a4ddbff4bda6a5c9cefc8b706d5d8a21d3aa6fe7a20d3ec062fb5a4c1656fd2c14a8b33ca378b830d9b6168589bfee658e83745cc1b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := flashbots.Verify(tc.addr+":"+tc.sig, []byte("Hello"))
			if err != nil {
				t.Fatal(err)
			}
			if got != common.HexToAddress(tc.addr) {
				t.Errorf("Verify = %s, want %s", got, tc.addr)
			}
		})
	}
}

func TestSignVerifyRoundTrip(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	want := crypto.PubkeyToAddress(key.PublicKey)
	for _, body := range [][]byte{nil, []byte("x"), []byte(`{"jsonrpc":"2.0"}`), {0, 0xff, 0x80}} {
		header, err := flashbots.Sign(key, body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := flashbots.Verify(header, body)
		if err != nil {
			t.Fatalf("Verify(Sign(%q)): %v", body, err)
		}
		if got != want {
			t.Errorf("Verify(Sign(%q)) = %s, want %s", body, got, want)
		}
	}
}

func TestSignWithoutKey(t *testing.T) {
	if _, err := flashbots.Sign(nil, []byte("x")); err == nil {
		t.Error("Sign(nil key) succeeded")
	}
}

func TestVerifyAcceptsEquivalentForms(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"eth_sendPrivateTransaction","params":[]}`)
	header, err := flashbots.Sign(key, body)
	if err != nil {
		t.Fatal(err)
	}
	addr, sig, _ := strings.Cut(header, ":")
	raw := hexutil.MustDecode(sig)
	raw[64] -= 27
	tests := map[string]string{
		"lowercase address":     strings.ToLower(addr) + ":" + sig,
		"uppercase hex address": "0x" + strings.ToUpper(addr[2:]) + ":" + sig,
		"recovery id 0/1":       addr + ":" + hexutil.Encode(raw),
		"uppercase signature":   addr + ":0x" + strings.ToUpper(sig[2:]),
	}
	for name, h := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := flashbots.Verify(h, body)
			if err != nil {
				t.Fatal(err)
			}
			if want := crypto.PubkeyToAddress(key.PublicKey); got != want {
				t.Errorf("Verify = %s, want %s", got, want)
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"mev_sendBundle","params":[{}]}`)
	header, err := flashbots.Sign(key, body)
	if err != nil {
		t.Fatal(err)
	}
	addr, sig, _ := strings.Cut(header, ":")
	otherHeader, err := flashbots.Sign(other, body)
	if err != nil {
		t.Fatal(err)
	}
	otherAddr, _, _ := strings.Cut(otherHeader, ":")
	forOtherBody, err := flashbots.Sign(key, []byte(`{"jsonrpc":"2.0","id":2}`))
	if err != nil {
		t.Fatal(err)
	}

	raw := hexutil.MustDecode(sig)
	withV := func(v byte) string {
		b := append([]byte(nil), raw...)
		b[64] = v
		return addr + ":" + hexutil.Encode(b)
	}
	// The same signature with S replaced by N-S (and the recovery id
	// flipped) recovers the same key: ecrecover accepts it, the usual
	// verifiers refuse it.
	n := crypto.S256().Params().N
	s := new(big.Int).SetBytes(raw[32:64])
	highS := append([]byte(nil), raw...)
	new(big.Int).Sub(n, s).FillBytes(highS[32:64])
	highS[64] = (raw[64] - 27) ^ 1 + 27

	tests := map[string]struct {
		header  string
		body    []byte
		wantErr error
	}{
		"missing header":        {"", body, flashbots.ErrNoSignature},
		"no colon":              {addr + sig, body, flashbots.ErrInvalidSignature},
		"two colons":            {header + ":00", body, flashbots.ErrInvalidSignature},
		"address without 0x":    {addr[2:] + ":" + sig, body, flashbots.ErrInvalidSignature},
		"address not hex":       {"0x" + strings.Repeat("z", 40) + ":" + sig, body, flashbots.ErrInvalidSignature},
		"address too short":     {addr[:40] + ":" + sig, body, flashbots.ErrInvalidSignature},
		"empty address":         {":" + sig, body, flashbots.ErrInvalidSignature},
		"empty signature":       {addr + ":", body, flashbots.ErrInvalidSignature},
		"signature without 0x":  {addr + ":" + sig[2:], body, flashbots.ErrInvalidSignature},
		"signature not hex":     {addr + ":0x" + strings.Repeat("g", 130), body, flashbots.ErrInvalidSignature},
		"signature 64 bytes":    {addr + ":" + sig[:130], body, flashbots.ErrInvalidSignature},
		"signature 66 bytes":    {header + "00", body, flashbots.ErrInvalidSignature},
		"recovery id 29":        {withV(29), body, flashbots.ErrInvalidSignature},
		"recovery id 2":         {withV(2), body, flashbots.ErrInvalidSignature},
		"high S":                {addr + ":" + hexutil.Encode(highS), body, flashbots.ErrInvalidSignature},
		"other signer claimed":  {otherAddr + ":" + sig, body, flashbots.ErrInvalidSignature},
		"signature of other":    {forOtherBody, body, flashbots.ErrInvalidSignature},
		"body with extra byte":  {header, append(append([]byte(nil), body...), ' '), flashbots.ErrInvalidSignature},
		"body missing a byte":   {header, body[:len(body)-1], flashbots.ErrInvalidSignature},
		"empty body":            {header, nil, flashbots.ErrInvalidSignature},
		"zero signature":        {addr + ":0x" + strings.Repeat("00", 64) + "1b", body, flashbots.ErrInvalidSignature},
		"whitespace around it":  {" " + header, body, flashbots.ErrInvalidSignature},
		"signature of the hash": {rawHashSignature(t, key, body), body, flashbots.ErrInvalidSignature},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := flashbots.Verify(tc.header, tc.body)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Verify = %s, %v; want an error wrapping %v", got, err, tc.wantErr)
			}
			if got != (common.Address{}) {
				t.Errorf("Verify returned address %s with an error", got)
			}
		})
	}
}

// rawHashSignature signs keccak256(body) directly, without the EIP-191
// prefix: a common mistake (Flashbots' issue tracker has several) that a
// verifier must not accept.
func rawHashSignature(t *testing.T, key *ecdsa.PrivateKey, body []byte) string {
	t.Helper()
	sig, err := crypto.Sign(crypto.Keccak256(body), key)
	if err != nil {
		t.Fatal(err)
	}
	sig[64] += 27
	return crypto.PubkeyToAddress(key.PublicKey).Hex() + ":" + hexutil.Encode(sig)
}

func FuzzVerify(f *testing.F) {
	key, err := crypto.HexToECDSA(goEthereumBookKey)
	if err != nil {
		f.Fatal(err)
	}
	body := []byte("Hello")
	header, err := flashbots.Sign(key, body)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(header, body)
	f.Add("", body)
	f.Add("0x:0x", []byte{})
	f.Add(header+":", body)
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		got, err := flashbots.Verify(header, body)
		if err != nil {
			if !errors.Is(err, flashbots.ErrInvalidSignature) && !errors.Is(err, flashbots.ErrNoSignature) {
				t.Fatalf("Verify error %v wraps neither sentinel", err)
			}
			return
		}
		addr, _, _ := strings.Cut(header, ":")
		if got != common.HexToAddress(addr) {
			t.Fatalf("Verify(%q) = %s, not the address the header names", header, got)
		}
	})
}
