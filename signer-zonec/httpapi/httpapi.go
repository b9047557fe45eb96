// Package httpapi is signerd's HTTP API (openapi/signer.yaml): strict
// decoding of typed signing requests, the routes, and their answers. Every
// route admits the txmanager identity only.
//
// The handlers are written by hand rather than generated: the generated
// server would link oapi-codegen's runtime into Zone C. A test validates
// real requests and responses against the spec instead.
package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/shared/textmetrics"
	signer "github.com/txfence/txfence/signer-zonec"
)

// Caller is the only identity the signing API admits.
const Caller = "txmanager"

// maxBody bounds a request body: 256 requests with their call data.
const maxBody = 8 << 20

// API serves the signing routes.
type API struct {
	Service *signer.Service
	metrics *metrics
}

// New makes the API and registers its metrics.
func New(svc *signer.Service, reg *textmetrics.Registry) *API {
	return &API{Service: svc, metrics: newMetrics(reg)}
}

// Mount adds the routes to r, behind the txmanager-only allowlist.
func (a *API) Mount(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(mtls.Allow(Caller))
		r.Post("/v1/sign", httpserver.Handle(a.sign))
		r.Post("/v1/sign/batch", httpserver.Handle(a.signBatch))
		r.Post("/v1/evaluate", httpserver.Handle(a.evaluate))
		r.Post("/v1/approvals/check", httpserver.Handle(a.checkApprovals))
		r.Get("/v1/keys", httpserver.Handle(a.keys))
		r.Get("/v1/audit", httpserver.Handle(a.audit))
	})
}

func (a *API) sign(w http.ResponseWriter, r *http.Request) error {
	req, err := readSignRequest(w, r, true)
	if err != nil {
		return err
	}
	results, err := a.Service.Sign(r.Context(), mtls.Peer(r.Context()), []*signer.Request{req})
	if err != nil {
		return err
	}
	a.observe(r, results)
	httpserver.WriteJSON(w, http.StatusOK, toResult(results[0]))
	return nil
}

func (a *API) signBatch(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Requests []signRequest `json:"requests"`
	}
	if err := readBody(w, r, &body); err != nil {
		return err
	}
	if len(body.Requests) == 0 || len(body.Requests) > signer.MaxBatch {
		return errs.InvalidFields("a batch holds 1 to 256 requests",
			errs.FieldError{Pointer: "/requests", Detail: fmt.Sprintf("%d requests", len(body.Requests))})
	}
	reqs := make([]*signer.Request, len(body.Requests))
	for i, b := range body.Requests {
		req, err := b.toRequest(fmt.Sprintf("/requests/%d", i), true)
		if err != nil {
			return err
		}
		reqs[i] = req
	}
	results, err := a.Service.Sign(r.Context(), mtls.Peer(r.Context()), reqs)
	if err != nil {
		return err
	}
	a.observe(r, results)
	out := make([]signResult, len(results))
	for i, res := range results {
		out[i] = toResult(res)
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"results": out})
	return nil
}

func (a *API) evaluate(w http.ResponseWriter, r *http.Request) error {
	req, err := readSignRequest(w, r, false)
	if err != nil {
		return err
	}
	d, err := a.Service.Evaluate(r.Context(), req)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toDecision(d))
	return nil
}

// checkRequest is the body of /v1/approvals/check (ApprovalCheckRequest
// in openapi/signer.yaml).
type checkRequest struct {
	Request   signRequest     `json:"request"`
	Rejection *rejectionInput `json:"rejection"`
}

type rejectionInput struct {
	Approver  string    `json:"approver"`
	Expiry    time.Time `json:"expiry"`
	Signature string    `json:"signature"`
}

