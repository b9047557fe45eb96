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
	return fmt.Errorf("%s: %w", what, errs.FromBody(resp.StatusCode, resp.Header.Get("Content-Type"), body))
}
