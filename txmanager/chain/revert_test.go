package chain_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/txfence/txfence/txmanager/chain"
)

var (
	errorSel = []byte{0x08, 0xc3, 0x79, 0xa0}
	panicSel = []byte{0x4e, 0x48, 0x7b, 0x71}
)

// errorData is the revert data of Error(msg).
func errorData(msg string) []byte {
	padded := common.RightPadBytes([]byte(msg), (len(msg)+31)/32*32)
	return concat(errorSel, word(0x20), word(int64(len(msg))), padded)
}

func panicData(code int64) []byte { return concat(panicSel, word(code)) }

func TestRevertReason(t *testing.T) {
	t.Parallel()
	custom := selector(insufficientBalance)
	longArgs := bytes.Repeat([]byte{0xab}, 200)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"nil", nil, "reverted without a reason"},
		{"empty", []byte{}, "reverted without a reason"},
		{"shorter than a selector", []byte{1, 2}, "reverted with 0x0102"},
		{"Error", errorData("nope"), "nope"},
		{"Error with an empty string", errorData(""), "reverted with an empty reason string"},
		{"Error with a NUL byte", errorData("bad\x00input"), `"bad\x00input"`},
		{"Error with invalid UTF-8", errorData("\xff\xfe"), `"\xff\xfe"`},
		{"Error with a newline", errorData("two\nlines"), `"two\nlines"`},
		{"Error, long", errorData(strings.Repeat("a", 300)), strings.Repeat("a", 256) + "…"},
		{"Error, long, cut inside a rune", errorData("a" + strings.Repeat("é", 200)), "a" + strings.Repeat("é", 127) + "…"},
		{"Error, malformed", concat(errorSel, []byte{1, 2, 3}), "custom error 0x08c379a0: 0x010203"},
		{"Panic generic", panicData(0x00), "panic 0x00: generic panic"},
		{"Panic assert", panicData(0x01), "panic 0x01: assert(false)"},
		{"Panic overflow", panicData(0x11), "panic 0x11: arithmetic underflow or overflow"},
		{"Panic division by zero", panicData(0x12), "panic 0x12: division or modulo by zero"},
		{"Panic enum", panicData(0x21), "panic 0x21: enum overflow"},
		{"Panic storage", panicData(0x22), "panic 0x22: invalid encoded storage byte array accessed"},
		{"Panic pop on empty", panicData(0x31), "panic 0x31: out-of-bounds array access; popping on an empty array"},
		{"Panic out of bounds", panicData(0x32), "panic 0x32: out-of-bounds access of an array or bytesN"},
		{"Panic memory", panicData(0x41), "panic 0x41: out of memory"},
		{"Panic zero function", panicData(0x51), "panic 0x51: uninitialized function"},
		{"Panic unknown code", panicData(0x99), "panic 0x99"},
		{"Panic huge code", concat(panicSel, bytes.Repeat([]byte{0xff}, 32)), "panic 0x" + strings.Repeat("ff", 32)},
		{"Panic, malformed", concat(panicSel, word(0x11), []byte{0}), "custom error 0x4e487b71: 0x" + strings.Repeat("00", 31) + "1100"},
		{"custom error", concat(custom, word(1), word(2)), "custom error " + hexutil.Encode(custom) + ": " + hexutil.Encode(concat(word(1), word(2)))},
		{"custom error without arguments", []byte{0xde, 0xad, 0xbe, 0xef}, "custom error 0xdeadbeef"},
		{"custom error, long", concat(custom, longArgs), "custom error " + hexutil.Encode(custom) + ": 0x" + strings.Repeat("ab", 128) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := chain.RevertReason(tt.data); got != tt.want {
				t.Errorf("RevertReason(%x)\n got %q\nwant %q", tt.data, got, tt.want)
			}
		})
	}
}

// FuzzRevertReason: revert data is whatever a contract chose to return.
// The reason goes into a database row, a log line and a webhook: it must
// be short, valid UTF-8 and free of NUL bytes, whatever the input.
func FuzzRevertReason(f *testing.F) {
	for _, seed := range [][]byte{nil, {1}, errorData("nope"), errorData("\x00"), panicData(0x11),
		concat(errorSel, word(0x20), word(1<<40)), concat(errorSel, word(1<<40)), concat(panicSel, word(1)[:31])} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := chain.RevertReason(data)
		if got == "" || !utf8.ValidString(got) || strings.ContainsRune(got, 0) || len(got) > 1100 {
			t.Errorf("RevertReason(%x) = %q: want a short, non-empty, printable line", data, got)
		}
	})
}
