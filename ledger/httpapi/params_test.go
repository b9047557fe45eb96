package httpapi

import (
	"encoding/base64"
	"encoding/binary"
	"math/big"
	"regexp"
	"strings"
	"testing"

	"github.com/txfence/txfence/ledger"
)

var (
	addressPattern = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	hashPattern    = regexp.MustCompile(`^0x[0-9a-fA-F]{64}$`)
	digits         = regexp.MustCompile(`^[0-9]+$`)
)

// FuzzParseAddress: an address is accepted exactly when it matches
// components.yaml's Address pattern, and answered in lower case.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "0x" + strings.Repeat("0", 40), "f39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
		"0X" + strings.Repeat("a", 40), "0x" + strings.Repeat("g", 40), "0x1234", "", "0x" + strings.Repeat("ab", 21), " 0x" + strings.Repeat("a", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAddress(s)
		if (err == nil) != addressPattern.MatchString(s) {
			t.Fatalf("%q: %v; the pattern says %v", s, err, addressPattern.MatchString(s))
		}
		if err == nil && lowerHex(a.Bytes()) != strings.ToLower(s) {
			t.Fatalf("%q read as %s", s, lowerHex(a.Bytes()))
		}
	})
}

// amountPattern is ledger.yaml's Amount pattern.
var amountPattern = regexp.MustCompile(`^-?[1-9][0-9]{0,77}$`)

// FuzzParseAmount: an amount is accepted exactly when it matches
// ledger.yaml's Amount pattern and its magnitude is below 2^256, and it
// prints back as it was sent.
func FuzzParseAmount(f *testing.F) {
	max := ledger.MaxAmount.String()
	over := new(big.Int).Add(ledger.MaxAmount, big.NewInt(1)).String()
	for _, s := range []string{"1", "-1", "0", "-0", "007", "+7", "1e3", "1.5", " 1", "1 ", "0x10", "", "-", max, "-" + max, over, "-" + over,
		strings.Repeat("9", 78), strings.Repeat("9", 79), "١٢٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseAmount(s)
		inRange := false
		if amountPattern.MatchString(s) {
			v, _ := new(big.Int).SetString(s, 10)
			inRange = v.CmpAbs(ledger.MaxAmount) <= 0
		}
		if (err == nil) != inRange {
			t.Fatalf("%q: %v; the pattern and the range say %v", s, err, inRange)
		}
		if err == nil && n.String() != s {
			t.Fatalf("%q read as %s", s, n)
		}
	})
}

// FuzzParseHash: a hash is accepted exactly when it matches
// components.yaml's Hash pattern.
func FuzzParseHash(f *testing.F) {
	for _, s := range []string{"0x" + strings.Repeat("aB", 32), "0x" + strings.Repeat("a", 63), "0x" + strings.Repeat("a", 65), "", "0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseHash(s)
		if (err == nil) != hashPattern.MatchString(s) {
			t.Fatalf("%q: %v; the pattern says %v", s, err, hashPattern.MatchString(s))
		}
		if err == nil && lowerHex(h.Bytes()) != strings.ToLower(s) {
			t.Fatalf("%q read as %s", s, lowerHex(h.Bytes()))
		}
	})
}

// FuzzParseAsset: "native" or a token address in any case, answered as
// the ledger spells assets, which reads back as itself.
func FuzzParseAsset(f *testing.F) {
	for _, s := range []string{"native", "NATIVE", "eth", "0x5FbDB2315678afecb367f032d93F642f64180aa3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAsset(s)
		if (err == nil) != (s == ledger.Native || addressPattern.MatchString(s)) {
			t.Fatalf("%q: %v", s, err)
		}
		if err != nil {
			return
		}
		if a != strings.ToLower(s) || (ledger.AccountKey{ChainID: 1, Asset: a, Kind: ledger.Wallet}).Validate() != nil {
			t.Fatalf("%q read as %q, not an asset of the ledger", s, a)
		}
		if again, err := parseAsset(a); err != nil || again != a {
			t.Fatalf("%q read as %q, which reads as %q %v", s, a, again, err)
		}
	})
}

// FuzzParseUint: chain ids, block numbers, limits and ids are decimal
// digits in range, nothing else.
func FuzzParseUint(f *testing.F) {
	for _, s := range []string{"0", "1", "007", "-1", "+1", "1e3", " 1", "1_000", "9223372036854775807", "9223372036854775808", "18446744073709551616", ""} {
		f.Add(s, uint64(1), uint64(maxInt64))
	}
	f.Add("1000", uint64(1), uint64(maxLimit))
	f.Fuzz(func(t *testing.T, s string, lo, hi uint64) {
		n, err := parseUint(s, lo, hi)
		want, inRange := new(big.Int), false
		if digits.MatchString(s) {
			want.SetString(s, 10)
			inRange = want.Cmp(new(big.Int).SetUint64(lo)) >= 0 && want.Cmp(new(big.Int).SetUint64(hi)) <= 0
		}
		if (err == nil) != inRange {
			t.Fatalf("%q in [%d, %d]: %d %v", s, lo, hi, n, err)
		}
		if err == nil && new(big.Int).SetUint64(n).Cmp(want) != 0 {
			t.Fatalf("%q read as %d", s, n)
		}
	})
}

