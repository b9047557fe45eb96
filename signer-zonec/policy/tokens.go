package policy

import (
	"context"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

// Token contracts are declared in the policy file with their standard,
// because selectors collide across standards: approve(address,uint256) and
// transferFrom(address,address,uint256) are both ERC-20 and ERC-721 calls,
// one meaning an amount and the other a token id. A call to a declared
// token is read by its standard only; a call to any other contract is not
// read as a token call at all.

// tokenKey identifies a token contract: the same address on two chains
// may be two different contracts.
type tokenKey struct {
	chain   uint64
	address common.Address
}

// token is a declared token contract.
type token struct {
	id       string
	key      tokenKey
	standard *tokenStandard
}

// tokenStandard is what policy reads of one token standard.
type tokenStandard struct {
	name  string // as in messages: ERC-20
	calls map[[4]byte]*tokenCall
	// approves and operators say whether the standard has approve and
	// setApprovalForAll, so a rule's spenders and operators lists mean
	// something.
	approves, operators bool
}

// effectKind is what a token call does.
type effectKind int

const (
	// moves units to a recipient.
	moves effectKind = iota
	// grants a spender an allowance of units.
	grants
	// grantsAll makes an operator of every unit, present and future: no
	// amount bounds it.
	grantsAll
	// revokes an allowance or an operator: it moves or grants nothing.
	revokes
)

// tokenEffect is what one token call does with the signer's tokens.
type tokenEffect struct {
	kind effectKind
	// party is the recipient of a move, the spender or operator of a grant
	// or a revocation.
	party common.Address
	// amount is the units moved or granted: 0 for grantsAll and revokes.
	amount *big.Int
}

// tokenCall is a call of a token standard, and how to read its effect
// from its decoded arguments.
type tokenCall struct {
	abiCall
	effect func(args []abiValue) (tokenEffect, error)
}

func newStandard(name string, approves, operators bool, calls ...*tokenCall) *tokenStandard {
	s := &tokenStandard{name: name, approves: approves, operators: operators, calls: map[[4]byte]*tokenCall{}}
	for _, c := range calls {
		if s.calls[c.selector] != nil {
			panic("policy: two " + name + " calls with selector " + common.Bytes2Hex(c.selector[:]))
		}
		s.calls[c.selector] = c
	}
	return s
}

// move reads a transfer of amount(args) units to the argument at to.
func move(to int, amount func(args []abiValue) *big.Int) func([]abiValue) (tokenEffect, error) {
	return func(args []abiValue) (tokenEffect, error) {
		return tokenEffect{kind: moves, party: args[to].address(), amount: amount(args)}, nil
	}
}

func argAmount(i int) func([]abiValue) *big.Int {
	return func(args []abiValue) *big.Int { return args[i].uint() }
}

func oneUnit([]abiValue) *big.Int { return big.NewInt(1) }

// operatorForAll reads setApprovalForAll(operator, approved).
func operatorForAll(args []abiValue) (tokenEffect, error) {
	if args[1].bool() {
		return tokenEffect{kind: grantsAll, party: args[0].address(), amount: new(big.Int)}, nil
	}
	return tokenEffect{kind: revokes, party: args[0].address(), amount: new(big.Int)}, nil
}

var setApprovalForAll = newCall("setApprovalForAll(address,bool)", [4]byte{0xa2, 0x2c, 0xb4, 0x65})

var (
	erc20 = newStandard("ERC-20", true, false,
		&tokenCall{newCall("transfer(address,uint256)", [4]byte{0xa9, 0x05, 0x9c, 0xbb}), move(0, argAmount(1))},
		&tokenCall{newCall("transferFrom(address,address,uint256)", [4]byte{0x23, 0xb8, 0x72, 0xdd}), move(1, argAmount(2))},
		// approve sets the allowance: 0 revokes it.
		&tokenCall{newCall("approve(address,uint256)", [4]byte{0x09, 0x5e, 0xa7, 0xb3}), func(args []abiValue) (tokenEffect, error) {
			if amount := args[1].uint(); amount.Sign() > 0 {
				return tokenEffect{kind: grants, party: args[0].address(), amount: amount}, nil
			}
			return tokenEffect{kind: revokes, party: args[0].address(), amount: new(big.Int)}, nil
		}},
		&tokenCall{newCall("increaseAllowance(address,uint256)", [4]byte{0x39, 0x50, 0x93, 0x51}), func(args []abiValue) (tokenEffect, error) {
			return tokenEffect{kind: grants, party: args[0].address(), amount: args[1].uint()}, nil
		}},
	)
	erc721 = newStandard("ERC-721", true, true,
		&tokenCall{newCall("transferFrom(address,address,uint256)", [4]byte{0x23, 0xb8, 0x72, 0xdd}), move(1, oneUnit)},
		&tokenCall{newCall("safeTransferFrom(address,address,uint256)", [4]byte{0x42, 0x84, 0x2e, 0x0e}), move(1, oneUnit)},
		&tokenCall{newCall("safeTransferFrom(address,address,uint256,bytes)", [4]byte{0xb8, 0x8d, 0x4f, 0xde}), move(1, oneUnit)},
		// approve(to, tokenId) approves one token; to 0 clears it.
		&tokenCall{newCall("approve(address,uint256)", [4]byte{0x09, 0x5e, 0xa7, 0xb3}), func(args []abiValue) (tokenEffect, error) {
			if to := args[0].address(); to != (common.Address{}) {
				return tokenEffect{kind: grants, party: to, amount: big.NewInt(1)}, nil
			}
			return tokenEffect{kind: revokes, amount: new(big.Int)}, nil
		}},
		&tokenCall{setApprovalForAll, operatorForAll},
	)
	erc1155 = newStandard("ERC-1155", false, true,
		&tokenCall{newCall("safeTransferFrom(address,address,uint256,uint256,bytes)", [4]byte{0xf2, 0x42, 0x43, 0x2a}), move(1, argAmount(3))},
		// A batch moves the sum of its amounts, whatever the ids; a batch
		// whose lists differ in length reverts, and is refused here.
		&tokenCall{newCall("safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)", [4]byte{0x2e, 0xb2, 0xc2, 0xd6}), func(args []abiValue) (tokenEffect, error) {
			ids, amounts := args[2].items, args[3].items
			if len(ids) != len(amounts) {
				return tokenEffect{}, fmt.Errorf("%d ids and %d amounts", len(ids), len(amounts))
			}
			sum := new(big.Int)
			for i := range amounts {
				sum.Add(sum, amounts[i].uint())
			}
			return tokenEffect{kind: moves, party: args[1].address(), amount: sum}, nil
		}},
		&tokenCall{setApprovalForAll, operatorForAll},
	)
)

// standards are the token standards a policy file may declare, by name.
var standards = map[string]*tokenStandard{"erc20": erc20, "erc721": erc721, "erc1155": erc1155}

// tokenRule is what an allow rule allows of one token: caps in its
// units, and who may receive or be granted them.
type tokenRule struct {
	maxAmount *big.Int
	windows   []window
	// recipients, when set, are the only recipients of moves; spenders the
	// only grantees of allowances; operators the only operators for all.
	// A nil spenders or operators allows none.
	recipients, spenders, operators map[common.Address]bool
}

// tokenAt is the declared token req is sent to, or nil.
func (p *Policy) tokenAt(req *signer.Request) *token {
	if req.To == nil {
		return nil
	}
	return p.tokens[tokenKey{req.ChainID, *req.To}]
}

// tokenCallOf reads req as a call of tok's standard under rule r. effect is
// nil with no reasons when req is a call r lists by selector for the
// contract (a plain call, capped by the rule's native limits only);
// otherwise reasons say why the call is denied, or effect is what it does.
func tokenCallOf(tok *token, r *rule, req *signer.Request) (*tokenCall, *tokenEffect, []string) {
	sel, ok := selectorOf(req)
	if !ok {
		return nil, nil, []string{fmt.Sprintf("a call to token %s without a selector (%d bytes of call data): only %s calls and the selectors rule %s lists are allowed to it", tok.id, len(req.Data), tok.standard.name, r.id)}
	}
	c := tok.standard.calls[sel]
	if c == nil {
		if r.match.selectors[tok.key.address][sel] {
			return nil, nil, nil
		}
		return nil, nil, []string{fmt.Sprintf("call data to token %s (selector 0x%x) is not an %s call policy reads, and rule %s lists no selector 0x%x for it", tok.id, sel, tok.standard.name, r.id, sel)}
	}
	if r.tokens[tok.key] == nil {
		// The rule reached the token by a selector it lists; compile
		// refuses listing a token call, so this is a bug if seen.
		return nil, nil, []string{fmt.Sprintf("rule %s does not name token %s", r.id, tok.id)}
	}
	args, err := c.decode(req.Data)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("malformed %s %s call data to token %s: %v", tok.standard.name, c.signature, tok.id, err)}
	}
	e, err := c.effect(args)
	if err != nil {
		return nil, nil, []string{fmt.Sprintf("malformed %s %s call data to token %s: %v", tok.standard.name, c.signature, tok.id, err)}
	}
	return c, &e, nil
}

