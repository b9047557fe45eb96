package chain

import (
	"encoding/hex"
	"errors"
	"strings"
	"unicode"

	"github.com/ethereum/go-ethereum/rpc"
)

// kind is what a node's error answer says about the transaction.
type kind int

const (
	// nodeFailure: no answer about the transaction (transport failure,
	// timeout, 5xx, rate limit, internal error, anything unrecognised).
	// The worker retries.
	nodeFailure kind = iota
	// reverted: the call reverted; data is what it reverted with.
	reverted
	// halted: the transaction would fail for a reason of its own
	// (out of gas, invalid opcode, intrinsic gas, ...).
	halted
	// insufficientFunds: the sender cannot pay the value (and, where the
	// node checks it, the gas).
	insufficientFunds
)

// outcome is a classified node error.
type outcome struct {
	kind   kind
	reason string
	data   []byte // the revert data, nil if the node gave none
}

// The words by which clients tell a failing transaction from a failing
// node, lower case and without spaces, underscores or hyphens (see
// squash). Only these mean something: any other answer is a node
// failure, retried, which is the safe side (a transaction retried in
// vain stays visible; one failed for a node's hiccup is lost). So the
// words are the clients' exact phrases, not loose ones: "stack
// overflow" alone could be a Java node's own crash, "insufficient
// balance" a paid provider's credits.
var (
	insufficientFundsWords = []string{
		"insufficientfundsforgas",          // geth, erigon, reth, anvil: "insufficient funds for gas * price + value"
		"insufficientfundsfortransfer",     // geth, anvil
		"upfrontcostexceedsaccountbalance", // besu
		"insufficientsenderbalance",        // nethermind
		"lackoffundfor",                    // revm: "lack of funds (x) for max fee (y)"
	}
	haltWords = []string{
		// geth, erigon and reth (go-ethereum's vm errors and their
		// copies), where the wording is the client's own.
		"outofgas",                    // also revm's "OutOfGas"
		"gasrequiredexceedsallowance", // eth_estimateGas: fails even with all the gas it may use
		"intrinsicgastoo",             // a given gas limit below the intrinsic cost ("too low"; anvil says "too high -- CallGasCostMoreThanGasLimit")
		"invalidopcode",
		"invalidjumpdestination",
		"stackunderflow", // also revm's "StackUnderflow"
		"stacklimitreached",
		"returndataoutofbounds",
		"writeprotection",
		"contractaddresscollision",
		"maxcodesizeexceeded",
		"mustnotbeginwith0xef",
		"maxinitcodesizeexceeded",
		"exceedsblockgaslimit",
		// anvil: revm's halt reasons, as "EVM error <reason>" under code
		// -32603 (JSON-RPC's internal error, so the code says nothing).
		// Not every "EVM error" is a halt: FatalExternalError is a
		// failed read of a forked chain's state.
		"evmerrorinvalidfeopcode",
		"evmerroropcodenotfound",
		"evmerrornotactivated", // an opcode of a later fork (PUSH0 on an old L2)
		"evmerrorinvalidjump",
		"evmerrorstackoverflow",
		"evmerroroutofoffset",
		"evmerrorstatechangeduringstaticcall",
		"evmerrorcallnotallowedinsidestatic",
		"evmerrorcreatecollision",
		"evmerrorcreatecontractsizelimit",
		"evmerrorcreatecontractstartingwithef",
		"evmerrorcreateinitcodesizelimit",
		"evmerrorreentrancysentryoog", // SSTORE with 2300 gas or less left
		"evmerrormemoryoog",
		"evmerrormemorylimitoog",
		"evmerrorprecompileoog",
		"evmerrorinvalidoperandoog",
	}
)

// classify reads a node's error. Only a JSON-RPC error object is an
// answer about the transaction: an HTTP error or a dropped connection
// says nothing about it, whatever its body says.
func classify(err error) outcome {
	var re rpc.Error
	if !errors.As(err, &re) {
		return outcome{kind: nodeFailure}
	}
	msg := re.Error()
	words := squash(msg)
	switch {
	case re.ErrorCode() == 3 || strings.Contains(words, "reverted") || dataSaysReverted(err):
		// Code 3 is geth's, erigon's, reth's and anvil's; besu says
		// "Execution reverted" under -32000, older nethermind "VM
		// execution error." with the data "Reverted 0x...".
		data, ok := revertData(err)
		if !ok {
			// No data to decode: the node's own words are the best
			// reason there is ("execution reverted: nope").
			return outcome{kind: reverted, reason: quoteIfNeeded(msg)}
		}
		return outcome{kind: reverted, reason: RevertReason(data), data: data}
	case containsAny(words, insufficientFundsWords):
		return outcome{kind: insufficientFunds, reason: quoteIfNeeded(msg)}
	case containsAny(words, haltWords):
		return outcome{kind: halted, reason: quoteIfNeeded(msg)}
	}
	return outcome{kind: nodeFailure}
}

// revertData is the revert data of a node's error, from rpc.DataError:
// a hex string (geth, anvil, erigon, reth, besu; "0x" when the contract
// reverted with nothing), a string with a prefix before the hex
// (nethermind's "Reverted 0x..."), or an object holding it under "data"
// (older hardhat). ok is false when there is none.
func revertData(err error) (data []byte, ok bool) {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return nil, false
	}
	var s string
	switch d := de.ErrorData().(type) {
	case string:
		s = d
	case map[string]any:
		s, _ = d["data"].(string)
	}
	i := strings.Index(s, "0x")
	if i < 0 {
		return nil, false
	}
	data, decErr := hex.DecodeString(strings.TrimSpace(s[i+2:]))
	if decErr != nil {
		return nil, false
	}
	return data, true
}

// dataSaysReverted reports whether the error's data is a string that
// starts by saying so, as older nethermind's "Reverted 0x..." does.
func dataSaysReverted(err error) bool {
	var de rpc.DataError
	if !errors.As(err, &de) {
		return false
	}
	s, ok := de.ErrorData().(string)
	return ok && strings.HasPrefix(strings.ToLower(s), "revert")
}

// squash lowers s and drops spaces, underscores and hyphens, so that
// "Out of gas", "OutOfGas" and "out_of_gas" read alike.
func squash(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '_', '-':
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
