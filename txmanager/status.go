package txmanager

import "time"

// SignerStatus is what an operator asks about a signer: who works on it,
// where its nonces stand and how much is open.
type SignerStatus struct {
	Key            SignerKey
	Owner          string // "" when no node holds an unexpired lease
	Token          int64
	LeaseExpiresAt *time.Time
	NextNonce      *uint64 // the cursor; nil before the first allocation
	Counts         map[State]int
	// OldestOpenSince is when the oldest transaction not yet terminal was
	// accepted; nil when none is open.
	OldestOpenSince *time.Time
}

// Lease is one signer's lease as the status pages show it.
type Lease struct {
	Key SignerKey
	// Owner is the last node to acquire the lease, "" once released.
	Owner string
	Token int64
	// ExpiresAt is zero for a released lease.
	ExpiresAt  time.Time
	AcquiredAt time.Time
	// Held says whether the lease is unexpired by the database clock,
	// which is the only clock that decides it.
	Held bool
}
