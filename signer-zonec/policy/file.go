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
	Limits        *rawLimits   `json:"limits,omitempty"`
	ERC20Spenders []string     `json:"erc20_spenders,omitempty"`
	Approval      *rawApproval `json:"approval,omitempty"`
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
