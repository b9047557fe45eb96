package ledger

import (
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// A Transit is a transfer between chains (a rebalancing): a source
// transaction on one chain sends funds away from a wallet (to a bridge)
// and a destination transaction on another chain brings them to a
// wallet. A client marks both with one transit id in their metadata, the
// destination depending on the source; txmanager's INIT events carry both
// links. Each end is booked on its own chain through the wallet's
// in_transit account, and the difference as the bridge's fee (the rules:
// ledger/booking/transit.go).
type Transit struct {
	ID string
	// Seq orders transits, newest highest: a list's cursor.
	Seq    int64
	Status TransitStatus
	// Source is the end funds leave from; Destination the end they arrive
	// at, its TxID zero until its INIT names the transit.
	Source, Destination TransitEnd
	// Bridge is whose fee_expense account holds the bridge fee (see
	// booking.TransitMove.Bridge); nil until the source is booked.
	Bridge *common.Address
	// BridgeFee is what left minus what arrived, once completed (nil
	// before); negative when more arrived than left. FeeJournalID is the
	// journal that booked it, 0 when it is zero.
	BridgeFee    *big.Int
	FeeJournalID int64
	// OpenedAt is when value last went into transit (nil while pending),
	// CompletedAt when it completed (nil unless completed), AlertedAt when
	// the age alert was raised for the current opening (nil if not).
	OpenedAt, CompletedAt, AlertedAt *time.Time
	UpdatedAt                        time.Time
}

// TransitEnd is one end of a transit: a transaction of txmanager, and
// once booked, what it moved through its wallet's in_transit account.
type TransitEnd struct {
	TxID    uuid.UUID
	ChainID uint64
	// Wallet is the transaction's sender.
	Wallet common.Address
	// JournalID is the journal that booked the end (transit_out or
	// transit_in), from receipt TxHash in block BlockHash; Asset and
	// Amount (positive) are what crossed. Zero values while not booked.
	JournalID int64
	TxHash    *common.Hash
	BlockHash *common.Hash
	Asset     string
	Amount    *big.Int
}

// Booked reports whether the end's settlement is booked.
func (e *TransitEnd) Booked() bool { return e.Amount != nil }

// TransitStatus says how far a transit has got.
type TransitStatus string

// The statuses of a transit, which follow from the ends booked.
const (
	// TransitPending: linked, neither end booked; nothing in transit.
	TransitPending TransitStatus = "pending"
	// TransitOpen: one end booked; value in transit.
	TransitOpen TransitStatus = "open"
	// TransitCompleted: both ends booked, and the bridge fee.
	TransitCompleted TransitStatus = "completed"
)

// Valid reports whether s is one of the statuses.
func (s TransitStatus) Valid() bool {
	return s == TransitPending || s == TransitOpen || s == TransitCompleted
}

// StatusOf is the status t's booked ends give it.
func (t *Transit) StatusOf() TransitStatus {
	switch {
	case t.Source.Booked() && t.Destination.Booked():
		return TransitCompleted
	case t.Source.Booked() || t.Destination.Booked():
		return TransitOpen
	}
	return TransitPending
}

// MaxTransitIDLen bounds a transit id.
const MaxTransitIDLen = 128

// ValidTransitID reports whether id is a well-formed transit id: 1 to
// MaxTransitIDLen characters of [A-Za-z0-9._:-].
func ValidTransitID(id string) bool {
	if id == "" || len(id) > MaxTransitIDLen {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
