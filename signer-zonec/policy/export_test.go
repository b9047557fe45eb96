package policy

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// Canonical re-encodes what p accepted, for tests that check an accepted
// file re-validates to the same thing.
func Canonical(p *Policy) []byte {
	b, err := json.Marshal(p.raw)
	if err != nil {
		panic(err) // rawPolicy holds only strings, numbers, bools, slices and maps
	}
	return b
}

// DecodedCall is a call policy reads by hand: an allowance-granting call
// (Standard "") or a call of a token standard.
type DecodedCall struct {
	Standard  string
	Signature string
	Selector  [4]byte
}

// DecodedCalls lists every call policy decodes, grants first, then each
// standard's calls in the order of their signatures.
func DecodedCalls() []DecodedCall {
	var out []DecodedCall
	for _, g := range grantCallList {
		out = append(out, DecodedCall{Signature: g.signature, Selector: g.selector})
	}
	for _, name := range []string{"erc20", "erc721", "erc1155"} {
		var calls []DecodedCall
		for _, c := range standards[name].calls {
			calls = append(calls, DecodedCall{Standard: name, Signature: c.signature, Selector: c.selector})
		}
		slices.SortFunc(calls, func(a, b DecodedCall) int { return strings.Compare(a.Signature, b.Signature) })
		out = append(out, calls...)
	}
	return out
}

// Decodes reads data as the call its selector names, if policy decodes
// such a call: known is false when it does not, err says why data is not
// that call's canonical encoding.
func Decodes(data []byte) (known bool, err error) {
	for _, c := range DecodedCalls() {
		if len(data) >= 4 && [4]byte(data[:4]) == c.Selector {
			_, err := Roundtrip(c.Signature, data)
			return true, err
		}
	}
	return false, nil
}

// callBySignature finds a decoded call by signature. A signature both a
// grant and a standard's call (approve) has the same arguments in both.
func callBySignature(signature string) *abiCall {
	for i := range grantCallList {
		if grantCallList[i].signature == signature {
			return &grantCallList[i].abiCall
		}
	}
	for _, s := range standards {
		for _, c := range s.calls {
			if c.signature == signature {
				return &c.abiCall
			}
		}
	}
	panic("no decoded call " + signature)
}

// EncodeCall is the canonical call data of signature with args, given as
// Go values: common.Address, bool, int or *big.Int, []byte, and []any for
// arrays and tuples.
func EncodeCall(signature string, args ...any) []byte {
	c := callBySignature(signature)
	if len(args) != len(c.args) {
		panic(fmt.Sprintf("%s takes %d arguments, got %d", signature, len(c.args), len(args)))
	}
	vals := make([]abiValue, len(args))
	for i := range args {
		vals[i] = toValue(&c.args[i], args[i])
	}
	return append(c.selector[:len(c.selector):len(c.selector)], encode(c.args, vals)...)
}

// Roundtrip decodes data as a call of signature and encodes what it read
// again: for call data the decoder accepts, the result is the input, or
// the decoder accepted something that is not the canonical encoding.
func Roundtrip(signature string, data []byte) ([]byte, error) {
	c := callBySignature(signature)
	vals, err := c.decode(data)
	if err != nil {
		return nil, err
	}
	return append(c.selector[:len(c.selector):len(c.selector)], encode(c.args, vals)...), nil
}

func toValue(t *abiType, x any) abiValue {
	var v abiValue
	switch t.kind {
	case abiAddress:
		a := x.(common.Address)
		copy(v.word[12:], a[:])
	case abiBool:
		if x.(bool) {
			v.word[31] = 1
		}
	case abiUint:
		switch n := x.(type) {
		case *big.Int:
			n.FillBytes(v.word[:])
		case int:
			big.NewInt(int64(n)).FillBytes(v.word[:])
		case int64:
			big.NewInt(n).FillBytes(v.word[:])
		}
	case abiFixedBytes:
		copy(v.word[:], x.([]byte))
	case abiBytes:
		v.bytes = x.([]byte)
	case abiArray:
		for _, item := range x.([]any) {
			v.items = append(v.items, toValue(t.elem, item))
		}
	case abiTuple:
		for i, item := range x.([]any) {
			v.items = append(v.items, toValue(&t.fields[i], item))
		}
	}
	return v
}

// encode is the canonical ABI encoding of vals as a tuple of types: heads
// in order, then the tails of the dynamic values in order, each offset
// pointing at its tail. Written apart from the decoder, as its inverse.
func encode(types []abiType, vals []abiValue) []byte {
	headSize := 0
	for i := range types {
		headSize += types[i].headSize()
	}
	var head, tail []byte
	for i := range types {
		t, v := &types[i], &vals[i]
		if !t.dynamic() {
			head = append(head, encodeStatic(t, v)...)
			continue
		}
		head = append(head, lengthWord(headSize+len(tail))...)
		tail = append(tail, encodeDynamic(t, v)...)
	}
	return append(head, tail...)
}

func encodeStatic(t *abiType, v *abiValue) []byte {
	if t.kind == abiTuple {
		return encode(t.fields, v.items)
	}
	return v.word[:]
}

func encodeDynamic(t *abiType, v *abiValue) []byte {
	switch t.kind {
	case abiBytes:
		out := append(lengthWord(len(v.bytes)), v.bytes...)
		return append(out, make([]byte, (32-len(v.bytes)%32)%32)...)
	case abiArray:
		elems := make([]abiType, len(v.items))
		for i := range elems {
			elems[i] = *t.elem
		}
		return append(lengthWord(len(v.items)), encode(elems, v.items)...)
	default:
		return encode(t.fields, v.items)
	}
}

func lengthWord(n int) []byte { return common.LeftPadBytes(big.NewInt(int64(n)).Bytes(), 32) }

// Unbounded lists what p allows without a bound, each as "<rule>: <what>":
// an allow rule without a per-transaction value cap (max_value_per_tx or
// match.value.max) or, for a cap above 0, without a value window; an allow
// rule or cancels entry without fee caps or a fee window; a token a rule
// names without a per-transaction cap or a window; and erc20_spenders,
// whose allowances on contracts that are not declared tokens no cap
// counts.
func Unbounded(p *Policy) []string {
	var out []string
	fees := func(who string, l *limits) {
		if l.maxFeePerGas == nil || l.maxGas == 0 {
			out = append(out, who+": no max_fee_per_gas or max_gas")
		}
		if len(l.feeWindows) == 0 {
			out = append(out, who+": no fee window")
		}
	}
	for _, g := range p.cancels {
		fees("cancels entry "+g.id, &g.limits)
	}
	for _, r := range p.allow {
		who := "rule " + r.id
		fees(who, &r.limits)
		perTx := r.limits.maxValue
		if m := r.match.maxValue; m != nil && (perTx == nil || m.Cmp(perTx) < 0) {
			perTx = m
		}
		switch {
		case perTx == nil:
			out = append(out, who+": no per-transaction value cap")
		case perTx.Sign() > 0 && len(r.limits.windows) == 0:
			out = append(out, who+": no value window")
		}
		if r.spenders != nil {
			out = append(out, who+": erc20_spenders, whose allowances no cap counts (declare the token and list its spenders)")
		}
		var ids []string
		for key, tr := range r.tokens {
			id := p.tokens[key].id
			if tr.maxAmount == nil {
				ids = append(ids, id+" has no max_amount_per_tx")
			}
			if len(tr.windows) == 0 {
				ids = append(ids, id+" has no window")
			}
		}
		slices.Sort(ids)
		for _, s := range ids {
			out = append(out, who+": token "+s)
		}
	}
	return out
}
