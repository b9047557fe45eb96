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
	"github.com/google/uuid"
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
	// Operator is who asked for the adjustment: an admin key of the
	// gateway, which named it (ledgerd books adjustments only from the
	// gateway's operator path). Approver is the second admin key that
	// approved it, when the gateway required one (above its threshold).
	// Both go into the journal's memo and the adjustment's audit row.
	Operator Operator
	Approver *Operator
}

// An Operator is an API key of the gateway acting on the books, and its
// tenant, as the gateway names them.
type Operator struct {
	KeyID      uuid.UUID `json:"key_id"`
	KeyName    string    `json:"key_name"`
	TenantID   uuid.UUID `json:"tenant_id"`
	TenantName string    `json:"tenant_name"`
}

// MaxOperatorNameLen bounds an operator's key and tenant names (the
// gateway's own bounds).
const MaxOperatorNameLen = 100

// validate names every way o is not an operator, under field.
func (o *Operator) validate(field string, add func(format string, args ...any)) {
	if o.KeyID == uuid.Nil {
		add("%s.key_id: the key's id", field)
	}
	if o.TenantID == uuid.Nil {
		add("%s.tenant_id: the key's tenant's id", field)
	}
	for name, v := range map[string]string{"key_name": o.KeyName, "tenant_name": o.TenantName} {
		if strings.TrimSpace(v) == "" || !utf8.ValidString(v) || utf8.RuneCountInString(v) > MaxOperatorNameLen {
			add("%s.%s: 1 to %d characters", field, name, MaxOperatorNameLen)
		}
	}
}

// AdjustmentIDPrefix starts the id of every adjustment of tenant's
// operators: ids are per tenant, so that one tenant's ticket number never
// collides with another's.
func AdjustmentIDPrefix(tenant uuid.UUID) string { return tenant.String() + ":" }

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
	a.Operator.validate("operator", add)
	if a.Operator.TenantID != uuid.Nil && !strings.HasPrefix(a.ID, AdjustmentIDPrefix(a.Operator.TenantID)) {
		add("adjustment_id: must start with the operator's tenant_id and ':' (ids are per tenant)")
	}
	if ap := a.Approver; ap != nil {
		ap.validate("approver", add)
		if ap.KeyID == a.Operator.KeyID {
			add("approver.key_id: the operator's own key; an approval is a second key's")
		}
		if ap.TenantID != a.Operator.TenantID {
			add("approver.tenant_id: another tenant's; the approver is a key of the operator's tenant")
		}
	}
	return errors.Join(problems...)
}

// Suspense is the account a moves its amount out of.
func (a *SuspenseAdjustment) Suspense() AccountKey {
	return AccountKey{ChainID: a.ChainID, Asset: a.Asset, Kind: Suspense, Address: a.Wallet}
}

// AdjustmentKey is the journal key of adjustment id.
func AdjustmentKey(id string) string { return "adjustment:" + id }

// adjustmentMemo is an adjustment journal's memo: who asked for it, who
// approved it, and why.
type adjustmentMemo struct {
	AdjustmentID string    `json:"adjustment_id"`
	Reason       string    `json:"reason"`
	Operator     Operator  `json:"operator"`
	Approver     *Operator `json:"approver,omitempty"`
}

// Journal is a's journal: the amount into the wallet's suspense account,
// out of the counter account, with no block (it books an explanation, not
// a chain fact), the reason, the operator and the approver in its memo.
// The memo is part of what the journal books: the same adjustment id
// asked again by another operator is another fact, a conflict.
func (a *SuspenseAdjustment) Journal() *Journal {
	memo, _ := json.Marshal(adjustmentMemo{AdjustmentID: a.ID, Reason: a.Reason, Operator: a.Operator, Approver: a.Approver}) // strings and UUIDs always marshal
	counter := AccountKey{ChainID: a.ChainID, Asset: a.Asset, Kind: a.Counter, Address: a.CounterAddress}
	return &Journal{Kind: Adjustment, Key: AdjustmentKey(a.ID), ChainID: a.ChainID, Memo: memo, Legs: []Leg{
		{Account: a.Suspense(), Amount: new(big.Int).Set(a.Amount)},
		{Account: counter, Amount: new(big.Int).Neg(a.Amount)},
	}}
}
