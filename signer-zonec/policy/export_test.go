package policy

import (
	"encoding/json"
	"fmt"
	"math/big"

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

// DecodedCalls lists every call policy decodes, grants first.
func DecodedCalls() []DecodedCall {
	var out []DecodedCall
	for _, g := range grantCallList {
		out = append(out, DecodedCall{Signature: g.signature, Selector: g.selector})
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

// callBySignature finds a decoded call by signature.
func callBySignature(signature string) *abiCall {
	for i := range grantCallList {
		if grantCallList[i].signature == signature {
			return &grantCallList[i].abiCall
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
		n, ok := x.(*big.Int)
		if !ok {
			n = big.NewInt(int64(x.(int)))
		}
		n.FillBytes(v.word[:])
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
