package ledger_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
)

// An adjustment's journal moves its amount into the wallet's suspense
// account and out of the counter account, balanced and without a block;
// every malformed field is named.
func TestSuspenseAdjustment(t *testing.T) {
	wallet, payer := common.HexToAddress("0xaa"), common.HexToAddress("0xbb")
	tenant := uuid.MustParse("3f2c9a1e-7b4d-4c2a-9e8f-0a1b2c3d4e5f")
	alice := ledger.Operator{KeyID: uuid.MustParse("0c6f9b1e-0000-4000-8000-000000000001"), KeyName: "ops-alice", TenantID: tenant, TenantName: "acme"}
	bob := ledger.Operator{KeyID: uuid.MustParse("0c6f9b1e-0000-4000-8000-000000000002"), KeyName: "ops-bob", TenantID: tenant, TenantName: "acme"}
	id := ledger.AdjustmentIDPrefix(tenant) + "INC-1"
	good := ledger.SuspenseAdjustment{ID: id, ChainID: 1, Wallet: wallet, Asset: ledger.Native, Amount: big.NewInt(-7),
		Counter: ledger.Counterparty, CounterAddress: payer, Reason: "a spender's transferFrom", Operator: alice, Approver: &bob}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	j := good.Journal()
	if err := j.Validate(); err != nil || j.Kind != ledger.Adjustment || j.Key != "adjustment:"+id || j.Block != nil ||
		j.Legs[0].Account != good.Suspense() || j.Legs[0].Amount.Int64() != -7 || j.Legs[1].Account.Kind != ledger.Counterparty ||
		j.Legs[1].Account.Address != payer || j.Legs[1].Amount.Int64() != 7 || !strings.Contains(string(j.Memo), "transferFrom") {
		t.Errorf("journal %+v: %v", j, err)
	}
	// The memo names who asked and who approved.
	var memo struct {
		ID                 string `json:"adjustment_id"`
		Operator, Approver ledger.Operator
	}
	if err := json.Unmarshal(j.Memo, &memo); err != nil || memo.ID != id || memo.Operator != alice || memo.Approver != bob {
		t.Errorf("memo %s: %v", j.Memo, err)
	}
	unapproved := good
	unapproved.Approver = nil
	if err := unapproved.Validate(); err != nil || strings.Contains(string(unapproved.Journal().Memo), "approver") ||
		unapproved.Journal().PayloadHash() == j.PayloadHash() {
		t.Errorf("without an approver: %v, memo %s", err, unapproved.Journal().Memo)
	}
	for name, bad := range map[string]func(a *ledger.SuspenseAdjustment){
		"no operator":          func(a *ledger.SuspenseAdjustment) { a.Operator = ledger.Operator{} },
		"no operator key name": func(a *ledger.SuspenseAdjustment) { a.Operator.KeyName = " " },
		"an id of no tenant's": func(a *ledger.SuspenseAdjustment) { a.ID = "INC-1" },
		"another tenant's id":  func(a *ledger.SuspenseAdjustment) { a.ID = ledger.AdjustmentIDPrefix(uuid.New()) + "INC-1" },
		"self-approved":        func(a *ledger.SuspenseAdjustment) { a.Approver = &alice },
		"approved from outside": func(a *ledger.SuspenseAdjustment) {
			a.Approver = &ledger.Operator{KeyID: uuid.New(), KeyName: "x", TenantID: uuid.New(), TenantName: "y"}
		},
		"no id": func(a *ledger.SuspenseAdjustment) { a.ID = "" },
		"a long id": func(a *ledger.SuspenseAdjustment) {
			a.ID = ledger.AdjustmentIDPrefix(tenant) + strings.Repeat("a", ledger.MaxAdjustmentIDLen)
		},
		"a zero amount":  func(a *ledger.SuspenseAdjustment) { a.Amount = new(big.Int) },
		"2^256":          func(a *ledger.SuspenseAdjustment) { a.Amount = new(big.Int).Lsh(big.NewInt(1), 256) },
		"to a wallet":    func(a *ledger.SuspenseAdjustment) { a.Counter = ledger.Wallet },
		"to suspense":    func(a *ledger.SuspenseAdjustment) { a.Counter = ledger.Suspense },
		"a blank reason": func(a *ledger.SuspenseAdjustment) { a.Reason = " \n" },
		"a long reason":  func(a *ledger.SuspenseAdjustment) { a.Reason = strings.Repeat("é", ledger.MaxReasonLen+1) },
		"not UTF-8":      func(a *ledger.SuspenseAdjustment) { a.Reason = "\xff" },
		"no chain":       func(a *ledger.SuspenseAdjustment) { a.ChainID = 0 },
		"an upper asset": func(a *ledger.SuspenseAdjustment) { a.Asset = "0xABCDEF0000000000000000000000000000000000" },
	} {
		a := good
		bad(&a)
		if err := a.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	long := good
	long.Reason = strings.Repeat("é", ledger.MaxReasonLen) // characters, not bytes
	if err := long.Validate(); err != nil {
		t.Errorf("a reason of %d two-byte characters: %v", ledger.MaxReasonLen, err)
	}
}