// FuzzParseKind: the kinds are exactly the ledger's.
func FuzzParseKind(f *testing.F) {
	for _, s := range []string{"wallet", "fee_expense", "opening_balance", "confirmed", "reversal", "Wallet", "", "equity"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k, err := parseAccountKind(s); (err == nil) != ledger.AccountKind(s).Valid() || (err == nil && string(k) != s) {
			t.Fatalf("account kind %q: %q %v", s, k, err)
		}
		if k, err := parseJournalKind(s); (err == nil) != ledger.JournalKind(s).Valid() || (err == nil && string(k) != s) {
			t.Fatalf("journal kind %q: %q %v", s, k, err)
		}
	})
}

var testCursors = cursors{key: []byte("the key of the tests' cursors")}

// FuzzParseCursor: whatever a caller passes as a cursor, opening it does
// not panic and fails unless this key sealed it for this list; a sealed
// position opens as itself for its account only, and any change to it is
// refused.
func FuzzParseCursor(f *testing.F) {
	f.Add("", int64(1), int64(3), int64(7), []byte{0x12, 0x34}, false, 0)
	f.Add("garbage", int64(9), int64(1<<62), int64(1<<62), []byte{}, true, 3)
	f.Add(testCursors.sealID(accountsCursor, "", 5), int64(42), int64(1), int64(1), make([]byte, 40), true, 20)
	f.Add(strings.Repeat("A", 600), int64(1), int64(0), int64(1), []byte{1}, false, 1)
	f.Add(oldStatementCursor(42, 7, big.NewInt(-5)), int64(42), int64(2), int64(7), []byte{5}, true, 9)
	f.Fuzz(func(t *testing.T, raw string, account, version, entry int64, magnitude []byte, negative bool, flip int) {
		// Anything at all: refused, unless it is a cursor this key sealed.
		if pos, err := testCursors.openPosition(account, raw); err == nil && testCursors.sealPosition(account, pos) != raw {
			t.Fatalf("%q opened as %+v, which this key did not seal", raw, pos)
		}
		if id, err := testCursors.openID(journalsCursor, "scope", raw); err == nil && testCursors.sealID(journalsCursor, "scope", id) != raw {
			t.Fatalf("%q opened as %d, which this key did not seal", raw, id)
		}

		if len(magnitude) > maxMagnitude {
			magnitude = magnitude[:maxMagnitude]
		}
		balance := new(big.Int).SetBytes(magnitude)
		if negative {
			balance.Neg(balance)
		}
		sealed := testCursors.sealPosition(account, ledger.StatementPosition{Version: version, EntryID: entry, Balance: balance})
		if len(sealed) > maxCursor {
			t.Fatalf("a cursor of %d characters: longer than components.yaml admits", len(sealed))
		}
		pos, err := testCursors.openPosition(account, sealed)
		if err != nil || pos.Version != version || pos.EntryID != entry || pos.Balance.Cmp(balance) != 0 {
			t.Fatalf("sealed %d %d %s, opened %+v %v", version, entry, balance, pos, err)
		}
		if _, err := testCursors.openPosition(account, oldStatementCursor(account, entry, balance)); err == nil {
			t.Fatal("a statement cursor paged by entry id alone opened")
		}
		if _, err := testCursors.openPosition(account+1, sealed); err == nil {
			t.Fatal("a statement's cursor opened for another account")
		}
		if _, err := (cursors{key: []byte("another ledgerd's key")}).openPosition(account, sealed); err == nil {
			t.Fatal("a cursor opened under another key")
		}
		b, _ := base64.RawURLEncoding.DecodeString(sealed)
		i := flip % len(b)
		if i < 0 {
			i = -i
		}
		b[i] ^= 1 << (uint(flip) % 8)
		if _, err := testCursors.openPosition(account, base64.RawURLEncoding.EncodeToString(b)); err == nil {
			t.Fatalf("byte %d of the cursor changed, and it still opened", i)
		}
	})
}

// oldStatementCursor is a statement cursor as ledgerd sealed them before
// statements were paged by balance version: kind 'e', the entry id and the
// balance.
func oldStatementCursor(account, entry int64, balance *big.Int) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(entry))
	sign := byte(0)
	if balance.Sign() < 0 {
		sign = 1
	}
	return testCursors.seal('e', statementScope(account), append(append(b, sign), balance.Bytes()...))
}
