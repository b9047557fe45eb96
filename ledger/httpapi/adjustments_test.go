package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/shared/errs"
)

var staking = common.HexToAddress("0x00000000000000000000000000000000005ea4e0")

// unexplained books what a reconciliation books for an inbound movement
// it cannot explain: amount into hot's wallet, out of its suspense
// account, in asset.
func unexplained(t *testing.T, a *api, journalKey, asset string, amount int64) {
	t.Helper()
	a.post(t, &ledger.Journal{Kind: ledger.Reconciliation, Key: journalKey, ChainID: chain,
		Block: &ledger.Block{Number: 9, Hash: common.HexToHash("0x09")},
		Legs:  []ledger.Leg{leg(key(ledger.Wallet, asset, hot), amount), leg(key(ledger.Suspense, asset, hot), -amount)}})
}

// The operators the gateway names: two admin keys of tenant acme.
const (
	acme       = "3f2c9a1e-7b4d-4c2a-9e8f-0a1b2c3d4e5f"
	aliceKey   = "0c6f9b1e-0000-4000-8000-00000000a11c"
	bobKey     = "0c6f9b1e-0000-4000-8000-000000000b0b"
	operatorOf = `{"key_id": %q, "key_name": %q, "tenant_id": "` + acme + `", "tenant_name": "acme"}`
)

var opAlice, opBob = fmt.Sprintf(operatorOf, aliceKey, "ops-alice"), fmt.Sprintf(operatorOf, bobKey, "ops-bob")

// adjustment is a request for adjustment id (acme's own id: the tenant's
// prefix is added) as the gateway's operator path sends it, asked by
// alice.
func adjustment(id, amount, kind string) string {
	return fmt.Sprintf(`{"adjustment_id": %q, "chain_id": %d, "wallet": %q, "asset": "native", "amount": %q,
		"counter_account": {"kind": %q, "address": %q}, "reason": "internal transfer from the staking contract", "operator": %s}`,
		acme+":"+id, chain, "0x"+strings.ToUpper(hot.Hex()[2:]), amount, kind, staking.Hex(), opAlice)
}

// approvedBy is body with approver added.
func approvedBy(body, approver string) string {
	return strings.TrimSuffix(body, "}") + `, "approver": ` + approver + "}"
}

func suspenseOf(t *testing.T, a *api, asset string) string {
	t.Helper()
	accts := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=suspense&asset="+asset+"&address="+hot.Hex()).Accounts
	if len(accts) != 1 {
		t.Fatalf("hot's suspense accounts in %s: %+v", asset, accts)
	}
	return accts[0].Balance
}

