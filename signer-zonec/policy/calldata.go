package policy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// This file reads call data by hand, in the Solidity ABI's canonical
// encoding only: every argument where the encoder puts it, every offset
// exactly where the previous dynamic value ended, every length exact,
// every padding byte zero, addresses with their upper 12 bytes zero, bools
// 0 or 1, uintN with their upper bytes zero, and not one byte more or
// less. A contract's own decoder may be laxer (solc ignores dirty upper
// bytes, follows any offset, accepts trailing data), so whatever it would
// read differently from this reader is refused here: what policy cannot
// read exactly, it must not let through. No ABI library is linked: the few
// shapes policy needs are simpler to check than to trust.

// abiCall is a function whose call data policy reads: its signature, its
// selector (the first four bytes of keccak256 of the signature, written
// out and checked by a test) and the argument types parsed from the
// signature.
type abiCall struct {
	signature string
	selector  [4]byte
	args      []abiType
}

// newCall parses signature. The signatures are constants of this package,
// so a bad one is a bug that fails every test.
func newCall(signature string, selector [4]byte) abiCall {
	name, list, ok := strings.Cut(signature, "(")
	if !ok || name == "" || !strings.HasSuffix(list, ")") {
		panic("policy: bad signature " + signature)
	}
	args, err := parseTypes(strings.TrimSuffix(list, ")"))
	if err != nil {
		panic(fmt.Sprintf("policy: bad signature %s: %v", signature, err))
	}
	return abiCall{signature: signature, selector: selector, args: args}
}

// name is the function's name, for messages.
func (c *abiCall) name() string {
	name, _, _ := strings.Cut(c.signature, "(")
	return name
}

// decode reads data (selector included) as a call of c.
func (c *abiCall) decode(data []byte) ([]abiValue, error) {
	if len(data) < 4 || [4]byte(data[:4]) != c.selector {
		return nil, fmt.Errorf("not a call of %s", c.signature)
	}
	return decodeArgs(c.args, data[4:])
}

type abiKind int

const (
	abiAddress    abiKind = iota
	abiBool               // a word of 0 or 1
	abiUint               // uintN: size is N/8 bytes
	abiFixedBytes         // bytesN: size is N
	abiBytes              // bytes
	abiArray              // T[]
	abiTuple              // (T1,T2,...)
)

// abiType is an argument type: one of the word types, bytes, a T[] or a
// tuple. Fixed-size arrays, strings and signed integers are not needed by
// any call policy reads, so they are not parsed.
type abiType struct {
	kind   abiKind
	size   int
	elem   *abiType
	fields []abiType
}

// dynamic reports whether the type is encoded after the head, behind an
// offset.
func (t *abiType) dynamic() bool {
	switch t.kind {
	case abiBytes, abiArray:
		return true
	case abiTuple:
		for i := range t.fields {
			if t.fields[i].dynamic() {
				return true
			}
		}
	}
	return false
}

// headSize is the bytes the type takes in its tuple's head: 32 for an
// offset or a word, the sum of its fields for a static tuple.
func (t *abiType) headSize() int {
	if t.kind != abiTuple || t.dynamic() {
		return 32
	}
	n := 0
	for i := range t.fields {
		n += t.fields[i].headSize()
	}
	return n
}

// parseTypes parses a comma-separated list of types, such as
// "address,(address,uint160)[],bytes".
func parseTypes(s string) ([]abiType, error) {
	if s == "" {
		return nil, nil
	}
	var out []abiType
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
			case ')':
				depth--
			}
			if depth < 0 {
				return nil, fmt.Errorf("unbalanced parentheses in %q", s)
			}
			if s[i] != ',' || depth > 0 {
				continue
			}
		}
		t, err := parseType(s[start:i])
		if err != nil {
			return nil, err
		}
		out = append(out, t)
		start = i + 1
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses in %q", s)
	}
	return out, nil
}

func parseType(s string) (abiType, error) {
	if elem, ok := strings.CutSuffix(s, "[]"); ok {
		e, err := parseType(elem)
		if err != nil {
			return abiType{}, err
		}
		return abiType{kind: abiArray, elem: &e}, nil
	}
	if inner, ok := strings.CutPrefix(s, "("); ok {
		inner, ok = strings.CutSuffix(inner, ")")
		if !ok {
			return abiType{}, fmt.Errorf("unbalanced tuple %q", s)
		}
		fields, err := parseTypes(inner)
		if err != nil || len(fields) == 0 {
			return abiType{}, fmt.Errorf("bad tuple %q", s)
		}
		return abiType{kind: abiTuple, fields: fields}, nil
	}
	switch s {
	case "address":
		return abiType{kind: abiAddress}, nil
	case "bool":
		return abiType{kind: abiBool}, nil
	case "bytes":
		return abiType{kind: abiBytes}, nil
	}
	if bits, ok := strings.CutPrefix(s, "uint"); ok {
		n, err := strconv.Atoi(bits)
		if err != nil || n < 8 || n > 256 || n%8 != 0 {
			return abiType{}, fmt.Errorf("bad type %q", s)
		}
		return abiType{kind: abiUint, size: n / 8}, nil
	}
	if size, ok := strings.CutPrefix(s, "bytes"); ok {
		n, err := strconv.Atoi(size)
		if err != nil || n < 1 || n > 32 {
			return abiType{}, fmt.Errorf("bad type %q", s)
		}
		return abiType{kind: abiFixedBytes, size: n}, nil
	}
	return abiType{}, fmt.Errorf("type %q is not one policy reads", s)
}