type itemCheck struct {
	Approver string `json:"approver"`
	Counts   bool   `json:"counts"`
	Field    string `json:"field,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

type approvalCheck struct {
	RuleID        string      `json:"rule_id,omitempty"`
	Threshold     int         `json:"threshold"`
	Approvers     []string    `json:"approvers"`
	Reason        string      `json:"reason,omitempty"`
	Approvals     []itemCheck `json:"approvals"`
	Rejection     *itemCheck  `json:"rejection,omitempty"`
	PolicyVersion string      `json:"policy_version"`
	PolicyHash    string      `json:"policy_hash"`
}

// checkApprovals answers whether each approval of the request, and its
// rejection, would count; nothing is signed or recorded.
func (a *API) checkApprovals(w http.ResponseWriter, r *http.Request) error {
	var body checkRequest
	if err := readBody(w, r, &body); err != nil {
		return err
	}
	req, err := body.Request.toRequest("/request", false)
	if err != nil {
		return err
	}
	var rejection *signer.Rejection
	if rj := body.Rejection; rj != nil {
		sig, err := base64.StdEncoding.DecodeString(rj.Signature)
		if err != nil || rj.Approver == "" || rj.Expiry.IsZero() {
			return errs.InvalidFields("invalid rejection",
				errs.FieldError{Pointer: "/rejection", Detail: "needs an approver, an expiry and a base64 signature"})
		}
		rejection = &signer.Rejection{Approver: rj.Approver, Expiry: rj.Expiry, Signature: sig}
	}
	c, err := a.Service.CheckApprovals(r.Context(), req, rejection)
	if err != nil {
		return err
	}
	out := approvalCheck{RuleID: c.RuleID, Threshold: c.Threshold, Approvers: c.Approvers, Reason: c.Why,
		Approvals: make([]itemCheck, len(c.Approvals)), PolicyVersion: c.PolicyVersion, PolicyHash: c.PolicyHash.Hex()}
	if out.Approvers == nil {
		out.Approvers = []string{}
	}
	for i, it := range c.Approvals {
		out.Approvals[i] = itemCheck{Approver: it.Approver, Counts: it.Counts, Field: it.Field, Reason: it.Why}
	}
	if c.Rejection != nil {
		out.Rejection = &itemCheck{Approver: c.Rejection.Approver, Counts: c.Rejection.Counts, Field: c.Rejection.Field, Reason: c.Rejection.Why}
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) keys(w http.ResponseWriter, r *http.Request) error {
	infos, err := a.Service.Keys.List(r.Context())
	if err != nil {
		return errs.Wrap(errs.Unavailable, "key backend unavailable", err)
	}
	type key struct {
		Address string `json:"address"`
		Backend string `json:"backend"`
	}
	out := make([]key, len(infos))
	for i, k := range infos {
		out[i] = key{Address: k.Address.Hex(), Backend: k.Backend}
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"keys": out})
	return nil
}

func (a *API) audit(w http.ResponseWriter, r *http.Request) error {
	after, err := queryUint(r, "after", 0, 1<<62)
	if err != nil {
		return err
	}
	limit, err := queryUint(r, "limit", 100, 1000)
	if err != nil {
		return err
	}
	if limit == 0 {
		return errs.InvalidFields("limit must be 1 to 1000", errs.FieldError{Pointer: "limit", Detail: "0"})
	}
	head, err := a.Service.Store.AuditHead(r.Context())
	if err != nil {
		return errs.Wrap(errs.Unavailable, "audit log unavailable", err)
	}
	records, err := a.Service.Store.Audit(r.Context(), after, int(limit))
	if err != nil {
		return errs.Wrap(errs.Unavailable, "audit log unavailable", err)
	}
	type record struct {
		Seq   uint64          `json:"seq"`
		Entry json.RawMessage `json:"entry"`
		Hash  string          `json:"hash"`
	}
	out := make([]record, len(records))
	for i, rec := range records {
		out[i] = record{Seq: rec.Entry.Seq, Entry: rec.Body, Hash: rec.Hash.Hex()}
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{
		"records": out,
		"head":    map[string]any{"seq": head.Seq, "hash": head.Hash.Hex()},
	})
	return nil
}

// readBody decodes r's body, which must be JSON of at most maxBody bytes,
// strictly into v.
func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := httpserver.CheckJSON(r); err != nil {
		return err
	}
	return httpserver.DecodeStrict(http.MaxBytesReader(w, r.Body, maxBody), v)
}

// readSignRequest is readBody for sign and evaluate, through
// DecodeSignRequest: the decoder the fuzz test feeds is the one they use.
func readSignRequest(w http.ResponseWriter, r *http.Request, needNonce bool) (*signer.Request, error) {
	if err := httpserver.CheckJSON(r); err != nil {
		return nil, err
	}
	return DecodeSignRequest(http.MaxBytesReader(w, r.Body, maxBody), needNonce)
}

// DecodeSignRequest reads one signing request (SignRequest in
// openapi/signer.yaml) strictly and converts it, naming every bad field.
// needNonce is false for evaluate, which comes before a nonce exists.
func DecodeSignRequest(body io.Reader, needNonce bool) (*signer.Request, error) {
	var wire signRequest
	if err := httpserver.DecodeStrict(body, &wire); err != nil {
		return nil, err
	}
	return wire.toRequest("", needNonce)
}

func queryUint(r *http.Request, name string, def, max uint64) (uint64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || n > max {
		return 0, errs.InvalidFields(fmt.Sprintf("%s must be an integer from 0 to %d", name, max), errs.FieldError{Pointer: name, Detail: raw})
	}
	return n, nil
}

// signRequest is the wire form of a signing request (SignRequest in
// openapi/signer.yaml).
type signRequest struct {
	TxID                 string          `json:"tx_id"`
	ChainID              uint64          `json:"chain_id"`
	From                 string          `json:"from"`
	Nonce                *uint64         `json:"nonce"`
	Type                 string          `json:"type"`
	To                   *string         `json:"to"`
	Value                string          `json:"value"`
	Data                 string          `json:"data"`
	Gas                  uint64          `json:"gas"`
	GasPrice             *string         `json:"gas_price"`
	MaxFeePerGas         *string         `json:"max_fee_per_gas"`
	MaxPriorityFeePerGas *string         `json:"max_priority_fee_per_gas"`
	Approvals            []approvalInput `json:"approvals"`
}

type approvalInput struct {
	Approver string `json:"approver"`
	// MaxFeePerGas is the approval's fee ceiling, which its signature
	// covers (signer.ApprovalMessage).
	MaxFeePerGas *string   `json:"max_fee_per_gas"`
	Expiry       time.Time `json:"expiry"`
	Signature    string    `json:"signature"`
}

// toRequest converts the wire form, naming every bad field under prefix.
func (b *signRequest) toRequest(prefix string, needNonce bool) (*signer.Request, error) {
	var fields []errs.FieldError
	bad := func(field, detail string) {
		fields = append(fields, errs.FieldError{Pointer: prefix + "/" + field, Detail: detail})
	}
	req := &signer.Request{TxID: b.TxID, ChainID: b.ChainID, Type: signer.TxType(b.Type), Gas: b.Gas}
	if len(b.TxID) > 64 {
		bad("tx_id", "longer than 64 characters")
	}
	if b.ChainID > 1<<62 {
		bad("chain_id", "out of range")
	}
	req.From = address(b.From, "from", bad)
	if b.To != nil {
		to := address(*b.To, "to", bad)
		req.To = &to
	}
	switch {
	case b.Nonce != nil && *b.Nonce > 1<<62:
		bad("nonce", "out of range")
	case b.Nonce != nil:
		req.Nonce = *b.Nonce
	case needNonce:
		bad("nonce", "required")
	}
	req.Value = amount(&b.Value, "value", bad)
	req.GasPrice = amount(b.GasPrice, "gas_price", bad)
	req.MaxFeePerGas = amount(b.MaxFeePerGas, "max_fee_per_gas", bad)
	req.MaxPriorityFeePerGas = amount(b.MaxPriorityFeePerGas, "max_priority_fee_per_gas", bad)
	if b.Data != "" {
		data, err := hexutil.Decode(b.Data)
		if err != nil {
			bad("data", "not 0x-prefixed hex of whole bytes")
		}
		req.Data = data
	}
	if len(b.Approvals) > signer.MaxApprovals {
		bad("approvals", fmt.Sprintf("more than %d", signer.MaxApprovals))
	}
	for i, ap := range b.Approvals {
		sig, err := base64.StdEncoding.DecodeString(ap.Signature)
		if err != nil || ap.Approver == "" {
			bad(fmt.Sprintf("approvals/%d", i), "needs an approver and a base64 signature")
		}
		ceiling := fmt.Sprintf("approvals/%d/max_fee_per_gas", i)
		if ap.MaxFeePerGas == nil {
			// An approval signed before the ceiling was in the message
			// (v1) counts for nothing: its approver must approve again.
			bad(ceiling, "required: the fee ceiling the approver signed")
		}
		req.Approvals = append(req.Approvals, signer.Approval{Approver: ap.Approver, MaxFeePerGas: amount(ap.MaxFeePerGas, ceiling, bad),
			Expiry: ap.Expiry, Signature: sig})
	}
	if len(fields) == 0 {
		if err := req.Validate(); err != nil {
			bad("", err.Error())
		}
	}
	if len(fields) > 0 {
		return nil, errs.InvalidFields("invalid signing request", fields...)
	}
	return req, nil
}

func address(s, field string, bad func(field, detail string)) common.Address {
	if !common.IsHexAddress(s) || !strings.HasPrefix(s, "0x") {
		bad(field, "not a 0x-prefixed 20-byte hex address")
		return common.Address{}
	}
	return common.HexToAddress(s)
}

// amount parses a uint256 decimal string; nil stays nil.
func amount(s *string, field string, bad func(field, detail string)) *big.Int {
	if s == nil {
		return nil
	}
	v, ok := new(big.Int).SetString(*s, 10)
	if !ok || v.Sign() < 0 || v.BitLen() > 256 || (len(*s) > 1 && (*s)[0] == '0') || strings.HasPrefix(*s, "+") {
		bad(field, "not a uint256 decimal string")
		return nil
	}
	return v
}

type decision struct {
	Verdict       string   `json:"verdict"`
	RuleID        string   `json:"rule_id"`
	Reasons       []string `json:"reasons,omitempty"`
	Threshold     int      `json:"threshold,omitempty"`
	Approvers     []string `json:"approvers,omitempty"`
	Approved      []string `json:"approved,omitempty"`
	PolicyVersion string   `json:"policy_version"`
	PolicyHash    string   `json:"policy_hash"`
}

func toDecision(d signer.Decision) decision {
	return decision{
		Verdict: string(d.Verdict), RuleID: d.RuleID, Reasons: d.Reasons, Threshold: d.Threshold,
		Approvers: d.Approvers, Approved: d.Approved, PolicyVersion: d.PolicyVersion, PolicyHash: d.PolicyHash.Hex(),
	}
}

type signResult struct {
	TxID     string   `json:"tx_id"`
	Outcome  string   `json:"outcome"`
	Reuse    string   `json:"reuse,omitempty"`
	TxHash   string   `json:"tx_hash,omitempty"`
	RawTx    string   `json:"raw_tx,omitempty"`
	AuditSeq uint64   `json:"audit_seq"`
	Decision decision `json:"decision"`
}

func toResult(res signer.Result) signResult {
	out := signResult{TxID: res.Request.TxID, Outcome: string(res.Outcome), AuditSeq: res.AuditSeq, Decision: toDecision(res.Decision)}
	if res.Outcome != signer.OutcomeRefused {
		out.Reuse = res.Reuse.String()
	}
	if res.Outcome == signer.OutcomeSigned || res.Outcome == signer.OutcomeReplayed {
		out.TxHash, out.RawTx = res.TxHash.Hex(), hexutil.Encode(res.RawTx)
	}
	return out
}
