package policy_test

import (
	"bytes"
	"context"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// TestDecodedSelectorsAreTheirSignaturesHashes: every selector policy
// matches is the first four bytes of keccak256 of its signature, computed
// here rather than trusted from memory.
func TestDecodedSelectorsAreTheirSignaturesHashes(t *testing.T) {
	t.Parallel()
	for _, c := range policy.DecodedCalls() {
		if want := crypto.Keccak256([]byte(c.Signature))[:4]; !bytes.Equal(c.Selector[:], want) {
			t.Errorf("%s %s: selector 0x%x, keccak256 says 0x%x", c.Standard, c.Signature, c.Selector, want)
		}
	}
}

// grantSignatures are the calls that give a third party power over a
// signer's tokens, debt or positions: each must be in policy's list of
// allowance-granting calls.
var grantSignatures = []string{
	"approve(address,uint256)",                                                  // ERC-20, ERC-721
	"increaseAllowance(address,uint256)",                                        // OpenZeppelin ERC-20
	"increaseApproval(address,uint256)",                                         // older OpenZeppelin/Zeppelin ERC-20
	"setApprovalForAll(address,bool)",                                           // ERC-721, ERC-1155
	"authorizeOperator(address)",                                                // ERC-777
	"approveAndCall(address,uint256,bytes)",                                     // ERC-1363, MiniMe, ERC-827
	"approveAndCall(address,uint256)",                                           // ERC-1363
	"permit(address,address,uint256,uint256,uint8,bytes32,bytes32)",             // EIP-2612
	"permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)",        // DAI
	"permit(address,uint256,uint256,uint8,bytes32,bytes32)",                     // ERC-4494 (NFT positions)
	"approve(address,address,uint160,uint48)",                                   // Permit2
	"permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)",   // Permit2, single
	"permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)", // Permit2, batch
	"approve(address,uint256,uint256)",                                          // ERC-6909
	"setOperator(address,bool)",                                                 // ERC-6909
	"approveDelegation(address,uint256)",                                        // Aave credit delegation
	"allow(address,bool)",                                                       // Compound III
	"setAuthorization(address,bool)",                                            // Morpho Blue
	"hope(address)",                                                             // Maker
}

func TestEveryAllowanceGrantingCallIsListed(t *testing.T) {
	t.Parallel()
	var listed []string
	for _, c := range policy.DecodedCalls() {
		if c.Standard == "" {
			listed = append(listed, c.Signature)
		}
	}
	for _, s := range grantSignatures {
		if !slices.Contains(listed, s) {
			t.Errorf("%s is not in the allowance-granting calls", s)
		}
	}
}

// grantArgs are canonical arguments for each allowance-granting call,
// with spender as the grantee.
func grantArgs(signature string, spender common.Address) []any {
	sig := make([]byte, 32)
	details := []any{token, big.NewInt(1000), 1 << 40, 7}
	switch signature {
	case "approve(address,uint256)", "increaseAllowance(address,uint256)", "increaseApproval(address,uint256)",
		"approveAndCall(address,uint256)", "approveDelegation(address,uint256)":
		return []any{spender, 1000}
	case "setApprovalForAll(address,bool)", "setOperator(address,bool)", "allow(address,bool)", "setAuthorization(address,bool)":
		return []any{spender, true}
	case "authorizeOperator(address)", "hope(address)":
		return []any{spender}
	case "approveAndCall(address,uint256,bytes)":
		return []any{spender, 1000, []byte("hello, callback")}
	case "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)":
		return []any{ops, spender, 1000, 1 << 40, 27, sig, sig}
	case "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)":
		return []any{ops, spender, 3, 1 << 40, true, 28, sig, sig}
	case "permit(address,uint256,uint256,uint8,bytes32,bytes32)":
		return []any{spender, 42, 1 << 40, 27, sig, sig}
	case "approve(address,address,uint160,uint48)":
		return []any{token, spender, 1000, 1 << 40}
	case "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)":
		return []any{ops, []any{details, spender, 1 << 40}, make([]byte, 65)}
	case "permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)":
		return []any{ops, []any{[]any{details, details}, spender, 1 << 40}, make([]byte, 65)}
	case "approve(address,uint256,uint256)":
		return []any{spender, 5, 1000}
	}
	panic("no arguments for " + signature)
}

// TestEvaluateAllowanceGrantingCalls: to a contract the policy does not
// declare as a token, each allowance-granting call is allowed only to a
// spender of the rule's erc20_spenders, and only in canonical encoding.
func TestEvaluateAllowanceGrantingCalls(t *testing.T) {
	t.Parallel()
	p := mustParse(t, withRule(`{"id": "calls", "effect": "allow", "match": {}, "limits": {`+feeCaps+`}, "erc20_spenders": ["0x00000000000000000000000000000000000000e1"]}`))
	for _, sig := range grantSignatures {
		good := policy.EncodeCall(sig, grantArgs(sig, router)...)
		for _, tc := range []struct {
			name   string
			data   []byte
			want   signer.Verdict
			reason string
		}{
			{"listed spender", good, signer.Allow, ""},
			{"unlisted spender", policy.EncodeCall(sig, grantArgs(sig, other)...), signer.Deny, sig + " to spender " + other.Hex() + ", which is not in erc20_spenders (rule calls)"},
			{"one byte short", good[:len(good)-1], signer.Deny, "malformed " + sig},
			{"one byte more", append(slices.Clone(good), 0), signer.Deny, "malformed " + sig},
			{"a word more", append(slices.Clone(good), make([]byte, 32)...), signer.Deny, "malformed " + sig},
			{"selector only", good[:4], signer.Deny, "malformed " + sig},
		} {
			d, err := p.Evaluate(context.Background(), request(to(token), value(0), data(tc.data)), now, spentIs(0))
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict != tc.want || d.RuleID != "calls" {
				t.Errorf("%s, %s: %s by %s %q, want %s", sig, tc.name, d.Verdict, d.RuleID, d.Reasons, tc.want)
			}
			if tc.reason != "" && !slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.Contains(r, tc.reason) }) {
				t.Errorf("%s, %s: reasons %q do not say %q", sig, tc.name, d.Reasons, tc.reason)
			}
		}
	}
}

