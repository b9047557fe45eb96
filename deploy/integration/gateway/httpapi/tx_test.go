package httpapi_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/txmanager"
)

// TestCreateIsIdempotentAndReadsBack: a create answers 201, the same
// Idempotency-Key and body 200 with the same transaction, another body
// 409; it reads back by id, by request and in the list, with metadata
// numbers exactly as sent.
func TestCreateIsIdempotentAndReadsBack(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	created := r.Create(t, r.Acme, signerA, "order-1")
	if created.State != "INIT" || created.RequestID != "order-1" {
		t.Errorf("created %+v", created)
	}
	resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx", transfer(signerA, "1000"), "Idempotency-Key", "order-1")
	if resp.StatusCode != http.StatusOK || decode[tx](t, b).TxID != created.TxID || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the same create again: %d %s %v", resp.StatusCode, b, resp.Header)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx", transfer(signerA, "1001"), "Idempotency-Key", "order-1"); resp.StatusCode != http.StatusConflict {
		t.Errorf("another body under the key: %d %s", resp.StatusCode, b)
	}
	_, b = r.Do(t, r.Acme, "GET", "/api/v1/tx/"+created.TxID, "")
	if !strings.Contains(string(b), `123456789012345678901234567890`) {
		t.Errorf("metadata changed on the way: %s", b)
	}
	if resp, b := r.Do(t, r.Acme, "GET", "/api/v1/tx/by-request?chain_id=31337&from="+signerA+"&request_id=order-1", ""); resp.StatusCode != http.StatusOK || decode[tx](t, b).TxID != created.TxID {
		t.Errorf("by request: %d %s", resp.StatusCode, b)
	}
	r.Create(t, r.Acme, signerA, "order-2")
	r.Create(t, r.Globex, signerB, "order-1") // the same key under another signer is another transaction
	resp, b = r.Do(t, r.AcmeRead, "GET", "/api/v1/tx?limit=1", "")
	page := decode[struct {
		Transactions []tx
		NextCursor   *string `json:"next_cursor"`
	}](t, b)
	if resp.StatusCode != http.StatusOK || len(page.Transactions) != 1 || page.NextCursor == nil {
		t.Fatalf("first page: %d %s", resp.StatusCode, b)
	}
	_, b = r.Do(t, r.AcmeRead, "GET", "/api/v1/tx?limit=5&cursor="+*page.NextCursor, "")
	if rest := decode[struct{ Transactions []tx }](t, b).Transactions; len(rest) != 1 || rest[0].TxID == page.Transactions[0].TxID {
		t.Errorf("second page: %s", b)
	}
	if _, b := r.Do(t, r.Acme, "GET", "/api/v1/tx/"+created.TxID+"/events", ""); !strings.Contains(string(b), `"to_state":"INIT"`) {
		t.Errorf("timeline: %s", b)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+created.TxID+"/cancel", ""); resp.StatusCode != http.StatusOK || decode[tx](t, b).State != "CANCELLED" {
		t.Errorf("cancel: %d %s", resp.StatusCode, b)
	}
	// A dependency must be a transaction of the tenant's.
	other := r.Create(t, r.Globex, signerB, "order-2")
	body := `{"chain_id": 31337, "from": "` + signerA + `", "to": "` + bob + `", "depends_on": "` + other.TxID + `"}`
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx", body, "Idempotency-Key", "order-3"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "/depends_on") {
		t.Errorf("depends on another tenant's tx: %d %s", resp.StatusCode, b)
	}
}

