package txmanager

import (
	"errors"

	"github.com/google/uuid"
)

// Replacement attempts of broadcast transactions: fee bumps and cancels.
// Each is planned (its fees fixed) before signerd is asked and stored
// before it is sent, so that a crash between the steps signs the same
// plan again rather than a new one.

// Plan is the next attempt of a broadcast transaction, fixed before it is
// signed.
type Plan struct {
	Attempt  int
	Kind     string // AttemptFeeBump or AttemptCancel
	GasLimit uint64
	Fees     Fees
	// ActionID is the operator action it carries out, if any.
	ActionID *uuid.UUID
}

// ErrPlanned: the transaction already has a planned attempt; it is signed
// and stored (or dropped) before another is planned.
var ErrPlanned = errors.New("the transaction already has a planned attempt")

// Waiting names the block from which one attempt's bump_after_blocks
// counts.
type Waiting struct {
	TxID    uuid.UUID
	Attempt int
	Since   uint64
}
