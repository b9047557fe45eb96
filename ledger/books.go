// Package ledger holds the ledger's bookkeeping types: accounts, journals
// and their legs, and the rules a journal must follow before it is booked.
// The database enforces the same rules again (ledger/postgres); checking
// them here names the problem in words. It also holds what the ledger's
// parts hand the store and read back from it (the wallet registry, feed
// and scan bookings, the backlog, reconciliations, transits, the read
// side of the books), and the store each part works through (store.go),
// so that none of them needs the adapter to say what it does.
package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// Native is the asset of a chain's own currency; a token is its contract's
// lower-case address.
const Native = "native"

// AccountKind is an account's role.
type AccountKind string

// The account kinds.
const (
	// Wallet is an address whose keys txfence holds (or watches).
	Wallet AccountKind = "wallet"
	// FeeExpense is what a wallet spent on gas.
	FeeExpense AccountKind = "fee_expense"
	// Counterparty is an address a wallet paid or was paid by.
	Counterparty AccountKind = "counterparty"
	// InTransit holds what left one chain and has not arrived on another.
	InTransit AccountKind = "in_transit"
	// Suspense holds differences found by reconciliation, until explained.
	Suspense AccountKind = "suspense"
	// DepositSource is an outside address that sent a wallet a deposit.
	DepositSource AccountKind = "deposit_source"
	// OpeningBalance is the other side of a wallet's opening: what the
	// wallet held on chain before the ledger booked its movements.
	OpeningBalance AccountKind = "opening_balance"
)

// Valid reports whether k is one of the kinds.
func (k AccountKind) Valid() bool {
	switch k {
	case Wallet, FeeExpense, Counterparty, InTransit, Suspense, DepositSource, OpeningBalance:
		return true
	}
	return false
}

// JournalKind says what a journal books.
type JournalKind string

// The journal kinds.
const (
	Confirmed      JournalKind = "confirmed"      // a transaction of ours mined with status 1
	Reverted       JournalKind = "reverted"       // one mined with status 0: its fee only
	Reversal       JournalKind = "reversal"       // the negation of a journal whose block left the chain
	Deposit        JournalKind = "deposit"        // an inbound transfer the block scanner found
	Reconciliation JournalKind = "reconciliation" // a difference with the chain, into suspense
	TransitOut     JournalKind = "transit_out"    // a rebalancing's source leg
	TransitIn      JournalKind = "transit_in"     // a rebalancing's destination leg
	Opening        JournalKind = "opening"        // a wallet's chain balances when the ledger began booking it
	Adjustment     JournalKind = "adjustment"     // an operator's explanation of a suspense amount (see SuspenseAdjustment)
)

// Valid reports whether k is one of the kinds.
func (k JournalKind) Valid() bool {
	switch k {
	case Confirmed, Reverted, Reversal, Deposit, Reconciliation, TransitOut, TransitIn, Opening, Adjustment:
		return true
	}
	return false
}

// AccountKey names an account: one asset on one chain for one address, in
// one role.
type AccountKey struct {
	ChainID uint64
	Asset   string
	Kind    AccountKind
	Address common.Address
}

func (k AccountKey) String() string {
	return fmt.Sprintf("%d/%s/%s/%s", k.ChainID, k.Asset, k.Kind, strings.ToLower(k.Address.Hex()))
}

var tokenAsset = regexp.MustCompile(`^0x[0-9a-f]{40}$`)

// Validate names what is wrong with k.
func (k AccountKey) Validate() error {
	var problems []error
	if k.ChainID == 0 || k.ChainID > 1<<63-1 {
		problems = append(problems, errors.New("chain_id: must be set"))
	}
	if k.Asset != Native && !tokenAsset.MatchString(k.Asset) {
		problems = append(problems, fmt.Errorf("asset %q: %q or a token's lower-case 0x address", k.Asset, Native))
	}
	if !k.Kind.Valid() {
		problems = append(problems, fmt.Errorf("kind %q: not an account kind", k.Kind))
	}
	return errors.Join(problems...)
}

// Leg is one entry of a journal: a signed amount on an account (positive
// adds to its balance, negative takes from it).
type Leg struct {
	Account AccountKey
	Amount  *big.Int
}

// MaxAmount is the largest magnitude of an amount: 2^256 - 1.
var MaxAmount = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// Block is a block a journal's fact was settled in.
type Block struct {
	Number uint64
	Hash   common.Hash
}

