package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	signer  = txmanagertest.Signer
	another = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
	bob     = txmanagertest.Bob
)

// api is txmanagerd's API over mutual TLS on a real store, one chain and
// one signer configured, every exchange checked against txmanager.yaml.
type api struct{ *txmanagertest.Server }

func start(t testing.TB) *api { return startServer(t, true, oneSigner) }

// oneSigner is a chains file's signers list: signer, with its defaults.
const oneSigner = `[{"address": "` + signer + `"}]`

// startServer starts the API for chain 31337 and the signers given (the
// JSON list of a chains file), checked against the spec when conform is
// set (benchmarks leave the check out: it costs more than the API).
func startServer(t testing.TB, conform bool, signers string) *api {
	t.Helper()
	pki := servicetest.PKI(t)
	opts := txmanagertest.Options{Chains: `{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"], "signers": ` + signers + `}]}`}
	if conform {
		opts.Wrap = func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.TxManager, h) }
	}
	srv := txmanagertest.Serve(t, pki, opts)
	return &api{srv}
}

type txJSON struct {
	TxID     string          `json:"tx_id"`
	State    string          `json:"state"`
	Value    string          `json:"value"`
	Reason   string          `json:"reason"`
	Metadata json.RawMessage `json:"metadata"`
}

func TestCreateGetCancelAndTheFeed(t *testing.T) {
	t.Parallel()
	a := start(t)
	code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody("order-1", "1000"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	tx := servicetest.Decode[txJSON](t, b)
	if tx.State != "INIT" || tx.Value != "1000" || string(tx.Metadata) != `{"order":"A-1"}` {
		t.Errorf("created %s", b)
	}
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody("order-1", "1000")); code != http.StatusOK || servicetest.Decode[txJSON](t, b).TxID != tx.TxID {
		t.Errorf("the same create again: %d %s, want 200 with %s", code, b, tx.TxID)
	}
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody("order-1", "1001")); code != http.StatusConflict {
		t.Errorf("another body under the id: %d %s, want 409", code, b)
	}
	if code, b := a.Do(t, "gateway", "GET", "/internal/v1/tx/"+tx.TxID, ""); code != http.StatusOK || servicetest.Decode[txJSON](t, b).TxID != tx.TxID {
		t.Errorf("get: %d %s", code, b)
	}
	code, b = a.Do(t, "gateway", "GET", "/internal/v1/tx?chain_id=31337&from="+signer+"&state=INIT&limit=10", "")
	if list := servicetest.Decode[struct {
		Transactions []txJSON
		NextCursor   *string `json:"next_cursor"`
	}](t, b); code != http.StatusOK || len(list.Transactions) != 1 || list.NextCursor != nil {
		t.Errorf("list: %d %s", code, b)
	}
	if code, b := a.Do(t, "gateway", "GET", "/internal/v1/tx/by-request?chain_id=31337&from="+signer+"&request_id=order-1", ""); code != http.StatusOK || servicetest.Decode[txJSON](t, b).TxID != tx.TxID {
		t.Errorf("by request: %d %s", code, b)
	}
	for query, want := range map[string]int{
		"chain_id=31337&from=" + signer + "&request_id=order-9":  404,
		"chain_id=31337&from=" + another + "&request_id=order-1": 404,
		"chain_id=31337&from=" + signer:                          400,
		"chain_id=x&from=" + signer + "&request_id=order-1":      400,
	} {
		if code, b := a.Do(t, "gateway", "GET", "/internal/v1/tx/by-request?"+query, ""); code != want {
			t.Errorf("by request %s: %d %s, want %d", query, code, b, want)
		}
	}
	// The signers filter: a set the gateway passes for a tenant; an empty
	// set matches nothing.
	for query, want := range map[string]int{
		"signers=31337:" + signer:                           1,
		"signers=1:" + signer + ",31337:" + another:         0,
		"signers=1:" + another + "&signers=31337:" + signer: 1,
		"signers=": 0,
	} {
		code, b := a.Do(t, "gateway", "GET", "/internal/v1/tx?"+query, "")
		if list := servicetest.Decode[struct{ Transactions []txJSON }](t, b); code != http.StatusOK || len(list.Transactions) != want {
			t.Errorf("list %s: %d %s, want %d transactions", query, code, b, want)
		}
	}
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/"+tx.TxID+"/cancel", ""); code != http.StatusOK || servicetest.Decode[txJSON](t, b).State != "CANCELLED" {
		t.Errorf("cancel: %d %s", code, b)
	}

	// The feed: the INIT and CANCELLED events, in order, as the ledger reads it.
	type event struct {
		Seq    uint64
		ID     string
		Type   string
		Signer string
		Data   map[string]any
	}
	var events []event
	for tries := 0; len(events) < 2 && tries < 10; tries++ {
		after := 0
		if len(events) > 0 {
			after = int(events[len(events)-1].Seq)
		}
		code, b := a.Do(t, "ledger", "GET", fmt.Sprintf("/internal/v1/events?after=%d&limit=10&wait=5", after), "")
		if code != http.StatusOK {
			t.Fatalf("feed: %d %s", code, b)
		}
		events = append(events, servicetest.Decode[struct{ Events []event }](t, b).Events...)
	}
	if len(events) != 2 || events[0].Seq != 1 || events[1].Seq != 2 || events[1].Data["to_state"] != "CANCELLED" || events[1].ID == events[0].ID || !strings.EqualFold(events[0].Signer, signer) {
		t.Fatalf("feed: %+v", events)
	}

	// The transaction's own timeline: its two events, numbered.
	code, b = a.Do(t, "gateway", "GET", "/internal/v1/tx/"+tx.TxID+"/events", "")
	if timeline := servicetest.Decode[struct{ Events []event }](t, b).Events; code != http.StatusOK || len(timeline) != 2 || timeline[1].Data["to_state"] != "CANCELLED" {
		t.Errorf("timeline: %d %s", code, b)
	}
	if code, _ := a.Do(t, "gateway", "GET", "/internal/v1/tx/0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7/events", ""); code != http.StatusNotFound {
		t.Errorf("timeline of an unknown tx: %d, want 404", code)
	}

	// A long poll answers with what arrives while it waits.
	got := make(chan []byte, 1)
	go func() {
		_, b := a.Do(t, "ledger", "GET", "/internal/v1/events?after=2&wait=20", "")
		got <- b
	}()
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody("order-2", "5")); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	select {
	case b := <-got:
		if !strings.Contains(string(b), `"seq":3`) {
			t.Errorf("long poll answered %s, want event 3", b)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the long poll did not answer")
	}
	// An empty wait ends empty.
	if code, b := a.Do(t, "ledger", "GET", "/internal/v1/events?after=3&wait=1", ""); code != http.StatusOK || string(b) != `{"events":[],"head_seq":3}`+"\n" {
		t.Errorf("empty long poll: %d %q", code, b)
	}
}

