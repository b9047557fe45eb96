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
	// Token is set when policy read the request as a call to a token it
	// knows: the units the call moves or grants, which signerd records
	// with the signature and token windows sum (Usage.Token).
	Token *TokenAmount
	// PolicyVersion and PolicyHash identify the policy that decided.
	PolicyVersion string
	PolicyHash    common.Hash
}

// TokenAmount is an amount of one token, in the token's own units.
type TokenAmount struct {
	Contract common.Address
	Amount   *big.Int
}

// Usage is what signerd signed for the request's chain and sender within a
// rolling window ending now, from its own record of what it signed (never
// from the caller). Policy asks it for the windows its rules set; a
// request's own amounts are not in it: policy adds them.
type Usage interface {
	// Value is the native value of the originals signed in the window:
	// fee-bump replacements and cancels of a nonce add nothing to it.
	Value(ctx context.Context, window time.Duration) (*big.Int, error)
	// Token is the units of token the originals signed in the window
	// moved or granted, as policy read them (Decision.Token).
	Token(ctx context.Context, token common.Address, window time.Duration) (*big.Int, error)
	// Fees is the most the nonces signed in the window can cost in fees:
	// for each nonce, gas × fee cap of its costliest signature. The
	// request's own nonce is left out: only one transaction per nonce can
	// be mined, so the request replaces, not adds to, what it bumps.
	Fees(ctx context.Context, window time.Duration) (*big.Int, error)
}

// Policy decides whether a request may be signed.
type Policy interface {
	// Evaluate decides req at now. It consults nothing but the policy,
	// the request (approvals included) and usage.
	Evaluate(ctx context.Context, req *Request, now time.Time, usage Usage) (Decision, error)
	// EvaluateCancel decides a cancel at a nonce already signed for an
	// intent (CheckReuse said Cancel), under the policy's cancels entries.
	// A cancel-shaped request at a fresh nonce is no cancel: Evaluate
	// decides it like any other transfer.
	EvaluateCancel(ctx context.Context, req *Request, now time.Time, usage Usage) (Decision, error)
	Version() string
	// Hash is the SHA-256 of the policy file as loaded; every audit
	// record carries it.
	Hash() common.Hash
	// AllowsCancel reports whether a cancel (a same-nonce 0-value
	// self-transfer) may replace a signed transaction of from on chainID.
	AllowsCancel(chainID uint64, from common.Address) bool
	// CheckApprovals says whether each of req's approvals, and rejection
	// if not nil, would count at now for the rule that needs approval,
	// signing nothing. The request's fees are not looked at: an approval
	// is checked against the intent, not the price of the moment.
	CheckApprovals(req *Request, rejection *Rejection, now time.Time) ApprovalCheck
}

// Approval is one approver's consent to an intent, at fee caps up to
// MaxFeePerGas, until Expiry.
type Approval struct {
	// Approver is the approver's id in the policy.
	Approver string
	// MaxFeePerGas is the approval's fee ceiling: the highest fee cap per
	// gas it covers, compared with Request.FeeCap (max_fee_per_gas of an
	// eip1559 transaction, the gas price of a legacy one). The tip needs
	// no ceiling of its own: a transaction's tip is at most its fee cap.
	// Fee bumps stay covered up to the ceiling; above it, new approvals
	// are needed.
	MaxFeePerGas *big.Int
	Expiry       time.Time
	// Signature is the approver's Ed25519 signature over ApprovalMessage.
	Signature []byte
}

// Rule ids of the decisions signerd makes itself at a used nonce, beside
// the policy's own; a policy file may not name a rule so.
const (
	RuleDoubleSign       = "double-sign-protection"
	RuleIdenticalRequest = "identical-request"
	// RuleTxIDBinding refuses a tx id at a nonce other than the first it
	// was signed at: one set of approvals, one transaction.
	RuleTxIDBinding = "tx-id-binding"
	// RuleNonceAhead refuses a nonce more than Service.MaxNonceAhead above
	// the signer's next nonce: no stockpiling of future transactions.
	RuleNonceAhead = "nonce-look-ahead"
)

