package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/common"
)

// A SuspenseAdjustment is an operator's explanation of an amount reconciliation
// put in a wallet's suspense account: it moves the amount from suspense to
// the account the investigation found it belongs to (the contract that
// paid the wallet, as a deposit source; the spender that took from it, as
// a counterparty; a fee the books lacked, as a fee expense), with the
// reason in the journal's memo. It never moves a wallet account: the
// wallet already ties out to the chain.
type SuspenseAdjustment struct {
	// ID is the operator's id for the adjustment: booking the same one
	// again is a replay, another with the same id a conflict.
	ID      string
	ChainID uint64
	Wallet  common.Address
	Asset   string
	// Amount is added to the wallet's suspense account and taken from the
	// counter account: positive clears a negative suspense balance (an
	// inbound movement), negative a positive one (an outbound movement).
	Amount  *big.Int
	Counter AccountKind
	// CounterAddress is whose Counter account it is: the wallet's own for
	// a fee expense, an outside address for a counterparty.
	CounterAddress common.Address
	Reason         string
}

// AdjustmentCounterKinds are the accounts an adjustment may move suspense
// to: not a wallet (which ties out already) nor suspense itself.
var AdjustmentCounterKinds = []AccountKind{Counterparty, DepositSource, FeeExpense, InTransit, OpeningBalance}

// MaxAdjustmentIDLen and MaxReasonLen bound an adjustment's id and reason.
const (
	MaxAdjustmentIDLen = 128
	MaxReasonLen       = 1000
)

var adjustmentID = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// ValidAdjustmentID reports whether id is 1 to MaxAdjustmentIDLen
// characters of [A-Za-z0-9._:-].
func ValidAdjustmentID(id string) bool {
	return len(id) <= MaxAdjustmentIDLen && adjustmentID.MatchString(id)
}

// ValidAdjustmentCounter reports whether k is one of
// AdjustmentCounterKinds.
func ValidAdjustmentCounter(k AccountKind) bool { return slices.Contains(AdjustmentCounterKinds, k) }

// ValidReason reports whether reason is 1 to MaxReasonLen characters of
// UTF-8, not only spaces.
func ValidReason(reason string) bool {
	return strings.TrimSpace(reason) != "" && utf8.ValidString(reason) && utf8.RuneCountInString(reason) <= MaxReasonLen
}

// Validate names every way a is not an adjustment the ledger books.
func (a *SuspenseAdjustment) Validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if !ValidAdjustmentID(a.ID) {
		add("adjustment_id: 1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'", MaxAdjustmentIDLen)
	}
	if a.Amount == nil || a.Amount.Sign() == 0 || new(big.Int).Abs(a.Amount).Cmp(MaxAmount) > 0 {
		add("amount: a non-zero integer of magnitude below 2^256")
	}
	if !ValidAdjustmentCounter(a.Counter) {
		add("counter_account.kind %q: one of %v", a.Counter, AdjustmentCounterKinds)
	}
	if !ValidReason(a.Reason) {
		add("reason: 1 to %d characters, not only spaces", MaxReasonLen)
	}
	if err := (AccountKey{ChainID: a.ChainID, Asset: a.Asset, Kind: Suspense, Address: a.Wallet}).Validate(); err != nil {
		add("%v", err)
	}
	return errors.Join(problems...)
}

// Suspense is the account a moves its amount out of.
func (a *SuspenseAdjustment) Suspense() AccountKey {
	return AccountKey{ChainID: a.ChainID, Asset: a.Asset, Kind: Suspense, Address: a.Wallet}
}

// AdjustmentKey is the journal key of adjustment id.
func AdjustmentKey(id string) string { return "adjustment:" + id }

// Journal is a's journal: the amount into the wallet's suspense account,
// out of the counter account, with no block (it books an explanation, not
// a chain fact), the reason in its memo.
func (a *SuspenseAdjustment) Journal() *Journal {
	memo, _ := json.Marshal(map[string]string{"adjustment_id": a.ID, "reason": a.Reason}) // strings always marshal
	counter := AccountKey{ChainID: a.ChainID, Asset: a.Asset, Kind: a.Counter, Address: a.CounterAddress}
	return &Journal{Kind: Adjustment, Key: AdjustmentKey(a.ID), ChainID: a.ChainID, Memo: memo, Legs: []Leg{
		{Account: a.Suspense(), Amount: new(big.Int).Set(a.Amount)},
		{Account: counter, Amount: new(big.Int).Neg(a.Amount)},
	}}
}