// TestDecoderRefusesWhatIsNotCanonical changes canonical call data in the
// ways a lax decoder would let through: each change is refused, and what
// is accepted encodes back to exactly the input.
func TestDecoderRefusesWhatIsNotCanonical(t *testing.T) {
	t.Parallel()
	word := func(n uint64) []byte { return common.LeftPadBytes(new(big.Int).SetUint64(n).Bytes(), 32) }
	// set returns data with the 32-byte word at argument byte offset at
	// replaced by w.
	set := func(data []byte, at int, w []byte) []byte {
		out := slices.Clone(data)
		copy(out[4+at:], w)
		return out
	}
	flip := func(data []byte, at int) []byte {
		out := slices.Clone(data)
		out[4+at] ^= 0x01
		return out
	}
	approveAndCall := "approveAndCall(address,uint256,bytes)"
	withBytes := policy.EncodeCall(approveAndCall, router, 1000, []byte("abc")) // spender, amount, offset 96, length 3, "abc" padded
	batch := "permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)"
	batchData := policy.EncodeCall(batch, grantArgs(batch, router)...)
	permit2 := "approve(address,address,uint160,uint48)"
	permit2Data := policy.EncodeCall(permit2, token, router, 1000, 1<<40)
	setAll := "setApprovalForAll(address,bool)"
	setAllData := policy.EncodeCall(setAll, router, true)
	for _, tc := range []struct {
		name, signature string
		data            []byte
		ok              bool
	}{
		{"canonical bytes", approveAndCall, withBytes, true},
		{"empty bytes", approveAndCall, policy.EncodeCall(approveAndCall, router, 1000, []byte{}), true},
		{"32 bytes, no padding", approveAndCall, policy.EncodeCall(approveAndCall, router, 1000, make([]byte, 32)), true},
		{"offset past its place", approveAndCall, append(set(withBytes, 64, word(128)), make([]byte, 32)...), false},
		{"offset before its place", approveAndCall, set(withBytes, 64, word(64)), false},
		{"offset beyond the data", approveAndCall, set(withBytes, 64, word(1<<40)), false},
		{"offset with upper bytes set", approveAndCall, set(withBytes, 64, append([]byte{1}, word(96)[1:]...)), false},
		{"length beyond the data", approveAndCall, set(withBytes, 96, word(33)), false},
		{"huge length", approveAndCall, set(withBytes, 96, word(1<<62)), false},
		{"length shorter, padding not zero", approveAndCall, set(withBytes, 96, word(2)), false},
		{"dirty padding", approveAndCall, flip(withBytes, 128+31), false},
		{"missing padding", approveAndCall, withBytes[:len(withBytes)-29], false},
		{"dirty address", approveAndCall, flip(withBytes, 0), false},
		{"bool 2", setAll, set(setAllData, 32, word(2)), false},
		{"bool with upper bytes set", setAll, flip(setAllData, 32), false},
		{"uint160 over its size", permit2, flip(permit2Data, 64+11), false},
		{"uint48 over its size", permit2, flip(permit2Data, 96+25), false},
		{"uint48 at its most", permit2, set(permit2Data, 96, word(1<<48-1)), true},
		{"canonical dynamic tuple and array", batch, batchData, true},
		{"array count beyond the data", batch, set(batchData, 96+96, word(1<<20)), false},
		{"array count one more", batch, set(batchData, 96+96, word(3)), false},
		{"array count one less", batch, set(batchData, 96+96, word(1)), false},
		{"tuple offset moved", batch, set(batchData, 32, word(64)), false},
		{"inner array offset moved", batch, set(batchData, 96, word(128)), false},
		{"signature offset moved", batch, set(batchData, 64, word(96)), false},
		{"empty", setAll, nil, false},
		{"wrong selector", setAll, append([]byte{0xa2, 0x2c, 0xb4, 0x66}, setAllData[4:]...), false},
	} {
		got, err := policy.Roundtrip(tc.signature, tc.data)
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case !tc.ok && err == nil:
			t.Errorf("%s: accepted %x", tc.name, tc.data)
		case err == nil && !bytes.Equal(got, tc.data):
			t.Errorf("%s: accepted, but encodes back to\n%x, not\n%x", tc.name, got, tc.data)
		}
	}
}

