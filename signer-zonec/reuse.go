package signer

import (
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
)

// Signed is one signature signerd gave at a (chain, signer, nonce): the
// double-sign protection record.
type Signed struct {
	ChainID uint64
	From    common.Address
	Nonce   uint64
	TxID    string
	Intent  Intent
	Digest  common.Hash
	FeeCap  *big.Int
	TipCap  *big.Int
	Gas     uint64
	Value   *big.Int
	// Token is what an original moves or grants of a token, as policy
	// read it; nil otherwise.
	Token  *TokenAmount
	Cancel bool
	TxHash common.Hash
	RawTx  []byte
}

// Reuse says how a request relates to what was signed at its nonce.
type Reuse int

// The ways a request may be signed at a nonce. Anything else is refused.
const (
	// Fresh: nothing was signed at this nonce yet.
	Fresh Reuse = iota
	// Identical: this exact request was signed before; answer with the
	// stored signature, sign nothing new.
	Identical
	// Replacement: a fee bump of the intent signed at this nonce.
	Replacement
	// Cancel: an authorized same-nonce 0-value self-transfer.
	Cancel
)

func (r Reuse) String() string {
	switch r {
	case Fresh:
		return "fresh"
	case Identical:
		return "identical"
	case Replacement:
		return "replacement"
	case Cancel:
		return "cancel"
	}
	return fmt.Sprintf("reuse(%d)", int(r))
}

// BumpPercent is how much both fee caps of a replacement must rise over
// every earlier signature at its nonce: the 10% that nodes require to
// replace a pooled transaction.
const BumpPercent = 10

// RefusedError explains why signerd refuses a request it must never be
// asked for, whatever policy says: a second intent at a used nonce, a tx id
// at a second nonce, a nonce far ahead.
type RefusedError struct {
	// Rule is RuleDoubleSign, RuleTxIDBinding or RuleNonceAhead.
	Rule   string
	Reason string
	// Earlier is the signature the request conflicts with, for the alert:
	// the first at its nonce, or the first of its tx id. Zero for
	// RuleNonceAhead.
	Earlier Signed
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("signing refused (%s): %s", e.Rule, e.Reason)
}

// CheckReuse decides whether req may be signed, given every earlier
// signature at its (chain, signer, nonce) in the order they were given.
// Only these share a nonce: the identical request again; a replacement of
// the same intent whose fee cap and tip cap each exceed every earlier
// signature's by at least BumpPercent; a cancel, when cancelAllowed, under
// the same fee rule. The first signature fixes the nonce's intent: a cancel
// does not open the nonce to other intents.
func CheckReuse(req *Request, earlier []Signed, cancelAllowed bool) (Reuse, *Signed, error) {
	if len(earlier) == 0 {
		return Fresh, nil, nil
	}
	digest := req.Digest()
	for i := range earlier {
		if earlier[i].Digest == digest {
			return Identical, &earlier[i], nil
		}
	}
	// The first signature fixes the nonce's intent. Its replacements
	// compare equal on intent (even when that intent looks like a cancel);
	// any other intent must be a cancel that policy allows.
	first := earlier[0]
	reuse := Replacement
	if req.Intent() != first.Intent {
		switch {
		case !req.IsCancel():
			return 0, nil, &RefusedError{Rule: RuleDoubleSign, Reason: "a different intent was already signed at this nonce (tx " + first.TxID + ")", Earlier: first}
		case !cancelAllowed:
			return 0, nil, &RefusedError{Rule: RuleDoubleSign, Reason: "cancels are not allowed by policy for this signer", Earlier: first}
		}
		reuse = Cancel
	}
	for _, e := range earlier {
		if !bumped(req.FeeCap(), e.FeeCap) || !bumped(req.TipCap(), e.TipCap) {
			return 0, nil, &RefusedError{
				Rule:    RuleDoubleSign,
				Reason:  fmt.Sprintf("fee cap %s and tip cap %s must each be at least %d%% above every earlier signature's (%s, %s)", req.FeeCap(), req.TipCap(), BumpPercent, e.FeeCap, e.TipCap),
				Earlier: first,
			}
		}
	}
	return reuse, nil, nil
}

// bumped reports whether next >= prev * (100+BumpPercent) / 100, in exact
// integers, rounding up so the rise is never under BumpPercent (geth rounds
// down, so whatever passes here also passes a node).
func bumped(next, prev *big.Int) bool {
	need := new(big.Int).Mul(prev, big.NewInt(100+BumpPercent))
	need.Add(need, big.NewInt(99))
	need.Div(need, big.NewInt(100))
	return next.Cmp(need) >= 0
}