func TestOnlyTheGatewayCreatesAndTheLedgerReadsTheFeed(t *testing.T) {
	t.Parallel()
	a := start(t)
	for _, as := range []string{"ledger", "signer", "mevrouter"} {
		if code, _ := a.Do(t, as, "POST", "/internal/v1/tx", txmanagertest.TransferBody("x", "1")); code != http.StatusForbidden {
			t.Errorf("%s creates: %d, want 403", as, code)
		}
	}
	for as, want := range map[string]int{"gateway": 200, "ledger": 200, "signer": 403, "mevrouter": 403} {
		if code, _ := a.Do(t, as, "GET", "/internal/v1/events", ""); code != want {
			t.Errorf("%s reads the feed: %d, want %d", as, code, want)
		}
	}
}

// TestBadInputGetsAProblemDocument: each bad create is refused with a
// problem naming the field, and nothing is stored.
func TestBadInputGetsAProblemDocument(t *testing.T) {
	t.Parallel()
	a := start(t)
	good := map[string]any{"chain_id": 31337, "from": signer, "request_id": "r", "to": bob, "value": "1"}
	with := func(k string, v any) string {
		m := map[string]any{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct{ name, body, want string }{
		{"an unknown chain", with("chain_id", 5), "chain_id: 5 is not a configured chain"},
		{"a signer not configured", with("from", another), "is not a signer configured on chain 31337"},
		{"a malformed address", with("to", "0x1234"), "request body"},
		{"an address without 0x", with("from", strings.TrimPrefix(signer, "0x")), "request body"},
		{"a value over uint256", with("value", "115792089237316195760200000000000000000000000000000000000000000000000000000000"), "value"},
		{"a negative value", with("value", "-1"), "value"},
		{"a value in hex", with("value", "0x10"), "value"},
		{"a value as a number", with("value", 10), "request body"},
		{"data not hex", with("data", "0xzz"), "request body"},
		{"data of odd length", with("data", "0x123"), "request body"},
		{"no request id", with("request_id", nil), "request_id"},
		{"no from", with("from", nil), "from"},
		{"a bad route", with("route", "fast"), "route"},
		{"metadata not an object", with("metadata", []int{1}), "metadata"},
		{"an unknown field", with("nonce", 7), "nonce"},
		{"a creation without data", with("to", nil), "contract creation"},
		{"not JSON", `{"chain_id": `, "request body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", tt.body)
			if code != http.StatusBadRequest || !strings.Contains(string(b), tt.want) {
				t.Errorf("%d %s; want a 400 problem mentioning %q", code, b, tt.want)
			}
		})
	}
	for path, want := range map[string]int{
		"/internal/v1/tx/not-a-uuid":                           400,
		"/internal/v1/tx/0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7": 404,
		"/internal/v1/tx?state=LOST":                           400,
		"/internal/v1/tx?limit=0":                              400,
		"/internal/v1/tx?cursor=garbage":                       400,
		"/internal/v1/tx?signers=31337:0x12":                   400,
		"/internal/v1/tx?signers=0:" + signer:                  400,
		"/internal/v1/events?after=-1":                         400,
		"/internal/v1/events?wait=31":                          400,
	} {
		as := "gateway"
		if code, b := a.Do(t, as, "GET", path, ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, b, want)
		}
	}
	var n int
	if err := a.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tx`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d transactions stored by refused requests (%v)", n, err)
	}
}

// TestSignerStatus: the owner, token, next nonce, counts per state and
// the oldest open transaction of a signer, as an operator reads them.
func TestSignerStatus(t *testing.T) {
	t.Parallel()
	a := start(t)
	path := "/internal/v1/signers/31337/" + signer
	code, b := a.Do(t, "gateway", "GET", path, "")
	if code != http.StatusOK || !strings.Contains(string(b), `"counts":{}`) || strings.Contains(string(b), "owner") {
		t.Fatalf("status of an idle signer: %d %s", code, b)
	}
	for i := range 3 {
		if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody(fmt.Sprintf("s-%d", i), "1")); code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
	}
	store := postgres.New(a.Pool)
	key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signer)}
	token, ok, err := store.Acquire(context.Background(), "node-7", key, time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := store.NextNonce(context.Background(), txmanager.Fence{Node: "node-7", Key: key, Token: token}, nil); err != nil {
		t.Fatal(err)
	}
	code, b = a.Do(t, "gateway", "GET", path, "")
	var st struct {
		Owner        string         `json:"owner"`
		FencingToken int64          `json:"fencing_token"`
		NextNonce    *uint64        `json:"next_nonce"`
		Counts       map[string]int `json:"counts"`
		OldestSince  *time.Time     `json:"oldest_open_since"`
	}
	if err := json.Unmarshal(b, &st); err != nil || code != http.StatusOK {
		t.Fatalf("status: %d %s", code, b)
	}
	if st.Owner != "node-7" || st.FencingToken != token || st.NextNonce == nil || *st.NextNonce != 0 || st.Counts["INIT"] != 3 || st.OldestSince == nil {
		t.Errorf("status %s", b)
	}
	for p, want := range map[string]int{
		"/internal/v1/signers/31337/" + another: http.StatusNotFound,
		"/internal/v1/signers/0/" + signer:      http.StatusBadRequest,
		"/internal/v1/signers/31337/0x1234":     http.StatusBadRequest,
	} {
		if code, b := a.Do(t, "gateway", "GET", p, ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", p, code, b, want)
		}
	}
}

// approvalPolicy writes a signerd policy for chain 31337: approvers alice,
// bob and carol exist, and every transfer of signer needs 1 of alice and
// bob, approved at most 2 hours ahead.
// TestTxCarriesItsFeeCeiling: a transaction's document names the highest
// fee cap txmanager may sign it with, fee bumps included (the lower of its
// own max_fee_per_gas and its signer's configured cap), the fee ceiling an
// approval needs to cover it whatever the market does; without either cap
// there is none.
func TestTxCarriesItsFeeCeiling(t *testing.T) {
	t.Parallel()
	withCap := startServer(t, true, `[{"address": "`+signer+`", "max_fee_per_gas": "200000000000"}]`)
	uncapped := start(t)
	withFee := func(requestID, maxFee string) string {
		return strings.Replace(txmanagertest.TransferBody(requestID, "1"), `"data": "0x",`, `"data": "0x", "max_fee_per_gas": "`+maxFee+`",`, 1)
	}
	for _, tc := range []struct {
		name string
		a    *api
		body string
		want *string
	}{
		{"the signer's cap", withCap, txmanagertest.TransferBody("c-1", "1"), ptr("200000000000")},
		{"the transaction's own, lower cap", withCap, withFee("c-2", "90000000000"), ptr("90000000000")},
		{"the signer's cap, lower than the transaction's", withCap, withFee("c-3", "300000000000"), ptr("200000000000")},
		{"the transaction's cap, the signer has none", uncapped, withFee("u-1", "70000000000"), ptr("70000000000")},
		{"no cap at all", uncapped, txmanagertest.TransferBody("u-2", "1"), nil},
	} {
		code, b := tc.a.Do(t, "gateway", "POST", "/internal/v1/tx", tc.body)
		var tx struct {
			TxID       string  `json:"tx_id"`
			FeeCeiling *string `json:"fee_ceiling"`
		}
		if code != http.StatusCreated || json.Unmarshal(b, &tx) != nil {
			t.Fatalf("%s: create answered %d %s", tc.name, code, b)
		}
		if !reflect.DeepEqual(tx.FeeCeiling, tc.want) {
			t.Errorf("%s: fee_ceiling %v, want %v (%s)", tc.name, deref(tx.FeeCeiling), deref(tc.want), b)
		}
		if code, got := tc.a.Do(t, "gateway", "GET", "/internal/v1/tx/"+tx.TxID, ""); code != http.StatusOK || (tc.want != nil) != strings.Contains(string(got), `"fee_ceiling"`) {
			t.Errorf("%s: get answered %d %s", tc.name, code, got)
		}
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "(none)"
	}
	return *s
}

// TestTxCarriesItsChainsType: a transaction's document names the type its
// chain is configured for, which an approval must sign.
func TestTxCarriesItsChainsType(t *testing.T) {
	t.Parallel()
	for legacy, want := range map[bool]string{false: "eip1559", true: "legacy"} {
		pki := servicetest.PKI(t)
		srv := txmanagertest.Serve(t, pki, txmanagertest.Options{
			Chains: fmt.Sprintf(`{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"], "legacy": %v, "signers": %s}]}`, legacy, oneSigner),
			Wrap:   func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.TxManager, h) },
		})
		a := &api{srv}
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody("typed", "1"))
		var tx struct{ Type string }
		if code != http.StatusCreated || json.Unmarshal(b, &tx) != nil || tx.Type != want {
			t.Errorf("legacy %v: create answered %d %s, want type %q", legacy, code, b, want)
		}
		code, b = a.Do(t, "gateway", "GET", "/internal/v1/tx?limit=1", "")
		if code != http.StatusOK || !strings.Contains(string(b), `"type":"`+want+`"`) {
			t.Errorf("legacy %v: list answered %d %s, want type %q", legacy, code, b, want)
		}
	}
}

