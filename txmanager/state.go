package txmanager

import "slices"

// State is a transaction's state (SYSTEM.md section 3).
type State string

// The states.
const (
	StateInit            State = "INIT"
	StateSimulated       State = "SIMULATED"
	StatePendingApproval State = "PENDING_APPROVAL"
	StateAllocated       State = "ALLOCATED"
	StateSigned          State = "SIGNED"
	StateBroadcasted     State = "BROADCASTED"
	StateConfirmed       State = "CONFIRMED"
	StateReverted        State = "REVERTED"
	StateFailed          State = "FAILED"
	StateCancelled       State = "CANCELLED"
)

// States lists every state, in the machine's order.
var States = []State{StateInit, StateSimulated, StatePendingApproval, StateAllocated, StateSigned,
	StateBroadcasted, StateConfirmed, StateReverted, StateFailed, StateCancelled}

// Terminal reports whether nothing more happens to a transaction in this
// state (short of a deep reorg reopening a CONFIRMED or REVERTED one).
func (s State) Terminal() bool {
	switch s {
	case StateConfirmed, StateReverted, StateFailed, StateCancelled:
		return true
	}
	return false
}

// Signed reports whether the transaction has a durable signature: from
// here on it is never re-signed with other content, so it cannot be
// cancelled by request, only replaced on chain.
func (s State) Signed() bool {
	switch s {
	case StateSigned, StateBroadcasted, StateConfirmed, StateReverted:
		return true
	}
	return false
}

// Valid reports whether s is a state.
func (s State) Valid() bool { return slices.Contains(States, s) }

// SubState refines a state without changing it.
type SubState string

// The sub-states; "" is none.
const (
	SubNone              SubState = ""
	SubWaitingDependency SubState = "waiting_dependency"
	SubInsufficientFunds SubState = "insufficient_funds"
	SubIncluded          SubState = "included"
	SubStale             SubState = "stale"
	SubStuck             SubState = "stuck"
	SubReplaced          SubState = "replaced"
)

// SubStates lists every sub-state.
var SubStates = []SubState{SubWaitingDependency, SubInsufficientFunds, SubIncluded, SubStale, SubStuck, SubReplaced}

// Valid reports whether s is a sub-state (or none).
func (s SubState) Valid() bool { return s == SubNone || slices.Contains(SubStates, s) }

// Route is how a transaction is to be broadcast.
type Route string

// The routes.
const (
	RoutePublic  Route = "public"
	RoutePrivate Route = "private"
	RouteAuto    Route = "auto"
)

// Reasons of FAILED and CANCELLED transactions (stable codes, see
// components.yaml TxStateChangedData.reason).
const (
	ReasonCancelRequested    = "cancel_requested"
	ReasonSimulationReverted = "simulation_reverted"
	ReasonPolicyDenied       = "policy_denied"
	ReasonApprovalRequired   = "approval_required"
	ReasonApprovalRejected   = "approval_rejected"
	ReasonApprovalExpired    = "approval_expired"
	ReasonInsufficientFunds  = "insufficient_funds"
	// ReasonFundsTimeout: held for funds longer than the signer's hold.
	ReasonFundsTimeout      = "insufficient_funds_timeout"
	ReasonDependencyFailed  = "dependency_failed"
	ReasonWaitingDependency = "waiting_dependency"
	// ReasonSigningRefused: signerd refused a transaction after its nonce
	// was allocated (the policy changed, a rolling window filled up, the
	// approvals expired).
	ReasonSigningRefused = "signing_refused"
	// ReasonGapFill: a transaction txfence made to fill the nonce of one
	// signerd refused while later nonces were signed (gap_policy fill).
	ReasonGapFill = "gap_fill"
	// ReasonNonceConsumedExternally: the chain's mined nonce passed the
	// transaction's with none of its attempts mined: the key was used
	// outside txfence at that nonce.
	ReasonNonceConsumedExternally = "nonce_consumed_externally"
	// ReasonCancelMined: an operator's cancel (a 0-value transfer
	// from the signer to itself at the transaction's nonce) was mined
	// instead of the transaction.
	ReasonCancelMined = "cancel_mined"
	// ReasonBroadcastRefused: every route refused the transaction for a
	// reason retrying will not change (sub-state stuck until an operator
	// acts).
	ReasonBroadcastRefused = "broadcast_refused"
	// ReasonAbandoned: an operator abandoned the transaction before its
	// broadcast; its nonce went to a 0-value transfer to the signer itself
	// (a transaction of its own, reason gap_fill).
	ReasonAbandoned = "abandoned"
	// ReasonOperatorAction: an operator's action changed the transaction
	// (a new attempt signed, a stuck sub-state cleared); the detail after
	// the colon names the action and its id.
	ReasonOperatorAction = "operator_action"
)
