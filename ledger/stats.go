package ledger

import "time"

// Stats is how far the ledger's loops have got and what needs an
// operator, read from the books for ledgerd's metrics: the same answer
// from every node, since it is the database's.
type Stats struct {
	// Feeds are the feed cursors, by feed.
	Feeds map[string]CursorStat
	// Scans are the scanners' cursors, by chain.
	Scans map[uint64]CursorStat
	// NegativeWallets counts, by chain, the wallet accounts whose balance
	// is below zero now.
	NegativeWallets map[uint64]int
	// OpenTransits counts the transits with one end booked;
	// OldestOpenTransit is when the longest open one opened (nil if none).
	OpenTransits      int
	OldestOpenTransit *time.Time
	// Reconciled is each scanned chain's latest reconciliation run (a
	// chain is reconciled only once its scanner runs).
	Reconciled map[uint64]RunStat
	// Backlogs are the feed consumer's backlogs (of every feed), by
	// chain; a chain without one is absent.
	Backlogs map[uint64]BacklogChain
}

// CursorStat is a cursor: where it is, and when it last moved.
type CursorStat struct {
	Position  uint64
	UpdatedAt time.Time
}

// RunStat sums up a reconciliation run.
type RunStat struct {
	Block                 uint64
	Complete              bool
	Differences, Deferred int
	FinishedAt            time.Time
}
