package policy

import (
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

// rule is one compiled rule of the file.
type rule struct {
	id    string
	deny  bool
	match matcher
	// For allow rules only.
	limits limits
	// spenders is the allowlist of grantees of allowance-granting calls to
	// contracts that are not declared tokens; nil refuses every such call.
	spenders map[common.Address]bool
	// tokens are the declared tokens the rule allows calls to.
	tokens   map[tokenKey]*tokenRule
	approval *approvalRule
}

// matcher is a rule's match. A nil set or bound matches anything.
type matcher struct {
	chains map[uint64]bool
	from   map[common.Address]bool
	// anyDest is set when the match names no destination at all (nor,
	// for an allow rule, any token).
	anyDest bool
	to      map[common.Address]bool
	// tokens are the declared tokens an allow rule names.
	tokens       map[tokenKey]bool
	creation     bool
	selectors    map[common.Address]map[[4]byte]bool
	anySelectors map[[4]byte]bool
	minValue     *big.Int
	maxValue     *big.Int
}

// matches reports whether the rule applies to req, sent to the declared
// token tok (nil for any other destination). A match that names no
// destination matches a contract creation only in a deny rule: denying is
// broad, allowing is narrow, and deploying code is a different act from
// calling it, so an allow rule must say contract_creation to permit it.
// For the same reason an allow rule reaches a declared token only by
// naming it, or by listing a selector for its address (a call that is not
// one of its standard's); a deny rule matches it like any contract.
func (m *matcher) matches(req *signer.Request, deny bool, tok *token) bool {
	if m.chains != nil && !m.chains[req.ChainID] {
		return false
	}
	if m.from != nil && !m.from[req.From] {
		return false
	}
	if m.minValue != nil && req.Value.Cmp(m.minValue) < 0 {
		return false
	}
	if m.maxValue != nil && req.Value.Cmp(m.maxValue) > 0 {
		return false
	}
	if req.To == nil {
		if m.anyDest {
			return deny
		}
		return m.creation
	}
	if tok != nil && !deny {
		if m.tokens[tok.key] {
			return true
		}
		sel, ok := selectorOf(req)
		return ok && m.selectors[*req.To][sel]
	}
	if m.anyDest || m.to[*req.To] {
		return true
	}
	sel, ok := selectorOf(req)
	if !ok {
		return false
	}
	return m.selectors[*req.To][sel] || m.anySelectors[sel]
}

func selectorOf(req *signer.Request) ([4]byte, bool) {
	var sel [4]byte
	s := req.Selector()
	if s == nil {
		return sel, false
	}
	copy(sel[:], s)
	return sel, true
}

// limits are caps on a request; nil or 0 means no cap. A compiled allow
// rule or cancels entry always has maxFeePerGas, maxGas and feeWindows.
type limits struct {
	maxValue       *big.Int
	windows        []window
	maxFeePerGas   *big.Int
	maxPriorityFee *big.Int
	maxGas         uint64
	feeWindows     []window
}

// window caps what was signed for one chain and sender within a rolling
// duration: value, fees or units of a token.
type window struct {
	duration time.Duration
	max      *big.Int
}

// check returns why req exceeds the caps that need nothing but req; who
// names the rule or cancels entry for the reasons.
func (l *limits) check(req *signer.Request, who string) []string {
	var reasons []string
	if l.maxValue != nil && req.Value.Cmp(l.maxValue) > 0 {
		reasons = append(reasons, fmt.Sprintf("value %s wei exceeds max_value_per_tx %s (%s)", req.Value, l.maxValue, who))
	}
	if l.maxFeePerGas != nil && req.FeeCap().Cmp(l.maxFeePerGas) > 0 {
		name := "max_fee_per_gas"
		if req.Type == signer.Legacy {
			name = "gas_price"
		}
		reasons = append(reasons, fmt.Sprintf("%s %s wei exceeds max_fee_per_gas %s (%s)", name, req.FeeCap(), l.maxFeePerGas, who))
	}
	// A legacy transaction has no separate tip: its gas price, capped by
	// max_fee_per_gas above, is all it can pay.
	if l.maxPriorityFee != nil && req.Type == signer.DynamicFee && req.MaxPriorityFeePerGas.Cmp(l.maxPriorityFee) > 0 {
		reasons = append(reasons, fmt.Sprintf("max_priority_fee_per_gas %s wei exceeds max_priority_fee_per_gas %s (%s)", req.MaxPriorityFeePerGas, l.maxPriorityFee, who))
	}
	if l.maxGas != 0 && req.Gas > l.maxGas {
		reasons = append(reasons, fmt.Sprintf("gas %d exceeds max_gas %d (%s)", req.Gas, l.maxGas, who))
	}
	return reasons
}

// approvalRule requires threshold approvals from approvers.
type approvalRule struct {
	threshold int
	approvers []string // ids, in the file's order
	// above, when set, requires approvals only above this value.
	above *big.Int
	// aboveToken requires approvals for token calls above these units;
	// compile sets it only with above.
	aboveToken map[tokenKey]*big.Int
	maxTTL     time.Duration
}

// required reports whether req, which calls tok with effect e (both nil
// for anything else), needs approvals. Each threshold missing counts as
// exceeded: without above every request needs approvals, and a call to a
// token without a threshold of its own too; a grant of every unit exceeds
// any threshold.
func (a *approvalRule) required(req *signer.Request, tok *token, e *tokenEffect) bool {
	if a.above == nil || req.Value.Cmp(a.above) > 0 {
		return true
	}
	if tok == nil || e == nil {
		return false
	}
	max, ok := a.aboveToken[tok.key]
	return !ok || e.kind == grantsAll || e.amount.Cmp(max) > 0
}

// cancelGrant lets signers on chains cancel.
type cancelGrant struct {
	id     string
	chains map[uint64]bool
	from   map[common.Address]bool
	limits limits
}

func (g *cancelGrant) covers(chainID uint64, from common.Address) bool {
	return (g.chains == nil || g.chains[chainID]) && (g.from == nil || g.from[from])
}
