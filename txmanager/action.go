package txmanager

import (
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// Operator actions on transactions that do not move: any node takes the
// request; the signer's owner carries it out under its lease and records
// the outcome, so that no node but the owner ever writes an attempt. Its
// chain follower acts on broadcast transactions, its worker on those not
// broadcast yet, ALLOCATED or SIGNED, and on every abandon.

// The actions an operator may ask for.
const (
	ActionResend = "resend" // send the current attempt again (or ask signerd again), now
	ActionBump   = "bump"   // a fee bump now, whatever the signer's automatic bumps
	ActionCancel = "cancel" // replace the transaction by a 0-value transfer to the signer itself
	// ActionAbandon fails the transaction (abandoned) and gives its nonce
	// to a new 0-value transfer to the signer itself.
	ActionAbandon = "abandon"
)

// The outcomes of an action.
const (
	ActionDone    = "done"
	ActionRefused = "refused"
)

// Action is an operator's request on one transaction and what became of
// it (Outcome empty while it waits for the signer's owner).
type Action struct {
	ID          uuid.UUID
	TxID        uuid.UUID
	Key         SignerKey
	Action      string
	Operator    string
	RequestedAt time.Time
	DoneAt      *time.Time
	Outcome     string
	Detail      string
	// Attempt is the attempt the action produced or sent again.
	Attempt *int
	// Fees are the fees fixed for the attempt the action has signerd sign
	// (WorkStore.PlanActionFees), nil until then.
	Fees *Fees
	// Filler is the transaction an abandon gave the nonce to.
	Filler *uuid.UUID
}

// ActionRequest is an operator's request.
type ActionRequest struct {
	TxID     uuid.UUID
	Action   string
	Operator string
	// ActionID, when set, makes the request idempotent: the same id again
	// is the same action.
	ActionID *uuid.UUID
}

// ActionAttempt is an attempt an operator action had signerd sign for a
// transaction not broadcast yet.
type ActionAttempt struct {
	Kind     string // AttemptFeeBump or AttemptCancel
	GasLimit uint64
	Fees     Fees
	Raw      []byte
	Hash     common.Hash
}

// ErrActionDone: the action was carried out (or refused) meanwhile.
var ErrActionDone = errors.New("the action is done already")

// OperatorReason is the reason the events of action a's changes give:
// operator_action, the action and its id.
func OperatorReason(a Action) string {
	return fmt.Sprintf("%s: %s (action %s)", ReasonOperatorAction, a.Action, a.ID)
}
