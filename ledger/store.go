package ledger

import (
	"context"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// The stores the ledger's parts work through, each as small as what its
// user calls, so that the feed consumer, the scanner, the reconciler, the
// transit watch or the API can be tested against a fake of its own store;
// postgres.Store implements them all.
//
// Booking is idempotent: a journal booked again under its key with the
// same payload is a replay (Posted.Created false), with another payload an
// errs.Conflict (and an alert) that books nothing of the call. A booking
// that moves a cursor (the feed's, a chain's scan cursor) commits with
// it, and is refused with errs.Conflict when the cursor is no longer
// where the caller read it: another consumer or scanner moved it.

// ConsumerStore is what the feed consumer reads and writes: the wallet
// registry, its cursor and backlog in the feed, the transits and journals
// a page of events moves, and the page's booking.
type ConsumerStore interface {
	// Wallets reads the wallet registry.
	Wallets(ctx context.Context) ([]RegisteredWallet, error)
	// Cursor is the seq up to which feed's events are booked; 0 before
	// any.
	Cursor(ctx context.Context, feed string) (uint64, error)
	// BacklogChains sums up feed's backlog, by chain; chains without one
	// are absent.
	BacklogChains(ctx context.Context, feed string) (map[uint64]BacklogChain, error)
	// Backlog reads the oldest limit events of chainID's backlog of feed,
	// in seq order: what is to be booked of the chain before anything
	// else.
	Backlog(ctx context.Context, feed string, chainID uint64, limit int) ([]BacklogEvent, error)
	// TransitsOf reads the transits named by ids, and those whose source
	// or destination is one of txs: what a page of the feed may link or
	// move.
	TransitsOf(ctx context.Context, txs []uuid.UUID, ids []string) ([]Transit, error)
	// LiveJournal reads the journal that books key's fact now: the one
	// under key or, when that was reversed and its fact booked again, the
	// last such rebooking; what a reversal negates. errs.NotFound when
	// none is booked.
	LiveJournal(ctx context.Context, key string) (int64, *Journal, error)
	// JournalByID reads journal id with its entries; errs.NotFound when
	// there is none.
	JournalByID(ctx context.Context, id int64) (BookedJournal, error)
	// BookFeed books a run of b.Feed's events in one transaction: the
	// signers join the wallets, the journals are booked, the transits
	// written, the backlog events added and drained, and the cursor moves
	// from b.From to b.To; errs.Conflict when the cursor is not at b.From
	// or a drained event is no longer in the backlog. Posted[i] is
	// b.Journals[i]'s outcome.
	BookFeed(ctx context.Context, b *FeedBooking) ([]Posted, error)
}

// ScannerStore is what a chain's block scanner reads and writes: its scan
// cursor and the blocks it keeps to find a fork point, the wallet
// registry, the feed consumer's cursor it waits for, and each block's
// booking or a rewind.
type ScannerStore interface {
	// ScanCursor is the last block the scanner booked on chainID; nil
	// before its first start.
	ScanCursor(ctx context.Context, chainID uint64) (*Block, error)
	// StartScan sets chainID's scan cursor at the last of blocks (oldest
	// first) on the first start and keeps them all as scanned; a cursor
	// set before is kept. It returns the cursor.
	StartScan(ctx context.Context, chainID uint64, blocks []ScannedBlock) (Block, error)
	// ScannedBlocks are the blocks of chainID the scanner keeps, newest
	// first: where a reorg's fork point is looked for.
	ScannedBlocks(ctx context.Context, chainID uint64) ([]ScannedBlock, error)
	// Cursor is the seq up to which feed's events are booked: a block is
	// booked once the consumer has caught up with the feed.
	Cursor(ctx context.Context, feed string) (uint64, error)
	// Wallets reads the wallet registry.
	Wallets(ctx context.Context) ([]RegisteredWallet, error)
	// UnopenedWallets are chainID's registered wallets the scanner has
	// not opened.
	UnopenedWallets(ctx context.Context, chainID uint64) ([]common.Address, error)
	// BookScan books b in one transaction: the cursor moves from b.Cursor
	// to b.Block (or stays, with no block), the wallets are opened at
	// b.Cursor, the journals and the wallets' transactions are written.
	// errs.Conflict when the cursor is not at b.Cursor.
	BookScan(ctx context.Context, b *ScanBooking) ([]Posted, error)
	// RewindScan moves chainID's scan cursor back from from to fork, a
	// kept block still on the chain, reversing the deposits and openings
	// booked after it. errs.Conflict when the cursor is not at from.
	RewindScan(ctx context.Context, chainID uint64, from, fork Block) (Rewound, error)
}

// ReconcileStore is what the reconciler reads and writes: a chain's
// reconciliation, in a transaction of its own, and the runs stored.
type ReconcileStore interface {
	// Reconcile runs fn in a transaction that holds chainID's
	// reconciliation lock, so that two runs of one chain go one after the
	// other, and commits what fn wrote. fn may run again on contention
	// and must be safe to re-run; when it fails, nothing it wrote is kept.
	Reconcile(ctx context.Context, chainID uint64, fn func(ReconcileTx) error) error
	// ReconciliationRuns lists stored runs, newest first, without their
	// items: of chainID (0 for every chain), before the run id before (0
	// for the newest), at most limit (1 to MaxRunsPage).
	ReconciliationRuns(ctx context.Context, chainID uint64, before int64, limit int) ([]ReconciliationRun, error)
}

// ReconcileTx is one chain's reconciliation under way (ReconcileStore):
// it reads the books as of a block, books the differences and stores the
// report, all committed together or not at all.
type ReconcileTx interface {
	// ScanCursor is the last block the scanner booked on the chain; nil
	// when it has booked none.
	ScanCursor(ctx context.Context) (*Block, error)
	// ScannedHash is the hash of the block the scanner booked at number,
	// when it still keeps that block.
	ScannedHash(ctx context.Context, number uint64) (common.Hash, bool, error)
	// FeedCursor is the seq up to which feed is booked for the chain: the
	// feed's cursor, or the seq before the oldest of the chain's backlog
	// (backlogged settlements are not booked yet).
	FeedCursor(ctx context.Context, feed string) (uint64, error)
	// NewestRun is the chain's newest stored run, or with complete its
	// newest complete one, without items; nil when there is none.
	NewestRun(ctx context.Context, complete bool) (*ReconciliationRun, error)
	// Wallets are the chain's wallets opened at or before block, in
	// address order.
	Wallets(ctx context.Context, block uint64) ([]common.Address, error)
	// Holdings reads, as of block, every asset the chain's wallets opened
	// at or before block have an account for.
	Holdings(ctx context.Context, block uint64) ([]Holding, error)
	// Unbooked lists the transactions the chain's wallets sent in blocks
	// from from to upTo, after each wallet's opening, that the ledger has
	// not booked, by sender, block and hash; Young when seen less than
	// grace ago.
	Unbooked(ctx context.Context, from, upTo uint64, grace time.Duration) ([]UnbookedTx, error)
	// Booked returns the journals, by key, booked under any of keys.
	Booked(ctx context.Context, keys []string) (map[string]int64, error)
	// NewRunID reserves the id of the run being made, for the memos of
	// its journals.
	NewRunID(ctx context.Context) (int64, error)
	// Book books journals in the reconciliation and returns their ids.
	Book(ctx context.Context, journals []*Journal) ([]int64, error)
	// Save stores run, whose ID NewRunID reserved, with its items.
	Save(ctx context.Context, run *ReconciliationRun) error
}

// TransitStore is what the transit watch needs: the transits overdue.
type TransitStore interface {
	// AlertTransits marks the open transits opened before openedBefore
	// and not alerted in their current opening as alerted at now, and
	// returns them: each opening once, whichever node asks.
	AlertTransits(ctx context.Context, openedBefore, now time.Time) ([]Transit, error)
}

// APIStore is what ledgerd's HTTP API reads, and the operator's
// adjustments of suspense it books.
type APIStore interface {
	// Accounts lists the accounts f selects, by account id, with their
	// balances.
	Accounts(ctx context.Context, f AccountFilter) ([]AccountBalance, error)
	// Account is one account with its current balance, or with atBlock
	// its balance as of that block; errs.NotFound when there is none.
	Account(ctx context.Context, id int64, atBlock *uint64) (AccountBalance, error)
	// Statement returns up to limit entries of the account after pos, in
	// the order they became visible, each with the running balance after
	// it; pos must be where a previous page ended (the API authenticates
	// its cursors). errs.NotFound when there is no such account.
	Statement(ctx context.Context, accountID int64, pos StatementPosition, limit int) ([]StatementLine, error)
	// Journals lists the journals f selects, oldest first, without their
	// entries.
	Journals(ctx context.Context, f JournalFilter) ([]BookedJournal, error)
	// JournalByID reads journal id with its entries; errs.NotFound when
	// there is none.
	JournalByID(ctx context.Context, id int64) (BookedJournal, error)
	// ReconciliationRuns lists stored runs, newest first, without their
	// items: of chainID (0 for every chain), before the run id before (0
	// for the newest), at most limit (1 to MaxRunsPage).
	ReconciliationRuns(ctx context.Context, chainID uint64, before int64, limit int) ([]ReconciliationRun, error)
	// ReconciliationRun reads stored run id with its items;
	// errs.NotFound when there is none.
	ReconciliationRun(ctx context.Context, id int64) (*ReconciliationRun, error)
	// Transits lists the transits f selects, newest first.
	Transits(ctx context.Context, f TransitFilter) ([]Transit, error)
	// Transit reads transit id; errs.NotFound when there is none.
	Transit(ctx context.Context, id string) (Transit, error)
	// Adjust books an operator's adjustment of suspense: never more than
	// suspense holds (errs.Conflict), the same adjustment again a replay.
	Adjust(ctx context.Context, a *SuspenseAdjustment) (Posted, error)
}
