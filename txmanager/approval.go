package txmanager

import (
	"math/big"
	"time"
)

// Approval is an approver's Ed25519 signature over a transaction's intent,
// its tx id, a fee ceiling and an expiry (txfence/approval/v2): stored by
// txmanager, verified by signerd, which alone knows the approvers' keys.
type Approval struct {
	Approver string
	// MaxFeePerGas is the fee ceiling the approver signed: signerd counts
	// the approval for an attempt whose fee cap (max_fee_per_gas, or the
	// gas price of a legacy transaction) is at or below it, and not above.
	MaxFeePerGas *big.Int
	Expiry       time.Time
	Signature    []byte
}

// Rejection is an approver's signed rejection (txfence/rejection/v1),
// which signerd counted.
type Rejection struct {
	Approver  string
	Expiry    time.Time
	Signature []byte
}

// Awaiting is a transaction waiting for approvals.
type Awaiting struct {
	Tx
	Expires time.Time
	// Expired: the wait is over by the database's clock.
	Expired bool
	// Decisions sums up the approvals recorded so far (who, and when each
	// was last stored): a change means the policy must be asked again.
	Decisions string
}