// abiValue is one decoded argument: a word (address, bool, uintN, bytesN),
// the content of bytes, or the items of an array or tuple.
type abiValue struct {
	word  [32]byte
	bytes []byte
	items []abiValue
}

func (v *abiValue) address() common.Address { return common.BytesToAddress(v.word[12:]) }
func (v *abiValue) uint() *big.Int          { return new(big.Int).SetBytes(v.word[:]) }
func (v *abiValue) bool() bool              { return v.word[31] == 1 }

// decodeArgs reads args, the call data after the selector, as a tuple of
// types in canonical encoding, and requires it to end exactly where the
// encoding ends.
func decodeArgs(types []abiType, args []byte) ([]abiValue, error) {
	head := 0
	static := true
	for i := range types {
		head += types[i].headSize()
		static = static && !types[i].dynamic()
	}
	if static && len(args) != head {
		return nil, fmt.Errorf("%d bytes of arguments, want exactly %d", len(args), head)
	}
	vals, used, err := decodeSeq("argument", len(types), func(i int) *abiType { return &types[i] }, args)
	if err != nil {
		return nil, err
	}
	if used != len(args) {
		return nil, fmt.Errorf("%d bytes after the arguments' encoding", len(args)-used)
	}
	return vals, nil
}

// decodeSeq reads n values, the i-th of type typ(i), laid out as a tuple
// at the start of data: the heads in order, then the tails of the dynamic
// ones, each exactly where the previous one ended. It returns how many
// bytes the tuple takes. what names a value in errors: argument, field or
// item.
func decodeSeq(what string, n int, typ func(i int) *abiType, data []byte) ([]abiValue, int, error) {
	head := 0
	for i := range n {
		head += typ(i).headSize()
		if head > len(data) {
			return nil, 0, fmt.Errorf("%d bytes, too short for the heads of %d %ss", len(data), n, what)
		}
	}
	vals := make([]abiValue, n)
	at, tail := 0, head
	for i := range n {
		t := typ(i)
		size := t.headSize()
		if !t.dynamic() {
			if err := decodeStatic(t, data[at:at+size], &vals[i]); err != nil {
				return nil, 0, fmt.Errorf("%s %d: %w", what, i, err)
			}
			at += size
			continue
		}
		off, err := readSize(data[at : at+32])
		if err != nil || off != tail {
			return nil, 0, fmt.Errorf("%s %d: offset is not %d, where the canonical encoding puts it", what, i, tail)
		}
		used, err := decodeDynamic(t, data[tail:], &vals[i])
		if err != nil {
			return nil, 0, fmt.Errorf("%s %d: %w", what, i, err)
		}
		tail += used
		at += size
	}
	return vals, tail, nil
}

// decodeStatic reads a static value from exactly its head bytes.
func decodeStatic(t *abiType, w []byte, v *abiValue) error {
	switch t.kind {
	case abiTuple:
		items, _, err := decodeSeq("field", len(t.fields), func(i int) *abiType { return &t.fields[i] }, w)
		v.items = items
		return err
	case abiAddress:
		if !zero(w[:12]) {
			return errors.New("an address with non-zero upper bytes")
		}
	case abiBool:
		if !zero(w[:31]) || w[31] > 1 {
			return errors.New("a bool that is not 0 or 1")
		}
	case abiUint:
		if !zero(w[:32-t.size]) {
			return fmt.Errorf("a uint%d with non-zero upper bytes", 8*t.size)
		}
	case abiFixedBytes:
		if !zero(w[t.size:]) {
			return fmt.Errorf("a bytes%d with non-zero padding", t.size)
		}
	default:
		return fmt.Errorf("internal error: kind %d is not static", t.kind)
	}
	copy(v.word[:], w)
	return nil
}

