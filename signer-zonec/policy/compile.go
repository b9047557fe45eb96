package policy

import (
	"cmp"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

// compile validates a decoded file and builds the Policy. It reports every
// problem it finds, not only the first, each at its JSON path.
func compile(raw rawPolicy) (*Policy, error) {
	c := compiler{}
	p := &Policy{
		version:   raw.Version,
		chains:    map[uint64]bool{},
		approvers: map[string]ed25519.PublicKey{},
		raw:       raw,
	}

	c.text("version", raw.Version, true, 128)
	if raw.Description != nil {
		c.text("description", *raw.Description, false, 4096)
	}
	if raw.Chains == nil {
		c.add("chains", "required: the chain ids signerd signs for")
	}
	p.chains = c.chainSet("chains", raw.Chains, nil)

	if raw.Approvers != nil && len(raw.Approvers) == 0 {
		c.add("approvers", "empty; leave it out when there are no approvers")
	}
	var seenIDs []string
	for _, id := range sortedKeys(raw.Approvers) {
		path := childPath("approvers", id)
		if !idPattern.MatchString(id) {
			c.add(path, "an approver id is 1 to 64 letters, digits, '.', '_', '-' or '@'")
		}
		if pub, ok := c.publicKey(path, raw.Approvers[id]); ok {
			for _, other := range seenIDs {
				if p.approvers[other].Equal(pub) {
					c.add(path, fmt.Sprintf("the same key as approver %q: one key, one approver", other))
				}
			}
			seenIDs = append(seenIDs, id)
			p.approvers[id] = pub
		}
	}

	if raw.Tokens != nil && len(raw.Tokens) == 0 {
		c.add("tokens", "empty; leave it out when no token is declared")
	}
	p.tokens = map[tokenKey]*token{}
	tokenIDs := map[string]*token{}
	for _, id := range sortedKeys(raw.Tokens) {
		if tok := c.token(childPath("tokens", id), id, raw.Tokens[id], p); tok != nil {
			p.tokens[tok.key] = tok
			tokenIDs[id] = tok
		}
	}

	ids := map[string]string{} // rule or cancel id -> its path
	claimID := func(path, id string) {
		if !idPattern.MatchString(id) {
			c.add(path, "an id is 1 to 64 letters, digits, '.', '_', '-' or '@'")
			return
		}
		if slices.Contains(reserved, id) {
			c.add(path, fmt.Sprintf("%q is reserved for signerd's own decisions", id))
			return
		}
		if prev, dup := ids[id]; dup {
			c.add(path, fmt.Sprintf("%q is already the id of %s", id, prev))
			return
		}
		ids[id] = strings.TrimSuffix(path, ".id")
	}

	for i, rc := range raw.Cancels {
		path := fmt.Sprintf("cancels[%d]", i)
		claimID(path+".id", rc.ID)
		if rc.Description != nil {
			c.text(path+".description", *rc.Description, false, 4096)
		}
		g := &cancelGrant{
			id:     rc.ID,
			chains: c.chainSet(path+".chains", rc.Chains, p.chains),
			from:   c.addressSet(path+".from", rc.From),
		}
		if rc.Limits == nil {
			c.add(path+".limits", "required: every cancels entry caps fees (max_fee_per_gas, max_gas and fee_windows)")
		} else {
			g.limits = c.limits(path+".limits", rc.Limits, true)
		}
		p.cancels = append(p.cancels, g)
	}

	if raw.Rules == nil {
		c.add("rules", "required (an empty list denies everything)")
	}
	for i, rr := range raw.Rules {
		path := fmt.Sprintf("rules[%d]", i)
		claimID(path+".id", rr.ID)
		if rr.Description != nil {
			c.text(path+".description", *rr.Description, false, 4096)
		}
		r := &rule{id: rr.ID}
		if rr.Match == nil {
			c.add(path+".match", "required ({} matches every request)")
		} else {
			r.match = c.match(path+".match", rr.Match, p.chains)
		}
		switch rr.Effect {
		case "deny":
			r.deny = true
			for _, f := range []struct {
				name string
				set  bool
			}{{"limits", rr.Limits != nil}, {"erc20_spenders", rr.ERC20Spenders != nil}, {"tokens", rr.Tokens != nil}, {"approval", rr.Approval != nil}} {
				if f.set {
					c.add(path+"."+f.name, "only allow rules have "+f.name+": a deny rule denies what it matches")
				}
			}
			p.deny = append(p.deny, r)
		case "allow":
			if rr.Limits == nil {
				c.add(path+".limits", "required: every allow rule caps fees (max_fee_per_gas, max_gas and fee_windows)")
			} else {
				r.limits = c.limits(path+".limits", rr.Limits, false)
			}
			if rr.ERC20Spenders != nil && len(rr.ERC20Spenders) == 0 {
				c.add(path+".erc20_spenders", "an empty list; leave it out (without it, no approval call is allowed)")
			} else if rr.ERC20Spenders != nil {
				r.spenders = c.addressSet(path+".erc20_spenders", rr.ERC20Spenders)
			}
			if rr.Tokens != nil {
				c.ruleTokens(path, rr.Tokens, r, tokenIDs)
			}
			if rr.Match != nil {
				c.tokensReachedAround(path+".match", rr.Match, &r.match, p.tokens)
			}
			if rr.Approval != nil {
				r.approval = c.approval(path+".approval", rr.Approval, p.approvers, r.tokens, tokenIDs)
			}
			p.allow = append(p.allow, r)
		case "":
			c.add(path+".effect", `required: "allow" or "deny"`)
		default:
			c.add(path+".effect", fmt.Sprintf(`%q is not "allow" or "deny"`, rr.Effect))
		}
	}
	if len(c.problems) > 0 {
		return nil, &Error{Problems: c.problems}
	}
	return p, nil
}

// idPattern is what a rule, cancel or approver id may look like: short and
// plain, since ids appear in decisions, logs and audit records.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9._@-]{1,64}$`)

type compiler struct {
	problems []Problem
}

func (c *compiler) add(path, msg string) { c.problems = append(c.problems, Problem{path, msg}) }

// text checks a free-text field: printable, bounded.
func (c *compiler) text(path, s string, required bool, max int) {
	switch {
	case s == "" && required:
		c.add(path, "required")
	case s == "" && !required:
		c.add(path, "empty; leave it out instead")
	case len(s) > max:
		c.add(path, fmt.Sprintf("longer than %d bytes", max))
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		c.add(path, "contains control characters")
	}
}

// chainSet reads a list of chain ids. within, when set, is the policy's
// allowlist, which every id must be in (a rule naming another chain could
// never apply: it is a mistake). A nil list is nil: any chain.
func (c *compiler) chainSet(path string, ids []uint64, within map[uint64]bool) map[uint64]bool {
	if ids == nil {
		return nil
	}
	if len(ids) == 0 {
		c.add(path, emptyList)
		return nil
	}
	set := map[uint64]bool{}
	for i, id := range ids {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case id == 0:
			c.add(ipath, "0 is not a chain id")
		case set[id]:
			c.add(ipath, fmt.Sprintf("chain %d is listed twice", id))
		case within != nil && !within[id]:
			c.add(ipath, fmt.Sprintf("chain %d is not in the policy's chains", id))
		}
		set[id] = true
	}
	return set
}

