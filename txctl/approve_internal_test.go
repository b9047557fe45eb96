package txctl

import (
	"context"
	"errors"
	"io"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
)

// word is a 32-byte ABI word holding hex s, left-padded.
func word(s string) string {
	return common.Bytes2Hex(common.LeftPadBytes(common.FromHex(s), 32))
}

// TestCallRows: what approve shows of call data is what the signer's
// policy reads in it. A selector two token standards share is shown in
// both readings, since only the policy file says which the contract is;
// call data the policy would refuse as malformed says so instead of
// showing arguments; an unknown call shows its selector and length.
func TestCallRows(t *testing.T) {
	token := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	one, two, three := "0x0000000000000000000000000000000000000001", "0x0000000000000000000000000000000000000002", "0x0000000000000000000000000000000000000003"
	tokenAt := ", token contract " + token.Hex()
	tests := []struct {
		name string
		to   *common.Address
		data string
		want [][2]string
	}{
		{"plain transfer", &token, "", [][2]string{{"call", "none (a plain transfer of value)"}}},
		{"creation", nil, "0x6080", [][2]string{{"call", "contract creation: 2 bytes of init code, not decoded"}}},
		{"no selector", &token, "0xa9059c", [][2]string{{"call", "3 bytes of call data, too short for a selector"}}},
		{"unknown call", &token, "0x12345678ff", [][2]string{{"call", "selector 0x12345678, 5 bytes of call data: not a call the signer's policy decodes"}}},
		{"ERC-20 transfer", &token, "0xa9059cbb" + word(two) + word("0x0de0b6b3a7640000"), [][2]string{
			{"call", "ERC-20 transfer(address,uint256)" + tokenAt},
			{"  recipient", two}, {"  amount", "1000000000000000000"},
			{"  effect", "moves 1000000000000000000 units of the token to " + two},
		}},
		{"ERC-20 increaseAllowance", &token, "0x39509351" + word(three) + word("0x01"), [][2]string{
			{"call", "ERC-20 increaseAllowance(address,uint256)" + tokenAt},
			{"  spender", three}, {"  added_amount", "1"},
			{"  effect", "lets " + three + " spend 1 unit of the signer's tokens"},
		}},
		{"transferFrom, ERC-20 or ERC-721", &token, "0x23b872dd" + word(one) + word(two) + word("0x05"), [][2]string{
			{"call", "2 readings of one selector: the signer's policy takes that of the standard its policy file declares " + token.Hex() + " to be"},
			{"call as ERC-20", "transferFrom(address,address,uint256)" + tokenAt},
			{"  from", one}, {"  recipient", two}, {"  amount", "5"},
			{"  effect", "moves 5 units of the token to " + two},
			{"call as ERC-721", "transferFrom(address,address,uint256)" + tokenAt},
			{"  from", one}, {"  recipient", two}, {"  token_id", "5"},
			{"  effect", "moves 1 unit of the token to " + two},
		}},
		{"approve 0: a revocation, or an NFT approval", &token, "0x095ea7b3" + word(three) + word("0x00"), [][2]string{
			{"call", "2 readings of one selector: the signer's policy takes that of the standard its policy file declares " + token.Hex() + " to be"},
			{"call as ERC-20", "approve(address,uint256)" + tokenAt},
			{"  spender", three}, {"  amount", "0"},
			{"  effect", "revokes the allowance or operator approval of " + three},
			{"call as ERC-721", "approve(address,uint256)" + tokenAt},
			{"  spender", three}, {"  token_id", "0"},
			{"  effect", "lets " + three + " spend 1 unit of the signer's tokens"},
		}},
		{"ERC-1155 transfer", &token, "0xf242432a" + word(one) + word(two) + word("0x07") + word("0x09") + word("0xa0") + word("0x01") + word("0xab00000000000000000000000000000000000000000000000000000000000000")[:64], [][2]string{
			{"call", "ERC-1155 safeTransferFrom(address,address,uint256,uint256,bytes)" + tokenAt},
			{"  from", one}, {"  recipient", two}, {"  token_id", "7"}, {"  amount", "9"}, {"  data", "0xab"},
			{"  effect", "moves 9 units of the token to " + two},
		}},
		{"setApprovalForAll false", &token, "0xa22cb465" + word(three) + word("0x00"), [][2]string{
			{"call", "2 readings of one selector: the signer's policy takes that of the standard its policy file declares " + token.Hex() + " to be"},
			{"call as ERC-721", "setApprovalForAll(address,bool)" + tokenAt},
			{"  operator", three}, {"  approved", "false"}, {"  effect", "revokes the allowance or operator approval of " + three},
			{"call as ERC-1155", "setApprovalForAll(address,bool)" + tokenAt},
			{"  operator", three}, {"  approved", "false"}, {"  effect", "revokes the allowance or operator approval of " + three},
		}},
		{"Permit2 approve", &token, "0x87517c45" + word(one) + word(three) + word("0x10") + word("0x20"), [][2]string{
			{"call", "approve(address,address,uint160,uint48), an allowance-granting call"},
			{"  address", one}, {"  address", three}, {"  uint160", "16"}, {"  uint48", "32"},
			{"  effect", "gives " + three + " power over the signer's tokens, debt or positions (an allowance, operator, permit or delegation)"},
		}},
		// An address with a dirty upper byte: solc would ignore it, the
		// policy refuses it, and approve does not show it as a transfer.
		{"dirty address", &token, "0xa9059cbb" + "ff" + word(two)[2:] + word("0x01"), [][2]string{
			{"call", "ERC-20 transfer(address,uint256)" + tokenAt + ": malformed, the signer's policy refuses it as this call (argument 0: an address with non-zero upper bytes)"},
		}},
		{"trailing byte", &token, "0xa9059cbb" + word(two) + word("0x01") + "00", [][2]string{
			{"call", "ERC-20 transfer(address,uint256)" + tokenAt + ": malformed, the signer's policy refuses it as this call (65 bytes of arguments, want exactly 64)"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f fields
			callRows(&f, tt.to, common.FromHex(tt.data))
			if diff := cmp.Diff(tt.want, f.rows); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecimalUnits(t *testing.T) {
	for _, tt := range []struct {
		v        string
		decimals int
		want     string
	}{
		{"0", 18, "0"}, {"1", 18, "0.000000000000000001"}, {"1000000000000000000", 18, "1"},
		{"1500000000000000000", 18, "1.5"}, {"40000000000", 9, "40"}, {"1", 9, "0.000000001"},
		{"115792089237316195423570985008687907853269984665640564039457584007913129639935", 18, "115792089237316195423570985008687907853269984665640564039457.584007913129639935"},
	} {
		v, _ := new(big.Int).SetString(tt.v, 10)
		if got := decimalUnits(v, tt.decimals); got != tt.want {
			t.Errorf("decimalUnits(%s, %d) = %s, want %s", tt.v, tt.decimals, got, tt.want)
		}
	}
}

// blockingReader never answers: a person who does not type.
type blockingReader struct{ stop chan struct{} }

func (r blockingReader) Read([]byte) (int, error) {
	<-r.stop
	return 0, errors.New("stopped")
}

// TestConfirm: only y or yes on the first line is a yes; a long line is
// not read whole; and a cancelled command (Ctrl-C) ends a question nobody
// answers.
func TestConfirm(t *testing.T) {
	for input, want := range map[string]bool{
		"y\n": true, "Y\n": true, "yes\n": true, "YES\r\n": true, "  yes \n": true, "y": true,
		"n\n": false, "\n": false, "no\n": false, "yes please\n": false, "ye\n": false, "\ny\n": false,
		strings.Repeat("y", maxAnswer) + "\n": false, "oui\n": false, "1\n": false,
	} {
		var errb strings.Builder
		x := &env{base: context.Background(), stdin: strings.NewReader(input), stderr: &errb}
		got, err := x.confirm("sign? ")
		if err != nil || got != want {
			t.Errorf("answer %q: %v %v, want %v", input, got, err, want)
		}
		if !strings.HasPrefix(errb.String(), "sign? ") {
			t.Errorf("answer %q: the question was %q", input, errb.String())
		}
	}
	for _, stdin := range []io.Reader{nil, strings.NewReader("")} {
		x := &env{base: context.Background(), stdin: stdin, stderr: &strings.Builder{}}
		if ok, err := x.confirm("sign? "); ok || !errors.Is(err, errNoAnswer) {
			t.Errorf("stdin %v: %v %v, want no answer", stdin, ok, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	r := blockingReader{stop: make(chan struct{})}
	defer close(r.stop)
	x := &env{base: ctx, stdin: r, stderr: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		_, err := x.confirm("sign? ")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled question: %v, want context.Canceled", err)
	}
}
