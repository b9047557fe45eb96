package txmanager

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// The event types (components.yaml EventType).
const (
	EventStateChanged = "tx.state_changed"
	EventAttempt      = "tx.attempt"
	EventConfirmation = "tx.confirmation"
	EventReorged      = "tx.reorged"
)

// Event is one entry of the feed: exactly one per state change, committed
// with it, in gap-free seq order.
type Event struct {
	Seq       uint64
	Type      string
	TxID      uuid.UUID
	ChainID   uint64
	CreatedAt time.Time
	Data      json.RawMessage
}

// ID is the event's stable id, the same on every delivery.
func (e *Event) ID() string { return fmt.Sprintf("evt_%016x", e.Seq) }

// StateChanged is the data of a tx.state_changed event.
type StateChanged struct {
	FromState    State    `json:"from_state,omitempty"`
	ToState      State    `json:"to_state"`
	SubState     SubState `json:"sub_state,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	RevertReason string   `json:"revert_reason,omitempty"`
	// Rule is the signer policy's rule behind a denial or a demand for
	// approvals.
	Rule  string       `json:"rule,omitempty"`
	Nonce *uint64      `json:"nonce,omitempty"`
	Hash  *common.Hash `json:"hash,omitempty"`
	Route Route        `json:"route,omitempty"`
	// Approvers are the approvals signerd counted, when a transaction
	// stops waiting for them; Approver is who rejected it.
	Approvers []string `json:"approvers,omitempty"`
	Approver  string   `json:"approver,omitempty"`
}
