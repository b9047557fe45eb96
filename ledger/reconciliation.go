package ledger

import (
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// ReconciliationRun is a reconciliation's stored report: the ledger's
// balance of every (wallet, asset) of one chain, with every journal up to
// a pinned block, against the chain's balance at that block.
type ReconciliationRun struct {
	ID      int64
	ChainID uint64
	// Block is the pinned block, by number and hash.
	Block Block
	// Trigger is "schedule" or "request".
	Trigger    string
	StartedAt  time.Time
	FinishedAt time.Time
	// Status is "complete" when every wallet was compared, "incomplete"
	// when some were deferred (see Item.Pending) or the run failed part
	// way (Problem says why).
	Status  string
	Problem string
	Items   []ReconciliationItem
}

// ReconciliationItem is one (wallet, asset) of a run.
type ReconciliationItem struct {
	Address common.Address
	Asset   string
	// Ledger and Chain are the two balances at the pinned block; Difference
	// is Chain - Ledger, booked to suspense when not zero.
	Ledger, Chain, Difference *big.Int
	// Cause explains a difference in words; "" when there is none.
	Cause string
	// JournalID is the reconciliation journal that booked the difference
	// to suspense; 0 when none was booked.
	JournalID int64
	// Pending are the wallet's transactions at or before the pinned block
	// that the feed has not booked yet: the item is deferred, not compared,
	// while they are younger than the grace period.
	Pending []common.Hash
	// Negative flags a ledger balance below zero: the chain settled more
	// than the books hold.
	Negative bool
}
