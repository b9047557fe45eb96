package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/httpapi"
	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// spender took what reconciliation put in suspense.
const spender = "0x000000000000000000000000000000000005e4de"

func adjustmentBody(id string, amount int64) string {
	return fmt.Sprintf(`{"adjustment_id": %q, "chain_id": 31337, "wallet": %q, "asset": "native", "amount": "%d",
		"counter_account": {"kind": "counterparty", "address": %q}, "reason": "transferFrom by a spender holding an allowance"}`,
		id, signerA, amount, spender)
}

// keyID is the id of key, as GET /me tells it.
func keyID(t *testing.T, g *gatewaystack.Gateway, key string) uuid.UUID {
	t.Helper()
	return read[gatewayapi.Me](t, g, key, "/api/v1/me").Key.KeyId
}

// adjustmentMemo is an adjustment journal's memo, as ledgerd stores it
// (the spec types a memo as any object).
type adjustmentMemo struct {
	ID       string `json:"adjustment_id"`
	Operator map[string]string
	Approver map[string]string
}

func memoOf(t *testing.T, g *gatewaystack.Gateway, journal int64) adjustmentMemo {
	t.Helper()
	j, err := g.Ledger.Store.JournalByID(context.Background(), journal)
	if err != nil {
		t.Fatal(err)
	}
	return decode[adjustmentMemo](t, j.Memo)
}

