package chain

import (
	"bytes"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common/hexutil"
)

// The selectors Solidity reverts with.
var (
	errorSelector = []byte{0x08, 0xc3, 0x79, 0xa0} // Error(string): require, revert("...")
	panicSelector = []byte{0x4e, 0x48, 0x7b, 0x71} // Panic(uint256): assert, overflow, ...
)

// Bounds on what a reason quotes: revert data comes from a contract
// anyone may have written, and the reason ends up in a database row, a
// log line and a webhook.
const (
	maxReasonString = 256 // bytes of an Error(string) message
	maxReasonData   = 128 // bytes of a custom error's arguments, shown as hex
)

// RevertReason says in one line why a call reverted, from the data the
// contract reverted with:
//
//	Error(string)         the message itself, e.g. "nope" (quoted Go-style if
//	                      it holds control characters or invalid UTF-8;
//	                      "reverted with an empty reason string" if empty)
//	Panic(uint256)        "panic 0x11: arithmetic underflow or overflow"
//	anything else         "custom error 0x<selector>: 0x<arguments>"
//	                      ("custom error 0x<selector>" without arguments)
//	nothing               "reverted without a reason"
//	1 to 3 bytes          "reverted with 0x<data>"
//
// Long messages and arguments are cut (with "…"); the full data stays
// with the caller. An Error or Panic payload that does not decode is
// shown as a custom error with that selector, so the reason never claims
// more than the data says.
func RevertReason(data []byte) string {
	switch {
	case len(data) == 0:
		return "reverted without a reason"
	case len(data) < 4:
		return "reverted with " + hexutil.Encode(data)
	case bytes.Equal(data[:4], errorSelector):
		// go-ethereum's decoder checks the offset and length words.
		if msg, err := abi.UnpackRevert(data); err == nil {
			if msg == "" {
				return "reverted with an empty reason string"
			}
			return quoteIfNeeded(msg)
		}
	case bytes.Equal(data[:4], panicSelector) && len(data) == 4+32:
		code := fmt.Sprintf("%#x", new(big.Int).SetBytes(data[4:]))
		if len(code) == 3 {
			code = "0x0" + code[2:] // 0x01, as the codes are usually written
		}
		// abi.UnpackRevert carries the standard meanings (0x01 assert,
		// 0x11 overflow, 0x12 division by zero, 0x21 enum, 0x22 storage,
		// 0x31 pop on empty, 0x32 out of bounds, 0x41 memory, 0x51 zero
		// function); an unknown code it words itself, which we shorten.
		if msg, err := abi.UnpackRevert(data); err == nil && !strings.HasPrefix(msg, "unknown panic code") {
			return fmt.Sprintf("panic %s: %s", code, msg)
		}
		return "panic " + code
	}
	reason := "custom error " + hexutil.Encode(data[:4])
	if args := data[4:]; len(args) > 0 {
		reason += ": " + hexutil.Encode(args[:min(len(args), maxReasonData)])
		if len(args) > maxReasonData {
			reason += "…"
		}
	}
	return reason
}

// quoteIfNeeded returns s as is when it is printable text, Go-quoted
// otherwise (a NUL byte, for one, is refused by PostgreSQL's text type),
// cut to maxReasonString bytes on a rune boundary.
func quoteIfNeeded(s string) string {
	cut := false
	if len(s) > maxReasonString {
		s, cut = s[:maxReasonString], true
		// Back off a rune the cut split; a string that was not valid
		// UTF-8 in the first place stops after UTFMax bytes and is
		// quoted below.
		for !utf8.ValidString(s) && len(s) > maxReasonString-utf8.UTFMax {
			s = s[:len(s)-1]
		}
	}
	printable := utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
	if !printable {
		s = strconv.Quote(s)
	}
	if cut {
		s += "…"
	}
	return s
}