// Journal is one booked fact and its balanced legs.
type Journal struct {
	Kind JournalKind
	// Key is the journal's idempotency key, derived from the fact (see
	// TxKey): the same fact booked again finds the journal booked before.
	Key     string
	ChainID uint64
	TxHash  *common.Hash
	Block   *Block
	// Status is the receipt's, "success" or "reverted"; "" when the fact
	// is not a transaction's.
	Status string
	// Reverses is the journal a Reversal negates; 0 otherwise.
	Reverses int64
	// Memo is a JSON object saying more (a reconciliation's cause); nil
	// for none.
	Memo json.RawMessage
	Legs []Leg
}

// MaxLegs bounds a journal's entries: a receipt with a few hundred token
// transfers fits.
const MaxLegs = 2048

// Validate names every problem that would stop j from being booked: fewer
// than two legs, an amount zero or out of range, legs that do not sum to
// zero in each asset, a leg on another chain.
func (j *Journal) Validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if !j.Kind.Valid() {
		add("kind %q: not a journal kind", j.Kind)
	}
	if j.Key == "" || len(j.Key) > 512 {
		add("key: 1 to 512 characters")
	}
	if j.ChainID == 0 || j.ChainID > 1<<63-1 {
		add("chain_id: must be set")
	}
	if j.Status != "" && j.Status != "success" && j.Status != "reverted" {
		add("status %q: success, reverted or none", j.Status)
	}
	if (j.Kind == Reversal) != (j.Reverses != 0) {
		add("reverses: a reversal names the journal it reverses, and only a reversal does")
	}
	if j.Memo != nil {
		var obj map[string]json.RawMessage
		if json.Unmarshal(j.Memo, &obj) != nil || obj == nil {
			add("memo: a JSON object")
		}
	}
	if len(j.Legs) < 2 || len(j.Legs) > MaxLegs {
		add("legs: %d, want 2 to %d", len(j.Legs), MaxLegs)
	}
	sums := map[string]*big.Int{}
	for i, l := range j.Legs {
		if err := l.Account.Validate(); err != nil {
			add("legs[%d]: %v", i, err)
			continue
		}
		if l.Account.ChainID != j.ChainID {
			add("legs[%d]: an account of chain %d in a journal of chain %d", i, l.Account.ChainID, j.ChainID)
		}
		if l.Amount == nil || l.Amount.Sign() == 0 || new(big.Int).Abs(l.Amount).Cmp(MaxAmount) > 0 {
			add("legs[%d]: amount %v: a non-zero integer of magnitude below 2^256", i, l.Amount)
			continue
		}
		if sums[l.Account.Asset] == nil {
			sums[l.Account.Asset] = new(big.Int)
		}
		sums[l.Account.Asset].Add(sums[l.Account.Asset], l.Amount)
	}
	for _, asset := range slices.Sorted(maps.Keys(sums)) {
		if sums[asset].Sign() != 0 {
			add("legs do not balance: the %s legs sum to %s", asset, sums[asset])
		}
	}
	return errors.Join(problems...)
}

// PayloadHash is the SHA-256 of what j books, legs in any order: a journal
// booked again under its key with the same hash is a replay; with another
// hash, a different fact under the same key.
func (j *Journal) PayloadHash() [32]byte {
	h := sha256.New()
	h.Write([]byte("txfence/ledger/journal/v1\x00"))
	u64 := func(v uint64) { h.Write(binary.BigEndian.AppendUint64(nil, v)) }
	str := func(s string) { u64(uint64(len(s))); h.Write([]byte(s)) }
	str(string(j.Kind))
	u64(j.ChainID)
	if j.TxHash != nil {
		h.Write([]byte{1})
		h.Write(j.TxHash[:])
	} else {
		h.Write([]byte{0})
	}
	if j.Block != nil {
		h.Write([]byte{1})
		u64(j.Block.Number)
		h.Write(j.Block.Hash[:])
	} else {
		h.Write([]byte{0})
	}
	str(j.Status)
	u64(uint64(j.Reverses))
	str(string(j.Memo))
	legs := make([]string, len(j.Legs))
	for i, l := range j.Legs {
		legs[i] = l.Account.String() + "=" + l.Amount.String()
	}
	slices.Sort(legs)
	u64(uint64(len(legs)))
	for _, l := range legs {
		str(l)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Posted is the outcome of booking a journal.
type Posted struct {
	JournalID int64
	// Created is false when the journal had been booked before (a replay).
	Created bool
}

// TxKey is the idempotency key of a journal booking a transaction's
// receipt in one block: the same receipt in the same block is one fact
// (a block hash fixes the receipt, its status included).
func TxKey(chainID uint64, tx common.Hash, block common.Hash) string {
	return fmt.Sprintf("tx:%d:%s:%s", chainID, strings.ToLower(tx.Hex()), strings.ToLower(block.Hex()))
}

// ReversalKey is the idempotency key of the reversal of journal id.
func ReversalKey(id int64) string { return fmt.Sprintf("reversal:%d", id) }
