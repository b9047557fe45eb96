package mevrouter

import (
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// PrivateRequest is what a private send may ask for.
type PrivateRequest struct {
	// MaxBlock is the last block the transactions may be included in; zero
	// means the current block plus the private route's default distance.
	MaxBlock uint64
	// Relays names the relays to use; empty means all.
	Relays   []string
	Fallback Fallback
	Hints    []string
	Fast     bool
}

// Fallback says what happens when a private send expires.
type Fallback string

// The fallback policies.
const (
	FallbackNone   Fallback = "none"
	FallbackPublic Fallback = "public"
)

// PrivateState is where a private send stands.
type PrivateState string

// The private states; see openapi/mevrouter.yaml PrivateState.
const (
	PrivatePending   PrivateState = "pending"
	PrivateIncluded  PrivateState = "included"
	PrivateExpired   PrivateState = "expired"
	PrivateCancelled PrivateState = "cancelled"
	PrivateFailed    PrivateState = "failed"
)

// Status is a private send's status.
type Status struct {
	Hash     common.Hash
	State    PrivateState
	Block    uint64
	MaxBlock uint64
	Relays   []string
	Fallback Fallback
	FellBack bool
	SentAt   time.Time
}
