// Package policy is signerd's policy engine: a versioned JSON file that an
// operator writes and a security reviewer reads, decoded strictly and
// compiled into the rules that decide every signing request.
//
// The file says which chains signerd signs for, which approver keys exist,
// which token contracts it reads calls to, when a cancel may replace a
// signed transaction, and an ordered list of rules. Evaluation is
// deny-first: any matching deny rule denies, whatever its place in the
// list; otherwise the first matching allow rule decides, under its limits
// (value per transaction and per rolling window, fees per transaction and
// per rolling window, gas, token units per transaction and per window,
// recipients, spenders and operators, M-of-N approvals); a request no
// allow rule matches is denied by "default-deny".
//
// Nothing a file allows is unbounded: every allow rule and cancels entry
// must cap fees (max_fee_per_gas, max_gas, fee_windows), every token a
// rule names must be capped per transaction and per window, and every
// approval must expire within max_ttl, or the file is refused.
//
// The file, in short (testdata/policy holds full examples; amounts are wei
// as decimal strings, token amounts the token's own units, addresses
// lowercase or EIP-55, selectors 0x+8 hex):
//
//	{
//	  "version": "2025-11-23.1",                  required; in every decision
//	  "description": "...",                       optional, on tokens, rules and cancels too
//	  "chains": [1, 8453],                        chain id allowlist
//	  "approvers": {"alice": "<Ed25519 public key, base64 or hex>"},
//	  "tokens": {"usdc": {"chain": 1, "address": "0x...",
//	             "standard": "erc20"}},           or erc721, erc1155: how its calls are read
//	  "cancels": [{"id": "...", "chains": [1], "from": ["0x..."],
//	               "limits": {"max_fee_per_gas": "...", "max_gas": 21000,      required
//	                          "fee_windows": [{"duration": "24h", "max_fee": "..."}]}}],
//	  "rules": [{
//	    "id": "treasury", "effect": "allow",      or "deny"
//	    "match": {                                every field optional: left out matches any
//	      "chains": [1], "from": ["0x..."],
//	      "to": ["0x..."],                        any call data to these (no declared token)
//	      "selectors": {"0x<contract>": ["0xa9059cbb"], "*": ["0x..."]},
//	      "contract_creation": true,              allow rules match creations only with this
//	      "value": {"min": "0", "max": "..."}     inclusive
//	    },
//	    "limits": {"max_value_per_tx": "...", "windows": [{"duration": "24h", "max_value": "..."}],
//	               "max_fee_per_gas": "...", "max_priority_fee_per_gas": "...", "max_gas": 21000,
//	               "fee_windows": [{"duration": "24h", "max_fee": "..."}]},   required, with fee caps
//	    "tokens": {"usdc": {                      calls to this declared token, in its units
//	      "max_amount_per_tx": "...", "windows": [{"duration": "24h", "max_amount": "..."}],
//	      "recipients": ["0x..."],                transfers only to these (left out: any)
//	      "spenders": ["0x..."],                  approvals only to these, capped like transfers
//	      "operators": ["0x..."]}},               setApprovalForAll(op, true) only to these
//	    "erc20_spenders": ["0x..."],              allowance grants to undeclared contracts only to these
//	    "approval": {"threshold": 2, "approvers": ["alice", "bob", "carol"],
//	                 "above_value": "...",        left out: always required
//	                 "above_token_amounts": {"usdc": "..."},  per token; needs above_value
//	                 "max_ttl": "24h"}            required: an approval's longest remaining life
//	  }]
//	}
//
// Call data to a declared token is read by its standard only, and an allow
// rule reaches a declared token only by naming it: selectors collide across
// standards, and a token no rule names must not be reachable through a
// rule written for any contract. Call data policy reads (token calls,
// allowance-granting calls) is decoded by hand, canonical ABI encoding
// only (calldata.go): what the decoder cannot read exactly is denied.
//
// Strictness is the point. The file is checked so that what a reviewer
// reads is what signerd enforces: unknown fields, fields spelt in another
// case, duplicate keys, nulls, empty lists (which would read as "none" but
// mean "any"), trailing data, invalid UTF-8, mis-checksummed addresses and
// amounts outside uint256 are all errors, each named by its JSON path.
package policy

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"io"
	"math/big"
	"os"
	"slices"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

