package policy

import (
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
)

// The calls that give a third party power over a signer's tokens. Whatever
// contract they are sent to, an allow rule permits them only for the
// spenders (operators) it lists.
var approvalCalls = map[[4]byte]string{
	{0x09, 0x5e, 0xa7, 0xb3}: "approve(address,uint256)",
	{0x39, 0x50, 0x93, 0x51}: "increaseAllowance(address,uint256)",
	{0xa2, 0x2c, 0xb4, 0x65}: "setApprovalForAll(address,bool)",
}

// setApprovalForAll's selector: its second argument is a bool.
var setApprovalForAll = [4]byte{0xa2, 0x2c, 0xb4, 0x65}

// decodeSpender decodes the first argument of an approval call: the
// spender or operator. It decodes by hand, as two 32-byte ABI words, and
// accepts only the exact canonical encoding: exactly two words, an address
// word with its upper 12 bytes zero and, for setApprovalForAll, a bool word
// of 0 or 1. Anything else is refused: a token contract might decode
// differently from this check, and what the check cannot read it must not
// let through.
func decodeSpender(sel [4]byte, data []byte) (common.Address, error) {
	args := data[4:]
	if len(args) != 64 {
		return common.Address{}, fmt.Errorf("%d bytes of arguments, want exactly 64", len(args))
	}
	for _, b := range args[:12] {
		if b != 0 {
			return common.Address{}, errors.New("the address argument has non-zero upper bytes")
		}
	}
	if sel == setApprovalForAll {
		for _, b := range args[32:63] {
			if b != 0 {
				return common.Address{}, errors.New("the bool argument is not 0 or 1")
			}
		}
		if args[63] > 1 {
			return common.Address{}, errors.New("the bool argument is not 0 or 1")
		}
	}
	return common.BytesToAddress(args[12:32]), nil
}
