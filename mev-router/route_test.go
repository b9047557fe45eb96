package mevrouter_test

import (
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	mevrouter "github.com/txfence/txfence/mev-router"
)

// TestSwapSelectorsAreTheRoutersOwn pins a few selectors to the values the
// routers' ABIs publish, so a mistyped signature cannot silently send a
// swap publicly.
func TestSwapSelectorsAreTheRoutersOwn(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"swapExactTokensForTokens(uint256,uint256,address[],address,uint256)":                "0x38ed1739",
		"swapExactETHForTokens(uint256,address[],address,uint256)":                           "0x7ff36ab5",
		"swapExactTokensForETH(uint256,uint256,address[],address,uint256)":                   "0x18cbafe5",
		"exactInputSingle((address,address,uint24,address,uint256,uint256,uint256,uint160))": "0x414bf389",
		"exactInputSingle((address,address,uint24,address,uint256,uint256,uint160))":         "0x04e45aaf",
		"execute(bytes,bytes[],uint256)":                                                     "0x3593564c",
		"multicall(uint256,bytes[])":                                                         "0x5ae401dc",
	}
	for sig, sel := range want {
		if got := mevrouter.SelectorOf(sig).String(); got != sel {
			t.Errorf("%s: %s, want %s", sig, got, sel)
		}
		found := false
		for _, s := range mevrouter.DEXSwapSignatures {
			found = found || s == sig
		}
		if !found {
			t.Errorf("%s is not in DEXSwapSignatures", sig)
		}
	}
}

func TestAutoRoute(t *testing.T) {
	t.Parallel()
	pool := common.HexToAddress("0x0000000000000000000000000000000000c0ffee")
	custom, err := mevrouter.ParseSelector("liquidate(address,uint256)")
	if err != nil {
		t.Fatal(err)
	}
	rule := mevrouter.NewAutoRule([]common.Address{pool}, []mevrouter.Selector{custom}, big.NewInt(1e18))
	other := common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	call := func(to *common.Address, value int64, data []byte) *types.Transaction {
		return types.NewTx(&types.DynamicFeeTx{To: to, Value: big.NewInt(value), Data: data})
	}
	swap := mevrouter.SelectorOf("swapExactTokensForTokens(uint256,uint256,address[],address,uint256)")
	liquidate := mevrouter.SelectorOf("liquidate(address,uint256)")
	tests := []struct {
		name   string
		route  mevrouter.Route
		tx     *types.Transaction
		want   mevrouter.Route
		reason string
	}{
		{"a swap to any router", mevrouter.RouteAuto, call(&other, 0, append(swap[:], make([]byte, 64)...)), mevrouter.RoutePrivate, "0x38ed1739"},
		{"a call to a listed contract", mevrouter.RouteAuto, call(&pool, 0, []byte{1, 2, 3, 4}), mevrouter.RoutePrivate, "listed contract"},
		{"a configured selector", mevrouter.RouteAuto, call(&other, 0, liquidate[:]), mevrouter.RoutePrivate, "configured"},
		{"a large transfer", mevrouter.RouteAuto, call(&other, 2e18, nil), mevrouter.RoutePrivate, "above the private threshold"},
		{"a small transfer", mevrouter.RouteAuto, call(&other, 1e18, nil), mevrouter.RoutePublic, "under the threshold"},
		{"a contract creation", mevrouter.RouteAuto, call(nil, 0, []byte{0x60, 0x80}), mevrouter.RoutePublic, "contract creation"},
		{"short call data", mevrouter.RouteAuto, call(&other, 0, swap[:3]), mevrouter.RoutePublic, "no listed"},
		{"public asked, even for a swap", mevrouter.RoutePublic, call(&other, 0, swap[:]), mevrouter.RoutePublic, "requested"},
		{"private asked, even for a transfer", mevrouter.RoutePrivate, call(&other, 1, nil), mevrouter.RoutePrivate, "requested"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, reason := rule.Decide(tt.route, tt.tx)
			if got != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("Decide = %s (%q), want %s (…%s…)", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestParseSelector(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "0x12", "0x1234567890", "zz", "nope"} {
		if _, err := mevrouter.ParseSelector(bad); err == nil {
			t.Errorf("ParseSelector(%q) accepted", bad)
		}
	}
	if s, err := mevrouter.ParseSelector("0x38ED1739"); err != nil || s.String() != "0x38ed1739" {
		t.Errorf("ParseSelector(0x38ED1739) = %s, %v", s, err)
	}
}