// TestNoTenantSeesAnother: every endpoint that takes a transaction, a
// signer or a key answers another tenant's exactly as if it did not
// exist, and lists leave it out. A key limited to some signers sees only
// those.
func TestNoTenantSeesAnother(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	theirs := r.Create(t, r.Acme, signerA, "secret-order")
	id := theirs.TxID
	approval := fmt.Sprintf(`{"approver": "alice", "max_fee_per_gas": "30000000000", "expiry": %q, "signature": %q}`,
		time.Now().Add(time.Hour).UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(make([]byte, 64)))
	acmeKeys, err := r.Store.Keys(context.Background(), r.AcmeTenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	notFound := []struct{ method, path, body string }{
		{"GET", "/api/v1/tx/" + id, ""},
		{"GET", "/api/v1/tx/" + id + "/events", ""},
		{"POST", "/api/v1/tx/" + id + "/cancel", ""},
		{"GET", "/api/v1/tx/" + id + "/actions", ""},
		{"POST", "/api/v1/tx/" + id + "/actions", `{"action": "bump"}`},
		{"POST", "/api/v1/tx/" + id + "/approvals", approval},
		{"POST", "/api/v1/tx/" + id + "/reject", fmt.Sprintf(`{"approver": "alice", "expiry": %q, "signature": %q}`,
			time.Now().Add(time.Hour).UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(make([]byte, 64)))},
		{"GET", "/api/v1/tx/by-request?chain_id=31337&from=" + signerA + "&request_id=secret-order", ""},
		{"GET", "/api/v1/signers/31337/" + signerA, ""},
		{"DELETE", "/api/v1/keys/" + acmeKeys[0].ID.String(), ""},
	}
	for _, c := range notFound {
		resp, b := r.Do(t, r.Globex, c.method, c.path, c.body)
		if resp.StatusCode != http.StatusNotFound || strings.Contains(string(b), signerA[2:10]) && c.method != "GET" {
			t.Errorf("globex %s %s: %d %s, want 404", c.method, c.path, resp.StatusCode, b)
		}
	}
	// The transaction is untouched by all that.
	if _, b := r.Do(t, r.Acme, "GET", "/api/v1/tx/"+id, ""); decode[tx](t, b).State != "INIT" {
		t.Errorf("acme's transaction after globex's tries: %s", b)
	}
	if _, err := r.Store.Authenticate(context.Background(), r.Acme); err != nil {
		t.Errorf("acme's key after globex tried to revoke it: %v", err)
	}
	// A create from another tenant's signer is refused, naming from.
	if resp, b := r.Do(t, r.Globex, "POST", "/api/v1/tx", transfer(signerA, "1"), "Idempotency-Key", "steal"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"/from"`) {
		t.Errorf("globex creates from acme's signer: %d %s", resp.StatusCode, b)
	}
	// Lists leave it out, whatever the filters say.
	for _, path := range []string{"/api/v1/tx", "/api/v1/tx?from=" + signerA, "/api/v1/tx?chain_id=31337", "/api/v1/approvals", "/api/v1/approvals?from=" + signerA} {
		resp, b := r.Do(t, r.Globex, "GET", path, "")
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), id) {
			t.Errorf("globex GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	if _, b := r.Do(t, r.Globex, "GET", "/api/v1/signers", ""); strings.Contains(strings.ToLower(string(b)), strings.ToLower(signerA)) {
		t.Errorf("globex's signers list acme's: %s", b)
	}
	if _, b := r.Do(t, r.Globex, "GET", "/api/v1/keys", ""); strings.Contains(string(b), acmeKeys[0].ID.String()) {
		t.Errorf("globex's keys list acme's: %s", b)
	}

	// A key limited to some of its tenant's signers sees only those: give
	// acme a second signer and a key for it alone.
	second := common.HexToAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC")
	if err := r.Store.AssignSigner(context.Background(), r.AcmeTenant.ID, gateway.SignerRef{ChainID: 31337, Address: second}); err != nil {
		t.Fatal(err)
	}
	narrow := r.Key(t, r.AcmeTenant, "narrow", gateway.Scopes, []gateway.SignerRef{{ChainID: 31337, Address: second}})
	if resp, _ := r.Do(t, narrow, "GET", "/api/v1/tx/"+id, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a key limited to another signer reads the tx: %d, want 404", resp.StatusCode)
	}
	if _, b := r.Do(t, narrow, "GET", "/api/v1/tx", ""); strings.Contains(string(b), id) {
		t.Errorf("a key limited to another signer lists the tx: %s", b)
	}
}

// TestKeysScopesAndAuthentication: no key, a bad key, a revoked key: 401
// with WWW-Authenticate; a key without the scope: 403; keys made over the
// API work at once and are shown once.
func TestKeysScopesAndAuthentication(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	for name, key := range map[string]string{"none": "", "garbage": "txf_nonsense", "bearer of nothing": " "} {
		resp, b := r.Do(t, key, "GET", "/api/v1/tx", "")
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, b)
		}
	}
	// A bad key learns nothing about validation: 401 before 400.
	if resp, _ := r.Do(t, "", "POST", "/api/v1/tx", `{"chain_id": "x"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unauthenticated bad request: %d, want 401", resp.StatusCode)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/tx", transfer(signerA, "1")},
		{"POST", "/api/v1/keys", `{"name": "x", "scopes": ["admin"]}`},
		{"GET", "/api/v1/approvals", ""},
		{"GET", "/api/v1/signers/31337/" + signerA, ""},
		{"GET", "/api/v1/webhooks", ""},
	} {
		resp, b := r.Do(t, r.AcmeRead, c.method, c.path, c.body, "Idempotency-Key", "k")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "scope") {
			t.Errorf("read-only %s %s: %d %s, want 403", c.method, c.path, resp.StatusCode, b)
		}
	}

	resp, b := r.Do(t, r.Acme, "POST", "/api/v1/keys", `{"name": "ci", "scopes": ["tx:write", "tx:read"], "signers": ["31337:`+signerA+`"]}`)
	made := decode[struct {
		KeyID string `json:"key_id"`
		Token string
	}](t, b)
	if resp.StatusCode != http.StatusCreated || made.Token == "" {
		t.Fatalf("create key: %d %s", resp.StatusCode, b)
	}
	r.Create(t, made.Token, signerA, "with-the-new-key")
	if _, b := r.Do(t, r.Acme, "GET", "/api/v1/keys", ""); strings.Contains(string(b), made.Token) || !strings.Contains(string(b), made.KeyID) {
		t.Errorf("the key list shows a token or misses the key: %s", b)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/keys", `{"name": "x", "scopes": ["tx:read"], "signers": ["31337:`+signerB+`"]}`); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a key for another tenant's signer: %d %s", resp.StatusCode, b)
	}
	if resp, b := r.Do(t, r.Acme, "DELETE", "/api/v1/keys/"+made.KeyID, ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "revoked_at") {
		t.Errorf("revoke: %d %s", resp.StatusCode, b)
	}
	if resp, _ := r.Do(t, made.Token, "GET", "/api/v1/tx", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", resp.StatusCode)
	}
	resp, b = r.Do(t, r.AcmeRead, "GET", "/api/v1/me", "")
	if me := decode[struct {
		TenantName string `json:"tenant_name"`
	}](t, b); resp.StatusCode != http.StatusOK || me.TenantName != "acme" {
		t.Errorf("me: %d %s", resp.StatusCode, b)
	}
}

