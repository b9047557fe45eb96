package httpapi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// The parsers of what a caller sends: query and path parameters. Each
// answers an error whose text is the problem's detail for that parameter.

// maxInt64 is the largest id, chain id or block number the ledger stores
// (PostgreSQL bigint).
const maxInt64 = 1<<63 - 1

// Page sizes, as components.yaml's Limit parameter has them.
const (
	defaultLimit = 100
	maxLimit     = 1000
)

// parseUint reads a decimal integer from lo to hi: digits only, no sign,
// no spaces.
func parseUint(s string, lo, hi uint64) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("must be an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// parseAddress reads a 0x-prefixed 20-byte hex address in any letter
// case; EIP-55 checksums are not checked.
func parseAddress(s string) (common.Address, error) {
	b, err := parseHex(s, common.AddressLength)
	if err != nil {
		return common.Address{}, errors.New("must be a 0x-prefixed 20-byte hex address")
	}
	return common.BytesToAddress(b), nil
}

// parseHash reads a 0x-prefixed 32-byte hex hash in any letter case.
func parseHash(s string) (common.Hash, error) {
	b, err := parseHex(s, common.HashLength)
	if err != nil {
		return common.Hash{}, errors.New("must be a 0x-prefixed 32-byte hex hash")
	}
	return common.BytesToHash(b), nil
}

// parseHex reads "0x" and exactly n bytes of hex.
func parseHex(s string, n int) ([]byte, error) {
	digits, ok := strings.CutPrefix(s, "0x")
	if !ok || len(digits) != 2*n {
		return nil, errors.New("length")
	}
	return hex.DecodeString(digits)
}

// parseAsset reads "native" or a token's address in any letter case, and
// answers the asset as the ledger spells it (the address in lower case).
func parseAsset(s string) (string, error) {
	if s == ledger.Native {
		return s, nil
	}
	addr, err := parseAddress(s)
	if err != nil {
		return "", fmt.Errorf("must be %q or a token's 0x-prefixed 20-byte hex address", ledger.Native)
	}
	return lowerHex(addr.Bytes()), nil
}

// parseAmount reads a signed decimal integer, non-zero, of magnitude
// below 2^256: digits without leading zeros, an optional '-', nothing else
// (no '+', spaces, exponent or fraction).
func parseAmount(s string) (*big.Int, error) {
	digits := strings.TrimPrefix(s, "-")
	valid := digits != "" && digits[0] != '0' && len(digits) <= 78 && strings.Trim(digits, "0123456789") == ""
	var n *big.Int
	if valid {
		n, valid = new(big.Int).SetString(s, 10)
	}
	if !valid || n.CmpAbs(ledger.MaxAmount) > 0 {
		return nil, errors.New("must be a non-zero integer of magnitude below 2^256, in decimal digits with an optional '-'")
	}
	return n, nil
}

// parseAccountKind reads an account kind.
func parseAccountKind(s string) (ledger.AccountKind, error) {
	if k := ledger.AccountKind(s); k.Valid() {
		return k, nil
	}
	return "", errors.New("must be an account kind: wallet, fee_expense, counterparty, in_transit, suspense, deposit_source or opening_balance")
}

// parseJournalKind reads a journal kind.
func parseJournalKind(s string) (ledger.JournalKind, error) {
	if k := ledger.JournalKind(s); k.Valid() {
		return k, nil
	}
	return "", errors.New("must be a journal kind: confirmed, reverted, reversal, deposit, reconciliation, transit_out, transit_in or opening")
}

// lowerHex is b as 0x-prefixed lower-case hex, as the API answers
// addresses and hashes.
func lowerHex(b []byte) string { return "0x" + hex.EncodeToString(b) }

// params reads a request's parameters, collecting every problem, so that
// one answer names them all.
type params struct {
	query  url.Values
	fields []errs.FieldError
}

func newParams(query url.Values) *params { return &params{query: query} }

// fail records a problem with the parameter name.
func (p *params) fail(name string, err error) {
	p.fields = append(p.fields, errs.FieldError{Pointer: name, Detail: err.Error()})
}

// get is the query parameter name, if it was given once: given twice is a
// problem, as is given empty.
func (p *params) get(name string) (string, bool) {
	vs, ok := p.query[name]
	switch {
	case !ok:
		return "", false
	case len(vs) > 1:
		p.fail(name, errors.New("must be given at most once"))
		return "", false
	case vs[0] == "":
		p.fail(name, errors.New("must not be empty; leave it out instead"))
		return "", false
	}
	return vs[0], true
}

// chainID is the optional chain_id; 0 when absent.
func (p *params) chainID() uint64 {
	s, ok := p.get("chain_id")
	if !ok {
		return 0
	}
	n, err := parseUint(s, 1, maxInt64)
	if err != nil {
		p.fail("chain_id", err)
	}
	return n
}

// atBlock is the optional at_block.
func (p *params) atBlock() *uint64 {
	s, ok := p.get("at_block")
	if !ok {
		return nil
	}
	n, err := parseUint(s, 0, maxInt64)
	if err != nil {
		p.fail("at_block", err)
		return nil
	}
	return &n
}

// limit is the page size, defaultLimit when absent.
func (p *params) limit() int {
	s, ok := p.get("limit")
	if !ok {
		return defaultLimit
	}
	n, err := parseUint(s, 1, maxLimit)
	if err != nil {
		p.fail("limit", err)
		return defaultLimit
	}
	return int(n)
}

// address is the optional parameter name as an address.
func (p *params) address(name string) *common.Address {
	s, ok := p.get(name)
	if !ok {
		return nil
	}
	a, err := parseAddress(s)
	if err != nil {
		p.fail(name, err)
		return nil
	}
	return &a
}

// hash is the optional parameter name as a hash.
func (p *params) hash(name string) *common.Hash {
	s, ok := p.get(name)
	if !ok {
		return nil
	}
	h, err := parseHash(s)
	if err != nil {
		p.fail(name, err)
		return nil
	}
	return &h
}

// asset is the optional asset; "" when absent.
func (p *params) asset() string {
	s, ok := p.get("asset")
	if !ok {
		return ""
	}
	a, err := parseAsset(s)
	if err != nil {
		p.fail("asset", err)
	}
	return a
}

// accountKind is the optional kind of an account; "" when absent.
func (p *params) accountKind() ledger.AccountKind {
	s, ok := p.get("kind")
	if !ok {
		return ""
	}
	k, err := parseAccountKind(s)
	if err != nil {
		p.fail("kind", err)
	}
	return k
}

// journalKind is the optional kind of a journal; "" when absent.
func (p *params) journalKind() ledger.JournalKind {
	s, ok := p.get("kind")
	if !ok {
		return ""
	}
	k, err := parseJournalKind(s)
	if err != nil {
		p.fail("kind", err)
	}
	return k
}

// transitStatus is the optional status of a transit; "" when absent.
func (p *params) transitStatus() ledger.TransitStatus {
	s, ok := p.get("status")
	if !ok {
		return ""
	}
	st := ledger.TransitStatus(s)
	if !st.Valid() {
		p.fail("status", errors.New("must be a transit status: pending, open or completed"))
	}
	return st
}

// transitID is the path parameter transit_id.
func (p *params) transitID(value string) string {
	if !ledger.ValidTransitID(value) {
		p.fail("transit_id", fmt.Errorf("must be 1 to %d characters of A-Z, a-z, 0-9, '.', '_', ':' and '-', alone or after a namespace of 1 to %d of them and %q",
			ledger.MaxTransitIDLen, ledger.MaxTransitNamespaceLen, ledger.NamespaceSeparator))
	}
	return value
}

// id is the path parameter name, a ledger id.
func (p *params) id(name, value string) int64 {
	n, err := parseUint(value, 1, maxInt64)
	if err != nil {
		p.fail(name, err)
	}
	return int64(n)
}

// err is the invalid problem naming every failing parameter; nil when
// there is none.
func (p *params) err() error {
	switch len(p.fields) {
	case 0:
		return nil
	case 1:
		return errs.InvalidFields(p.fields[0].Pointer+": "+p.fields[0].Detail, p.fields...)
	}
	names := make([]string, len(p.fields))
	for i, f := range p.fields {
		names[i] = f.Pointer
	}
	return errs.InvalidFields(fmt.Sprintf("%d parameters are invalid: %s", len(p.fields), strings.Join(names, ", ")), p.fields...)
}
