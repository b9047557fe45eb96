package mevrouter

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Route is how a transaction is to be sent.
type Route string

// The routes. Auto resolves to Public or Private per transaction.
const (
	RoutePublic  Route = "public"
	RoutePrivate Route = "private"
	RouteAuto    Route = "auto"
)

// DEXSwapSignatures are the swap functions of the common DEX routers
// (Uniswap V2 and its forks, Uniswap V3 SwapRouter and SwapRouter02, the
// Universal Router, and their multicalls): the calls a sandwich bot
// front-runs. The auto route sends calls with these selectors privately.
// Selectors are computed from the signatures, so a typo cannot hide.
var DEXSwapSignatures = []string{
	// Uniswap V2 Router02 (and SushiSwap, PancakeSwap, ... forks)
	"swapExactTokensForTokens(uint256,uint256,address[],address,uint256)",
	"swapTokensForExactTokens(uint256,uint256,address[],address,uint256)",
	"swapExactETHForTokens(uint256,address[],address,uint256)",
	"swapTokensForExactETH(uint256,uint256,address[],address,uint256)",
	"swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
	"swapETHForExactTokens(uint256,address[],address,uint256)",
	"swapExactTokensForTokensSupportingFeeOnTransferTokens(uint256,uint256,address[],address,uint256)",
	"swapExactETHForTokensSupportingFeeOnTransferTokens(uint256,address[],address,uint256)",
	"swapExactTokensForETHSupportingFeeOnTransferTokens(uint256,uint256,address[],address,uint256)",
	// Uniswap V3 SwapRouter
	"exactInputSingle((address,address,uint24,address,uint256,uint256,uint256,uint160))",
	"exactInput((bytes,address,uint256,uint256,uint256))",
	"exactOutputSingle((address,address,uint24,address,uint256,uint256,uint256,uint160))",
	"exactOutput((bytes,address,uint256,uint256,uint256))",
	// Uniswap SwapRouter02 (no deadline in the params)
	"exactInputSingle((address,address,uint24,address,uint256,uint256,uint160))",
	"exactInput((bytes,address,uint256,uint256))",
	"exactOutputSingle((address,address,uint24,address,uint256,uint256,uint160))",
	"exactOutput((bytes,address,uint256,uint256))",
	"multicall(bytes[])",
	"multicall(uint256,bytes[])",
	"multicall(bytes32,bytes[])",
	// Uniswap Universal Router
	"execute(bytes,bytes[])",
	"execute(bytes,bytes[],uint256)",
}

// Selector is a 4-byte function selector.
type Selector [4]byte

func (s Selector) String() string { return "0x" + hex.EncodeToString(s[:]) }

// SelectorOf is the selector of a function signature.
func SelectorOf(signature string) Selector {
	var s Selector
	copy(s[:], crypto.Keccak256([]byte(signature)))
	return s
}

// ParseSelector reads "0x1234abcd" or a function signature.
func ParseSelector(text string) (Selector, error) {
	var s Selector
	if strings.Contains(text, "(") {
		return SelectorOf(text), nil
	}
	b, err := hex.DecodeString(strings.TrimPrefix(text, "0x"))
	if err != nil || len(b) != 4 {
		return s, fmt.Errorf("%q is neither a 4-byte selector (0x12345678) nor a function signature", text)
	}
	copy(s[:], b)
	return s, nil
}

// AutoRule decides the auto route: private for what a sandwich bot could
// exploit, public otherwise.
type AutoRule struct {
	// Contracts: any call to them goes private.
	Contracts map[common.Address]bool
	// Selectors: a call with one of them, to any contract, goes private.
	Selectors map[Selector]string // selector -> where it came from, for the reason
	// ValueAbove: a transaction moving more wei than this goes private;
	// nil disables the rule.
	ValueAbove *big.Int
}

// NewAutoRule builds the rule; the DEX swap selectors are always included.
func NewAutoRule(contracts []common.Address, selectors []Selector, valueAbove *big.Int) *AutoRule {
	r := &AutoRule{Contracts: map[common.Address]bool{}, Selectors: map[Selector]string{}, ValueAbove: valueAbove}
	for _, c := range contracts {
		r.Contracts[c] = true
	}
	for _, sig := range DEXSwapSignatures {
		r.Selectors[SelectorOf(sig)] = sig
	}
	for _, s := range selectors {
		if _, ok := r.Selectors[s]; !ok {
			r.Selectors[s] = "configured"
		}
	}
	return r
}

// Decide resolves route for tx, with the reason.
func (r *AutoRule) Decide(route Route, tx *types.Transaction) (Route, string) {
	switch route {
	case RoutePublic:
		return RoutePublic, "public route requested"
	case RoutePrivate:
		return RoutePrivate, "private route requested"
	}
	if to := tx.To(); to != nil && r.Contracts[*to] {
		return RoutePrivate, "auto: call to a listed contract " + to.Hex()
	}
	if data := tx.Data(); len(data) >= 4 {
		sel := Selector(data[:4])
		if from, ok := r.Selectors[sel]; ok {
			return RoutePrivate, fmt.Sprintf("auto: selector %s (%s) can be sandwiched", sel, from)
		}
	}
	if r.ValueAbove != nil && tx.Value().Cmp(r.ValueAbove) > 0 {
		return RoutePrivate, fmt.Sprintf("auto: value %s wei above the private threshold %s", tx.Value(), r.ValueAbove)
	}
	if tx.To() == nil {
		return RoutePublic, "auto: contract creation, nothing to sandwich"
	}
	return RoutePublic, "auto: no listed contract or selector, value under the threshold"
}
