package ledger

import (
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// The triggers of a reconciliation run.
const (
	TriggerSchedule = "schedule" // the reconciler's own interval
	TriggerRequest  = "request"  // an operator asked for it
)

// The statuses of a reconciliation run.
const (
	RunComplete   = "complete"
	RunIncomplete = "incomplete"
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
	// Status is "complete" when every item was compared, "incomplete"
	// when some were deferred (see Item.Pending) or could not be compared
	// or booked (Problem says why, and each such item's Cause).
	Status  string
	Problem string
	// Differences counts the items whose difference is not zero; Deferred
	// those not compared. Both are set when Items is not loaded.
	Differences, Deferred int
	Items                 []ReconciliationItem
}

// ReconciliationItem is one (wallet, asset) of a run.
type ReconciliationItem struct {
	Address common.Address
	Asset   string
	// Ledger and Chain are the two balances at the pinned block; Difference
	// is Chain - Ledger, booked to suspense when not zero. Difference is
	// nil when the item was not compared (deferred), and Chain too when the
	// chain's balance could not be read.
	Ledger, Chain, Difference *big.Int
	// Cause explains a difference in words, or why the item was not
	// compared or its difference not booked; "" when there is nothing to
	// explain.
	Cause string
	// JournalID is the reconciliation journal that booked the difference
	// to suspense; 0 when none was booked.
	JournalID int64
	// Pending are the wallet's transactions at or before the pinned block
	// that the feed has not booked: the item is deferred, not compared,
	// while any is younger than the grace period; older, they are compared
	// and named in the Cause. A transaction named by a complete run at an
	// earlier block is not listed again.
	Pending []common.Hash
	// Negative flags a ledger balance below zero: the chain settled more
	// than the books hold.
	Negative bool
}

// MaxRunsPage bounds a page of stored runs: the API's largest page, and
// the one more it reads to tell whether another follows.
const MaxRunsPage = 1001

// Holding is what the books hold, as of a block, of one asset for one
// wallet: in the wallet's account, and in its suspense account (what
// earlier reconciliations found and nothing has explained yet).
type Holding struct {
	Address          common.Address
	Asset            string
	Wallet, Suspense *big.Int
}

// UnbookedTx is a transaction a wallet sent that the scanner saw and the
// ledger has not booked (no journal under its TxKey).
type UnbookedTx struct {
	Sender common.Address
	Hash   common.Hash
	Block  uint64
	// Young says the scanner saw it less than the grace period ago (by
	// the database's clock): txmanager may still settle it.
	Young bool
}
