package gateway

import (
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// The statuses of an operator's adjustment of the ledger (table
// ledger_adjustment).
const (
	// AdjustmentPending waits for a second admin key until its expiry.
	AdjustmentPending = "pending_approval"
	// AdjustmentApproved is cleared to book (at or below the threshold,
	// or approved) and not booked yet: the ledger did not answer, and the
	// next attempt books it.
	AdjustmentApproved = "approved"
	AdjustmentBooked   = "booked"
	AdjustmentRejected = "rejected"
	// AdjustmentRefused: the ledger refused it (Refusal says why).
	AdjustmentRefused = "refused"
	// AdjustmentExpired is a pending adjustment past its expiry, as it is
	// read: it can no longer be approved.
	AdjustmentExpired = "expired"
)

// AdjustmentStatuses lists the statuses an adjustment is read with.
var AdjustmentStatuses = []string{AdjustmentPending, AdjustmentApproved, AdjustmentBooked, AdjustmentRejected, AdjustmentRefused, AdjustmentExpired}

// KeyRef names an API key as the audit keeps it.
type KeyRef struct {
	ID   uuid.UUID
	Name string
}

// NewAdjustment is an operator's proposal to move Amount out of Wallet's
// suspense account in Asset to the counter account (the ledger's
// SuspenseAdjustment), under the tenant's own ID.
type NewAdjustment struct {
	Tenant         uuid.UUID
	ID             string
	ChainID        uint64
	Wallet         common.Address
	Asset          string
	Amount         *big.Int
	CounterKind    string
	CounterAddress common.Address
	Reason         string
	ProposedBy     KeyRef
}

// SameAs reports whether a proposes what n does: a replay, not a
// conflict.
func (n *NewAdjustment) SameAs(a *Adjustment) bool {
	return n.ChainID == a.ChainID && n.Wallet == a.Wallet && n.Asset == a.Asset && n.Amount.Cmp(a.Amount) == 0 &&
		n.CounterKind == a.CounterKind && n.CounterAddress == a.CounterAddress && n.Reason == a.Reason
}

// Adjustment is a stored proposal with what became of it.
type Adjustment struct {
	NewAdjustment
	Seq int64
	// Status is one of AdjustmentStatuses.
	Status string
	// NeedsApproval says whether a second admin key had to approve it;
	// Threshold is the threshold of its chain and asset then (nil: none
	// configured, so every amount needed one).
	NeedsApproval bool
	Threshold     *big.Int
	ProposedAt    time.Time
	// ExpiresAt is when a pending approval lapses (nil when none was
	// needed).
	ExpiresAt              *time.Time
	ApprovedBy, RejectedBy *KeyRef
	ApprovedAt, RejectedAt *time.Time
	JournalID              *int64
	BookedAt               *time.Time
	// RefusalKind (an errs kind's name) and Refusal are the ledger's
	// refusal, when it refused.
	RefusalKind, Refusal string
	RefusedAt            *time.Time
}

// Signer is the signer whose wallet the adjustment moves.
func (a *Adjustment) Signer() SignerRef {
	return SignerRef{ChainID: a.ChainID, Address: a.Wallet}
}

// ApprovalRule is when an adjustment needs a second admin key: when its
// magnitude, with those of the wallet's adjustments in the asset booked
// without one within Window, is above Threshold (nil: always). A pending
// one lapses after TTL.
type ApprovalRule struct {
	Threshold *big.Int
	Window    time.Duration
	TTL       time.Duration
}

// AdjustmentFilter selects a tenant's adjustments.
type AdjustmentFilter struct {
	// Status is one of AdjustmentStatuses, or "" for all.
	Status string
	// Signers are the wallets whose adjustments are listed: those a key
	// may use.
	Signers []SignerRef
	// Before is the Seq the page starts below (0: the newest); Limit the
	// most it holds.
	Before int64
	Limit  int
}
