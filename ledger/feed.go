package ledger

// FeedBooking is what a run of a feed's events produced, booked by
// ConsumerStore.BookFeed in one transaction with the feed's cursor.
type FeedBooking struct {
	Feed string
	// From is the feed's cursor as stored; To the seq of the run's last
	// event.
	From, To uint64
	// Signers are the signers the events named: wallets from then on.
	Signers  []WalletKey
	Journals []*Journal
	// Transits are the transits the events linked or moved, each as the
	// run leaves it.
	Transits []TransitWrite
	// Backlog are events of the run (From, To] moved to the backlog,
	// unbooked: their chain's trouble kept them from being booked. An
	// event there already stays as it is.
	Backlog []BacklogEvent
	// Drained are the seqs of backlog events the run books (Journals
	// holds what they book): they leave the backlog. Each must be there;
	// otherwise another consumer has booked it, and nothing is booked
	// (errs.Conflict).
	Drained []uint64
}
