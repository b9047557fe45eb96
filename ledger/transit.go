package ledger

import (
	"math/big"
	"strings"
	"time"

	"github.com/txfence/txfence/shared/transitid"

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

// MaxTransitIDLen bounds a transit id as a client names it.
const MaxTransitIDLen = transitid.MaxLen

// MaxTransitNamespaceLen bounds a transit namespace (shared/transitid).
const MaxTransitNamespaceLen = transitid.MaxNamespaceLen

// NamespaceSeparator joins a namespace and a client's transit id in the
// ledger's id of a transit: a character no client id holds.
const NamespaceSeparator = "~"

// TransitKey is the ledger's id of the transit a client named id in
// namespace ns: "ns~id", each tenant's ids apart from every other's, so
// that no tenant can pair a transaction with another's transfer or take
// an id another uses. Without a namespace (transactions accepted before
// namespaces existed) it is id alone, as it was then.
func TransitKey(ns, id string) string {
	if ns == "" {
		return id
	}
	return ns + NamespaceSeparator + id
}

// SplitTransitKey is TransitKey's inverse: the namespace ("" for none)
// and the client's id.
func SplitTransitKey(key string) (ns, id string) {
	if ns, id, ok := strings.Cut(key, NamespaceSeparator); ok {
		return ns, id
	}
	return "", key
}

// ValidTransitID reports whether key is a well-formed transit id of the
// ledger: a client's id (1 to MaxTransitIDLen characters of
// [A-Za-z0-9._:-]), alone or after a valid namespace and
// NamespaceSeparator.
func ValidTransitID(key string) bool {
	ns, id := SplitTransitKey(key)
	if strings.Contains(key, NamespaceSeparator) && !ValidTransitNamespace(ns) {
		return false
	}
	return transitid.Valid(id)
}

// ValidClientTransitID reports whether id is a well-formed transit id as
// a client names it, without a namespace.
func ValidClientTransitID(id string) bool { return transitid.Valid(id) }

// ValidTransitNamespace reports whether ns is a well-formed namespace: 1
// to MaxTransitNamespaceLen characters of [A-Za-z0-9._:-].
func ValidTransitNamespace(ns string) bool { return transitid.ValidNamespace(ns) }

// TransitWrite is a transit as a run of the feed leaves it
// (FeedBooking.Transits). The journals of its parts that the run books
// itself are named by pointer, each one of the FeedBooking's Journals,
// since their ids are known only once booked; nil keeps the Transit's id.
type TransitWrite struct {
	Transit
	SourceJournal, DestinationJournal, FeeJournal *Journal
}

// TransitFilter selects transits: each field set must match.
type TransitFilter struct {
	Status TransitStatus
	// ChainID matches a transit's source chain or its destination's.
	ChainID uint64
	// Wallet matches a transit whose source or destination wallet it is;
	// with ChainID, only the end on that chain.
	Wallet *common.Address
	// Before is the Seq of the previous page's last transit; 0 for the
	// newest.
	Before int64
	Limit  int
}