// An operator explains a suspense amount in parts: each adjustment moves
// what it names from suspense to the account it belongs to, a replay
// answers the first booking, and nothing may take suspense past zero,
// not even two adjustments racing for the last of it.
func TestAdjustingSuspense(t *testing.T) {
	t.Parallel()
	a := start(t)
	unexplained(t, a, "reconciliation:1", ledger.Native, -1000) // chain below the books: suspense holds +1000
	unexplained(t, a, "reconciliation:2", ledger.Native, 1700)  // then above: suspense nets to -700

	code, body := a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", adjustment("INC-1", "300", "deposit_source"))
	var j ledgerapi.Journal
	if code != http.StatusCreated || json.Unmarshal(body, &j) != nil || j.Kind != "adjustment" || j.BlockNumber != nil || len(j.Entries) != 2 {
		t.Fatalf("first adjustment: %d %s", code, body)
	}
	// The spec types a memo as any object: what an adjustment's holds is
	// read here.
	var sent struct {
		Memo struct {
			ID       string `json:"adjustment_id"`
			Reason   string `json:"reason"`
			Operator map[string]string
			Approver map[string]string
		}
	}
	memo := &sent.Memo
	if json.Unmarshal(body, &sent) != nil || memo.ID != acme+":INC-1" || memo.Reason != "internal transfer from the staking contract" ||
		memo.Operator["key_id"] != aliceKey || memo.Operator["key_name"] != "ops-alice" || memo.Operator["tenant_name"] != "acme" || memo.Approver != nil {
		t.Errorf("the memo in %s", body)
	}
	for _, e := range j.Entries {
		want := map[ledgerapi.AccountKind]string{"suspense": "300", "deposit_source": "-300"}[e.Account.Kind]
		if e.Amount != want || (e.Account.Kind == "suspense" && e.Account.Address != strings.ToLower(hot.Hex())) ||
			(e.Account.Kind == "deposit_source" && e.Account.Address != strings.ToLower(staking.Hex())) {
			t.Errorf("entry %+v", e)
		}
	}
	if got := suspenseOf(t, a, ledger.Native); got != "-400" {
		t.Errorf("suspense after 300 explained: %s, want -400", got)
	}

	// The same adjustment again: the same journal, 200, nothing booked.
	code, body = a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", adjustment("INC-1", "300", "deposit_source"))
	var again ledgerapi.Journal
	if code != http.StatusOK || json.Unmarshal(body, &again) != nil || again.JournalId != j.JournalId || suspenseOf(t, a, ledger.Native) != "-400" {
		t.Errorf("replay: %d %s", code, body)
	}
	for name, c := range map[string]struct {
		body   string
		status int
	}{
		"the id with another amount":   {adjustment("INC-1", "301", "deposit_source"), http.StatusConflict},
		"the id with another account":  {adjustment("INC-1", "300", "counterparty"), http.StatusConflict},
		"the id by another operator":   {strings.Replace(adjustment("INC-1", "300", "deposit_source"), opAlice, opBob, 1), http.StatusConflict},
		"the id, approved since":       {approvedBy(adjustment("INC-1", "300", "deposit_source"), opBob), http.StatusConflict},
		"more than suspense holds":     {adjustment("INC-2", "401", "deposit_source"), http.StatusConflict},
		"the wrong way":                {adjustment("INC-2", "-1", "counterparty"), http.StatusConflict},
		"a token with no suspense yet": {strings.Replace(adjustment("INC-2", "1", "deposit_source"), `"native"`, `"`+token+`"`, 1), http.StatusNotFound},
	} {
		code, body := a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", c.body)
		var p errs.Problem
		if code != c.status || json.Unmarshal(body, &p) != nil || p.Status != c.status {
			t.Errorf("%s: %d %s, want a %d problem", name, code, body, c.status)
		}
	}
	if got := suspenseOf(t, a, ledger.Native); got != "-400" {
		t.Errorf("suspense after the refusals: %s, want -400", got)
	}

	// Eight operators race to clear 100 each of the 400 left: four win.
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() {
			codes[i], _ = a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", adjustment(fmt.Sprintf("race-%d", i), "100", "counterparty"))
		})
	}
	wg.Wait()
	slices.Sort(codes)
	if want := []int{201, 201, 201, 201, 409, 409, 409, 409}; !slices.Equal(codes, want) {
		t.Errorf("racing adjustments: %v, want %v", codes, want)
	}
	if got := suspenseOf(t, a, ledger.Native); got != "0" {
		t.Errorf("suspense after the race: %s, want 0", got)
	}
	// The wallet never moved: it tied out to the chain before, and does.
	if got := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=wallet&address="+hot.Hex()).Accounts[0].Balance; got != "700" {
		t.Errorf("hot's wallet: %s, want 700", got)
	}
}