const emptyList = "an empty list; leave the field out to match any (an empty list would read as none)"

// addressSet reads a list of addresses; nil is nil (any).
func (c *compiler) addressSet(path string, list []string) map[common.Address]bool {
	if list == nil {
		return nil
	}
	if len(list) == 0 {
		c.add(path, emptyList)
		return nil
	}
	set := map[common.Address]bool{}
	for i, s := range list {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		a, ok := c.address(ipath, s)
		if !ok {
			continue
		}
		if set[a] {
			c.add(ipath, a.Hex()+" is listed twice")
		}
		set[a] = true
	}
	return set
}

var hexAddress = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)

// address reads an address written in lowercase or with its EIP-55
// checksum: a mixed-case address with a wrong checksum is a typo.
func (c *compiler) address(path, s string) (common.Address, bool) {
	if !hexAddress.MatchString(s) {
		c.add(path, fmt.Sprintf("%q is not an address (0x and 40 hex digits)", s))
		return common.Address{}, false
	}
	a := common.HexToAddress(s)
	if s != strings.ToLower(s) && s != a.Hex() {
		c.add(path, fmt.Sprintf("%s has a wrong EIP-55 checksum (write it lowercase or as %s)", s, a.Hex()))
		return common.Address{}, false
	}
	return a, true
}