// fuzzPolicy allows every decoded call it can: any call to an undeclared
// contract with grants to router, and any call of each declared token's
// standard, under caps no amount exceeds, with router as spender and
// operator.
var fuzzPolicy = `{"version": "fuzz", "chains": [1],
  "tokens": {
    "t20": {"chain": 1, "address": "0x0000000000000000000000000000000000000020", "standard": "erc20"},
    "t721": {"chain": 1, "address": "0x0000000000000000000000000000000000000721", "standard": "erc721"},
    "t1155": {"chain": 1, "address": "0x0000000000000000000000000000000000001155", "standard": "erc1155"}
  },
  "rules": [
    {"id": "tokens", "effect": "allow", "match": {"chains": [1]}, "limits": {` + feeCaps + `}, "tokens": {
      "t20": {"max_amount_per_tx": "` + maxUint256.String() + `", "windows": [{"duration": "1h", "max_amount": "` + maxUint256.String() + `"}], "spenders": ["0x00000000000000000000000000000000000000e1"]},
      "t721": {"max_amount_per_tx": "` + maxUint256.String() + `", "windows": [{"duration": "1h", "max_amount": "` + maxUint256.String() + `"}], "spenders": ["0x00000000000000000000000000000000000000e1"], "operators": ["0x00000000000000000000000000000000000000e1"]},
      "t1155": {"max_amount_per_tx": "` + maxUint256.String() + `", "windows": [{"duration": "1h", "max_amount": "` + maxUint256.String() + `"}], "operators": ["0x00000000000000000000000000000000000000e1"]}}},
    {"id": "calls", "effect": "allow", "match": {}, "limits": {` + feeCaps + `}, "erc20_spenders": ["0x00000000000000000000000000000000000000e1"]}]}`

// fuzzTokens are fuzzPolicy's token contracts, by standard.
var fuzzTokens = map[string]common.Address{
	"erc20":   common.HexToAddress("0x0000000000000000000000000000000000000020"),
	"erc721":  common.HexToAddress("0x0000000000000000000000000000000000000721"),
	"erc1155": common.HexToAddress("0x0000000000000000000000000000000000001155"),
}

// tokenCallArgs are canonical arguments for each token standard's calls.
func tokenCallArgs(signature string) []any {
	switch signature {
	case "transfer(address,uint256)":
		return []any{dest1, 1000}
	case "transferFrom(address,address,uint256)":
		return []any{ops, dest1, 1000}
	case "approve(address,uint256)", "increaseAllowance(address,uint256)":
		return []any{router, 1000}
	case "setApprovalForAll(address,bool)":
		return []any{router, true}
	case "safeTransferFrom(address,address,uint256)":
		return []any{ops, dest1, 7}
	case "safeTransferFrom(address,address,uint256,bytes)":
		return []any{ops, dest1, 7, []byte("data for the receiver hook, longer than one word")}
	case "safeTransferFrom(address,address,uint256,uint256,bytes)":
		return []any{ops, dest1, 7, 1000, []byte{}}
	case "safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)":
		return []any{ops, dest1, []any{1, 2, 3}, []any{10, maxUint256, 30}, []byte{1}}
	}
	panic("no arguments for " + signature)
}