// Adjustments only through the operator path. An admin key that may use
// the wallet proposes; at or below the threshold (with what was booked
// alone in the window) the ledger books it at once with the key named in
// the journal's memo; above, it waits for a second, older admin key, the
// proposer's own approval refused; keys without the scope, limited to
// other signers or of another tenant are refused with a 403 problem; and
// ledgerd itself refuses the bare request operators used to send with the
// gateway's certificate.
func TestAdjustmentsOnlyThroughTheOperatorPath(t *testing.T) {
	t.Parallel()
	var thresholds httpapi.AdjustmentThresholds
	if err := thresholds.UnmarshalText([]byte("31337:native=1000")); err != nil {
		t.Fatal(err)
	}
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true, Adjustments: httpapi.AdjustmentRules{Thresholds: thresholds}})
	ctx := context.Background()
	// Reconciliation found 5000 less on chain than in the books: suspense
	// holds +5000.
	g.Ledger.Book(t, ledger.Opening, "opening:A", 1, gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, 10000),
		gatewaystack.Leg(ledger.OpeningBalance, ledger.Native, signerA, -10000))
	g.Ledger.Book(t, ledger.Reconciliation, "reconciliation:A:2", 2, gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, -5000),
		gatewaystack.Leg(ledger.Suspense, ledger.Native, signerA, 5000))
	signerC := gateway.SignerRef{ChainID: 31337, Address: common.HexToAddress("0x00000000000000000000000000000000000c0ffe")}
	if err := g.Store.AssignSigner(ctx, g.AcmeTenant.ID, signerC); err != nil {
		t.Fatal(err)
	}
	bob := g.Key(t, g.AcmeTenant, "ops-bob", []gateway.Scope{gateway.ScopeAdmin}, nil)
	onlyC := g.Key(t, g.AcmeTenant, "ops-c", []gateway.Scope{gateway.ScopeAdmin, gateway.ScopeLedgerRead}, []gateway.SignerRef{signerC})
	reader := g.Key(t, g.AcmeTenant, "books", []gateway.Scope{gateway.ScopeLedgerRead, gateway.ScopeTxRead}, nil)
	aliceID, bobID := keyID(t, g, g.Acme), keyID(t, g, bob)

	send := func(key, method, path, body string) (int, []byte) {
		t.Helper()
		resp, b := g.Do(t, key, method, path, body)
		return resp.StatusCode, b
	}
	propose := func(key, id string, amount int64) (int, []byte) {
		t.Helper()
		return send(key, "POST", "/api/v1/ledger/adjustments", adjustmentBody(id, amount))
	}
	refused := func(what string, code int, body []byte, status int, says string) {
		t.Helper()
		p := decode[problem](t, body)
		if code != status || p.Status != status || !strings.Contains(p.Detail, says) {
			t.Errorf("%s: %d %s, want a %d problem saying %q", what, code, body, status, says)
		}
	}

	// Keys that may not: no admin scope, limited to another signer,
	// another tenant's.
	for name, key := range map[string]string{"a tx:read key": g.AcmeRead, "a ledger:read key": reader} {
		code, body := propose(key, "INC-0", -1)
		refused(name, code, body, http.StatusForbidden, "admin")
	}
	for name, key := range map[string]string{"an admin key limited to another signer": onlyC, "globex's admin key": g.Globex} {
		code, body := propose(key, "INC-0", -1)
		refused(name, code, body, http.StatusForbidden, "may not adjust wallet")
	}

	// At or below the threshold: booked at once, the key in the memo.
	code, body := propose(g.Acme, "INC-1", -400)
	booked := decode[gatewayapi.LedgerAdjustment](t, body)
	if code != http.StatusCreated || booked.Status != "booked" || booked.NeedsApproval || booked.JournalId == nil ||
		booked.ProposedBy != (gatewayapi.LedgerAdjustmentKey{KeyId: aliceID, Name: "admin"}) || *booked.Threshold != "1000" {
		t.Fatalf("INC-1: %d %s", code, body)
	}
	if memo := memoOf(t, g, *booked.JournalId); memo.ID != g.AcmeTenant.ID.String()+":INC-1" || memo.Approver != nil ||
		memo.Operator["key_id"] != aliceID.String() || memo.Operator["key_name"] != "admin" || memo.Operator["tenant_name"] != "acme" ||
		memo.Operator["tenant_id"] != g.AcmeTenant.ID.String() {
		t.Errorf("INC-1's journal memo: %+v", memo)
	}
	// The tenant reads its journal with its own id in the memo.
	shown := read[gatewayapi.LedgerJournal](t, g, g.Acme, fmt.Sprintf("/api/v1/ledger/journals/%d", *booked.JournalId))
	if shown.Memo["adjustment_id"] != "INC-1" {
		t.Errorf("the memo the tenant reads: %v", shown.Memo)
	}
	if code, body := propose(g.Acme, "INC-1", -400); code != http.StatusOK || *decode[gatewayapi.LedgerAdjustment](t, body).JournalId != *booked.JournalId {
		t.Errorf("INC-1 again: %d %s", code, body)
	}
	code, body = propose(g.Acme, "INC-1", -401)
	refused("INC-1 with another amount", code, body, http.StatusConflict, "INC-1")

	// Above the threshold: it waits; its proposer cannot approve it, nor
	// can a key made after it; a second admin key's approval books it.
	code, body = propose(g.Acme, "INC-2", -2000)
	if pending := decode[gatewayapi.LedgerAdjustment](t, body); code != http.StatusAccepted || pending.Status != "pending_approval" || pending.JournalId != nil {
		t.Fatalf("INC-2: %d %s", code, body)
	}
	late := g.Key(t, g.AcmeTenant, "ops-late", []gateway.Scope{gateway.ScopeAdmin}, nil)
	code, body = send(g.Acme, "POST", "/api/v1/ledger/adjustments/INC-2/approve", "")
	refused("self-approval", code, body, http.StatusForbidden, "cannot approve")
	code, body = send(late, "POST", "/api/v1/ledger/adjustments/INC-2/approve", "")
	refused("a key made after the proposal", code, body, http.StatusForbidden, "older than the proposal")
	code, body = send(onlyC, "POST", "/api/v1/ledger/adjustments/INC-2/approve", "")
	refused("a key limited to another signer", code, body, http.StatusNotFound, `no adjustment "INC-2"`)
	code, body = send(bob, "POST", "/api/v1/ledger/adjustments/INC-2/approve", "")
	approved := decode[gatewayapi.LedgerAdjustment](t, body)
	if code != http.StatusOK || approved.Status != "booked" || approved.ApprovedBy == nil || approved.ApprovedBy.KeyId != bobID || approved.JournalId == nil {
		t.Fatalf("bob's approval: %d %s", code, body)
	}
	if memo := memoOf(t, g, *approved.JournalId); memo.Operator["key_id"] != aliceID.String() || memo.Approver["key_id"] != bobID.String() || memo.Approver["key_name"] != "ops-bob" {
		t.Errorf("INC-2's journal memo: %+v", memo)
	}

	// 400 booked alone in the window: 700 more would pass 1000, so it
	// waits too; its proposer withdraws it.
	if code, body := propose(g.Acme, "INC-3", -700); code != http.StatusAccepted {
		t.Errorf("INC-3: %d %s, want it to wait", code, body)
	}
	if code, body := send(g.Acme, "POST", "/api/v1/ledger/adjustments/INC-3/reject", ""); code != http.StatusOK ||
		decode[gatewayapi.LedgerAdjustment](t, body).Status != "rejected" {
		t.Errorf("withdrawing INC-3: %d %s", code, body)
	}
	code, body = send(bob, "POST", "/api/v1/ledger/adjustments/INC-3/approve", "")
	refused("approving a rejected one", code, body, http.StatusConflict, "rejected")

	// More than suspense holds (2600 left): the ledger refuses it, with
	// its problem, and the refusal is kept.
	if code, body := propose(g.Acme, "INC-4", -3000); code != http.StatusAccepted {
		t.Fatalf("INC-4: %d %s", code, body)
	}
	code, body = send(bob, "POST", "/api/v1/ledger/adjustments/INC-4/approve", "")
	refused("more than suspense holds", code, body, http.StatusConflict, "suspense holds 2600")
	if got := read[gatewayapi.LedgerAdjustment](t, g, g.Acme, "/api/v1/ledger/adjustments/INC-4"); got.Status != "refused" || got.Refusal == nil ||
		!strings.Contains(*got.Refusal, "suspense holds 2600") {
		t.Errorf("INC-4 after the refusal: %+v", got)
	}

	list := read[gatewayapi.LedgerAdjustmentList](t, g, g.Acme, "/api/v1/ledger/adjustments")
	var statuses []string
	for _, adj := range list.Adjustments {
		statuses = append(statuses, adj.AdjustmentId+"="+string(adj.Status))
	}
	if got := strings.Join(statuses, " "); got != "INC-4=refused INC-3=rejected INC-2=booked INC-1=booked" {
		t.Errorf("acme's adjustments: %s", got)
	}
	for _, key := range []string{onlyC, g.Globex} {
		if list := read[gatewayapi.LedgerAdjustmentList](t, g, key, "/api/v1/ledger/adjustments"); len(list.Adjustments) != 0 {
			t.Errorf("a key that may not use signer A lists %+v", list.Adjustments)
		}
	}

	// ledgerd refuses the bare request operators used to send with the
	// gateway's certificate: the operator path is the only one.
	bare := fmt.Sprintf(`{"adjustment_id": "%s:INC-9", "chain_id": 31337, "wallet": %q, "asset": "native", "amount": "-1",
		"counter_account": {"kind": "counterparty", "address": %q}, "reason": "by hand"}`, g.AcmeTenant.ID, signerA, spender)
	resp, err := servicetest.Client(t, g.PKI, "gateway", "ledger").Post(g.Ledger.URL+"/v1/adjustments", "application/json", strings.NewReader(bare))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a bare adjustment to ledgerd as the gateway: %d, want 403", resp.StatusCode)
	}
	suspense := read[gatewayapi.LedgerAccountList](t, g, g.Acme, "/api/v1/ledger/accounts?chain_id=31337&address="+signerA+"&kind=suspense")
	if len(suspense.Accounts) != 1 || suspense.Accounts[0].Balance != "2600" {
		t.Errorf("suspense after it all: %+v, want 2600", suspense.Accounts)
	}
}
