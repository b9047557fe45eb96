package policy

// The policy file as written. These types mirror the JSON one to one; the
// field tags are the schema the strict decoder enforces (decode.go), and
// compile (compile.go) turns them into rules. Optional scalars are pointers
// so that a field set to its zero value ("max_gas": 0, "min": "") is seen
// and refused instead of read as absent.

// rawPolicy is the whole file.
type rawPolicy struct {
	// Version names this revision of the file; every decision carries it.
	Version     string  `json:"version"`
	Description *string `json:"description,omitempty"`
	// Chains is the chain id allowlist: nothing is signed for another chain.
	Chains []uint64 `json:"chains"`
	// Approvers maps an approver id to its Ed25519 public key (base64 or
	// hex).
	Approvers map[string]string `json:"approvers,omitempty"`
	// Tokens declares the token contracts policy reads calls to, by id:
	// their chain, address and standard. Call data to a declared token is
	// decoded by its standard and capped in its units; a rule reaches it
	// only by naming it.
	Tokens map[string]rawToken `json:"tokens,omitempty"`
	// Cancels says who may cancel (replace a signed transaction by a
	// same-nonce 0-value self-transfer); none may without an entry.
	Cancels []rawCancel `json:"cancels,omitempty"`
	// Rules are evaluated deny first, then the first matching allow rule.
	// Required; an empty list denies everything.
	Rules []rawRule `json:"rules"`
}

// rawRule is one rule.
type rawRule struct {
	ID          string    `json:"id"`
	Description *string   `json:"description,omitempty"`
	Effect      string    `json:"effect"` // "allow" or "deny"
	Match       *rawMatch `json:"match"`  // required; {} matches every request
	// The rest is for allow rules only.
	Limits *rawLimits `json:"limits,omitempty"`
	// ERC20Spenders are the spenders allowance-granting calls to contracts
	// that are not declared tokens may name.
	ERC20Spenders []string `json:"erc20_spenders,omitempty"`
	// Tokens names the declared tokens the rule allows calls to, by id,
	// with their caps.
	Tokens   map[string]rawTokenRule `json:"tokens,omitempty"`
	Approval *rawApproval            `json:"approval,omitempty"`
}

// rawToken declares one token contract.
type rawToken struct {
	Chain       uint64  `json:"chain"`
	Address     string  `json:"address"`
	Standard    string  `json:"standard"` // "erc20", "erc721" or "erc1155"
	Description *string `json:"description,omitempty"`
}

// rawTokenRule is what a rule allows of one token, in the token's units:
// each call counts the units it moves or grants (ERC-20 amounts, 1 per
// ERC-721 token, ERC-1155 amounts summed).
type rawTokenRule struct {
	MaxAmountPerTx *string          `json:"max_amount_per_tx,omitempty"` // required
	Windows        []rawTokenWindow `json:"windows,omitempty"`           // required
	// Recipients, when set, are the only addresses transfers may go to.
	Recipients []string `json:"recipients,omitempty"`
	// Spenders may be approved (approve, increaseAllowance), for amounts
	// under the caps; without it no approval is allowed.
	Spenders []string `json:"spenders,omitempty"`
	// Operators may be given every unit of an ERC-721 or ERC-1155 token
	// (setApprovalForAll(operator, true)), which no cap can bound; without
	// it nobody may.
	Operators []string `json:"operators,omitempty"`
}

// rawTokenWindow caps the units of one token signed for one chain and
// sender within a rolling duration.
type rawTokenWindow struct {
	Duration  string `json:"duration"`
	MaxAmount string `json:"max_amount"`
}

// rawMatch selects the requests a rule applies to. Every field left out
// matches anything; every field given must hold.
type rawMatch struct {
	Chains []uint64 `json:"chains,omitempty"`
	From   []string `json:"from,omitempty"`
	// To, Selectors and ContractCreation together constrain the
	// destination: a request matches if its destination is listed in To
	// (any call data), or is a key of Selectors ("*" for any contract) with
	// its selector listed, or it is a contract creation and
	// ContractCreation is true. With none of the three, a deny rule matches
	// any destination and an allow rule any call but no contract creation.
	To               []string            `json:"to,omitempty"`
	Selectors        map[string][]string `json:"selectors,omitempty"`
	ContractCreation bool                `json:"contract_creation,omitempty"`
	// Value bounds the value, both ends inclusive.
	Value *rawRange `json:"value,omitempty"`
}

// rawRange is an inclusive range of wei.
type rawRange struct {
	Min *string `json:"min,omitempty"`
	Max *string `json:"max,omitempty"`
}

// rawLimits are an allow rule's (or a cancel entry's) caps. The fee caps
// (MaxFeePerGas, MaxGas, FeeWindows) are required: fees leave the wallet
// like value does.
type rawLimits struct {
	MaxValuePerTx        *string        `json:"max_value_per_tx,omitempty"`
	Windows              []rawWindow    `json:"windows,omitempty"`
	MaxFeePerGas         *string        `json:"max_fee_per_gas,omitempty"`
	MaxPriorityFeePerGas *string        `json:"max_priority_fee_per_gas,omitempty"`
	MaxGas               *uint64        `json:"max_gas,omitempty"`
	FeeWindows           []rawFeeWindow `json:"fee_windows,omitempty"`
}

// rawWindow caps the value signed for one chain and sender within a rolling
// duration.
type rawWindow struct {
	Duration string `json:"duration"`
	MaxValue string `json:"max_value"`
}

// rawFeeWindow caps the fees (gas × fee cap of each nonce's costliest
// signature) signed for one chain and sender within a rolling duration.
type rawFeeWindow struct {
	Duration string `json:"duration"`
	MaxFee   string `json:"max_fee"`
}

// rawApproval requires M-of-N approvals.
type rawApproval struct {
	Threshold uint64   `json:"threshold"`
	Approvers []string `json:"approvers"`
	// AboveValue, when set, requires approvals only for a value strictly
	// above it; without it approvals are always required.
	AboveValue *string `json:"above_value,omitempty"`
	// AboveTokenAmounts, by token id, requires approvals for calls to the
	// token that move or grant strictly more units; a call to a token the
	// rule names but that has no amount here always needs approvals, and
	// so does a grant of every unit (setApprovalForAll).
	AboveTokenAmounts map[string]string `json:"above_token_amounts,omitempty"`
	// MaxTTL refuses approvals that expire further ahead than this from
	// the time of evaluation. Required: an approval that lives for months
	// outlives the reason it was given.
	MaxTTL *string `json:"max_ttl,omitempty"`
}

// rawCancel lets some signers on some chains cancel.
type rawCancel struct {
	ID          string     `json:"id"`
	Description *string    `json:"description,omitempty"`
	Chains      []uint64   `json:"chains,omitempty"`
	From        []string   `json:"from,omitempty"`
	Limits      *rawLimits `json:"limits,omitempty"`
}
