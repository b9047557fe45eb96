// Package txmanager is the fenced transaction state machine: the states and
// events of a managed transaction, the fencing that keeps two nodes from
// ever working on one signer, and the rules every store and worker follows.
package txmanager

import (
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// SignerKey names one signer on one chain: the unit of ownership. Every
// transaction of a signer is worked by the one node holding its lease.
type SignerKey struct {
	ChainID uint64
	Signer  common.Address
}

func (k SignerKey) String() string { return fmt.Sprintf("%d/%s", k.ChainID, k.Signer.Hex()) }

// Fence is a node's claim on a signer: its lease's fencing token. Every
// critical write carries it and checks it in the same SQL statement
// against the lease row: owner, token and an unexpired lease by the
// database clock.
type Fence struct {
	Node  string
	Key   SignerKey
	Token int64
}

// ErrFenced is returned by a fenced write that touched nothing because the
// lease is no longer this node's (expired, taken over, or a newer token).
// The node must stop all work on the signer at once.
var ErrFenced = errors.New("fenced: the signer's lease is no longer held by this node")

// FencedError names the fence that failed.
type FencedError struct {
	Fence Fence
	Op    string
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("%s on %s: lease token %d of node %s is no longer current", e.Op, e.Fence.Key, e.Fence.Token, e.Fence.Node)
}

func (e *FencedError) Unwrap() error { return ErrFenced }

// StateError is a state change refused because the transaction is not in
// a state it may leave that way (for example cancelled meanwhile).
type StateError struct {
	TxID  uuid.UUID
	State State
	Want  []State
}

func (e *StateError) Error() string {
	return fmt.Sprintf("transaction %s is %s, not %v", e.TxID, e.State, e.Want)
}
