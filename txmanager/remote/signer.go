// Package remote is txmanager's side of the services it calls over mutual
// TLS: signerd, for the policy's dry run and for signatures, and
// mevrouterd, for broadcasts. Each wraps the client generated from that
// service's OpenAPI spec, so the calls follow the spec by construction,
// and turns problem documents back into error kinds (shared/errs).
package remote

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/openapi/signerapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
)

// Signer calls signerd.
type Signer struct {
	api *signerapi.ClientWithResponses
}

// NewSigner is a client of the signerd at baseURL, through hc (an mTLS
// client whose identity is txmanager, pinned to signerd's).
func NewSigner(baseURL string, hc *http.Client) (*Signer, error) {
	if hc == nil {
		return nil, errors.New("remote: no HTTP client (an mTLS client as txmanager is needed)")
	}
	c, err := signerapi.NewClientWithResponses(baseURL, signerapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &Signer{api: c}, nil
}

// Fees are a transaction's fee fields: EIP-1559 caps, or a legacy gas
// price.
type Fees = txmanager.Fees

// MaxSignBatch is the most requests signerd signs in one batch.
const MaxSignBatch = 256

// Approval is an approver's signature to pass to signerd.
type Approval = txmanager.Approval

// ToSign is one transaction to decide and sign. Nonce is nil for the dry
// run before a nonce is allocated.
type ToSign struct {
	Tx        *txmanager.Tx
	Nonce     *uint64
	GasLimit  uint64
	Fees      Fees
	Approvals []Approval
}

// Verdict is signerd's decision.
type Verdict string

// The verdicts.
const (
	Allow         Verdict = "allow"
	Deny          Verdict = "deny"
	NeedsApproval Verdict = "needs_approval"
)

// Decision is signerd's policy decision on a transaction.
type Decision struct {
	Verdict   Verdict
	RuleID    string
	Reasons   []string
	Threshold int
	Approvers []string
	Approved  []string
}

// Outcome is what signerd did with a signing request.
type Outcome string

// The outcomes (signer.yaml Outcome).
const (
	OutcomeSigned        Outcome = "signed"
	OutcomeReplayed      Outcome = "replayed"
	OutcomeDenied        Outcome = "denied"
	OutcomeNeedsApproval Outcome = "needs_approval"
	OutcomeRefused       Outcome = "refused"
)

// Signed is signerd's answer to one request of a batch.
type Signed struct {
	TxID     uuid.UUID
	Outcome  Outcome
	Decision Decision
	RawTx    []byte
	Hash     common.Hash
}

// request converts one transaction to signerd's request.
func request(s ToSign) signerapi.SignRequest {
	t := s.Tx
	r := signerapi.SignRequest{
		TxId: t.ID.String(), ChainId: int64(t.ChainID), From: t.From.Hex(), Gas: int64(s.GasLimit),
		Value: t.Value.String(), Type: signerapi.TxTypeEIP1559,
	}
	if t.To != nil {
		to := t.To.Hex()
		r.To = &to
	}
	if len(t.Data) > 0 {
		d := "0x" + common.Bytes2Hex(t.Data)
		r.Data = &d
	}
	if s.Nonce != nil {
		n := int64(*s.Nonce)
		r.Nonce = &n
	}
	str := func(v *big.Int) *string {
		if v == nil {
			return nil
		}
		x := v.String()
		return &x
	}
	if s.Fees.GasPrice != nil {
		r.Type, r.GasPrice = signerapi.TxTypeLegacy, str(s.Fees.GasPrice)
	} else {
		r.MaxFeePerGas, r.MaxPriorityFeePerGas = str(s.Fees.MaxFeePerGas), str(s.Fees.MaxPriorityFeePerGas)
	}
	if len(s.Approvals) > 0 {
		as := make([]signerapi.Approval, len(s.Approvals))
		for i, a := range s.Approvals {
			as[i] = signerapi.Approval{Approver: a.Approver, MaxFeePerGas: a.MaxFeePerGas.String(), Expiry: a.Expiry, Signature: a.Signature}
		}
		r.Approvals = &as
	}
	return r
}

func decision(d signerapi.Decision) Decision {
	out := Decision{Verdict: Verdict(d.Verdict), RuleID: d.RuleId}
	if d.Reasons != nil {
		out.Reasons = *d.Reasons
	}
	if d.Threshold != nil {
		out.Threshold = *d.Threshold
	}
	if d.Approvers != nil {
		out.Approvers = *d.Approvers
	}
	if d.Approved != nil {
		out.Approved = *d.Approved
	}
	return out
}

// Evaluate asks signerd's policy for its verdict before a nonce is
// allocated; nothing is signed or recorded.
func (s *Signer) Evaluate(ctx context.Context, t ToSign) (Decision, error) {
	resp, err := s.api.EvaluateWithResponse(ctx, request(t))
	if err != nil {
		return Decision{}, errs.Wrap(errs.Unavailable, "signerd unreachable", err)
	}
	if resp.JSON200 == nil {
		return Decision{}, problem("signerd evaluate", resp.HTTPResponse, resp.Body)
	}
	return decision(*resp.JSON200), nil
}

// SignBatch asks signerd to decide and sign the transactions, in order, in
// one durable step. A batch signerd refuses whole (malformed, a key it
// does not hold, its store down) is an error; per-transaction refusals
// are outcomes.
func (s *Signer) SignBatch(ctx context.Context, ts []ToSign) ([]Signed, error) {
	body := signerapi.SignBatchRequest{Requests: make([]signerapi.SignRequest, len(ts))}
	for i, t := range ts {
		body.Requests[i] = request(t)
	}
	resp, err := s.api.SignBatchWithResponse(ctx, body)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, "signerd unreachable", err)
	}
	if resp.JSON200 == nil {
		return nil, problem("signerd sign", resp.HTTPResponse, resp.Body)
	}
	if len(resp.JSON200.Results) != len(ts) {
		return nil, fmt.Errorf("signerd answered %d results for %d requests", len(resp.JSON200.Results), len(ts))
	}
	out := make([]Signed, len(ts))
	for i, r := range resp.JSON200.Results {
		if r.TxId != ts[i].Tx.ID.String() {
			return nil, fmt.Errorf("signerd answered result %d for %s, asked for %s", i, r.TxId, ts[i].Tx.ID)
		}
		out[i] = Signed{TxID: ts[i].Tx.ID, Outcome: Outcome(r.Outcome), Decision: decision(r.Decision)}
		if r.RawTx != nil {
			out[i].RawTx = common.FromHex(*r.RawTx)
		}
		if r.TxHash != nil {
			out[i].Hash = common.HexToHash(*r.TxHash)
		}
	}
	return out, nil
}