var hexSelector = regexp.MustCompile(`^0x[0-9a-fA-F]{8}$`)

func (c *compiler) selector(path, s string) ([4]byte, bool) {
	var sel [4]byte
	if !hexSelector.MatchString(s) {
		c.add(path, fmt.Sprintf("%q is not a selector (0x and 8 hex digits)", s))
		return sel, false
	}
	hex.Decode(sel[:], []byte(s[2:]))
	return sel, true
}

var decimal = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)

// amount reads a wei amount: a decimal string in uint256 range. Strings,
// not JSON numbers, because JSON tools lose precision past 2^53.
func (c *compiler) amount(path, s string) (*big.Int, bool) { return c.number(path, s, wei) }

// units reads an amount of a token, in the token's own units.
func (c *compiler) units(path, s string) (*big.Int, bool) { return c.number(path, s, tokenUnits) }

// The units amounts are written in.
const (
	wei        = "wei"
	tokenUnits = "token units"
)

func (c *compiler) number(path, s, unit string) (*big.Int, bool) {
	if !decimal.MatchString(s) || len(s) > 78 {
		c.add(path, fmt.Sprintf("%q is not an amount (a decimal string of %s, no sign, no leading zeros)", s, unit))
		return nil, false
	}
	v, _ := new(big.Int).SetString(s, 10)
	if v.Cmp(maxUint256) > 0 {
		c.add(path, s+" is more than 2^256-1")
		return nil, false
	}
	return v, true
}

var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

func (c *compiler) duration(path, s string) (time.Duration, bool) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		c.add(path, fmt.Sprintf("%q is not a positive duration (such as 1h, 24h, 168h)", s))
		return 0, false
	}
	return d, true
}

// publicKey reads an Ed25519 public key written as 64 hex digits (0x
// optional) or standard base64.
func (c *compiler) publicKey(path, s string) (ed25519.PublicKey, bool) {
	pub, err := ParsePublicKey(s)
	if err != nil {
		c.add(path, err.Error())
		return nil, false
	}
	return pub, true
}

// ParsePublicKey reads an approver's Ed25519 public key as the policy file
// writes it: 64 hex digits (0x optional) or standard base64 of the 32 bytes.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	h := strings.TrimPrefix(s, "0x")
	if len(h) == 2*ed25519.PublicKeySize {
		if b, err := hex.DecodeString(h); err == nil {
			return ed25519.PublicKey(b), nil
		}
	}
	if b, err := base64.StdEncoding.Strict().DecodeString(s); err == nil && len(b) == ed25519.PublicKeySize {
		return ed25519.PublicKey(b), nil
	}
	return nil, fmt.Errorf("%q is not an Ed25519 public key (64 hex digits or base64 of 32 bytes)", s)
}

