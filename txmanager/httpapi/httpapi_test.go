package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/errs"
	signerpkg "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	signer  = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	another = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
	bob     = "0x0000000000000000000000000000000000000b0b"
)

// api is txmanagerd's API over mutual TLS on a real store, one chain and
// one signer configured, every exchange checked against txmanager.yaml.
type api struct {
	url  string
	pki  string
	pool *pgxpool.Pool
}

func start(t testing.TB) *api { return startServer(t, true, oneSigner) }

// startWith starts the API for chain 31337 and signer with opts (its
// Chains and Wrap set here).
func startWith(t testing.TB, opts txmanagertest.Options) *api {
	t.Helper()
	pki := servicetest.PKI(t)
	opts.Chains = `{"chains": [{"chain_id": 31337, "rpc": ["http://127.0.0.1:8545"], "signers": ` + oneSigner + `}]}`
	opts.Wrap = func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.TxManager, h) }
	srv := txmanagertest.Serve(t, pki, opts)
	return &api{url: srv.URL, pki: pki, pool: srv.Pool}
}

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
	return &api{url: srv.URL, pki: pki, pool: srv.Pool}
}

func (a *api) do(t testing.TB, as, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, a.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := servicetest.Client(t, a.pki, as, "txmanager").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func createBody(requestID, value string) string {
	return fmt.Sprintf(`{"chain_id": 31337, "from": %q, "request_id": %q, "to": %q, "value": %q, "data": "0x",
		"route": "auto", "metadata": {"order": "A-1"}}`, signer, requestID, bob, value)
}

type txJSON struct {
	TxID     string          `json:"tx_id"`
	State    string          `json:"state"`
	Value    string          `json:"value"`
	Reason   string          `json:"reason"`
	Metadata json.RawMessage `json:"metadata"`
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

func TestCreateGetCancelAndTheFeed(t *testing.T) {
	t.Parallel()
	a := start(t)
	code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody("order-1", "1000"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	tx := decode[txJSON](t, b)
	if tx.State != "INIT" || tx.Value != "1000" || string(tx.Metadata) != `{"order":"A-1"}` {
		t.Errorf("created %s", b)
	}
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody("order-1", "1000")); code != http.StatusOK || decode[txJSON](t, b).TxID != tx.TxID {
		t.Errorf("the same create again: %d %s, want 200 with %s", code, b, tx.TxID)
	}
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody("order-1", "1001")); code != http.StatusConflict {
		t.Errorf("another body under the id: %d %s, want 409", code, b)
	}
	if code, b := a.do(t, "gateway", "GET", "/internal/v1/tx/"+tx.TxID, ""); code != http.StatusOK || decode[txJSON](t, b).TxID != tx.TxID {
		t.Errorf("get: %d %s", code, b)
	}
	code, b = a.do(t, "gateway", "GET", "/internal/v1/tx?chain_id=31337&from="+signer+"&state=INIT&limit=10", "")
	if list := decode[struct {
		Transactions []txJSON
		NextCursor   *string `json:"next_cursor"`
	}](t, b); code != http.StatusOK || len(list.Transactions) != 1 || list.NextCursor != nil {
		t.Errorf("list: %d %s", code, b)
	}
	if code, b := a.do(t, "gateway", "GET", "/internal/v1/tx/by-request?chain_id=31337&from="+signer+"&request_id=order-1", ""); code != http.StatusOK || decode[txJSON](t, b).TxID != tx.TxID {
		t.Errorf("by request: %d %s", code, b)
	}
	for query, want := range map[string]int{
		"chain_id=31337&from=" + signer + "&request_id=order-9":  404,
		"chain_id=31337&from=" + another + "&request_id=order-1": 404,
		"chain_id=31337&from=" + signer:                          400,
		"chain_id=x&from=" + signer + "&request_id=order-1":      400,
	} {
		if code, b := a.do(t, "gateway", "GET", "/internal/v1/tx/by-request?"+query, ""); code != want {
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
		code, b := a.do(t, "gateway", "GET", "/internal/v1/tx?"+query, "")
		if list := decode[struct{ Transactions []txJSON }](t, b); code != http.StatusOK || len(list.Transactions) != want {
			t.Errorf("list %s: %d %s, want %d transactions", query, code, b, want)
		}
	}
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+tx.TxID+"/cancel", ""); code != http.StatusOK || decode[txJSON](t, b).State != "CANCELLED" {
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
		code, b := a.do(t, "ledger", "GET", fmt.Sprintf("/internal/v1/events?after=%d&limit=10&wait=5", after), "")
		if code != http.StatusOK {
			t.Fatalf("feed: %d %s", code, b)
		}
		events = append(events, decode[struct{ Events []event }](t, b).Events...)
	}
	if len(events) != 2 || events[0].Seq != 1 || events[1].Seq != 2 || events[1].Data["to_state"] != "CANCELLED" || events[1].ID == events[0].ID || !strings.EqualFold(events[0].Signer, signer) {
		t.Fatalf("feed: %+v", events)
	}

	// The transaction's own timeline: its two events, numbered.
	code, b = a.do(t, "gateway", "GET", "/internal/v1/tx/"+tx.TxID+"/events", "")
	if timeline := decode[struct{ Events []event }](t, b).Events; code != http.StatusOK || len(timeline) != 2 || timeline[1].Data["to_state"] != "CANCELLED" {
		t.Errorf("timeline: %d %s", code, b)
	}
	if code, _ := a.do(t, "gateway", "GET", "/internal/v1/tx/0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7/events", ""); code != http.StatusNotFound {
		t.Errorf("timeline of an unknown tx: %d, want 404", code)
	}

	// A long poll answers with what arrives while it waits.
	got := make(chan []byte, 1)
	go func() {
		_, b := a.do(t, "ledger", "GET", "/internal/v1/events?after=2&wait=20", "")
		got <- b
	}()
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody("order-2", "5")); code != http.StatusCreated {
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
	if code, b := a.do(t, "ledger", "GET", "/internal/v1/events?after=3&wait=1", ""); code != http.StatusOK || string(b) != `{"events":[],"head_seq":3}`+"\n" {
		t.Errorf("empty long poll: %d %q", code, b)
	}
}

func TestOnlyTheGatewayCreatesAndTheLedgerReadsTheFeed(t *testing.T) {
	t.Parallel()
	a := start(t)
	for _, as := range []string{"ledger", "signer", "mevrouter"} {
		if code, _ := a.do(t, as, "POST", "/internal/v1/tx", createBody("x", "1")); code != http.StatusForbidden {
			t.Errorf("%s creates: %d, want 403", as, code)
		}
	}
	for as, want := range map[string]int{"gateway": 200, "ledger": 200, "signer": 403, "mevrouter": 403} {
		if code, _ := a.do(t, as, "GET", "/internal/v1/events", ""); code != want {
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
			code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", tt.body)
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
		if code, b := a.do(t, as, "GET", path, ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", path, code, b, want)
		}
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM tx`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d transactions stored by refused requests (%v)", n, err)
	}
}

// TestSignerStatus: the owner, token, next nonce, counts per state and
// the oldest open transaction of a signer, as an operator reads them.
func TestSignerStatus(t *testing.T) {
	t.Parallel()
	a := start(t)
	path := "/internal/v1/signers/31337/" + signer
	code, b := a.do(t, "gateway", "GET", path, "")
	if code != http.StatusOK || !strings.Contains(string(b), `"counts":{}`) || strings.Contains(string(b), "owner") {
		t.Fatalf("status of an idle signer: %d %s", code, b)
	}
	for i := range 3 {
		if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody(fmt.Sprintf("s-%d", i), "1")); code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, b)
		}
	}
	store := postgres.New(a.pool)
	key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signer)}
	token, ok, err := store.Acquire(context.Background(), "node-7", key, time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := store.NextNonce(context.Background(), txmanager.Fence{Node: "node-7", Key: key, Token: token}, nil); err != nil {
		t.Fatal(err)
	}
	code, b = a.do(t, "gateway", "GET", path, "")
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
		if code, b := a.do(t, "gateway", "GET", p, ""); code != want {
			t.Errorf("GET %s: %d %s, want %d", p, code, b, want)
		}
	}
}

// approvalPolicy writes a signerd policy for chain 31337: approvers alice,
// bob and carol exist, and every transfer of signer needs 1 of alice and
// bob, approved at most 2 hours ahead.
func approvalPolicy(t *testing.T, keys map[string]ed25519.PrivateKey) string {
	t.Helper()
	pub := func(id string) string {
		return base64.StdEncoding.EncodeToString(keys[id].Public().(ed25519.PublicKey))
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(`{"version": "approvals-1", "chains": [31337],
		"approvers": {"alice": "`+pub("alice")+`", "bob": "`+pub("bob")+`", "carol": "`+pub("carol")+`"},
		"rules": [{"id": "approved-payments", "effect": "allow", "match": {"from": ["`+signer+`"]},
			"limits": {"max_fee_per_gas": "1000000000000", "max_gas": 21000, "fee_windows": [{"duration": "24h", "max_fee": "1000000000000000000"}]},
			"approval": {"threshold": 1, "approvers": ["alice", "bob"], "max_ttl": "2h"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func approverKeys(ids ...string) map[string]ed25519.PrivateKey {
	out := map[string]ed25519.PrivateKey{}
	for _, id := range ids {
		seed := sha256.Sum256([]byte("txfence txmanager httpapi test approver " + id))
		out[id] = ed25519.NewKeyFromSeed(seed[:])
	}
	return out
}

// intentOf is the signing request of a transfer of 1 wei from signer to
// bob, as signerd reads the intent an approver signs.
func intentOf(txID string) *signerpkg.Request {
	to := common.HexToAddress(bob)
	return &signerpkg.Request{TxID: txID, ChainID: 31337, From: common.HexToAddress(signer), Type: signerpkg.DynamicFee, To: &to, Value: big.NewInt(1)}
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
	a := startWith(t, txmanagertest.Options{SignerPolicy: approvalPolicy(t, keys)})
	ctx := context.Background()
	waiting, other, idle := a.waiting(t, "a-1"), a.waiting(t, "a-2"), a.create(t, "a-3")
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
		code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", tt.body)
		if !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s; want a problem mentioning %q", tt.name, code, b, tt.want)
		}
		wantProblem(t, tt.name, code, b, tt.pointer)
	}
	var stored int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM approval`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d approvals stored by refused requests (%v)", stored, err)
	}

	code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", sign("alice", waiting, 30e9, in))
	if code != http.StatusOK || decode[txJSON](t, b).State != "PENDING_APPROVAL" || !strings.Contains(string(b), `"approval_expires_at"`) {
		t.Fatalf("approve: %d %s", code, b)
	}
	// The fee ceiling is stored with the signature it belongs to, for the
	// worker to pass on to signerd.
	var ceiling string
	if err := a.pool.QueryRow(ctx, `SELECT max_fee_per_gas::text FROM approval WHERE tx_id = $1 AND approver = 'alice'`, waiting).Scan(&ceiling); err != nil || ceiling != "30000000000" {
		t.Errorf("stored fee ceiling %q (%v), want 30000000000", ceiling, err)
	}
	// Approved again, the approval and its ceiling are replaced; with
	// bob's, the rule's two approvers hold the two approvals there can be.
	for _, body := range []string{sign("alice", waiting, 45e9, in), sign("bob", waiting, 45e9, in), sign("bob", waiting, 50e9, in)} {
		if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", body); code != http.StatusOK {
			t.Fatalf("approve again: %d %s", code, b)
		}
	}
	if err := a.pool.QueryRow(ctx, `SELECT string_agg(approver || '<=' || max_fee_per_gas::text, ' ' ORDER BY approver) FROM approval WHERE tx_id = $1`,
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
		if code, b := a.do(t, c.as, "POST", c.path, approval("bob", expiry, sig)); code != c.want {
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
	a := startWith(t, txmanagertest.Options{SignerPolicy: approvalPolicy(t, keys)})
	ctx := context.Background()
	waiting, idle := a.waiting(t, "r-1"), a.create(t, "r-2")
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
		code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/reject", tt.body)
		wantProblem(t, tt.name, code, b, tt.pointer)
	}
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM approval`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d decisions stored by refused rejections (%v)", n, err)
	}
	if code, b := a.do(t, "gateway", "GET", "/internal/v1/tx/"+waiting, ""); decode[txJSON](t, b).State != "PENDING_APPROVAL" {
		t.Fatalf("after refused rejections: %d %s", code, b)
	}

	good := reject("bob")
	for range 2 { // the same rejection again answers the same
		code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/reject", rejectionJSON(good))
		if tx := decode[txJSON](t, b); code != http.StatusOK || tx.State != "FAILED" || tx.Reason != "approval_rejected" {
			t.Fatalf("reject: %d %s", code, b)
		}
	}
	var signature []byte
	if err := a.pool.QueryRow(ctx, `SELECT signature FROM approval WHERE tx_id = $1 AND approver = 'bob' AND decision = 'reject'`, waiting).Scan(&signature); err != nil ||
		!bytes.Equal(signature, good.Signature) {
		t.Errorf("the recorded rejection's signature %x (%v), want %x", signature, err, good.Signature)
	}
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM event WHERE tx_id = $1 AND payload->>'to_state' = 'FAILED'
		AND payload->>'approver' = 'bob'`, waiting).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d rejection events naming bob (%v), want 1", n, err)
	}
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals",
		approvalJSON(signerpkg.SignApproval(keys["alice"], "alice", intentOf(waiting), big.NewInt(30e9), in))); code != http.StatusConflict {
		t.Errorf("approving a rejected transaction: %d %s", code, b)
	}
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+idle+"/reject", rejectionJSON(good)); code != http.StatusConflict {
		t.Errorf("rejecting a transaction not waiting for approvals: %d %s", code, b)
	}
}

// TestApprovalsNeedASignerToCheckThem: a node without a signer refuses
// approvals and rejections as unavailable rather than store them
// unchecked.
func TestApprovalsNeedASignerToCheckThem(t *testing.T) {
	t.Parallel()
	a := start(t)
	waiting := a.waiting(t, "n-1")
	keys := approverKeys("alice")
	body := approvalJSON(signerpkg.SignApproval(keys["alice"], "alice", intentOf(waiting), big.NewInt(30e9), time.Now().Add(time.Hour)))
	if code, b := a.do(t, "gateway", "POST", "/internal/v1/tx/"+waiting+"/approvals", body); code != http.StatusServiceUnavailable {
		t.Errorf("approve without a signer: %d %s, want 503", code, b)
	}
}

func (a *api) create(t *testing.T, requestID string) string {
	t.Helper()
	code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody(requestID, "1"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	return decode[txJSON](t, b).TxID
}

// waiting creates a transaction and parks it as the owner's worker does
// after the policy's dry run.
func (a *api) waiting(t *testing.T, requestID string) string {
	t.Helper()
	id := a.create(t, requestID)
	if _, err := a.pool.Exec(context.Background(), `UPDATE tx SET state = 'PENDING_APPROVAL', gas_limit = 21000,
		approval_expires_at = now() + interval '1 hour' WHERE tx_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

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
		return strings.Replace(createBody(requestID, "1"), `"data": "0x",`, `"data": "0x", "max_fee_per_gas": "`+maxFee+`",`, 1)
	}
	for _, tc := range []struct {
		name string
		a    *api
		body string
		want *string
	}{
		{"the signer's cap", withCap, createBody("c-1", "1"), ptr("200000000000")},
		{"the transaction's own, lower cap", withCap, withFee("c-2", "90000000000"), ptr("90000000000")},
		{"the signer's cap, lower than the transaction's", withCap, withFee("c-3", "300000000000"), ptr("200000000000")},
		{"the transaction's cap, the signer has none", uncapped, withFee("u-1", "70000000000"), ptr("70000000000")},
		{"no cap at all", uncapped, createBody("u-2", "1"), nil},
	} {
		code, b := tc.a.do(t, "gateway", "POST", "/internal/v1/tx", tc.body)
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
		if code, got := tc.a.do(t, "gateway", "GET", "/internal/v1/tx/"+tx.TxID, ""); code != http.StatusOK || (tc.want != nil) != strings.Contains(string(got), `"fee_ceiling"`) {
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
		a := &api{url: srv.URL, pki: pki, pool: srv.Pool}
		code, b := a.do(t, "gateway", "POST", "/internal/v1/tx", createBody("typed", "1"))
		var tx struct{ Type string }
		if code != http.StatusCreated || json.Unmarshal(b, &tx) != nil || tx.Type != want {
			t.Errorf("legacy %v: create answered %d %s, want type %q", legacy, code, b, want)
		}
		code, b = a.do(t, "gateway", "GET", "/internal/v1/tx?limit=1", "")
		if code != http.StatusOK || !strings.Contains(string(b), `"type":"`+want+`"`) {
			t.Errorf("legacy %v: list answered %d %s, want type %q", legacy, code, b, want)
		}
	}
}
