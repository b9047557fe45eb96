package ledger

import (
	"encoding/json"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// The read side of the books (APIStore): accounts with their balances,
// current or as of a block, an account's statement, and journals as
// booked. Accounts, journals and entries never change once committed.

// MaxPage bounds what one read returns: a list asks for its page size, and
// one more row to learn whether another page follows.
const MaxPage = 1001

// AccountBalance is an account with its balance.
type AccountBalance struct {
	ID int64
	AccountKey
	// Balance is the current balance, or the balance as of AtBlock.
	Balance *big.Int
	// Version grows each time the current balance moves; 0 with AtBlock.
	Version int64
	// AtBlock is the block the balance is as of; nil for the current one.
	AtBlock *uint64
}

// AccountFilter selects accounts: each field set must match.
type AccountFilter struct {
	ChainID uint64
	Address *common.Address
	Kind    AccountKind
	Asset   string
	// AtBlock asks for balances as of that block instead of the current
	// ones.
	AtBlock *uint64
	// After is the last account id of the previous page; 0 for the first.
	After int64
	Limit int
}

// StatementLine is one entry of an account's statement.
type StatementLine struct {
	EntryID int64
	// Version is the account's balance version the entry's posting made:
	// a statement is in version order, then entry id order.
	Version   int64
	JournalID int64
	Kind      JournalKind
	// Reverses is the journal a reversal undoes; 0 otherwise.
	Reverses int64
	TxHash   *common.Hash
	Block    *Block
	Amount   *big.Int
	// Balance is the account's balance after this entry.
	Balance *big.Int
}

// StatementPosition is where a page of a statement starts: after entry
// EntryID of version Version, whose running balance was Balance. The zero
// position is the start.
type StatementPosition struct {
	Version int64
	EntryID int64
	Balance *big.Int
}

// BookedJournal is a journal as the ledger booked it.
type BookedJournal struct {
	ID      int64
	Kind    JournalKind
	ChainID uint64
	TxHash  *common.Hash
	Block   *Block
	// Status is the receipt's, "success" or "reverted"; "" when the fact
	// is not a transaction's.
	Status string
	// Reverses is the journal a reversal undoes; ReversedBy the reversal
	// that undid this one. 0 for none.
	Reverses, ReversedBy int64
	// Memo is a JSON object, {} when there is nothing to say.
	Memo      json.RawMessage
	CreatedAt time.Time
	// Entries are the journal's entries, in booking order; JournalByID
	// reads them, Journals does not.
	Entries []BookedEntry
}

// BookedEntry is one entry of a journal.
type BookedEntry struct {
	ID        int64
	AccountID int64
	Account   AccountKey
	Amount    *big.Int
}

// JournalFilter selects journals: each field set must match.
type JournalFilter struct {
	ChainID uint64
	TxHash  *common.Hash
	Kind    JournalKind
	// After is the last journal id of the previous page; 0 for the first.
	After int64
	Limit int
}