func (c *compiler) match(path string, rm *rawMatch, chains map[uint64]bool) matcher {
	m := matcher{
		chains: c.chainSet(path+".chains", rm.Chains, chains),
		from:   c.addressSet(path+".from", rm.From),
		to:     c.addressSet(path+".to", rm.To),
	}
	m.creation = rm.ContractCreation
	if rm.Selectors != nil && len(rm.Selectors) == 0 {
		c.add(path+".selectors", "empty; leave it out instead")
	}
	for _, key := range sortedKeys(rm.Selectors) {
		kpath := childPath(path+".selectors", key)
		var set map[[4]byte]bool
		list := rm.Selectors[key]
		if len(list) == 0 {
			c.add(kpath, "no selectors listed")
		}
		for i, s := range list {
			ipath := fmt.Sprintf("%s[%d]", kpath, i)
			sel, ok := c.selector(ipath, s)
			if !ok {
				continue
			}
			if set[sel] {
				c.add(ipath, s+" is listed twice")
			}
			if set == nil {
				set = map[[4]byte]bool{}
			}
			set[sel] = true
		}
		if key == "*" {
			m.anySelectors = set
			continue
		}
		a, ok := c.address(kpath, key)
		if !ok {
			continue
		}
		if m.to[a] {
			c.add(kpath, a.Hex()+" is also in to, which allows any call data to it: list it in one place")
		}
		if m.selectors[a] != nil {
			c.add(kpath, a.Hex()+" is listed twice")
		}
		if m.selectors == nil {
			m.selectors = map[common.Address]map[[4]byte]bool{}
		}
		m.selectors[a] = set
	}
	m.anyDest = rm.To == nil && rm.Selectors == nil && !rm.ContractCreation
	if rm.Value != nil {
		vpath := path + ".value"
		if rm.Value.Min == nil && rm.Value.Max == nil {
			c.add(vpath, "set min, max or both")
		}
		if rm.Value.Min != nil {
			m.minValue, _ = c.amount(vpath+".min", *rm.Value.Min)
		}
		if rm.Value.Max != nil {
			m.maxValue, _ = c.amount(vpath+".max", *rm.Value.Max)
		}
		if m.minValue != nil && m.maxValue != nil && m.minValue.Cmp(m.maxValue) > 0 {
			c.add(vpath, "min is more than max: the range is empty")
		}
	}
	return m
}

// limits reads caps. A cancel moves no value, so its limits have none of
// the value caps. The fee caps are required of both: a fee cap per
// transaction alone would let a compromised caller drain a wallet in fees
// one capped transaction after another, so fees also count toward rolling
// windows per sender.
func (c *compiler) limits(path string, rl *rawLimits, cancel bool) limits {
	var l limits
	if cancel {
		if rl.MaxValuePerTx != nil {
			c.add(path+".max_value_per_tx", "a cancel moves no value")
		}
		if rl.Windows != nil {
			c.add(path+".windows", "a cancel moves no value")
		}
	}
	if rl.MaxValuePerTx != nil {
		l.maxValue, _ = c.amount(path+".max_value_per_tx", *rl.MaxValuePerTx)
	}
	if rl.Windows != nil && len(rl.Windows) == 0 {
		c.add(path+".windows", emptyList)
	}
	l.windows = c.windows(path+".windows", len(rl.Windows), func(i int) (string, string) { return rl.Windows[i].Duration, rl.Windows[i].MaxValue }, "max_value", "window", wei)
	if rl.MaxFeePerGas == nil {
		c.add(path+".max_fee_per_gas", "required: the most a transaction may pay per gas (a legacy gas price included)")
	} else {
		l.maxFeePerGas, _ = c.amount(path+".max_fee_per_gas", *rl.MaxFeePerGas)
	}
	if rl.MaxPriorityFeePerGas != nil {
		l.maxPriorityFee, _ = c.amount(path+".max_priority_fee_per_gas", *rl.MaxPriorityFeePerGas)
	}
	if l.maxFeePerGas != nil && l.maxPriorityFee != nil && l.maxPriorityFee.Cmp(l.maxFeePerGas) > 0 {
		c.add(path+".max_priority_fee_per_gas", "more than max_fee_per_gas, which already caps it")
	}
	switch {
	case rl.MaxGas == nil:
		c.add(path+".max_gas", "required: the most gas a transaction may use")
	case *rl.MaxGas == 0:
		c.add(path+".max_gas", "0 would refuse every transaction")
	default:
		l.maxGas = *rl.MaxGas
	}
	switch {
	case rl.FeeWindows == nil:
		c.add(path+".fee_windows", "required: at least one rolling window of the fees (gas × max fee) signed for the sender")
	case len(rl.FeeWindows) == 0:
		c.add(path+".fee_windows", "an empty list: at least one fee window is required")
	}
	l.feeWindows = c.windows(path+".fee_windows", len(rl.FeeWindows), func(i int) (string, string) { return rl.FeeWindows[i].Duration, rl.FeeWindows[i].MaxFee }, "max_fee", "fee window", wei)
	return l
}

