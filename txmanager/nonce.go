package txmanager

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// What to do with an allocated transaction that signerd refused to sign:
// give its nonce back while nothing later is signed, or else follow the
// signer's gap policy.

// ErrLaterNonceSigned refuses to release a nonce: a later nonce of the
// signer is signed (or allocated to a transaction not being released), so
// giving the nonce up would leave a gap. The gap policy decides.
var ErrLaterNonceSigned = errors.New("a later nonce of the signer is signed")

// NonceRelease is an allocated transaction to take its nonce back from.
type NonceRelease struct {
	TxID uuid.UUID
	// To is FAILED (with Reason) or PENDING_APPROVAL (the approvals no
	// longer suffice: it waits again).
	To     State
	Reason string
	// ApprovalExpires is when a transaction sent back to PENDING_APPROVAL
	// stops waiting.
	ApprovalExpires time.Time
}

// GapFillRequestID is the request id of the transaction that fills the
// nonce of the transaction id.
func GapFillRequestID(id uuid.UUID) string { return "txfence:gap-fill:" + id.String() }
