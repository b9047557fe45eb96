package signer

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Verdict is what policy says about a request.
type Verdict string

// The verdicts. Anything not explicitly allowed is denied.
const (
	Allow         Verdict = "allow"
	Deny          Verdict = "deny"
	NeedsApproval Verdict = "needs_approval"
)

// Decision is policy's answer, with the rule that gave it.
type Decision struct {
	Verdict Verdict
	// RuleID names the deciding rule; "default-deny" when none matched.
	RuleID  string
	Reasons []string
	// Threshold and Approvers are set for NeedsApproval (and for Allow
	// when approvals were required and enough were valid): M of the N
	// approver ids listed.
	Threshold int
	Approvers []string
	// Approved lists the approvers whose valid approvals counted.
	Approved []string
	// PolicyVersion and PolicyHash identify the policy that decided.
	PolicyVersion string
	PolicyHash    common.Hash
}

// SpentFunc reports the value signerd signed for the request's chain and
// sender within the last window, from its own record of what it signed
// (fee-bump replacements of one intent count once). Policy calls it for
// rolling-window limits.
type SpentFunc func(ctx context.Context, window time.Duration) (*big.Int, error)

// Policy decides whether a request may be signed.
type Policy interface {
	// Evaluate decides req at now. It consults nothing but the policy,
	// the request (approvals included) and spent.
	Evaluate(ctx context.Context, req *Request, now time.Time, spent SpentFunc) (Decision, error)
	Version() string
	// Hash is the SHA-256 of the policy file as loaded; every audit
	// record carries it.
	Hash() common.Hash
	// AllowsCancel reports whether a cancel (a same-nonce 0-value
	// self-transfer) may replace a signed transaction of from on chainID.
	AllowsCancel(chainID uint64, from common.Address) bool
}

// Approval is one approver's consent to an intent, until Expiry.
type Approval struct {
	// Approver is the approver's id in the policy.
	Approver string
	Expiry   time.Time
	// Signature is the approver's Ed25519 signature over ApprovalMessage.
	Signature []byte
}

// Rule ids of the decisions signerd makes itself at a used nonce, beside
// the policy's own; a policy file may not name a rule so.
const (
	RuleDoubleSign       = "double-sign-protection"
	RuleIdenticalRequest = "identical-request"
)

// ApprovalMessage is what an approver signs: the intent (recomputed by
// signerd from the request, never taken from the caller), the tx id and the
// expiry, in a fixed encoding with a domain prefix so the signature is good
// for nothing else.
func ApprovalMessage(intent Intent, txID string, expiry time.Time) []byte {
	msg := make([]byte, 0, 64+len(txID))
	msg = append(msg, "txfence/approval/v1\x00"...)
	msg = append(msg, intent[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(len(txID)))
	msg = append(msg, txID...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(expiry.Unix()))
	return msg
}

// VerifyApproval checks a's signature by pub over the request's intent.
// The signature covers the expiry in whole seconds, so an expiry with a
// fraction is refused: the expiry signerd enforces is exactly the signed
// one.
func VerifyApproval(pub ed25519.PublicKey, req *Request, a Approval) bool {
	return len(pub) == ed25519.PublicKeySize && a.Expiry.Nanosecond() == 0 && ed25519.Verify(pub, ApprovalMessage(req.Intent(), req.TxID, a.Expiry), a.Signature)
}

// SignApproval signs an approval of req's intent until expiry: what the
// approval command does with an approver's key file.
func SignApproval(priv ed25519.PrivateKey, approver string, req *Request, expiry time.Time) Approval {
	expiry = expiry.Truncate(time.Second)
	return Approval{Approver: approver, Expiry: expiry, Signature: ed25519.Sign(priv, ApprovalMessage(req.Intent(), req.TxID, expiry))}
}
