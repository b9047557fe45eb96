package ledger_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
)

// An adjustment's journal moves its amount into the wallet's suspense
// account and out of the counter account, balanced and without a block;
// every malformed field is named.
func TestSuspenseAdjustment(t *testing.T) {
	wallet, payer := common.HexToAddress("0xaa"), common.HexToAddress("0xbb")
	good := ledger.SuspenseAdjustment{ID: "INC-1", ChainID: 1, Wallet: wallet, Asset: ledger.Native, Amount: big.NewInt(-7),
		Counter: ledger.Counterparty, CounterAddress: payer, Reason: "a spender's transferFrom"}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	j := good.Journal()
	if err := j.Validate(); err != nil || j.Kind != ledger.Adjustment || j.Key != "adjustment:INC-1" || j.Block != nil ||
		j.Legs[0].Account != good.Suspense() || j.Legs[0].Amount.Int64() != -7 || j.Legs[1].Account.Kind != ledger.Counterparty ||
		j.Legs[1].Account.Address != payer || j.Legs[1].Amount.Int64() != 7 || !strings.Contains(string(j.Memo), "transferFrom") {
		t.Errorf("journal %+v: %v", j, err)
	}
	for name, bad := range map[string]func(a *ledger.SuspenseAdjustment){
		"no id":          func(a *ledger.SuspenseAdjustment) { a.ID = "" },
		"a long id":      func(a *ledger.SuspenseAdjustment) { a.ID = strings.Repeat("a", ledger.MaxAdjustmentIDLen+1) },
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
