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
	Seq     uint64
	Type    string
	TxID    uuid.UUID
	ChainID uint64
	// Signer is the transaction's from: consumers that serve several
	// owners (the gateway's tenants) route events by it.
	Signer    common.Address
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
	// BlockNumber and BlockHash name the block holding the receipt, on
	// the way to CONFIRMED, REVERTED or CANCELLED by a mined cancel: the
	// ledger reads the receipt pinned to it.
	BlockNumber *uint64      `json:"block_number,omitempty"`
	BlockHash   *common.Hash `json:"block_hash,omitempty"`
	Route       Route        `json:"route,omitempty"`
	// Approvers are the approvals signerd counted, when a transaction
	// stops waiting for them; Approver is who rejected it.
	Approvers []string `json:"approvers,omitempty"`
	Approver  string   `json:"approver,omitempty"`
}

// Confirmation is the data of a tx.confirmation event: the mined
// attempt's receipt is in a canonical block with Confirmations
// confirmations (1 in its own block). NewFork: the receipt is in another
// block than last reported, after a reorg.
type Confirmation struct {
	Hash          common.Hash `json:"hash"`
	BlockNumber   uint64      `json:"block_number"`
	BlockHash     common.Hash `json:"block_hash"`
	Confirmations uint64      `json:"confirmations"`
	ReceiptStatus uint8       `json:"receipt_status"`
	NewFork       bool        `json:"new_fork"`
}

// Reorged is the data of a tx.reorged event: the block holding the
// receipt left the canonical chain and the transaction was re-opened.
type Reorged struct {
	Hash          common.Hash `json:"hash"`
	BlockNumber   uint64      `json:"block_number"`
	BlockHash     common.Hash `json:"block_hash"`
	Confirmations uint64      `json:"confirmations,omitempty"`
	FromState     State       `json:"from_state"`
	ToState       State       `json:"to_state"`
}

// The kinds of attempt a tx.attempt event reports.
const (
	AttemptInitial = "initial"
	AttemptResend  = "resend"
	AttemptFeeBump = "fee_bump"
	AttemptCancel  = "cancel"
)

// AttemptSent is the data of a tx.attempt event: one signed attempt was
// sent.
type AttemptSent struct {
	Attempt  int          `json:"attempt"`
	Kind     string       `json:"kind"`
	Nonce    uint64       `json:"nonce"`
	Hash     common.Hash  `json:"hash"`
	Replaces *common.Hash `json:"replaces,omitempty"`
	Fees     AttemptFees  `json:"fees"`
	Route    Route        `json:"route"`
	SentAt   time.Time    `json:"sent_at"`
}

// AttemptFees are an attempt's gas limit and fee fields, in wei, as
// decimal strings.
type AttemptFees struct {
	GasLimit             uint64 `json:"gas_limit"`
	MaxFeePerGas         string `json:"max_fee_per_gas,omitempty"`
	MaxPriorityFeePerGas string `json:"max_priority_fee_per_gas,omitempty"`
	GasPrice             string `json:"gas_price,omitempty"`
}