// check returns why the effect e of call c to tok exceeds what tr allows
// under rule who, reading the token's windows from usage. An error reading
// the record is an error: no decision.
func (tr *tokenRule) check(ctx context.Context, tok *token, c *tokenCall, e *tokenEffect, usage signer.Usage, who string) (string, error) {
	switch e.kind {
	case revokes:
		// Revoking moves nothing: allowed to anyone, so an allowance given
		// to a spender since removed from the policy can still be taken
		// back.
		return "", nil
	case grantsAll:
		if !tr.operators[e.party] {
			return fmt.Sprintf("setApprovalForAll grants every unit of token %s to %s, which is not in the operators of token %s (%s)", tok.id, e.party.Hex(), tok.id, who), nil
		}
		return "", nil
	case grants:
		if !tr.spenders[e.party] {
			return fmt.Sprintf("%s of %s units of token %s to %s, which is not in the spenders of token %s (%s)", c.name(), e.amount, tok.id, e.party.Hex(), tok.id, who), nil
		}
	case moves:
		if tr.recipients != nil && !tr.recipients[e.party] {
			return fmt.Sprintf("%s of %s units of token %s to %s, which is not in the recipients of token %s (%s)", c.name(), e.amount, tok.id, e.party.Hex(), tok.id, who), nil
		}
	}
	if e.amount.Cmp(tr.maxAmount) > 0 {
		return fmt.Sprintf("%s of %s units of token %s exceeds max_amount_per_tx %s (%s)", c.name(), e.amount, tok.id, tr.maxAmount, who), nil
	}
	if usage == nil {
		return "", fmt.Errorf("policy %s: a token window applies and there is no record of what was signed", who)
	}
	read := func(ctx context.Context, d time.Duration) (*big.Int, error) {
		return usage.Token(ctx, tok.key.address, d)
	}
	return overWindows(ctx, tr.windows, e.amount, "units of token "+tok.id, read, who, func(w window, signed *big.Int) string {
		return fmt.Sprintf("%s units of token %s signed in the last %s plus %s exceeds the window's max_amount %s (%s)", signed, tok.id, w.duration, e.amount, w.max, who)
	})
}
