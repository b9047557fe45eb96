package chain_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// The test contracts are written in EVM bytecode by hand (there is no
// solc here). The opcodes they use:
const (
	opSTOP     = 0x00
	opSHL      = 0x1b // a, b -> b << a (the shift is on top)
	opCODECOPY = 0x39 // destOffset, offset, size -> (memory[destOffset:] = code[offset:offset+size])
	opMSTORE   = 0x52 // offset, value -> (memory[offset:offset+32] = value)
	opSSTORE   = 0x55 // key, value -> (storage[key] = value)
	opJUMP     = 0x56 // dest ->
	opJUMPDEST = 0x5b
	opPUSH1    = 0x60 // followed by 1 byte
	opPUSH4    = 0x63 // followed by 4 bytes
	opDUP1     = 0x80
	opRETURN   = 0xf3 // offset, size -> (ends, returning memory[offset:offset+size])
	opREVERT   = 0xfd // offset, size -> (reverts with memory[offset:offset+size])
	opINVALID  = 0xfe // designated invalid: halts, burning all gas
)

// Runtime code of the test contracts. Stack comments list the top first.
var (
	// revertsWithError reverts with Error("nope"), as solc encodes
	// require(false, "nope"): memory [0,4) the selector, [4,36) the
	// string's offset 0x20, [36,68) its length 4, [68,100) "nope" padded.
	revertsWithError = []byte{
		opPUSH4, 0x08, 0xc3, 0x79, 0xa0, // Error(string) selector
		opPUSH1, 0xe0, opSHL, // << 224: into the top 4 bytes of a word
		opPUSH1, 0x00, opMSTORE, // memory[0:32] = selector, then zeros
		opPUSH1, 0x20, opPUSH1, 0x04, opMSTORE, // memory[4:36] = 0x20, the offset
		opPUSH1, 0x04, opPUSH1, 0x24, opMSTORE, // memory[36:68] = 4, the length
		opPUSH4, 'n', 'o', 'p', 'e', // the string's bytes
		opPUSH1, 0xe0, opSHL, // left-aligned in its word
		opPUSH1, 0x44, opMSTORE, // memory[68:100] = "nope" + zeros
		opPUSH1, 0x64, opPUSH1, 0x00, opREVERT, // revert(0, 100)
	}

	// revertsWithPanic reverts with Panic(0x11), what solc's checked
	// arithmetic raises on overflow: the selector, then the code as a
	// uint256.
	revertsWithPanic = []byte{
		opPUSH4, 0x4e, 0x48, 0x7b, 0x71, // Panic(uint256) selector
		opPUSH1, 0xe0, opSHL, // into the top 4 bytes
		opPUSH1, 0x00, opMSTORE, // memory[0:32] = selector, then zeros
		opPUSH1, 0x11, opPUSH1, 0x04, opMSTORE, // memory[4:36] = 0x11
		opPUSH1, 0x24, opPUSH1, 0x00, opREVERT, // revert(0, 36)
	}

	// revertsEmpty reverts with no data, as solc's revert() and
	// require(false) do.
	revertsEmpty = []byte{
		opPUSH1, 0x00, // size 0
		opPUSH1, 0x00, // offset 0
		opREVERT,
	}

	// storesOne writes storage[0] = 1 and succeeds: about 43,000 gas, so an
	// estimate that is not simply a transfer's 21,000.
	storesOne = []byte{
		opPUSH1, 0x01, // value
		opPUSH1, 0x00, // key
		opSSTORE,
		opSTOP,
	}

	// haltsInvalid halts on the designated invalid opcode (what solc before
	// 0.8 compiled assert to).
	haltsInvalid = []byte{opINVALID}

	// loopsForever jumps to itself until it runs out of gas.
	loopsForever = []byte{
		opJUMPDEST,    // pc 0
		opPUSH1, 0x00, // dest 0
		opJUMP,
	}
)

// insufficientBalance is the custom error the custom-error contract
// reverts with.
const insufficientBalance = "InsufficientBalance(uint256,uint256)"

func selector(signature string) []byte { return crypto.Keccak256([]byte(signature))[:4] }

// revertsWithCustom reverts with InsufficientBalance(1, 2), as solc
// encodes `revert InsufficientBalance(1, 2)`: the selector, then each
// argument as a word.
func revertsWithCustom() []byte {
	sel := selector(insufficientBalance)
	return []byte{
		opPUSH4, sel[0], sel[1], sel[2], sel[3], // the error's selector
		opPUSH1, 0xe0, opSHL, // into the top 4 bytes
		opPUSH1, 0x00, opMSTORE, // memory[0:32] = selector, then zeros
		opPUSH1, 0x01, opPUSH1, 0x04, opMSTORE, // memory[4:36] = 1
		opPUSH1, 0x02, opPUSH1, 0x24, opMSTORE, // memory[36:68] = 2
		opPUSH1, 0x44, opPUSH1, 0x00, opREVERT, // revert(0, 68)
	}
}

// initCode is creation code that deploys runtime: it copies the runtime,
// which follows it, into memory and returns it.
func initCode(runtime []byte) []byte {
	if len(runtime) > 0xff {
		panic("runtime too long for PUSH1")
	}
	const prefixLen = 11 // the bytes below, up to the runtime
	code := []byte{
		opPUSH1, byte(len(runtime)), // size
		opDUP1,             // size, size
		opPUSH1, prefixLen, // offset of the runtime in this code, size, size
		opPUSH1, 0x00, // destOffset 0, offset, size, size
		opCODECOPY,              // memory[0:size] = runtime; leaves size
		opPUSH1, 0x00, opRETURN, // return memory[0:size]: the deployed code
	}
	return append(code, runtime...)
}

// word is v as a 32-byte ABI word.
func word(v int64) []byte { return common.LeftPadBytes(big.NewInt(v).Bytes(), 32) }

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// deploy sends a creation transaction of runtime from the first dev
// account and returns the contract's address once mined.
func deploy(t *testing.T, node *anvil.Node, runtime []byte) common.Address {
	t.Helper()
	ctx := testContext(t)
	from := node.Accounts()[0]
	client := node.Client()
	nonce, err := client.PendingNonceAt(ctx, from.Address)
	if err != nil {
		t.Fatal(err)
	}
	tx := signDynamic(t, node, from.Key, nonce, nil, nil, initCode(runtime), gwei(1))
	if err := client.SendTransaction(ctx, tx); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	r := chaintest.WaitReceipt(t, node, tx.Hash())
	if r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("deploy %x: creation failed", runtime)
	}
	return r.ContractAddress
}
