// Tests of txmanager's internal API that need a real signerd beside it:
// approvals and rejections are checked with the signer before they are
// stored. The rest of the API's tests are in txmanager/httpapi.
package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/errs"
	signerpkg "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// startWithSigner starts txmanager's API for chain 31337 and
// txmanagertest.Signer, every exchange checked against txmanager.yaml,
// with a real signerd serving policy beside it; with no policy there is
// no signerd.
func startWithSigner(t *testing.T, policy string) *txmanagertest.Server {
	t.Helper()
	pki := servicetest.PKI(t)
	opts := txmanagertest.Options{
		Chains: `{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"], "signers": [{"address": "` + txmanagertest.Signer + `"}]}]}`,
		Wrap:   func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.TxManager, h) },
	}
	if policy != "" {
		opts.SignerURL = signertest.StartServer(t, signertest.ServerOptions{PKI: pki, PolicyFile: policy}).URL
	}
	return txmanagertest.Serve(t, pki, opts)
}

type txJSON struct {
	TxID   string `json:"tx_id"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

func approvalPolicy(t *testing.T, keys map[string]ed25519.PrivateKey) string {
	t.Helper()
	approvers := map[string]ed25519.PublicKey{}
	for _, id := range []string{"alice", "bob", "carol"} {
		approvers[id] = keys[id].Public().(ed25519.PublicKey)
	}
	return signertest.ApprovalPolicy{RuleID: "approved-payments", From: txmanagertest.Signer, Approvers: approvers,
		RuleApprovers: []string{"alice", "bob"}}.Write(t)
}

func approverKeys(ids ...string) map[string]ed25519.PrivateKey {
	out := map[string]ed25519.PrivateKey{}
	for _, id := range ids {
		out[id] = signertest.ApproverKey(id)
	}
	return out
}

// intentOf is the signing request of a transfer of 1 wei from signer to
// bob, as signerd reads the intent an approver signs.
func intentOf(txID string) *signerpkg.Request {
	to := common.HexToAddress(txmanagertest.Bob)
	return &signerpkg.Request{TxID: txID, ChainID: 31337, From: common.HexToAddress(txmanagertest.Signer), Type: signerpkg.DynamicFee, To: &to, Value: big.NewInt(1)}
}

func approvalJSON(a signerpkg.Approval) string {
	return fmt.Sprintf(`{"approver": %q, "max_fee_per_gas": %q, "expiry": %q, "signature": %q}`,
		a.Approver, a.MaxFeePerGas.String(), a.Expiry.UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(a.Signature))
}

func rejectionJSON(r signerpkg.Rejection) string {
	return fmt.Sprintf(`{"approver": %q, "expiry": %q, "signature": %q}`,
		r.Approver, r.Expiry.UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(r.Signature))
}

// wantProblem fails unless the answer is a 400 problem naming pointer.
func wantProblem(t *testing.T, name string, code int, b []byte, pointer string) {
	t.Helper()
	var p errs.Problem
	if code != http.StatusBadRequest || json.Unmarshal(b, &p) != nil {
		t.Errorf("%s: %d %s; want a 400 problem", name, code, b)
		return
	}
	if pointer != "" && !slices.ContainsFunc(p.Errors, func(f errs.FieldError) bool { return f.Pointer == pointer }) {
		t.Errorf("%s: the problem names %+v, want %s", name, p.Errors, pointer)
	}
}

// TestApproveAndReject: approvals are checked with signerd and stored for
// the owner's worker to pass on, only while the transaction waits for
// them; malformed ones, and junk signerd would not count (a bad
// signature, an approver the policy or the rule does not list, another
// transaction's approval, an expiry beyond max_ttl), are refused with a
// problem document naming the field and store nothing. An approver again
// replaces its approval, so no more than the rule's N are stored.
func TestApproveAndReject(t *testing.T) {
	t.Parallel()
	keys := approverKeys("alice", "bob", "carol", "mallory")
	a := startWithSigner(t, approvalPolicy(t, keys))
	ctx := context.Background()
	waiting, other, idle := a.AwaitingApproval(t, "a-1"), a.AwaitingApproval(t, "a-2"), a.Create(t, "a-3")
	sig := base64.StdEncoding.EncodeToString(make([]byte, 64))
	expiry := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	approvalUpTo := func(approver, maxFee, expiry, sig string) string {
		return fmt.Sprintf(`{"approver": %q, "max_fee_per_gas": %q, "expiry": %q, "signature": %q}`, approver, maxFee, expiry, sig)
	}
	approval := func(approver, expiry, sig string) string { return approvalUpTo(approver, "30000000000", expiry, sig) }
	in := time.Now().Add(time.Hour)
	sign := func(id, txID string, ceiling int64, expiry time.Time) string {
		return approvalJSON(signerpkg.SignApproval(keys[id], id, intentOf(txID), big.NewInt(ceiling), expiry))
	}
	forged := signerpkg.SignApproval(keys["alice"], "alice", intentOf(waiting), big.NewInt(30e9), in)
	forged.Signature[0] ^= 0xff
	stolen := signerpkg.SignApproval(keys["mallory"], "mallory", intentOf(waiting), big.NewInt(30e9), in)
	stolen.Approver = "alice"
	bad := []struct{ name, body, want, pointer string }{
		{"an approver id with a space", approval("al ice", expiry, sig), "approver", "/approver"},
		{"an expiry with a fraction", approval("alice", time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano), sig), "whole seconds", "/expiry"},
		{"an expiry in the past", approval("alice", "2020-01-01T00:00:00Z", sig), "past", "/expiry"},
		{"a short signature", approval("alice", expiry, base64.StdEncoding.EncodeToString(make([]byte, 63))), "signature", "/signature"},
		{"a signature not base64", approval("alice", expiry, "!!"), "request body", ""},
		{"no signature", fmt.Sprintf(`{"approver": "alice", "max_fee_per_gas": "1", "expiry": %q}`, expiry), "signature", "/signature"},
		{"an unknown field", fmt.Sprintf(`{"approver": "alice", "max_fee_per_gas": "1", "expiry": %q, "signature": %q, "nonce": 1}`, expiry, sig), "nonce", ""},
		{"no fee ceiling (an approval as signed before v2)", fmt.Sprintf(`{"approver": "alice", "expiry": %q, "signature": %q}`, expiry, sig), "max_fee_per_gas", "/max_fee_per_gas"},
		{"a fee ceiling in gwei", approvalUpTo("alice", "30 gwei", expiry, sig), "max_fee_per_gas", "/max_fee_per_gas"},
		{"a fee ceiling with a leading zero", approvalUpTo("alice", "030", expiry, sig), "max_fee_per_gas", "/max_fee_per_gas"},
		{"a fee ceiling beyond uint256", approvalUpTo("alice", new(big.Int).Lsh(big.NewInt(1), 256).String(), expiry, sig), "max_fee_per_gas", "/max_fee_per_gas"},
		// Junk that only signerd can tell.
		{"zeros for a signature", approval("alice", expiry, sig), "signature", "/signature"},
		{"a forged signature", approvalJSON(forged), "signature", "/signature"},
		{"a key that is not the approver's", approvalJSON(stolen), "signature", "/signature"},
		{"an approver the policy does not list", sign("mallory", waiting, 30e9, in), "not an approver", "/approver"},
		{"an approver of the policy, not of the rule", sign("carol", waiting, 30e9, in), "not an approver", "/approver"},
		{"another transaction's approval", sign("alice", other, 30e9, in), "signature", "/signature"},
		{"an expiry beyond max_ttl", sign("alice", waiting, 30e9, time.Now().Add(3*time.Hour)), "max_ttl", "/expiry"},
	}
	for _, tt := range bad {
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", tt.body)
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s; want a problem mentioning %q", tt.name, code, b, tt.want)
		}
		wantProblem(t, tt.name, code, b, tt.pointer)
	}
	var stored int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM approval`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d approvals stored by refused requests (%v)", stored, err)
	}

	code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", sign("alice", waiting, 30e9, in))
	if code != http.StatusOK || servicetest.Decode[txJSON](t, b).State != "PENDING_APPROVAL" || !strings.Contains(string(b), `"approval_expires_at"`) {
		t.Fatalf("approve: %d %s", code, b)
	}
	// The fee ceiling is stored with the signature it belongs to, for the
	// worker to pass on to signerd.
	var ceiling string
	if err := a.Pool.QueryRow(ctx, `SELECT max_fee_per_gas::text FROM approval WHERE tx_id = $1 AND approver = 'alice'`, waiting).Scan(&ceiling); err != nil || ceiling != "30000000000" {
		t.Errorf("stored fee ceiling %q (%v), want 30000000000", ceiling, err)
	}
	// Approved again, the approval and its ceiling are replaced; with
	// bob's, the rule's two approvers hold the two approvals there can be.
	for _, body := range []string{sign("alice", waiting, 45e9, in), sign("bob", waiting, 45e9, in), sign("bob", waiting, 50e9, in)} {
		if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", body); code != http.StatusOK {
			t.Fatalf("approve again: %d %s", code, b)
		}
	}
	if err := a.Pool.QueryRow(ctx, `SELECT string_agg(approver || '<=' || max_fee_per_gas::text, ' ' ORDER BY approver) FROM approval WHERE tx_id = $1`,
		waiting).Scan(&ceiling); err != nil || ceiling != "alice<=45000000000 bob<=50000000000" {
		t.Errorf("stored approvals %q (%v), want alice's and bob's latest", ceiling, err)
	}
	for _, c := range []struct {
		as, path string
		want     int
	}{
		{"gateway", "/internal/v1/tx/" + idle + "/approvals", http.StatusConflict},
		{"gateway", "/internal/v1/tx/0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7/approvals", http.StatusNotFound},
		{"ledger", "/internal/v1/tx/" + waiting + "/approvals", http.StatusForbidden},
	} {
		if code, b := a.Do(t, c.as, "POST", c.path, approval("bob", expiry, sig)); code != c.want {
			t.Errorf("approve %s as %s: %d %s, want %d", c.path, c.as, code, b, c.want)
		}
	}
}