// ApprovalMessage is what an approver signs: the intent (recomputed by
// signerd from the request, never taken from the caller), the tx id, the
// fee ceiling (32 bytes, big-endian) and the expiry, in a fixed encoding
// with a domain prefix so the signature is good for nothing else. v2 added
// the fee ceiling; signerd verifies v2 only, so an approval signed before
// (v1, good for any fee) counts for nothing.
//
// maxFeePerGas must be a uint256 (VerifyApproval checks that first).
func ApprovalMessage(intent Intent, txID string, maxFeePerGas *big.Int, expiry time.Time) []byte {
	msg := make([]byte, 0, 96+len(txID))
	msg = append(msg, "txfence/approval/v2\x00"...)
	msg = append(msg, intent[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(len(txID)))
	msg = append(msg, txID...)
	msg = append(msg, common.LeftPadBytes(maxFeePerGas.Bytes(), 32)...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(expiry.Unix()))
	return msg
}

// VerifyApproval checks a's signature by pub over the request's intent, its
// tx id, a's fee ceiling and a's expiry. It does not compare the ceiling
// with the request's fees: policy does, and says so. The signature covers
// the expiry in whole seconds, so an expiry with a fraction is refused:
// the expiry signerd enforces is exactly the signed one. An approval
// without a ceiling, or with one that is not a uint256, verifies for
// nothing.
func VerifyApproval(pub ed25519.PublicKey, req *Request, a Approval) bool {
	return len(pub) == ed25519.PublicKeySize && a.Expiry.Nanosecond() == 0 && isUint256(a.MaxFeePerGas) &&
		ed25519.Verify(pub, ApprovalMessage(req.Intent(), req.TxID, a.MaxFeePerGas, a.Expiry), a.Signature)
}

// SignApproval signs an approval of req's intent at fee caps up to
// maxFeePerGas, until expiry: what the approval tools do with an approver's
// key file. It panics when maxFeePerGas is not a uint256: the tools check
// what they read before they sign.
func SignApproval(priv ed25519.PrivateKey, approver string, req *Request, maxFeePerGas *big.Int, expiry time.Time) Approval {
	if !isUint256(maxFeePerGas) {
		panic("signer: an approval's fee ceiling must be a uint256")
	}
	ceiling := new(big.Int).Set(maxFeePerGas)
	expiry = expiry.Truncate(time.Second)
	return Approval{Approver: approver, MaxFeePerGas: ceiling, Expiry: expiry,
		Signature: ed25519.Sign(priv, ApprovalMessage(req.Intent(), req.TxID, ceiling, expiry))}
}

func isUint256(v *big.Int) bool { return v != nil && v.Sign() >= 0 && v.Cmp(maxUint256) <= 0 }

// MaxApprovals is the most approvals one request may carry: a policy rule
// lists at most as many approvers, so more can only be junk.
const MaxApprovals = 32

// Rejection is one approver's refusal of an intent: the transaction fails
// without a nonce spent. It is signed like an approval, under its own
// domain, so neither can be passed off as the other.
type Rejection struct {
	Approver string
	// Expiry bounds how long the signed rejection may be presented; the
	// signature covers it in whole seconds.
	Expiry    time.Time
	Signature []byte
}

// RejectionMessage is what an approver signs to reject: the intent, the
// tx id and the expiry, as in ApprovalMessage, under the domain
// "txfence/rejection/v1" and without a fee ceiling (a rejection holds at
// any fee).
func RejectionMessage(intent Intent, txID string, expiry time.Time) []byte {
	msg := make([]byte, 0, 72+len(txID))
	msg = append(msg, "txfence/rejection/v1\x00"...)
	msg = append(msg, intent[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(len(txID)))
	msg = append(msg, txID...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(expiry.Unix()))
	return msg
}

// VerifyRejection checks r's signature by pub over the request's intent,
// its tx id and r's expiry (whole seconds only, as for approvals).
func VerifyRejection(pub ed25519.PublicKey, req *Request, r Rejection) bool {
	return len(pub) == ed25519.PublicKeySize && r.Expiry.Nanosecond() == 0 &&
		ed25519.Verify(pub, RejectionMessage(req.Intent(), req.TxID, r.Expiry), r.Signature)
}

// SignRejection signs a rejection of req's intent, presentable until
// expiry: what the approval tools do with an approver's key file.
func SignRejection(priv ed25519.PrivateKey, approver string, req *Request, expiry time.Time) Rejection {
	expiry = expiry.Truncate(time.Second)
	return Rejection{Approver: approver, Expiry: expiry, Signature: ed25519.Sign(priv, RejectionMessage(req.Intent(), req.TxID, expiry))}
}

// ApprovalCheck is policy's word on the approvals, or the rejection, of a
// request, without signing anything: whether each would count for the
// rule that needs approval, and why not. txmanager asks before it stores
// an approval or a rejection, so that junk never waits beside a
// transaction.
type ApprovalCheck struct {
	// RuleID is the rule that decides the request ("" when none needs
	// approvals); Threshold of Approvers (N) is what it needs.
	RuleID    string
	Threshold int
	Approvers []string
	// Why is set when no approval or rejection can count for the request
	// at all (denied, or no approval needed).
	Why       string
	Approvals []ItemCheck
	Rejection *ItemCheck
	// PolicyVersion and PolicyHash identify the policy that checked.
	PolicyVersion string
	PolicyHash    common.Hash
}

// ItemCheck says whether one approval or rejection counts, and why not.
type ItemCheck struct {
	Approver string
	Counts   bool
	// Field names what is wrong, one of the Field constants, when the
	// item does not count for a reason of its own ("" when nothing can
	// count for the request: ApprovalCheck.Why).
	Field string
	Why   string
}

// The fields an ItemCheck may blame.
const (
	FieldApprover     = "approver"
	FieldExpiry       = "expiry"
	FieldMaxFeePerGas = "max_fee_per_gas"
	FieldSignature    = "signature"
)