// TestFeeCapsUnderTheChainsMinimumTip: on a polygon-pos chain an intent
// whose own fee caps are under the chain's minimum tip (25 gwei) could
// never be sent: it is refused at creation with a problem naming the
// field, and one at the minimum is accepted.
func TestFeeCapsUnderTheChainsMinimumTip(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	srv := txmanagertest.Serve(t, pki, txmanagertest.Options{
		Chains: `{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"], "profile": "polygon-pos", "signers": ` + oneSigner + `}]}`,
		Wrap:   func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.TxManager, h) },
	})
	a := &api{srv}
	body := func(id, tip string) string {
		return fmt.Sprintf(`{"chain_id": 31337, "from": %q, "request_id": %q, "to": %q, "value": "1", "max_priority_fee_per_gas": %q}`, signer, id, bob, tip)
	}
	code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", body("under", "24000000000"))
	if code != http.StatusBadRequest || !strings.Contains(string(b), "max_priority_fee_per_gas: 24000000000 is below chain 31337's minimum priority fee") {
		t.Errorf("a tip cap under the minimum: %d %s; want a 400 problem naming it", code, b)
	}
	if code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", body("at", "25000000000")); code != http.StatusCreated {
		t.Errorf("a tip cap at the minimum: %d %s; want 201", code, b)
	}
}