// Rule ids that signerd decides by without a rule of the file; a rule of the
// file cannot take them.
const (
	// DefaultDeny decides a request that no allow rule matches.
	DefaultDeny = "default-deny"
	// ChainNotAllowed decides a request for a chain not in the file's chains.
	ChainNotAllowed = "chain-allowlist"
	// InvalidRequest decides a request that fails signer.Request.Validate.
	InvalidRequest = "invalid-request"
)

// reserved are the rule ids the file may not use.
var reserved = []string{DefaultDeny, ChainNotAllowed, InvalidRequest, signer.RuleDoubleSign, signer.RuleIdenticalRequest, signer.RuleTxIDBinding, signer.RuleNonceAhead}

// maxFileSize bounds a policy file: a real one is a few kilobytes, and
// nothing legitimate needs megabytes of rules.
const maxFileSize = 4 << 20

// Policy is a compiled policy file. It is immutable and safe for concurrent
// use; it keeps no state between evaluations (rolling windows are computed
// from signerd's record through signer.Usage), so reloading it, or
// restarting signerd, changes nothing it decides.
type Policy struct {
	version   string
	hash      common.Hash
	chains    map[uint64]bool
	approvers map[string]ed25519.PublicKey
	tokens    map[tokenKey]*token
	deny      []*rule
	allow     []*rule
	cancels   []*cancelGrant
	// raw is the decoded file, kept so tests can check that what was
	// accepted re-validates.
	raw rawPolicy
}

var _ signer.Policy = (*Policy)(nil)

// Load reads and parses the policy file at path.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	return p, nil
}

// Parse decodes and validates a policy file. A file with problems returns
// an *Error listing every problem found, each at its JSON path.
func Parse(data []byte) (*Policy, error) {
	if len(data) > maxFileSize {
		return nil, &Error{Problems: []Problem{{Path: "$", Msg: fmt.Sprintf("%d bytes is more than the %d a policy file may have", len(data), maxFileSize)}}}
	}
	raw, err := decode(data)
	if err != nil {
		return nil, err
	}
	p, err := compile(raw)
	if err != nil {
		return nil, err
	}
	p.hash = sha256.Sum256(data)
	return p, nil
}

// Version is the file's version field.
func (p *Policy) Version() string { return p.version }

// Hash is the SHA-256 of the file's exact bytes: any change to the file,
// even of whitespace, changes it, so an audit record names the file that
// decided precisely.
func (p *Policy) Hash() common.Hash { return p.hash }

// Chains lists the chain ids the policy signs for, ascending.
func (p *Policy) Chains() []uint64 {
	out := make([]uint64, 0, len(p.chains))
	for id := range p.chains {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// AllowsCancel reports whether a cancel of from's transaction on chainID
// may be signed at a nonce already used: the chain must be in the policy, a
// cancels entry must name the chain and the signer (or leave either open),
// and no deny rule may match the cancel (a 0-value transfer from from to
// itself), just as Evaluate would decide it. Without a cancels entry,
// nothing may be cancelled.
func (p *Policy) AllowsCancel(chainID uint64, from common.Address) bool {
	if p.cancelGrant(chainID, from) == nil {
		return false
	}
	self := from
	cancel := &signer.Request{ChainID: chainID, From: from, To: &self, Value: new(big.Int)}
	for _, r := range p.deny {
		if r.match.matches(cancel, true, p.tokenAt(cancel)) {
			return false
		}
	}
	return true
}

// ValidID reports whether id may name a rule, a cancels entry or an
// approver: 1 to 64 letters, digits, '.', '_', '-' or '@'.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func (p *Policy) cancelGrant(chainID uint64, from common.Address) *cancelGrant {
	if !p.chains[chainID] {
		return nil
	}
	for _, g := range p.cancels {
		if g.covers(chainID, from) {
			return g
		}
	}
	return nil
}
