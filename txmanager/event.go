package txmanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/transitid"

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
	// DependsOn and TransitID are on the INIT event only, from the
	// intent: the transactions it waits for (an array, in the intent's
	// order), and the transfer between chains its metadata names (see
	// TransitIDOf). The ledger links the two transactions of a transfer
	// by them, within TransitNamespace (the intent's, with a transit id
	// only): the destination depends on the source, among others maybe.
	DependsOn        dependson.List `json:"depends_on,omitempty"`
	TransitID        string         `json:"transit_id,omitempty"`
	TransitNamespace string         `json:"transit_namespace,omitempty"`
}

// InitEvent is the data of the INIT event that reports in's acceptance.
func InitEvent(in *Intent) StateChanged {
	e := StateChanged{ToState: StateInit, DependsOn: in.DependsOn, TransitID: TransitIDOf(in.Metadata)}
	if e.TransitID != "" {
		e.TransitNamespace = in.TransitNamespace
	}
	return e
}

// The transit id's bounds (shared/transitid).
const (
	MaxTransitIDLen        = transitid.MaxLen
	MaxTransitNamespaceLen = transitid.MaxNamespaceLen
)

// TransitIDOf is the transit id metadata names: the string member
// "transit_id" of the object, when it is 1 to MaxTransitIDLen characters
// of [A-Za-z0-9._:-]. A client marks the source and the destination
// transactions of a transfer between chains with the same one (the
// destination depending on the source). Anything else is no transit id:
// metadata is the client's own, and txmanager accepts it as it is.
func TransitIDOf(metadata json.RawMessage) string {
	// Most metadata names no transit: skip decoding it. A member name
	// spelled with escapes still gets decoded.
	if !bytes.Contains(metadata, []byte("transit_id")) && !bytes.Contains(metadata, []byte(`\u`)) {
		return ""
	}
	// A map, not a struct: encoding/json matches struct fields ignoring
	// case, and "Transit_ID" is not the member meant.
	var obj map[string]json.RawMessage
	if json.Unmarshal(metadata, &obj) != nil {
		return ""
	}
	var id string
	if json.Unmarshal(obj["transit_id"], &id) != nil || !transitid.Valid(id) {
		return ""
	}
	return id
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
	// AttemptDropped is no send: an attempt sent before was unknown to
	// every read endpoint at two blocks in a row after its send (a node
	// answered the send with its hash and dropped it since). A resend
	// follows, unless the attempt was dropped the chain's max_drops times.
	AttemptDropped = "dropped"
)

// ReasonDroppedByNode: the current attempt was dropped by the nodes the
// chain's max_drops times (sub-state stuck, until mined or an operator
// acts); the detail after the colon says which attempt and how often.
const ReasonDroppedByNode = "dropped_by_node"

// AttemptSent is the data of a tx.attempt event: one signed attempt was
// sent, or (kind dropped) found dropped since it was last sent at SentAt.
type AttemptSent struct {
	Attempt  int          `json:"attempt"`
	Kind     string       `json:"kind"`
	Nonce    uint64       `json:"nonce"`
	Hash     common.Hash  `json:"hash"`
	Replaces *common.Hash `json:"replaces,omitempty"`
	Fees     AttemptFees  `json:"fees"`
	Route    Route        `json:"route"`
	SentAt   time.Time    `json:"sent_at"`
	// Drops counts the times this attempt was dropped, this one included
	// (kind dropped only).
	Drops int `json:"drops,omitempty"`
}

// AttemptFees are an attempt's gas limit and fee fields, in wei, as
// decimal strings.
type AttemptFees struct {
	GasLimit             uint64 `json:"gas_limit"`
	MaxFeePerGas         string `json:"max_fee_per_gas,omitempty"`
	MaxPriorityFeePerGas string `json:"max_priority_fee_per_gas,omitempty"`
	GasPrice             string `json:"gas_price,omitempty"`
}