// decodeDynamic reads a dynamic value at the start of data and returns how
// many bytes it takes.
func decodeDynamic(t *abiType, data []byte, v *abiValue) (int, error) {
	if len(data) < 32 {
		return 0, errors.New("no length word")
	}
	n, err := readSize(data[:32])
	if err != nil {
		return 0, err
	}
	rest := data[32:]
	switch t.kind {
	case abiBytes:
		padded := (n + 31) / 32 * 32
		if n > len(rest) || padded > len(rest) {
			return 0, fmt.Errorf("%d bytes of content, more than the call data holds", n)
		}
		if !zero(rest[n:padded]) {
			return 0, errors.New("non-zero padding after bytes")
		}
		v.bytes = rest[:n:n]
		return 32 + padded, nil
	case abiArray:
		// Each item takes at least 32 bytes of head: a count beyond that
		// cannot be real, and is refused before anything is allocated.
		if n > len(rest)/32 {
			return 0, fmt.Errorf("%d items, more than the call data holds", n)
		}
		items, used, err := decodeSeq("item", n, func(int) *abiType { return t.elem }, rest)
		if err != nil {
			return 0, err
		}
		v.items = items
		return 32 + used, nil
	case abiTuple:
		// A dynamic tuple has no length word: its fields start at once.
		items, used, err := decodeSeq("field", len(t.fields), func(i int) *abiType { return &t.fields[i] }, data)
		v.items = items
		return used, err
	}
	return 0, fmt.Errorf("internal error: kind %d is not dynamic", t.kind)
}

// readSize reads an offset or a length: a word whose value fits an int
// well below any call data size.
func readSize(w []byte) (int, error) {
	if !zero(w[:28]) || w[28]&0x80 != 0 {
		return 0, errors.New("an offset or length beyond any call data")
	}
	return int(uint32(w[28])<<24 | uint32(w[29])<<16 | uint32(w[30])<<8 | uint32(w[31])), nil
}

func zero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// CallReading is call data as policy reads it, for a person about to
// approve it (txctl approve): what they are shown is what policy counts,
// from the same decoder.
type CallReading struct {
	// Standard is ERC-20, ERC-721 or ERC-1155 for a token call; empty for
	// an allowance-granting call of no token standard (Permit2, ERC-6909,
	// lending delegations...), which policy checks on any contract that is
	// not a declared token.
	Standard string
	// Signature is the function's, as its selector hashes it.
	Signature string
	Selector  [4]byte
	// Args are the arguments in order, named for a token call and by
	// their ABI type otherwise; nil when Err is set.
	Args []CallArg
	// Effect is what policy counts of the call; nil when Err is set.
	Effect *CallEffect
	// Err says why policy refuses data as this call: not its canonical
	// encoding, or a batch whose lists differ in length.
	Err error
}

// CallArg is one decoded argument. Value is an address in EIP-55 hex, a
// decimal integer, true or false, 0x-prefixed hex bytes, [a, b] for an
// array or (a, b) for a tuple.
type CallArg struct {
	Name, Value string
}

// CallEffect is what a call does with the signer's tokens, as policy
// counts it against a rule.
type CallEffect struct {
	// Kind is "moves" (units to Party), "grants" (an allowance of Amount
	// units to Party), "grants_all" (Party becomes an operator of every
	// unit, present and future) or "revokes" (an allowance or operator:
	// Party's, or the one approved account of an ERC-721 token when Party
	// is zero).
	Kind   string
	Party  common.Address
	Amount *big.Int // units moved or granted; nil for grants_all, revokes and a grant of no token standard
}

// tokenArgNames name each token call's arguments for a person. Every call
// of every standard has its names, one per argument, or the package
// panics when it starts (and every test fails).
var tokenArgNames = checkArgNames(map[*tokenStandard]map[string][]string{
	erc20: {
		"transfer(address,uint256)":             {"recipient", "amount"},
		"transferFrom(address,address,uint256)": {"from", "recipient", "amount"},
		"approve(address,uint256)":              {"spender", "amount"},
		"increaseAllowance(address,uint256)":    {"spender", "added_amount"},
	},
	erc721: {
		"transferFrom(address,address,uint256)":           {"from", "recipient", "token_id"},
		"safeTransferFrom(address,address,uint256)":       {"from", "recipient", "token_id"},
		"safeTransferFrom(address,address,uint256,bytes)": {"from", "recipient", "token_id", "data"},
		"approve(address,uint256)":                        {"spender", "token_id"},
		"setApprovalForAll(address,bool)":                 {"operator", "approved"},
	},
	erc1155: {
		"safeTransferFrom(address,address,uint256,uint256,bytes)":          {"from", "recipient", "token_id", "amount", "data"},
		"safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)": {"from", "recipient", "token_ids", "amounts", "data"},
		"setApprovalForAll(address,bool)":                                  {"operator", "approved"},
	},
})

