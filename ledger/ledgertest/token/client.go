package token

import (
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// The helpers below give a test that drives a chain it did not start (a
// development stack's anvil, through its URL) the inputs of Token's
// transactions: it signs and sends them itself, through whatever route
// it is testing.

// DeployCalldata is the input of the transaction that creates a Token
// named Name and Symbol: its creation code with the constructor's
// arguments. Its sender alone may mint.
func DeployCalldata() []byte {
	args, err := contract.Pack("", Name, Symbol)
	if err != nil {
		panic("token: pack the constructor: " + err.Error()) // two fixed strings always pack
	}
	return append(common.FromHex(creationCode), args...)
}

// MintCalldata is the input of mint(to, amount), which only the deployer
// may send.
func MintCalldata(to common.Address, amount *big.Int) []byte {
	data, err := contract.Pack("mint", to, amount)
	if err != nil {
		panic("token: pack mint: " + err.Error()) // only a nil amount gets here
	}
	return data
}

// DeployGas and CallGas are gas limits that fit Deploy's and a mint's or
// transfer's transaction, for a test that sends them itself.
const (
	DeployGas = deployGas
	CallGas   = callGas
)
