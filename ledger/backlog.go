package ledger

import (
	"encoding/json"
	"time"
)

// Why an event was moved to a feed's backlog.
const (
	// BacklogHalted: the ledger had halted the event's chain.
	BacklogHalted = "halted"
	// BacklogEndpoint: the chain's endpoint could not give the receipt in
	// the block the event names (unreachable, failing, or not there yet).
	BacklogEndpoint = "endpoint"
	// BacklogNoEndpoint: no endpoint is configured for the chain.
	BacklogNoEndpoint = "no_endpoint"
	// BacklogWalletNotOpened: the settlement moves a wallet the chain's
	// scanner has not opened yet.
	BacklogWalletNotOpened = "wallet_not_opened"
	// BacklogQueued: older events of the chain were in the backlog.
	BacklogQueued = "queued"
)

// BacklogEvent is an event of a feed moved to its backlog: its chain's
// trouble kept it from being booked when the feed reached it.
type BacklogEvent struct {
	Seq     uint64
	ChainID uint64
	TxID    string
	// Event is the event as the feed served it; EventAt when txmanager
	// committed it.
	Event   json.RawMessage
	EventAt time.Time
	// Reason is one of the Backlog* reasons; Error what the attempt to
	// book it said, if anything.
	Reason string
	Error  string
}

// BacklogChain sums up one chain's backlog.
type BacklogChain struct {
	Events int
	// OldestSeq and OldestAt are the oldest event's seq and when
	// txmanager committed it.
	OldestSeq uint64
	OldestAt  time.Time
}