// FuzzDecodeCall feeds call data to each call policy decodes by hand
// (which picks the call and its destination: a declared token of its
// standard, or an undeclared contract for an allowance-granting call; its
// selector is put in front of args) and to whatever selector args starts
// with (which out of range), sent to an undeclared contract and to an
// ERC-20 token. The decoder never panics; what it accepts encodes back to
// exactly the input (it reads the canonical encoding only); policy never
// allows a call the decoder refuses, and an allowed call to a token
// carries its units.
func FuzzDecodeCall(f *testing.F) {
	calls := policy.DecodedCalls()
	seed := func(i int, args []byte) {
		f.Add(uint8(i), args)
		f.Add(uint8(i), args[:max(len(args)-1, 0)])                      // short
		f.Add(uint8(i), append(slices.Clone(args), 0, 0, 0, 0))          // extra bytes
		f.Add(uint8(i), append(slices.Clone(args), make([]byte, 32)...)) // an extra word
		f.Add(uint8(i), []byte{})
		huge := slices.Clone(args)
		for j := 32; j < len(huge) && j < 96; j++ {
			huge[j] = 0xff // a huge amount, or a bad bool or offset
		}
		f.Add(uint8(i), huge)
		f.Add(uint8(255), append([]byte{0xde, 0xad, 0xbe, 0xef}, args...)) // a wrong selector
	}
	for i, c := range calls {
		if c.Standard == "" {
			seed(i, policy.EncodeCall(c.Signature, grantArgs(c.Signature, router)...)[4:])
		} else {
			seed(i, policy.EncodeCall(c.Signature, tokenCallArgs(c.Signature)...)[4:])
		}
		if strings.Contains(c.Signature, "[]") || strings.Contains(c.Signature, "bytes)") {
			bad := policy.EncodeCall(c.Signature, append([]any(nil), argsFor(c)...)...)[4:]
			bad[95] ^= 0x20 // an offset or a length moved by a word
			f.Add(uint8(i), bad)
		}
	}

	p := mustParse(f, fuzzPolicy)
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		evaluate := func(dest common.Address, data []byte) signer.Decision {
			t.Helper()
			d, err := p.Evaluate(context.Background(), request(to(dest), value(0), func(r *signer.Request) { r.Data = data }), now, spentIs(0))
			if err != nil {
				t.Fatal(err)
			}
			if d.Verdict != signer.Allow && d.Verdict != signer.Deny {
				t.Fatalf("verdict %s", d.Verdict)
			}
			return d
		}
		if int(which) >= len(calls) {
			// Whatever selector args starts with: to a token, only a call
			// of its standard decoded exactly may pass.
			if d := evaluate(fuzzTokens["erc20"], args); d.Verdict == signer.Allow {
				if _, err := policy.Roundtrip(erc20Signature(t, calls, args), args); err != nil {
					t.Fatalf("allowed to an ERC-20 token, yet no ERC-20 call: %x", args)
				}
			}
			known, err := policy.Decodes(args)
			if d := evaluate(other, args); d.Verdict == signer.Allow && known && err != nil {
				t.Fatalf("allowed, yet the decoder refuses it (%v): %x", err, args)
			}
			return
		}
		c := calls[which]
		data := append(c.Selector[:len(c.Selector):len(c.Selector)], args...)
		decoded, err := policy.Roundtrip(c.Signature, data)
		if err == nil && !bytes.Equal(decoded, data) {
			t.Fatalf("%s: accepted %x, which encodes back to %x", c.Signature, data, decoded)
		}
		dest := other
		if c.Standard != "" {
			dest = fuzzTokens[c.Standard]
		}
		d := evaluate(dest, data)
		if d.Verdict == signer.Allow && err != nil {
			t.Fatalf("%s %s: allowed, yet the decoder refuses it (%v): %x", c.Standard, c.Signature, err, data)
		}
		if d.Verdict == signer.Allow && c.Standard != "" && (d.Token == nil || d.Token.Contract != dest || d.Token.Amount == nil) {
			t.Fatalf("%s %s: allowed without its token units: %+v", c.Standard, c.Signature, d.Token)
		}
	})
}

// argsFor are the canonical arguments of a decoded call.
func argsFor(c policy.DecodedCall) []any {
	if c.Standard == "" {
		return grantArgs(c.Signature, router)
	}
	return tokenCallArgs(c.Signature)
}

// erc20Signature is the ERC-20 call data starts with, or fails t.
func erc20Signature(t *testing.T, calls []policy.DecodedCall, data []byte) string {
	t.Helper()
	for _, c := range calls {
		if c.Standard == "erc20" && len(data) >= 4 && bytes.Equal(data[:4], c.Selector[:]) {
			return c.Signature
		}
	}
	t.Fatalf("allowed to an ERC-20 token, yet no ERC-20 call: %x", data)
	return ""
}