// TestBadInputNamesTheField: each request that breaks the spec is a 400
// problem whose errors point at the field, and nothing is stored.
func TestBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	body := func(mutate string) string {
		return strings.Replace(transfer(signerA, "1"), `"chain_id": 31337`, mutate, 1)
	}
	cases := []struct {
		name, method, path, body, idem, pointer string
	}{
		{"no idempotency key", "POST", "/api/v1/tx", transfer(signerA, "1"), "", "Idempotency-Key"},
		{"a spaced idempotency key", "POST", "/api/v1/tx", transfer(signerA, "1"), "has space", "Idempotency-Key"},
		{"a malformed from", "POST", "/api/v1/tx", strings.Replace(transfer(signerA, "1"), signerA, "0x1234", 1), "k", "/from"},
		{"a value in hex", "POST", "/api/v1/tx", transfer(signerA, "0x10"), "k", "/value"},
		{"a chain id as text", "POST", "/api/v1/tx", body(`"chain_id": "31337"`), "k", "/chain_id"},
		{"an unknown member", "POST", "/api/v1/tx", body(`"chain_id": 31337, "nonce": 7`), "k", "/nonce"},
		{"a bad route", "POST", "/api/v1/tx", strings.Replace(transfer(signerA, "1"), `"public"`, `"fast"`, 1), "k", "/route"},
		{"gas too low", "POST", "/api/v1/tx", body(`"chain_id": 31337, "gas": 5`), "k", "/gas"},
		{"not JSON", "POST", "/api/v1/tx", `{"chain_id":`, "k", "request body"},
		{"a bad tx id", "GET", "/api/v1/tx/not-a-uuid", "", "", "tx_id"},
		{"a bad state", "GET", "/api/v1/tx?state=LOST", "", "", "state"},
		{"a limit of 0", "GET", "/api/v1/tx?limit=0", "", "", "limit"},
		{"a bad action", "POST", "/api/v1/tx/" + uuid.NewString() + "/actions", `{"action": "explode"}`, "", "/action"},
		{"a bad action id", "POST", "/api/v1/tx/" + uuid.NewString() + "/actions", `{"action": "bump", "action_id": "nope"}`, "", "/action_id"},
		{"a bad key scope", "POST", "/api/v1/keys", `{"name": "x", "scopes": ["root"]}`, "", "/scopes/0"},
		{"a bad Last-Event-ID", "GET", "/api/v1/events", "", "", "Last-Event-ID"},
		{"a bad event type", "GET", "/api/v1/events?types=tx.nothing", "", "", "types"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			headers := []string{}
			if c.idem != "" {
				headers = append(headers, "Idempotency-Key", c.idem)
			}
			if c.name == "a bad Last-Event-ID" {
				headers = append(headers, "Last-Event-ID", "-3")
			}
			resp, b := r.Do(t, r.Acme, c.method, c.path, c.body, headers...)
			p := decode[problem](t, b)
			found := false
			for _, e := range p.Errors {
				found = found || e.Pointer == c.pointer
			}
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
				p.Type != "urn:txfence:problem:invalid" || (!found && !strings.Contains(p.Detail, c.pointer)) {
				t.Errorf("%d %s; want a 400 problem naming %q", resp.StatusCode, b, c.pointer)
			}
		})
	}
	var n int
	if err := r.TxM.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tx`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d transactions stored by refused requests (%v)", n, err)
	}
}

// TestApprovalsAndOperatorActions: a transaction waiting for approvals is
// listed, approved and rejected through the gateway; operator actions
// reach txmanager with the key as the operator.
func TestApprovalsAndOperatorActions(t *testing.T) {
	t.Parallel()
	// Approvers alice and bob, each a key of their own; signerd, which
	// txmanager asks, knows their public keys from the policy.
	keys := map[string]ed25519.PrivateKey{"alice": signertest.ApproverKey("alice"), "bob": signertest.ApproverKey("bob")}
	policyFile := signertest.ApprovalPolicy{RuleID: "large-transfers", From: signerA, Threshold: 2, Approvers: map[string]ed25519.PublicKey{
		"alice": keys["alice"].Public().(ed25519.PublicKey), "bob": keys["bob"].Public().(ed25519.PublicKey)}}.Write(t)
	r := gatewaystack.Start(t, gatewaystack.Options{SignerPolicy: policyFile})
	ctx := context.Background()
	waiting := r.Create(t, r.Acme, signerA, "big-payment")
	key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signerA)}
	token, ok, err := r.TxM.Store.Acquire(ctx, "test-node", key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	fence := txmanager.Fence{Node: "test-node", Key: key, Token: token}
	if _, err := r.TxM.Store.PendingApproval(ctx, fence, uuid.MustParse(waiting.TxID), 21000, time.Now().Add(time.Hour),
		txmanager.StateChanged{Rule: "large-transfers"}); err != nil {
		t.Fatal(err)
	}
	resp, b := r.Do(t, r.Acme, "GET", "/api/v1/approvals", "")
	if list := decode[struct{ Transactions []tx }](t, b).Transactions; resp.StatusCode != http.StatusOK || len(list) != 1 || list[0].TxID != waiting.TxID {
		t.Fatalf("pending approvals: %d %s", resp.StatusCode, b)
	}
	to := common.HexToAddress(gatewaystack.Bob)
	intent := &signer.Request{TxID: waiting.TxID, ChainID: 31337, From: common.HexToAddress(signerA), Type: signer.DynamicFee, To: &to, Value: big.NewInt(1000)}
	expiry := time.Now().Add(time.Hour)
	a := signer.SignApproval(keys["alice"], "alice", intent, big.NewInt(30e9), expiry)
	approval := fmt.Sprintf(`{"approver": "alice", "max_fee_per_gas": "30000000000", "expiry": %q, "signature": %q}`,
		a.Expiry.UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(a.Signature))
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+waiting.TxID+"/approvals", approval); resp.StatusCode != http.StatusOK || decode[tx](t, b).State != "PENDING_APPROVAL" {
		t.Errorf("approve: %d %s", resp.StatusCode, b)
	}
	// A rejection is bob's signature over the transaction, not his name:
	// an unsigned or forged one is refused and leaves it waiting.
	rejection := func(rej signer.Rejection) string {
		return fmt.Sprintf(`{"approver": %q, "expiry": %q, "signature": %q}`, rej.Approver, rej.Expiry.UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(rej.Signature))
	}
	forged := signer.SignRejection(keys["alice"], "bob", intent, expiry)
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+waiting.TxID+"/reject", rejection(forged)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a rejection in bob's name signed by alice's key: %d %s, want 400", resp.StatusCode, b)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+waiting.TxID+"/reject", rejection(signer.SignRejection(keys["bob"], "bob", intent, expiry))); resp.StatusCode != http.StatusOK || decode[tx](t, b).Reason != "approval_rejected" {
		t.Errorf("reject: %d %s", resp.StatusCode, b)
	}
	// An action on a transaction not yet broadcast is txmanager's 409,
	// passed on as such.
	fresh := r.Create(t, r.Acme, signerA, "fresh")
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+fresh.TxID+"/actions", `{"action": "bump"}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("bump before broadcast: %d %s", resp.StatusCode, b)
	}
	resp, b = r.Do(t, r.Acme, "GET", "/api/v1/signers/31337/"+signerA, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"owner":"test-node"`) {
		t.Errorf("signer status: %d %s", resp.StatusCode, b)
	}
}

// TestOperatorActionsBeforeTheBroadcast: through the gateway, an admin key
// acts on ALLOCATED and SIGNED transactions (abandon included), recorded
// with the key as the operator; a request repeated under its action_id is
// the same action (200), another under it a 409; abandoning a BROADCASTED
// transaction is txmanager's 409, passed on; another tenant's transaction
// is a 404.
func TestOperatorActionsBeforeTheBroadcast(t *testing.T) {
	t.Parallel()
	r := gatewaystack.Start(t, gatewaystack.Options{})
	owner := r.TxM.NewOwner(t, txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signerA)})
	// to moves a new transfer up to state, as the owner's worker would.
	to := func(requestID string, state txmanager.State) string {
		t.Helper()
		id := uuid.MustParse(r.Create(t, r.Acme, signerA, requestID).TxID)
		owner.MoveTo(t, id, state)
		return id.String()
	}
	type action struct {
		ActionID   string  `json:"action_id"`
		TxID       string  `json:"tx_id"`
		Action     string  `json:"action"`
		Operator   string  `json:"operator"`
		Outcome    *string `json:"outcome"`
		FillerTxID *string `json:"filler_tx_id"`
	}
	allocated, signed, broadcast := to("allocated", txmanager.StateAllocated), to("signed", txmanager.StateSigned), to("broadcast", txmanager.StateBroadcasted)
	for _, c := range []struct{ id, action string }{{allocated, "resend"}, {allocated, "bump"}, {allocated, "abandon"}, {signed, "resend"}, {signed, "bump"}} {
		resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+c.id+"/actions", `{"action": "`+c.action+`"}`)
		a := decode[action](t, b)
		if resp.StatusCode != http.StatusAccepted || a.TxID != c.id || a.Action != c.action || !strings.HasPrefix(a.Operator, "key:") || a.Outcome != nil {
			t.Errorf("%s of %s: %d %s, want 202 with the key as the operator", c.action, c.id, resp.StatusCode, b)
		}
	}

	const actionID = "0193a2c7-41d0-7e8a-b5f3-2c9d8e7f6a10"
	body := `{"action": "resend", "action_id": "` + actionID + `"}`
	resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+broadcast+"/actions", body)
	if a := decode[action](t, b); resp.StatusCode != http.StatusAccepted || a.ActionID != actionID {
		t.Fatalf("resend with an action id: %d %s", resp.StatusCode, b)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+broadcast+"/actions", body); resp.StatusCode != http.StatusOK || decode[action](t, b).ActionID != actionID {
		t.Errorf("the same again: %d %s, want 200 with the action", resp.StatusCode, b)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+broadcast+"/actions", `{"action": "bump", "action_id": "`+actionID+`"}`); resp.StatusCode != http.StatusConflict ||
		!strings.Contains(string(b), actionID) {
		t.Errorf("another action under the id: %d %s, want 409", resp.StatusCode, b)
	}
	if resp, b := r.Do(t, r.Acme, "POST", "/api/v1/tx/"+broadcast+"/actions", `{"action": "abandon"}`); resp.StatusCode != http.StatusConflict ||
		!strings.Contains(string(b), "cancel it instead") {
		t.Errorf("abandon a broadcast transaction: %d %s, want 409", resp.StatusCode, b)
	}
	if resp, b := r.Do(t, r.Globex, "POST", "/api/v1/tx/"+signed+"/actions", `{"action": "abandon"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's transaction: %d %s, want 404", resp.StatusCode, b)
	}
	resp, b = r.Do(t, r.Acme, "GET", "/api/v1/tx/"+allocated+"/actions", "")
	list := decode[struct{ Actions []action }](t, b).Actions
	if resp.StatusCode != http.StatusOK || len(list) != 3 || list[2].Action != "abandon" {
		t.Errorf("the actions of the allocated transaction: %d %s", resp.StatusCode, b)
	}
}
