package chaintest

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/testinfra/anvil"
)

// SetL1FeeOracle puts a stand-in for the OP Stack GasPriceOracle at addr
// (anvil_setCode, so at the predeploy address as well): its
// getL1Fee(bytes) answers perByte × the length of the bytes, a fee that
// grows with the transaction's size as the real one does, and any other
// call reverts. It is how a test turns anvil into enough of an OP Stack
// chain to price the L1 data fee.
func SetL1FeeOracle(t testing.TB, node *anvil.Node, addr common.Address, perByte uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := node.RPC().CallContext(ctx, nil, "anvil_setCode", addr, hexutil.Bytes(l1FeeOracleCode(perByte))); err != nil {
		t.Fatalf("set the L1 fee oracle's code at %s: %v", addr, err)
	}
}

// l1FeeOracleCode is the stand-in's runtime code, written by hand (there
// is no solc here). The assembly, with each instruction's offset and the
// stack after it (top first):
//
//	00 PUSH1 0x00          0
//	02 CALLDATALOAD        calldata[0:32]
//	03 PUSH1 0xe0          224, calldata[0:32]
//	05 SHR                 selector
//	06 PUSH4 <getL1Fee>    getL1Fee(bytes) selector, selector
//	11 EQ                  is getL1Fee
//	12 PUSH1 0x13          19, is getL1Fee
//	14 JUMPI               (to 19 if getL1Fee)
//	15 PUSH1 0x00          0
//	17 DUP1                0, 0
//	18 REVERT              (anything else: revert with no data)
//	19 JUMPDEST
//	20 PUSH1 0x24          36
//	22 CALLDATALOAD        n: the bytes' length (after the selector and the offset word)
//	23 PUSH8 <perByte>     perByte, n
//	32 MUL                 fee
//	33 PUSH1 0x00          0, fee
//	35 MSTORE              (memory[0:32] = fee)
//	36 PUSH1 0x20          32
//	38 PUSH1 0x00          0, 32
//	40 RETURN              (memory[0:32]: the fee as a uint256)
func l1FeeOracleCode(perByte uint64) []byte {
	sel := crypto.Keccak256([]byte("getL1Fee(bytes)"))[:4]
	code := []byte{
		0x60, 0x00, // PUSH1 0
		0x35,       // CALLDATALOAD
		0x60, 0xe0, // PUSH1 224
		0x1c,                                 // SHR
		0x63, sel[0], sel[1], sel[2], sel[3], // PUSH4 selector
		0x14,       // EQ
		0x60, 0x13, // PUSH1 19
		0x57,       // JUMPI
		0x60, 0x00, // PUSH1 0
		0x80,       // DUP1
		0xfd,       // REVERT
		0x5b,       // JUMPDEST
		0x60, 0x24, // PUSH1 36
		0x35, // CALLDATALOAD
		0x67, // PUSH8 perByte (the 8 bytes follow)
	}
	code = binary.BigEndian.AppendUint64(code, perByte)
	return append(code,
		0x02,       // MUL
		0x60, 0x00, // PUSH1 0
		0x52,       // MSTORE
		0x60, 0x20, // PUSH1 32
		0x60, 0x00, // PUSH1 0
		0xf3, // RETURN
	)
}