// windows reads n rolling windows, at most one per duration: at(i) gives
// the i-th window's duration and cap, the cap in the field maxField, in
// unit.
func (c *compiler) windows(path string, n int, at func(i int) (duration, max string), maxField, kind, unit string) []window {
	var out []window
	seen := map[time.Duration]bool{}
	for i := range n {
		wpath := fmt.Sprintf("%s[%d]", path, i)
		dur, maxText := at(i)
		d, okD := c.duration(wpath+".duration", dur)
		max, okM := c.number(wpath+"."+maxField, maxText, unit)
		if okD && seen[d] {
			c.add(wpath+".duration", fmt.Sprintf("a second %s of %s", kind, d))
		}
		seen[d] = true
		if okD && okM {
			out = append(out, window{duration: d, max: max})
		}
	}
	return out
}

func (c *compiler) approval(path string, ra *rawApproval, approvers map[string]ed25519.PublicKey, ruleTokens map[tokenKey]*tokenRule, tokenIDs map[string]*token) *approvalRule {
	a := &approvalRule{threshold: int(min(ra.Threshold, 1<<16))}
	if ra.Approvers == nil {
		c.add(path+".approvers", "required: the ids of the approvers who may approve")
	} else if len(ra.Approvers) == 0 {
		c.add(path+".approvers", "an empty list: no approval could ever count")
	} else if len(ra.Approvers) > signer.MaxApprovals {
		// A request carries at most MaxApprovals approvals, one per
		// approver: more approvers could never all count.
		c.add(path+".approvers", fmt.Sprintf("%d approvers; a rule may list at most %d", len(ra.Approvers), signer.MaxApprovals))
	}
	for i, id := range ra.Approvers {
		ipath := fmt.Sprintf("%s.approvers[%d]", path, i)
		switch {
		case approvers[id] == nil:
			c.add(ipath, fmt.Sprintf("%q is not in the policy's approvers", id))
		case slices.Contains(a.approvers, id):
			c.add(ipath, fmt.Sprintf("%q is listed twice", id))
		default:
			a.approvers = append(a.approvers, id)
		}
	}
	switch {
	case ra.Threshold == 0:
		c.add(path+".threshold", "required, at least 1")
	case ra.Threshold > uint64(len(ra.Approvers)):
		c.add(path+".threshold", fmt.Sprintf("%d of %d approvers can never be reached", ra.Threshold, len(ra.Approvers)))
	}
	if ra.AboveValue != nil {
		a.above, _ = c.amount(path+".above_value", *ra.AboveValue)
	}
	switch {
	case ra.AboveTokenAmounts != nil && ra.AboveValue == nil:
		c.add(path+".above_value", "required with above_token_amounts: without it every request needs approvals, and the token thresholds never apply")
	case ra.AboveTokenAmounts != nil && len(ra.AboveTokenAmounts) == 0:
		c.add(path+".above_token_amounts", "empty; leave it out instead")
	}
	for _, id := range sortedKeys(ra.AboveTokenAmounts) {
		tpath := childPath(path+".above_token_amounts", id)
		tok := tokenIDs[id]
		if tok == nil || ruleTokens[tok.key] == nil {
			c.add(tpath, fmt.Sprintf("token %s is not in the rule's tokens", id))
			continue
		}
		if max, ok := c.units(tpath, ra.AboveTokenAmounts[id]); ok {
			if a.aboveToken == nil {
				a.aboveToken = map[tokenKey]*big.Int{}
			}
			a.aboveToken[tok.key] = max
		}
	}
	if ra.MaxTTL == nil {
		c.add(path+".max_ttl", "required: how far ahead an approval may expire (such as 24h)")
	} else {
		a.maxTTL, _ = c.duration(path+".max_ttl", *ra.MaxTTL)
	}
	return a
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// token reads the declaration of token id; nil when it has a problem.
func (c *compiler) token(path, id string, rt rawToken, p *Policy) *token {
	ok := true
	if !idPattern.MatchString(id) {
		c.add(path, "a token id is 1 to 64 letters, digits, '.', '_', '-' or '@'")
		ok = false
	}
	switch {
	case rt.Chain == 0:
		c.add(path+".chain", "required: the chain id the contract is on")
		ok = false
	case !p.chains[rt.Chain]:
		c.add(path+".chain", fmt.Sprintf("chain %d is not in the policy's chains", rt.Chain))
		ok = false
	}
	addr, okAddr := c.address(path+".address", rt.Address)
	key := tokenKey{rt.Chain, addr}
	if prev := p.tokens[key]; okAddr && ok && prev != nil {
		c.add(path+".address", fmt.Sprintf("%s on chain %d is already token %s: one contract, one standard", addr.Hex(), rt.Chain, prev.id))
		ok = false
	}
	std := standards[rt.Standard]
	if std == nil {
		c.add(path+".standard", fmt.Sprintf("%q is not erc20, erc721 or erc1155", rt.Standard))
	}
	if rt.Description != nil {
		c.text(path+".description", *rt.Description, false, 4096)
	}
	if !ok || !okAddr || std == nil {
		return nil
	}
	return &token{id: id, key: key, standard: std}
}

// ruleTokens reads the tokens an allow rule names, with their caps. A rule
// that names tokens reaches them, and only them among declared tokens; it
// no longer matches any destination.
func (c *compiler) ruleTokens(path string, raw map[string]rawTokenRule, r *rule, tokenIDs map[string]*token) {
	if len(raw) == 0 {
		c.add(path+".tokens", "empty; leave it out instead")
	}
	r.tokens = map[tokenKey]*tokenRule{}
	r.match.tokens = map[tokenKey]bool{}
	r.match.anyDest = false
	for _, id := range sortedKeys(raw) {
		tpath := childPath(path+".tokens", id)
		tok := tokenIDs[id]
		switch {
		case tok == nil:
			c.add(tpath, fmt.Sprintf("%q is not in the policy's tokens", id))
		case r.match.chains != nil && !r.match.chains[tok.key.chain]:
			c.add(tpath, fmt.Sprintf("token %s is on chain %d, which %s does not match", id, tok.key.chain, path))
		default:
			r.tokens[tok.key] = c.tokenRule(tpath, raw[id], tok)
			r.match.tokens[tok.key] = true
		}
	}
}

// tokenRule reads the caps and lists a rule sets for tok. Caps per
// transaction and per window are required: a token a rule names with no
// cap would be the unbounded transfer this section exists to prevent.
func (c *compiler) tokenRule(path string, rt rawTokenRule, tok *token) *tokenRule {
	tr := &tokenRule{}
	if rt.MaxAmountPerTx == nil {
		c.add(path+".max_amount_per_tx", "required: the most units of the token one transaction may move or grant")
	} else {
		tr.maxAmount, _ = c.units(path+".max_amount_per_tx", *rt.MaxAmountPerTx)
	}
	switch {
	case rt.Windows == nil:
		c.add(path+".windows", "required: at least one rolling window of the units signed for the sender")
	case len(rt.Windows) == 0:
		c.add(path+".windows", "an empty list: at least one window is required")
	}
	tr.windows = c.windows(path+".windows", len(rt.Windows), func(i int) (string, string) { return rt.Windows[i].Duration, rt.Windows[i].MaxAmount }, "max_amount", "window", tokenUnits)
	tr.recipients = c.addressSet(path+".recipients", rt.Recipients)
	tr.spenders = c.grantees(path+".spenders", rt.Spenders, tok.standard.approves,
		tok.standard.name+" has no approve: list setApprovalForAll's operators under operators",
		"an empty list; leave it out (without it, no approval is allowed)")
	tr.operators = c.grantees(path+".operators", rt.Operators, tok.standard.operators,
		tok.standard.name+" has no setApprovalForAll: list approve's spenders under spenders",
		"an empty list; leave it out (without it, setApprovalForAll(operator, true) is refused)")
	return tr
}

// grantees compiles a token rule's optional list of who the sender may
// grant to (spenders, operators). Left out, it allows none; a list the
// token's standard has no call for (unsupported) or an empty one is
// refused, since either would read as a permission the rule does not give.
func (c *compiler) grantees(path string, list []string, supported bool, unsupported, empty string) map[common.Address]bool {
	switch {
	case list == nil:
		return nil
	case !supported:
		c.add(path, unsupported)
	case len(list) == 0:
		c.add(path, empty)
	default:
		return c.addressSet(path, list)
	}
	return nil
}

// tokensReachedAround refuses an allow rule's match that would reach a
// declared token on a chain the rule covers around the token's caps: its
// address in to (any call data), or one of its standard's calls, or an
// allowance-granting call, listed as a selector for it. Selectors of other
// calls (a burn, WETH's withdraw) may be listed: they move none of the
// token's units.
func (c *compiler) tokensReachedAround(path string, rm *rawMatch, m *matcher, tokens map[tokenKey]*token) {
	declared := func(s string) []*token {
		if !hexAddress.MatchString(s) {
			return nil
		}
		a := common.HexToAddress(s)
		var out []*token
		for key, tok := range tokens {
			if key.address == a && (m.chains == nil || m.chains[key.chain]) {
				out = append(out, tok)
			}
		}
		slices.SortFunc(out, func(x, y *token) int { return cmp.Compare(x.key.chain, y.key.chain) })
		return out
	}
	for i, s := range rm.To {
		for _, tok := range declared(s) {
			c.add(fmt.Sprintf("%s.to[%d]", path, i), fmt.Sprintf("%s is token %s on chain %d: name it under the rule's tokens, whose calls are read and capped", tok.key.address.Hex(), tok.id, tok.key.chain))
		}
	}
	for _, key := range sortedKeys(rm.Selectors) {
		toks := declared(key)
		for i, s := range rm.Selectors[key] {
			if !hexSelector.MatchString(s) {
				continue
			}
			var sel [4]byte
			hex.Decode(sel[:], []byte(s[2:]))
			ipath := fmt.Sprintf("%s[%d]", childPath(path+".selectors", key), i)
			for _, tok := range toks {
				if tc := tok.standard.calls[sel]; tc != nil {
					c.add(ipath, fmt.Sprintf("0x%x is %s %s on token %s: name the token under the rule's tokens, whose calls are read and capped", sel, tok.standard.name, tc.signature, tok.id))
				} else if g := grantCalls[sel]; g != nil {
					c.add(ipath, fmt.Sprintf("0x%x is %s, which grants an allowance that token %s's caps would not count", sel, g.signature, tok.id))
				}
			}
		}
	}
}