// TestARejectionIsSignedByAnApproverOfTheRule: a rejection fails a
// transaction only when signed over txfence/rejection/v1 by an approver
// of the rule that needs approval. Unsigned, wrongly signed, signed by an
// approver the rule does not list, or an approval passed off as a
// rejection: a 400 naming the field, and the transaction keeps waiting. A
// good one fails it, its event names the approver and the approval row
// keeps the signature; the same rejection again answers the same.
func TestARejectionIsSignedByAnApproverOfTheRule(t *testing.T) {
	t.Parallel()
	keys := approverKeys("alice", "bob", "carol", "mallory")
	a := startWithSigner(t, approvalPolicy(t, keys))
	ctx := context.Background()
	waiting, idle := a.AwaitingApproval(t, "r-1"), a.Create(t, "r-2")
	in := time.Now().Add(time.Hour)
	reject := func(id string) signerpkg.Rejection {
		return signerpkg.SignRejection(keys[id], id, intentOf(waiting), in)
	}
	approvalAsRejection := signerpkg.SignApproval(keys["bob"], "bob", intentOf(waiting), big.NewInt(30e9), in)
	forged := reject("bob")
	forged.Signature[5] ^= 1
	for _, tt := range []struct{ name, body, pointer string }{
		{"no signature (the old body)", `{"approver": "bob"}`, ""},
		{"zeros for a signature", rejectionJSON(signerpkg.Rejection{Approver: "bob", Expiry: in.Truncate(time.Second), Signature: make([]byte, 64)}), "/signature"},
		{"a forged signature", rejectionJSON(forged), "/signature"},
		{"an approval's signature", rejectionJSON(signerpkg.Rejection{Approver: "bob", Expiry: approvalAsRejection.Expiry, Signature: approvalAsRejection.Signature}), "/signature"},
		{"an approver of the policy, not of the rule", rejectionJSON(reject("carol")), "/approver"},
		{"an approver the policy does not list", rejectionJSON(reject("mallory")), "/approver"},
		{"an expiry in the past", rejectionJSON(signerpkg.SignRejection(keys["bob"], "bob", intentOf(waiting), time.Now().Add(-time.Minute))), "/expiry"},
	} {
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/reject", tt.body)
		wantProblem(t, tt.name, code, b, tt.pointer)
	}
	var n int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM approval`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d decisions stored by refused rejections (%v)", n, err)
	}
	if code, b := a.Do(t, "gateway", "GET", "/internal/v1/tx/"+waiting, ""); servicetest.Decode[txJSON](t, b).State != "PENDING_APPROVAL" {
		t.Fatalf("after refused rejections: %d %s", code, b)
	}

	good := reject("bob")
	for range 2 { // the same rejection again answers the same
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/reject", rejectionJSON(good))
		if tx := servicetest.Decode[txJSON](t, b); code != http.StatusOK || tx.State != "FAILED" || tx.Reason != "approval_rejected" {
			t.Fatalf("reject: %d %s", code, b)
		}
	}
	var signature []byte
	if err := a.Pool.QueryRow(ctx, `SELECT signature FROM approval WHERE tx_id = $1 AND approver = 'bob' AND decision = 'reject'`, waiting).Scan(&signature); err != nil ||
		!bytes.Equal(signature, good.Signature) {
		t.Errorf("the recorded rejection's signature %x (%v), want %x", signature, err, good.Signature)
	}
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM event WHERE tx_id = $1 AND payload->>'to_state' = 'FAILED'
		AND payload->>'approver' = 'bob'`, waiting).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rejection events naming bob (%v), want 1", n, err)
	}
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals",
		approvalJSON(signerpkg.SignApproval(keys["alice"], "alice", intentOf(waiting), big.NewInt(30e9), in))); code != http.StatusConflict {
		t.Errorf("approving a rejected transaction: %d %s", code, b)
	}
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+idle+"/reject", rejectionJSON(good)); code != http.StatusConflict {
		t.Errorf("rejecting a transaction not waiting for approvals: %d %s", code, b)
	}
}

// TestApprovalsNeedASignerToCheckThem: a node without a signer refuses
// approvals and rejections as unavailable rather than store them
// unchecked.
func TestApprovalsNeedASignerToCheckThem(t *testing.T) {
	t.Parallel()
	a := startWithSigner(t, "")
	waiting := a.AwaitingApproval(t, "n-1")
	keys := approverKeys("alice")
	body := approvalJSON(signerpkg.SignApproval(keys["alice"], "alice", intentOf(waiting), big.NewInt(30e9), time.Now().Add(time.Hour)))
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", body); code != http.StatusServiceUnavailable {
		t.Errorf("approve without a signer: %d %s, want 503", code, b)
	}
}
