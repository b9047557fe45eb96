package policy_test

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/signer-zonec/policy"
)

// feeCaps are the fee caps every allow rule and cancels entry must have,
// for the cases about something else.
const feeCaps = `"max_fee_per_gas": "100", "max_gas": 21000, "fee_windows": [{"duration": "24h", "max_fee": "2100000"}]`

// withTokens is a small valid policy with tokens usd (ERC-20) and nft
// (ERC-721) on chain 1 and items (ERC-1155) on chain 10, around rules.
func withTokens(rules string) string {
	return `{"version": "v1", "chains": [1, 10], "approvers": {"alice": "` + pubB64("alice") + `"}, "tokens": {
		"usd": {"chain": 1, "address": "0x00000000000000000000000000000000000000c2", "standard": "erc20"},
		"nft": {"chain": 1, "address": "0x00000000000000000000000000000000000000c3", "standard": "erc721"},
		"items": {"chain": 10, "address": "0x00000000000000000000000000000000000000c4", "standard": "erc1155"}}, "rules": [` + rules + `]}`
}

// withRule is a small valid policy around one rule.
func withRule(rule string) string {
	return `{"version": "v1", "chains": [1, 10], "approvers": {"alice": "` + pubB64("alice") + `", "bob": "` + pubB64("bob") + `"}, "rules": [` + rule + `]}`
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	p := func(path, msg string) policy.Problem { return policy.Problem{Path: path, Msg: msg} }
	tests := []struct {
		name string
		src  string
		want []policy.Problem
	}{
		// Shape: what encoding/json alone would let through or say badly.
		{"not JSON", `{"version": "v1",, }`, []policy.Problem{p("$", `invalid JSON at line 1, column 18: invalid character ',' looking for beginning of object key string`)}},
		{"cut short", `{"version": "v1", "chains": [1`, []policy.Problem{p("chains", "unexpected end of file")}},
		{"trailing data", withRule(``) + ` {}`, []policy.Problem{p("$", "data after the object (line 1, column 178)")}},
		{"trailing garbage", withRule(``) + `x`, []policy.Problem{p("$", "data after the object (line 1, column 177)")}},
		{"not an object", `[]`, []policy.Problem{p("$", "want an object, got an array")}},
		{"unknown top-level field", `{"version": "v1", "chains": [1], "rules": [], "rule": []}`, []policy.Problem{p("rule", `unknown field "rule"`)}},
		{"unknown nested field", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_value": "1"}}`), []policy.Problem{p("rules[0].limits.max_value", `unknown field "max_value"`)}},
		{"field in another case", withRule(`{"id": "a", "Effect": "allow", "match": {}}`), []policy.Problem{p("rules[0].Effect", `unknown field "Effect" (did you mean "effect"? names are case-sensitive)`)}},
		{"duplicate key", withRule(`{"id": "a", "effect": "deny", "effect": "allow", "match": {}}`), []policy.Problem{p("rules[0].effect", "duplicate key")}},
		{"duplicate key in another case", withRule(`{"id": "a", "effect": "deny", "EFFECT": "allow", "match": {}}`), []policy.Problem{p("rules[0].EFFECT", `duplicate key ("effect" differs only in case)`)}},
		{"duplicate approver id", `{"version": "v1", "chains": [1], "approvers": {"alice": "` + pubB64("alice") + `", "alice": "` + pubB64("bob") + `"}, "rules": []}`, []policy.Problem{p("approvers.alice", "duplicate key")}},
		{"null", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": null}`), []policy.Problem{p("rules[0].limits", "null is not allowed; leave the field out instead")}},
		{"string for a list", `{"version": "v1", "chains": "1", "rules": []}`, []policy.Problem{p("chains", "want an array, got a string")}},
		{"number for a string", `{"version": 1, "chains": [1], "rules": []}`, []policy.Problem{p("version", "want a string, got a number")}},
		{"negative chain", `{"version": "v1", "chains": [-1], "rules": []}`, []policy.Problem{p("chains[0]", "-1 is not a whole number from 0 to 2^64-1")}},
		{"fractional gas", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_gas": 1.5}}`), []policy.Problem{p("rules[0].limits.max_gas", "1.5 is not a whole number from 0 to 2^64-1")}},
		{"number for an amount", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_value_per_tx": 1}}`), []policy.Problem{p("rules[0].limits.max_value_per_tx", "want a string, got a number")}},
		{"string for a bool", withRule(`{"id": "a", "effect": "allow", "match": {"contract_creation": "true"}}`), []policy.Problem{p("rules[0].match.contract_creation", "want true or false, got a string")}},
		{"invalid UTF-8", "{\"version\": \"v\xff\", \"chains\": [1], \"rules\": []}", []policy.Problem{p("$", "not valid UTF-8")}},

		// Required and top-level fields.
		{"empty object", `{}`, []policy.Problem{p("version", "required"), p("chains", "required: the chain ids signerd signs for"), p("rules", "required (an empty list denies everything)")}},
		{"empty chains", `{"version": "v1", "chains": [], "rules": []}`, []policy.Problem{p("chains", "an empty list; leave the field out to match any (an empty list would read as none)")}},
		{"chain 0 and a repeat", `{"version": "v1", "chains": [0, 5, 5], "rules": []}`, []policy.Problem{p("chains[0]", "0 is not a chain id"), p("chains[2]", "chain 5 is listed twice")}},
		{"version with a newline", `{"version": "v\n1", "chains": [1], "rules": []}`, []policy.Problem{p("version", "contains control characters")}},
		{"bad approver key", `{"version": "v1", "chains": [1], "approvers": {"alice": "c2hvcnQ="}, "rules": []}`, []policy.Problem{p("approvers.alice", `"c2hvcnQ=" is not an Ed25519 public key (64 hex digits or base64 of 32 bytes)`)}},
		{"bad approver id", `{"version": "v1", "chains": [1], "approvers": {"al ice": "` + pubB64("alice") + `"}, "rules": []}`, []policy.Problem{p(`approvers["al ice"]`, "an approver id is 1 to 64 letters, digits, '.', '_', '-' or '@'")}},
		{"one key for two approvers", `{"version": "v1", "chains": [1], "approvers": {"alice": "` + pubB64("alice") + `", "bob": "` + pubHex("alice") + `"}, "rules": []}`, []policy.Problem{p("approvers.bob", `the same key as approver "alice": one key, one approver`)}},

		// Rules.
		{"rule without id, effect or match", withRule(`{}`), []policy.Problem{p("rules[0].id", "an id is 1 to 64 letters, digits, '.', '_', '-' or '@'"), p("rules[0].match", "required ({} matches every request)"), p("rules[0].effect", `required: "allow" or "deny"`)}},
		{"unknown effect", withRule(`{"id": "a", "effect": "permit", "match": {}}`), []policy.Problem{p("rules[0].effect", `"permit" is not "allow" or "deny"`)}},
		{"duplicate rule id", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}}, {"id": "a", "effect": "deny", "match": {}}`), []policy.Problem{p("rules[1].id", `"a" is already the id of rules[0]`)}},
		{"reserved rule id", withRule(`{"id": "default-deny", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}}`), []policy.Problem{p("rules[0].id", `"default-deny" is reserved for signerd's own decisions`)}},
		{"rule id of a nonce decision", withRule(`{"id": "identical-request", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}}`), []policy.Problem{p("rules[0].id", `"identical-request" is reserved for signerd's own decisions`)}},
		{"deny rule with limits", withRule(`{"id": "a", "effect": "deny", "match": {}, "limits": {}, "erc20_spenders": ["0x00000000000000000000000000000000000000e1"]}`), []policy.Problem{
			p("rules[0].limits", "only allow rules have limits: a deny rule denies what it matches"),
			p("rules[0].erc20_spenders", "only allow rules have erc20_spenders: a deny rule denies what it matches"),
		}},
		{"chain outside the policy", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"chains": [1, 5]}}`), []policy.Problem{p("rules[0].match.chains[1]", "chain 5 is not in the policy's chains")}},
		{"address too short", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"to": ["0x1234"]}}`), []policy.Problem{p("rules[0].match.to[0]", `"0x1234" is not an address (0x and 40 hex digits)`)}},
		{"address with a bad checksum", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"from": ["0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266"]}}`), []policy.Problem{p("rules[0].match.from[0]", "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266 has a wrong EIP-55 checksum (write it lowercase or as 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266)")}},
		{"address in upper case", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"from": ["0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266"]}}`), []policy.Problem{p("rules[0].match.from[0]", "0xF39FD6E51AAD88F6F4CE6AB8827279CFFFB92266 has a wrong EIP-55 checksum (write it lowercase or as 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266)")}},
		{"address listed twice", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"to": ["0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266", "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"]}}`), []policy.Problem{p("rules[0].match.to[1]", "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 is listed twice")}},
		{"empty from", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"from": []}}`), []policy.Problem{p("rules[0].match.from", "an empty list; leave the field out to match any (an empty list would read as none)")}},
		{"empty spenders", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}, "erc20_spenders": []}`), []policy.Problem{p("rules[0].erc20_spenders", "an empty list; leave it out (without it, no approval call is allowed)")}},
		{"bad selectors", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"selectors": {"0x00000000000000000000000000000000000000c1": ["0xa9059cb", "a9059cbb", "0xa9059cbb", "0xA9059CBB"], "0x00000000000000000000000000000000000000c2": [], "0xnope": ["0xa9059cbb"]}}}`), []policy.Problem{
			p("rules[0].match.selectors.0x00000000000000000000000000000000000000c1[0]", `"0xa9059cb" is not a selector (0x and 8 hex digits)`),
			p("rules[0].match.selectors.0x00000000000000000000000000000000000000c1[1]", `"a9059cbb" is not a selector (0x and 8 hex digits)`),
			p("rules[0].match.selectors.0x00000000000000000000000000000000000000c1[3]", "0xA9059CBB is listed twice"),
			p("rules[0].match.selectors.0x00000000000000000000000000000000000000c2", "no selectors listed"),
			p("rules[0].match.selectors.0xnope", `"0xnope" is not an address (0x and 40 hex digits)`),
		}},
		{"one contract in to and selectors", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"to": ["0x00000000000000000000000000000000000000c1"], "selectors": {"0x00000000000000000000000000000000000000c1": ["0xa9059cbb"]}}}`), []policy.Problem{p("rules[0].match.selectors.0x00000000000000000000000000000000000000c1", "0x00000000000000000000000000000000000000C1 is also in to, which allows any call data to it: list it in one place")}},
		{"bad amounts", withRule(`{"id": "a", "effect": "allow", "match": {"value": {"min": "01", "max": "1e18"}}, "limits": {"max_value_per_tx": "-1", "max_fee_per_gas": "1.5", "max_priority_fee_per_gas": "", "max_gas": 21000, "fee_windows": [{"duration": "1h", "max_fee": "1"}]}}`), []policy.Problem{
			p("rules[0].match.value.min", `"01" is not an amount (a decimal string of wei, no sign, no leading zeros)`),
			p("rules[0].match.value.max", `"1e18" is not an amount (a decimal string of wei, no sign, no leading zeros)`),
			p("rules[0].limits.max_value_per_tx", `"-1" is not an amount (a decimal string of wei, no sign, no leading zeros)`),
			p("rules[0].limits.max_fee_per_gas", `"1.5" is not an amount (a decimal string of wei, no sign, no leading zeros)`),
			p("rules[0].limits.max_priority_fee_per_gas", `"" is not an amount (a decimal string of wei, no sign, no leading zeros)`),
		}},
		{"amount past uint256", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {` + feeCaps + `, "max_value_per_tx": "115792089237316195423570985008687907853269984665640564039457584007913129639936"}}`), []policy.Problem{p("rules[0].limits.max_value_per_tx", "115792089237316195423570985008687907853269984665640564039457584007913129639936 is more than 2^256-1")}},
		{"empty and inverted ranges", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"value": {}}}, {"id": "b", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"value": {"min": "2", "max": "1"}}}`), []policy.Problem{p("rules[0].match.value", "set min, max or both"), p("rules[1].match.value", "min is more than max: the range is empty")}},
		{"bad limits", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_gas": 0, "max_fee_per_gas": "10", "max_priority_fee_per_gas": "11", "fee_windows": [{"duration": "1h", "max_fee": "1"}], "windows": [{"duration": "0s", "max_value": "1"}, {"duration": "1d", "max_value": "1"}, {"duration": "60m", "max_value": "1"}, {"duration": "1h", "max_value": "1"}]}}`), []policy.Problem{
			p("rules[0].limits.windows[0].duration", `"0s" is not a positive duration (such as 1h, 24h, 168h)`),
			p("rules[0].limits.windows[1].duration", `"1d" is not a positive duration (such as 1h, 24h, 168h)`),
			p("rules[0].limits.windows[3].duration", "a second window of 1h0m0s"),
			p("rules[0].limits.max_priority_fee_per_gas", "more than max_fee_per_gas, which already caps it"),
			p("rules[0].limits.max_gas", "0 would refuse every transaction"),
		}},
		{"window without max", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {` + feeCaps + `, "windows": [{"duration": "1h"}]}}`), []policy.Problem{p("rules[0].limits.windows[0].max_value", `"" is not an amount (a decimal string of wei, no sign, no leading zeros)`)}},
		{"bad approvals", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}, "approval": {"threshold": 3, "approvers": ["alice", "carol", "alice"], "max_ttl": "forever"}}, {"id": "b", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}, "approval": {"threshold": 0, "approvers": [], "max_ttl": "1h"}}, {"id": "c", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}, "approval": {"threshold": 1, "max_ttl": "1h"}}`), []policy.Problem{
			p("rules[0].approval.approvers[1]", `"carol" is not in the policy's approvers`),
			p("rules[0].approval.approvers[2]", `"alice" is listed twice`),
			p("rules[0].approval.max_ttl", `"forever" is not a positive duration (such as 1h, 24h, 168h)`),
			p("rules[1].approval.approvers", "an empty list: no approval could ever count"),
			p("rules[1].approval.threshold", "required, at least 1"),
			p("rules[2].approval.approvers", "required: the ids of the approvers who may approve"),
			p("rules[2].approval.threshold", "1 of 0 approvers can never be reached"),
		}},
		{"bad cancels", `{"version": "v1", "chains": [1], "cancels": [{"id": "c", "chains": [2], "limits": {"max_value_per_tx": "0", "windows": []}}, {"id": "c"}], "rules": [{"id": "c", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}}]}`, []policy.Problem{
			p("cancels[0].chains[0]", "chain 2 is not in the policy's chains"),
			p("cancels[0].limits.max_value_per_tx", "a cancel moves no value"),
			p("cancels[0].limits.windows", "a cancel moves no value"),
			p("cancels[0].limits.windows", "an empty list; leave the field out to match any (an empty list would read as none)"),
			p("cancels[0].limits.max_fee_per_gas", "required: the most a transaction may pay per gas (a legacy gas price included)"),
			p("cancels[0].limits.max_gas", "required: the most gas a transaction may use"),
			p("cancels[0].limits.fee_windows", "required: at least one rolling window of the fees (gas × max fee) signed for the sender"),
			p("cancels[1].id", `"c" is already the id of cancels[0]`),
			p("cancels[1].limits", "required: every cancels entry caps fees (max_fee_per_gas, max_gas and fee_windows)"),
			p("rules[0].id", `"c" is already the id of cancels[0]`),
		}},

		// Tokens: declared once, with their standard; named by rules with
		// caps in token units.
		{"token declarations", `{"version": "v1", "chains": [1, 10], "tokens": {
			"bad id!": {"chain": 1, "address": "0x00000000000000000000000000000000000000c1", "standard": "erc20"},
			"a": {"chain": 0, "address": "0x1", "standard": "erc777"},
			"b": {"chain": 5, "address": "0x00000000000000000000000000000000000000c2", "standard": "erc721"},
			"c": {"chain": 1, "address": "0x00000000000000000000000000000000000000c3", "standard": "erc20", "description": "ok"},
			"d": {"chain": 1, "address": "0x00000000000000000000000000000000000000c3", "standard": "erc1155"},
			"e": {"chain": 10, "address": "0x00000000000000000000000000000000000000c3", "standard": "erc1155", "description": ""}}, "rules": []}`, []policy.Problem{
			p("tokens.a.chain", "required: the chain id the contract is on"),
			p("tokens.a.address", `"0x1" is not an address (0x and 40 hex digits)`),
			p("tokens.a.standard", `"erc777" is not erc20, erc721 or erc1155`),
			p("tokens.b.chain", "chain 5 is not in the policy's chains"),
			p(`tokens["bad id!"]`, "a token id is 1 to 64 letters, digits, '.', '_', '-' or '@'"),
			p("tokens.d.address", "0x00000000000000000000000000000000000000C3 on chain 1 is already token c: one contract, one standard"),
			p("tokens.e.description", "empty; leave it out instead"),
		}},
		{"empty tokens", `{"version": "v1", "chains": [1], "tokens": {}, "rules": []}`, []policy.Problem{p("tokens", "empty; leave it out when no token is declared")}},
		{"rule token entries", withTokens(`{"id": "a", "effect": "allow", "match": {"chains": [10]}, "limits": {` + feeCaps + `}, "tokens": {
			"usd": {"max_amount_per_tx": "1", "windows": [{"duration": "1h", "max_amount": "1"}]},
			"items": {"recipients": [], "spenders": ["0x00000000000000000000000000000000000000e1"], "windows": []},
			"nope": {"max_amount_per_tx": "1", "windows": [{"duration": "1h", "max_amount": "1"}]}}}`), []policy.Problem{
			p("rules[0].tokens.items.max_amount_per_tx", "required: the most units of the token one transaction may move or grant"),
			p("rules[0].tokens.items.windows", "an empty list: at least one window is required"),
			p("rules[0].tokens.items.recipients", "an empty list; leave the field out to match any (an empty list would read as none)"),
			p("rules[0].tokens.items.spenders", "ERC-1155 has no approve: list setApprovalForAll's operators under operators"),
			p("rules[0].tokens.nope", `"nope" is not in the policy's tokens`),
			p("rules[0].tokens.usd", "token usd is on chain 1, which rules[0] does not match"),
		}},
		{"rule token caps", withTokens(`{"id": "a", "effect": "allow", "match": {}, "limits": {` + feeCaps + `}, "tokens": {
			"usd": {"max_amount_per_tx": "-1", "windows": [{"duration": "1h", "max_amount": "1.0"}, {"duration": "60m", "max_amount": "1"}], "spenders": [], "operators": ["0x00000000000000000000000000000000000000e1"]},
			"nft": {"operators": []}}}`), []policy.Problem{
			p("rules[0].tokens.nft.max_amount_per_tx", "required: the most units of the token one transaction may move or grant"),
			p("rules[0].tokens.nft.windows", "required: at least one rolling window of the units signed for the sender"),
			p("rules[0].tokens.nft.operators", "an empty list; leave it out (without it, setApprovalForAll(operator, true) is refused)"),
			p("rules[0].tokens.usd.max_amount_per_tx", `"-1" is not an amount (a decimal string of token units, no sign, no leading zeros)`),
			p("rules[0].tokens.usd.windows[0].max_amount", `"1.0" is not an amount (a decimal string of token units, no sign, no leading zeros)`),
			p("rules[0].tokens.usd.windows[1].duration", "a second window of 1h0m0s"),
			p("rules[0].tokens.usd.spenders", "an empty list; leave it out (without it, no approval is allowed)"),
			p("rules[0].tokens.usd.operators", "ERC-20 has no setApprovalForAll: list approve's spenders under spenders"),
		}},
		{"tokens on a deny rule, and none on an allow rule", withTokens(`{"id": "a", "effect": "deny", "match": {}, "tokens": {"usd": {}}}, {"id": "b", "effect": "allow", "match": {}, "limits": {` + feeCaps + `}, "tokens": {}}`), []policy.Problem{
			p("rules[0].tokens", "only allow rules have tokens: a deny rule denies what it matches"),
			p("rules[1].tokens", "empty; leave it out instead"),
		}},
		{"a declared token reached around its caps", withTokens(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {
			"to": ["0x00000000000000000000000000000000000000c2", "0x00000000000000000000000000000000000000c4"],
			"selectors": {"0x00000000000000000000000000000000000000c3": ["0x42966c68", "0x23b872dd", "0xd505accf"]}}}`), []policy.Problem{
			p("rules[0].match.to[0]", "0x00000000000000000000000000000000000000c2 is token usd on chain 1: name it under the rule's tokens, whose calls are read and capped"),
			p("rules[0].match.to[1]", "0x00000000000000000000000000000000000000C4 is token items on chain 10: name it under the rule's tokens, whose calls are read and capped"),
			p("rules[0].match.selectors.0x00000000000000000000000000000000000000c3[1]", "0x23b872dd is ERC-721 transferFrom(address,address,uint256) on token nft: name the token under the rule's tokens, whose calls are read and capped"),
			p("rules[0].match.selectors.0x00000000000000000000000000000000000000c3[2]", "0xd505accf is permit(address,address,uint256,uint256,uint8,bytes32,bytes32), which grants an allowance that token nft's caps would not count"),
		}},
		{"token approval thresholds", withTokens(`{"id": "a", "effect": "allow", "match": {}, "limits": {` + feeCaps + `},
			"tokens": {"usd": {"max_amount_per_tx": "1", "windows": [{"duration": "1h", "max_amount": "1"}]}},
			"approval": {"threshold": 1, "approvers": ["alice"], "above_token_amounts": {"usd": "x", "nft": "1"}, "max_ttl": "1h"}}`), []policy.Problem{
			p("rules[0].approval.above_value", "required with above_token_amounts: without it every request needs approvals, and the token thresholds never apply"),
			p("rules[0].approval.above_token_amounts.nft", "token nft is not in the rule's tokens"),
			p("rules[0].approval.above_token_amounts.usd", `"x" is not an amount (a decimal string of token units, no sign, no leading zeros)`),
		}},

		// Fees are capped by every allow rule and cancels entry, per
		// transaction and per rolling window; approvals expire.
		{"allow rule without limits", withRule(`{"id": "a", "effect": "allow", "match": {}}`), []policy.Problem{p("rules[0].limits", "required: every allow rule caps fees (max_fee_per_gas, max_gas and fee_windows)")}},
		{"limits without fee caps", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_value_per_tx": "1", "max_priority_fee_per_gas": "1"}}`), []policy.Problem{
			p("rules[0].limits.max_fee_per_gas", "required: the most a transaction may pay per gas (a legacy gas price included)"),
			p("rules[0].limits.max_gas", "required: the most gas a transaction may use"),
			p("rules[0].limits.fee_windows", "required: at least one rolling window of the fees (gas × max fee) signed for the sender"),
		}},
		{"cancels entry without limits", `{"version": "v1", "chains": [1], "cancels": [{"id": "c"}], "rules": []}`, []policy.Problem{p("cancels[0].limits", "required: every cancels entry caps fees (max_fee_per_gas, max_gas and fee_windows)")}},
		{"bad fee windows", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_fee_per_gas": "1", "max_gas": 21000, "fee_windows": [{"duration": "1h", "max_fee": "x"}, {"duration": "60m", "max_fee": "1"}, {"duration": "0s", "max_fee": "1"}]}}`), []policy.Problem{
			p("rules[0].limits.fee_windows[0].max_fee", `"x" is not an amount (a decimal string of wei, no sign, no leading zeros)`),
			p("rules[0].limits.fee_windows[1].duration", "a second fee window of 1h0m0s"),
			p("rules[0].limits.fee_windows[2].duration", `"0s" is not a positive duration (such as 1h, 24h, 168h)`),
		}},
		{"empty fee windows", withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {"max_fee_per_gas": "1", "max_gas": 21000, "fee_windows": []}}`), []policy.Problem{p("rules[0].limits.fee_windows", "an empty list: at least one fee window is required")}},
		{"approval without max_ttl", withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {}, "approval": {"threshold": 1, "approvers": ["alice"]}}`), []policy.Problem{p("rules[0].approval.max_ttl", "required: how far ahead an approval may expire (such as 24h)")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := policy.Parse([]byte(tc.src))
			var perr *policy.Error
			if !errors.As(err, &perr) {
				t.Fatalf("Parse: %v, want a *policy.Error", err)
			}
			if diff := cmp.Diff(tc.want, perr.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAcceptsEdges(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"max uint256":           withRule(`{"id": "a", "effect": "allow", "match": {}, "limits": {` + feeCaps + `, "max_value_per_tx": "115792089237316195423570985008687907853269984665640564039457584007913129639935"}}`),
		"zero amount":           withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"value": {"max": "0"}}}`),
		"checksummed address":   withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"from": ["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"]}}`),
		"upper-case selector":   withRule(`{"id": "a", "effect": "allow", "limits": {` + feeCaps + `}, "match": {"selectors": {"*": ["0xA9059CBB"]}}}`),
		"hex key with 0x":       `{"version": "v1", "chains": [1], "approvers": {"a@example.com": "0x` + pubHex("alice") + `"}, "rules": []}`,
		"no rules":              `{"version": "v1", "chains": [1], "rules": []}`,
		"whitespace everywhere": "\n\t{ \"version\" : \"v1\" ,\r\n \"chains\" : [ 1 ] , \"rules\" : [ ] }\n\n",
		"max chain id":          `{"version": "v1", "chains": [18446744073709551615], "rules": []}`,
		"a token's address on a chain where it is no token": withTokens(`{"id": "a", "effect": "allow", "match": {"chains": [1], "to": ["0x00000000000000000000000000000000000000c4"]}, "limits": {` + feeCaps + `}}`),
		"a selector of no token call on a token":            withTokens(`{"id": "a", "effect": "allow", "match": {"selectors": {"0x00000000000000000000000000000000000000c2": ["0x42966c68"]}}, "limits": {` + feeCaps + `}}`),
		"a token rule":                                      withTokens(`{"id": "a", "effect": "allow", "match": {"chains": [1]}, "limits": {` + feeCaps + `}, "tokens": {"usd": {"max_amount_per_tx": "0", "windows": [{"duration": "1h", "max_amount": "0"}], "recipients": ["0x00000000000000000000000000000000000000d1"], "spenders": ["0x00000000000000000000000000000000000000e1"]}, "nft": {"max_amount_per_tx": "1", "windows": [{"duration": "1h", "max_amount": "1"}], "operators": ["0x00000000000000000000000000000000000000e1"]}}, "approval": {"threshold": 1, "approvers": ["alice"], "above_value": "0", "above_token_amounts": {"usd": "0"}, "max_ttl": "1h"}}`),
	} {
		if _, err := policy.Parse([]byte(src)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := policy.Parse([]byte(`{"version": "", "chains": [0], "rules": []}`))
	want := "invalid policy: 2 problems:\n  version: required\n  chains[0]: 0 is not a chain id"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	_, err = policy.Parse([]byte(`{"version": "v", "chains": [0], "rules": []}`))
	if want := "invalid policy: chains[0]: 0 is not a chain id"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// TestHashIsOfTheExactBytes changes every byte of a policy file in turn:
// whenever the result still parses, its hash differs and is the SHA-256 of
// the new bytes; whitespace alone changes it too.
func TestHashIsOfTheExactBytes(t *testing.T) {
	t.Parallel()
	orig, err := os.ReadFile(filepath.Join("..", "testdata", "policy", "development.json"))
	if err != nil {
		t.Fatal(err)
	}
	p := mustParse(t, string(orig))
	if p.Hash() != common.Hash(sha256.Sum256(orig)) {
		t.Fatalf("Hash %s is not the SHA-256 of the file", p.Hash())
	}
	accepted := 0
	for i := range orig {
		changed := append([]byte(nil), orig...)
		changed[i] ^= 0x01
		q, err := policy.Parse(changed)
		if err != nil {
			continue
		}
		accepted++
		if q.Hash() == p.Hash() || q.Hash() != common.Hash(sha256.Sum256(changed)) {
			t.Fatalf("byte %d changed: hash %s (original %s)", i, q.Hash(), p.Hash())
		}
	}
	if accepted < 100 {
		t.Errorf("only %d one-byte changes parsed; the test proves little", accepted)
	}
	for _, ws := range []string{"\n", " "} {
		if q := mustParse(t, string(orig)+ws); q.Hash() == p.Hash() {
			t.Errorf("appending %q kept the hash", ws)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	if _, err := policy.Load(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "load policy") {
		t.Errorf("a missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(path, []byte(`{"version": "v1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := policy.Load(path)
	var perr *policy.Error
	if !errors.As(err, &perr) || !strings.Contains(err.Error(), path) {
		t.Errorf("a bad file: %v, want a *policy.Error naming the file", err)
	}
}

func TestParsePublicKey(t *testing.T) {
	t.Parallel()
	want := approverKey("alice").Public()
	for _, s := range []string{pubB64("alice"), pubHex("alice"), "0x" + pubHex("alice"), strings.ToUpper(pubHex("alice"))} {
		got, err := policy.ParsePublicKey(s)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParsePublicKey(%q) = %x, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "0x", pubHex("alice")[2:], pubB64("alice")[:43], strings.TrimRight(pubB64("alice"), "=")} {
		if _, err := policy.ParsePublicKey(s); err == nil {
			t.Errorf("ParsePublicKey(%q) accepted", s)
		}
	}
}