// problem turns a non-2xx answer back into an error of its kind.
func problem(what string, resp *http.Response, body []byte) error {
	return fmt.Errorf("%s: %w", what, errs.FromUpstream(resp.StatusCode, resp.Header.Get("Content-Type"), body))
}

// Rejection is an approver's signed rejection of a transaction
// (txfence/rejection/v1).
type Rejection struct {
	Approver  string
	Expiry    time.Time
	Signature []byte
}

// ApprovalCheck is signerd's word on approvals, or a rejection, of a
// transaction: whether each counts for the rule that needs approval.
type ApprovalCheck struct {
	// RuleID, Threshold (M) and Approvers (the N who can count) are those
	// of the rule that needs approval; Why says why nothing can count
	// when no rule does.
	RuleID    string
	Threshold int
	Approvers []string
	Why       string
	Approvals []ItemCheck
	Rejection *ItemCheck
}

// ItemCheck says whether one approval or the rejection counts, and why
// not.
type ItemCheck struct {
	Approver string
	Counts   bool
	// Field names what is wrong ("approver", "expiry", "max_fee_per_gas"
	// or "signature"); "" when nothing can count (ApprovalCheck.Why).
	Field string
	Why   string
}

// CheckApprovals asks signerd whether t's approvals, and rejection if not
// nil, would count; nothing is signed or recorded. t's fees only give the
// request its type: signerd does not look at them here.
func (s *Signer) CheckApprovals(ctx context.Context, t ToSign, rejection *Rejection) (ApprovalCheck, error) {
	body := signerapi.ApprovalCheckRequest{Request: request(t)}
	if rejection != nil {
		body.Rejection = &signerapi.Rejection{Approver: rejection.Approver, Expiry: rejection.Expiry, Signature: rejection.Signature}
	}
	resp, err := s.api.CheckApprovalsWithResponse(ctx, body)
	if err != nil {
		return ApprovalCheck{}, errs.Wrap(errs.Unavailable, "signerd unreachable", err)
	}
	if resp.JSON200 == nil {
		return ApprovalCheck{}, problem("signerd check approvals", resp.HTTPResponse, resp.Body)
	}
	c := resp.JSON200
	out := ApprovalCheck{Threshold: c.Threshold, Approvers: c.Approvers}
	if c.RuleId != nil {
		out.RuleID = *c.RuleId
	}
	if c.Reason != nil {
		out.Why = *c.Reason
	}
	item := func(it signerapi.ItemCheck) ItemCheck {
		out := ItemCheck{Approver: it.Approver, Counts: it.Counts}
		if it.Reason != nil {
			out.Why = *it.Reason
		}
		if it.Field != nil {
			out.Field = string(*it.Field)
		}
		return out
	}
	for _, it := range c.Approvals {
		out.Approvals = append(out.Approvals, item(it))
	}
	if c.Rejection != nil {
		r := item(*c.Rejection)
		out.Rejection = &r
	}
	if len(out.Approvals) != len(t.Approvals) {
		return ApprovalCheck{}, fmt.Errorf("signerd checked %d approvals of %d", len(out.Approvals), len(t.Approvals))
	}
	if (out.Rejection == nil) != (rejection == nil) {
		return ApprovalCheck{}, errors.New("signerd's check of the rejection is missing or unasked for")
	}
	return out, nil
}
