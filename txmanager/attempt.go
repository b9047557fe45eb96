package txmanager

import (
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// Attempt is one signed attempt of a transaction, to store.
type Attempt struct {
	TxID                 uuid.UUID
	Raw                  []byte
	Hash                 common.Hash
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
	GasPrice             *big.Int
}

// Sent is a transaction whose current attempt a route accepted.
type Sent struct {
	TxID  uuid.UUID
	Route Route
}