func TestAdjustmentBadInputIsAProblem(t *testing.T) {
	t.Parallel()
	a := start(t)
	unexplained(t, a, "reconciliation:1", ledger.Native, 5)
	over := new(big.Int).Lsh(big.NewInt(1), 256).String()
	for _, c := range []struct {
		name, body string
		pointers   []string
	}{
		{"an empty object but its operator", `{"operator": ` + opAlice + `}`, []string{"/adjustment_id", "/amount", "/asset", "/chain_id", "/counter_account", "/reason", "/wallet"}},
		{"a malformed operator", strings.Replace(adjustment("x", "5", "counterparty"), opAlice, `{"key_id": "nope", "key_name": "", "tenant_id": "`+acme+`"}`, 1),
			[]string{"/operator/key_id", "/operator/key_name", "/operator/tenant_name"}},
		{"a zero amount", adjustment("x", "0", "counterparty"), []string{"/amount"}},
		{"a negative zero", adjustment("x", "-0", "counterparty"), []string{"/amount"}},
		{"a leading zero", adjustment("x", "05", "counterparty"), []string{"/amount"}},
		{"a plus sign", adjustment("x", "+5", "counterparty"), []string{"/amount"}},
		{"an exponent", adjustment("x", "5e2", "counterparty"), []string{"/amount"}},
		{"a fraction", adjustment("x", "5.0", "counterparty"), []string{"/amount"}},
		{"2^256", adjustment("x", over, "counterparty"), []string{"/amount"}},
		{"-2^256", adjustment("x", "-"+over, "counterparty"), []string{"/amount"}},
		{"hex", adjustment("x", "0x10", "counterparty"), []string{"/amount"}},
		{"to a wallet", adjustment("x", "5", "wallet"), []string{"/counter_account/kind"}},
		{"to suspense", adjustment("x", "5", "suspense"), []string{"/counter_account/kind"}},
		{"a bad id and kind", adjustment("no spaces", "5", "equity"), []string{"/adjustment_id", "/counter_account/kind"}},
		{"a short wallet", strings.Replace(adjustment("x", "5", "counterparty"), `"wallet": "`, `"wallet": "0x12`, 1), []string{"/wallet"}},
		{"a bad asset", strings.Replace(adjustment("x", "5", "counterparty"), `"native"`, `"eth"`, 1), []string{"/asset"}},
		{"a blank reason", strings.Replace(adjustment("x", "5", "counterparty"), "internal transfer from the staking contract", "   ", 1), []string{"/reason"}},
		{"chain 0", strings.Replace(adjustment("x", "5", "counterparty"), fmt.Sprintf(`"chain_id": %d`, chain), `"chain_id": 0`, 1), []string{"/chain_id"}},
		{"no counter address", strings.Replace(adjustment("x", "5", "counterparty"), `, "address": "`+staking.Hex()+`"`, "", 1), []string{"/counter_account/address"}},
	} {
		code, body := a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", c.body)
		var p errs.Problem
		if code != http.StatusBadRequest || json.Unmarshal(body, &p) != nil || p.Type != "urn:txfence:problem:invalid" {
			t.Errorf("%s: %d %s, want a 400 problem", c.name, code, body)
			continue
		}
		var named []string
		for _, f := range p.Errors {
			named = append(named, f.Pointer)
		}
		slices.Sort(named)
		if !slices.Equal(named, c.pointers) {
			t.Errorf("%s: the problem names %v, want %v: %s", c.name, named, c.pointers, body)
		}
	}
	for name, c := range map[string]struct{ contentType, body string }{
		"an unknown field": {"application/json", strings.Replace(adjustment("x", "5", "counterparty"), `{`, `{"approved": true, `, 1)},
		"not JSON":         {"application/json", "amount=5"},
		"a form":           {"application/x-www-form-urlencoded", adjustment("x", "5", "counterparty")},
		"a number amount":  {"application/json", strings.Replace(adjustment("x", "5", "counterparty"), `"amount": "5"`, `"amount": 5`, 1)},
	} {
		if code, body := a.send(t, "gateway", "POST", "/v1/adjustments", c.contentType, c.body); code != http.StatusBadRequest && code != http.StatusUnsupportedMediaType {
			t.Errorf("%s: %d %s, want 400", name, code, body)
		}
	}
	// The rules between fields: ids per tenant, approvals by a second key
	// of the tenant.
	for name, body := range map[string]string{
		"an id of no tenant's":   strings.Replace(adjustment("x", "5", "counterparty"), acme+":x", "x", 1),
		"another tenant's id":    strings.Replace(adjustment("x", "5", "counterparty"), acme+":x", "00000000-0000-4000-8000-000000000001:x", 1),
		"approved by itself":     approvedBy(adjustment("x", "5", "counterparty"), opAlice),
		"approved from outside":  approvedBy(adjustment("x", "5", "counterparty"), strings.Replace(opBob, acme, "00000000-0000-4000-8000-000000000001", 1)),
		"a malformed approver":   approvedBy(adjustment("x", "5", "counterparty"), `{"key_id": "`+bobKey+`"}`),
		"an operator of nothing": strings.Replace(adjustment("x", "5", "counterparty"), aliceKey, "00000000-0000-0000-0000-000000000000", 1),
	} {
		code, body := a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", body)
		var p errs.Problem
		if code != http.StatusBadRequest || json.Unmarshal(body, &p) != nil || p.Type != "urn:txfence:problem:invalid" {
			t.Errorf("%s: %d %s, want a 400 problem", name, code, body)
		}
	}
	for _, as := range []string{"stranger", "ledger", "txmanager"} {
		if code, body := a.send(t, as, "POST", "/v1/adjustments", "application/json", adjustment("x", "5", "counterparty")); code != http.StatusForbidden {
			t.Errorf("as %s: %d %s, want 403", as, code, body)
		}
	}
	if got := suspenseOf(t, a, ledger.Native); got != "-5" {
		t.Errorf("suspense after bad input: %s, want -5 untouched", got)
	}
}

