package mevrouter

import (
	"fmt"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

// Sent is a route's answer for one transaction.
type Sent struct {
	Hash       common.Hash
	Accepted   bool
	AcceptedBy []string
	// Err is the most telling refusal when no endpoint accepted.
	Err *SendError
}

// SendError is a refusal, classified.
type SendError struct {
	Category nodeerr.Category
	Message  string
	Endpoint string
}

func (e *SendError) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Endpoint, e.Message, e.Category)
}

// MoreTelling keeps the refusal that says most: a node's own verdict beats
// a timeout or a connection error, and the first verdict beats later ones.
func MoreTelling(have, next *SendError) *SendError {
	if have == nil || (have.Category == nodeerr.Transient && next.Category != nodeerr.Transient) {
		return next
	}
	return have
}