func checkArgNames(names map[*tokenStandard]map[string][]string) map[*tokenStandard]map[string][]string {
	for _, s := range standards {
		for _, c := range s.calls {
			if len(names[s][c.signature]) != len(c.args) {
				panic("policy: no argument names for " + s.name + " " + c.signature)
			}
		}
	}
	return names
}

var effectKinds = map[effectKind]string{moves: "moves", grants: "grants", grantsAll: "grants_all", revokes: "revokes"}

// ReadCall reads data as every call policy decodes by its selector: one
// reading per token standard that has the call (an ERC-20 and an ERC-721
// transferFrom or approve share their selector, and policy tells them
// apart only by the standard its policy file declares the contract to
// be), else the allowance-granting call policy checks on other contracts.
// No reading means policy decodes no call of that selector (or data has
// none): a rule can then only let it through by listing the selector.
func ReadCall(data []byte) []CallReading {
	if len(data) < 4 {
		return nil
	}
	sel := [4]byte(data[:4])
	var out []CallReading
	for _, s := range []*tokenStandard{erc20, erc721, erc1155} {
		c := s.calls[sel]
		if c == nil {
			continue
		}
		r := CallReading{Standard: s.name, Signature: c.signature, Selector: sel}
		args, err := c.decode(data)
		var e tokenEffect
		if err == nil {
			e, err = c.effect(args)
		}
		if r.Err = err; err == nil {
			r.Args = formatArgs(c.args, args, tokenArgNames[s][c.signature])
			r.Effect = &CallEffect{Kind: effectKinds[e.kind], Party: e.party}
			if e.kind == moves || e.kind == grants {
				r.Effect.Amount = e.amount
			}
		}
		out = append(out, r)
	}
	if g := grantCalls[sel]; g != nil && !tokenSelector(sel) {
		r := CallReading{Signature: g.signature, Selector: sel}
		args, err := g.decode(data)
		if r.Err = err; err == nil {
			r.Args = formatArgs(g.args, args, nil)
			r.Effect = &CallEffect{Kind: "grants", Party: g.grantee(args)}
		}
		out = append(out, r)
	}
	return out
}

// Calls lists every call ReadCall reads, in no particular order, as
// readings without arguments: each standard's calls and the
// allowance-granting calls of no standard. A reader of call data that
// mirrors this one (the operator console's) checks it knows the same.
func Calls() []CallReading {
	var out []CallReading
	for _, s := range []*tokenStandard{erc20, erc721, erc1155} {
		for _, c := range s.calls {
			out = append(out, CallReading{Standard: s.name, Signature: c.signature, Selector: c.selector})
		}
	}
	for _, g := range grantCallList {
		if !tokenSelector(g.selector) {
			out = append(out, CallReading{Signature: g.signature, Selector: g.selector})
		}
	}
	return out
}

func tokenSelector(sel [4]byte) bool {
	return erc20.calls[sel] != nil || erc721.calls[sel] != nil || erc1155.calls[sel] != nil
}

// formatArgs writes decoded arguments for a person, named by names or,
// when nil, by their types.
func formatArgs(types []abiType, vals []abiValue, names []string) []CallArg {
	out := make([]CallArg, len(vals))
	for i := range vals {
		name := typeName(&types[i])
		if names != nil {
			name = names[i]
		}
		out[i] = CallArg{Name: name, Value: formatValue(&types[i], &vals[i])}
	}
	return out
}

func typeName(t *abiType) string {
	switch t.kind {
	case abiAddress:
		return "address"
	case abiBool:
		return "bool"
	case abiUint:
		return "uint" + strconv.Itoa(8*t.size)
	case abiFixedBytes:
		return "bytes" + strconv.Itoa(t.size)
	case abiBytes:
		return "bytes"
	case abiArray:
		return typeName(t.elem) + "[]"
	}
	names := make([]string, len(t.fields))
	for i := range t.fields {
		names[i] = typeName(&t.fields[i])
	}
	return "(" + strings.Join(names, ",") + ")"
}

func formatValue(t *abiType, v *abiValue) string {
	switch t.kind {
	case abiAddress:
		return v.address().Hex()
	case abiBool:
		return strconv.FormatBool(v.bool())
	case abiUint:
		return v.uint().String()
	case abiFixedBytes:
		return "0x" + hex.EncodeToString(v.word[:t.size])
	case abiBytes:
		return "0x" + hex.EncodeToString(v.bytes)
	}
	items := make([]string, len(v.items))
	for i := range v.items {
		item := t.elem
		if t.kind == abiTuple {
			item = &t.fields[i]
		}
		items[i] = formatValue(item, &v.items[i])
	}
	if t.kind == abiArray {
		return "[" + strings.Join(items, ", ") + "]"
	}
	return "(" + strings.Join(items, ", ") + ")"
}