// ledgerd books adjustments only from the gateway's operator path: a bare
// request with the gateway's certificate, as operators were once told to
// send, is refused with a problem naming the path, and books nothing; the
// gateway's request names its operator (and approver), which the
// journal's memo and the audit row keep, once, whatever the replays.
func TestLedgerdBooksAdjustmentsOnlyFromTheOperatorPath(t *testing.T) {
	t.Parallel()
	a := start(t)
	unexplained(t, a, "reconciliation:1", ledger.Native, -1000) // suspense holds +1000
	bare := strings.Replace(adjustment("INC-7", "-400", "counterparty"), `, "operator": `+opAlice, "", 1)
	code, body := a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", bare)
	var p errs.Problem
	if code != http.StatusForbidden || json.Unmarshal(body, &p) != nil || p.Type != "urn:txfence:problem:forbidden" ||
		!strings.Contains(p.Detail, "operator path") || !strings.Contains(p.Detail, "/api/v1/ledger/adjustments") {
		t.Errorf("a bare adjustment: %d %s, want a 403 problem naming the operator path", code, body)
	}
	if got := suspenseOf(t, a, ledger.Native); got != "1000" {
		t.Errorf("suspense after the bare request: %s, want 1000", got)
	}

	approved := approvedBy(adjustment("INC-7", "-400", "counterparty"), opBob)
	for range 2 {
		code, body = a.send(t, "gateway", "POST", "/v1/adjustments", "application/json", approved)
		if code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("an approved adjustment: %d %s", code, body)
		}
	}
	var j ledgerapi.Journal
	var sent struct{ Memo json.RawMessage } // the memo as sent: the spec types it as any object
	if json.Unmarshal(body, &j) != nil || json.Unmarshal(body, &sent) != nil ||
		!strings.Contains(string(sent.Memo), `"approver":{"key_id":"`+bobKey+`","key_name":"ops-bob"`) ||
		!strings.Contains(string(sent.Memo), `"operator":{"key_id":"`+aliceKey+`","key_name":"ops-alice"`) {
		t.Errorf("the journal's memo: %s", sent.Memo)
	}
	var rows int
	var operator, approver, tenant string
	var journalID int64
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) OVER (), journal_id, operator_key_name, approver_key_name, tenant_name
		FROM adjustment WHERE adjustment_id = $1`, acme+":INC-7").Scan(&rows, &journalID, &operator, &approver, &tenant); err != nil ||
		rows != 1 || journalID != j.JournalId || operator != "ops-alice" || approver != "ops-bob" || tenant != "acme" {
		t.Errorf("the audit row: %d rows, journal %d, %q approved by %q of %q: %v", rows, journalID, operator, approver, tenant, err)
	}
	if _, err := a.pool.Exec(context.Background(), `UPDATE adjustment SET approver_key_name = 'someone' WHERE adjustment_id = $1`, acme+":INC-7"); err == nil {
		t.Error("the audit row was changed")
	}
}
