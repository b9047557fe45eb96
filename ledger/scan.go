package ledger

import "github.com/ethereum/go-ethereum/common"

// ScannedBlock is a block the scanner booked, linked to its parent.
type ScannedBlock struct {
	Number uint64
	Hash   common.Hash
	Parent common.Hash
}

// Block is b as a journal names it.
func (b ScannedBlock) Block() Block { return Block{Number: b.Number, Hash: b.Hash} }

// WalletTx is a transaction a wallet sent, seen by the scanner: the feed
// consumer books txfence's own; reconciliation reports the others.
type WalletTx struct {
	Hash   common.Hash
	Sender common.Address
}

// ScanBooking is what the scanner books for one block, N+1, with the
// cursor at N; or, with no block, the wallets it opens at N.
type ScanBooking struct {
	ChainID uint64
	// Cursor is the scan cursor as the scanner read it: block N.
	Cursor Block
	// Block is block N+1, whose parent is N; nil to open wallets only.
	Block *ScannedBlock
	// Opened are the wallets opened at N; their opening journals are among
	// Journals (none for a wallet that held nothing).
	Opened []common.Address
	// Journals are the openings at N and the deposits of N+1.
	Journals []*Journal
	// WalletTxs are the transactions wallets sent in N+1.
	WalletTxs []WalletTx
	// Window is how many scanned blocks to keep, N+1 included.
	Window int
}

// Rewound is what a rewind of the scan to a fork point undid.
type Rewound struct {
	// Reversed counts the deposits and openings reversed.
	Reversed int
	// Unopened are the wallets opened after the fork point: the scanner
	// opens them again at it.
	Unopened []common.Address
}
