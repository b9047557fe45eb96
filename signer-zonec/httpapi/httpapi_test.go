package httpapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/openapi"
	"github.com/txfence/txfence/openapi/openapitest"
	"github.com/txfence/txfence/shared/errs"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/httpapi"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// api is signerd's API over mutual TLS on a real store, with the
// development policy and anvil's public keys.
type api struct {
	url  string
	pki  string
	pool *pgxpool.Pool
	logs *logtest.Buffer
}

func start(t *testing.T) *api { return startWith(t, "") }

// startWith starts the API with the policy file given (the development
// policy when empty).
func startWith(t *testing.T, policyFile string) *api {
	t.Helper()
	logs := &logtest.Buffer{}
	pki := servicetest.PKI(t)
	srv := signertest.StartServer(t, signertest.ServerOptions{
		PKI:        pki,
		PolicyFile: policyFile,
		Logger:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		// Every exchange of every test here is checked against signer.yaml.
		Wrap: func(h http.Handler) http.Handler { return openapitest.Conform(t, openapi.Signer, h) },
	})
	return &api{url: srv.URL, pki: pki, pool: srv.Pool, logs: logs}
}

func (a *api) post(t *testing.T, as, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := servicetest.Client(t, a.pki, as, "signer").Post(a.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func transferJSON(txID string, nonce int, value string) string {
	return fmt.Sprintf(`{"tx_id":%q,"chain_id":31337,"from":%q,"nonce":%d,"type":"eip1559",
		"to":%q,"value":%q,"data":"0x","gas":21000,"max_fee_per_gas":"30000000000","max_priority_fee_per_gas":"1000000000"}`,
		txID, signertest.DevAddress(0).Hex(), nonce, signertest.DevAddress(1).Hex(), value)
}

type signResult struct {
	TxID     string `json:"tx_id"`
	Outcome  string `json:"outcome"`
	TxHash   string `json:"tx_hash"`
	RawTx    string `json:"raw_tx"`
	AuditSeq uint64 `json:"audit_seq"`
	Decision struct {
		Verdict    string `json:"verdict"`
		RuleID     string `json:"rule_id"`
		PolicyHash string `json:"policy_hash"`
	} `json:"decision"`
}

func TestSignOverMTLS(t *testing.T) {
	t.Parallel()
	a := start(t)
	resp, body := a.post(t, "txmanager", "/v1/sign", transferJSON("tx-1", 0, "1000"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign: %d %s", resp.StatusCode, body)
	}
	var res signResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Outcome != "signed" || res.Decision.RuleID != "anvil-calls" || res.AuditSeq != 1 {
		t.Fatalf("result %+v", res)
	}
	raw, err := hexutil.Decode(res.RawTx)
	if err != nil {
		t.Fatal(err)
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	from, err := types.Sender(types.LatestSignerForChainID(big.NewInt(31337)), &tx)
	if err != nil || from != signertest.DevAddress(0) || tx.Hash().Hex() != res.TxHash {
		t.Errorf("signed tx recovers to %s (%v), hash %s vs %s", from.Hex(), err, tx.Hash().Hex(), res.TxHash)
	}

	// A batch: a new nonce, the same request again, and another intent at
	// the first nonce.
	resp, body = a.post(t, "txmanager", "/v1/sign/batch", `{"requests":[`+transferJSON("tx-2", 1, "5")+`,`+
		transferJSON("tx-1", 0, "1000")+`,`+transferJSON("tx-3", 0, "7")+`]}`)
	var batch struct{ Results []signResult }
	if err := json.Unmarshal(body, &batch); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("batch: %d %s", resp.StatusCode, body)
	}
	var got []string
	for _, r := range batch.Results {
		got = append(got, r.Outcome)
	}
	if strings.Join(got, ",") != "signed,replayed,refused" {
		t.Errorf("batch outcomes %v", got)
	}

	resp, body = a.post(t, "txmanager", "/v1/evaluate", `{"tx_id":"tx-9","chain_id":1,"from":"`+signertest.DevAddress(0).Hex()+
		`","type":"legacy","to":"`+signertest.DevAddress(1).Hex()+`","value":"1","gas":21000,"gas_price":"1"}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"verdict":"deny"`) {
		t.Errorf("evaluate on a chain the policy does not list: %d %s", resp.StatusCode, body)
	}

	client := servicetest.Client(t, a.pki, "txmanager", "signer")
	for _, path := range []string{"/v1/keys", "/v1/audit?after=1&limit=2"} {
		r, err := client.Get(a.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, r.StatusCode, b)
		}
		if path == "/v1/keys" && !strings.Contains(string(b), signertest.DevAddress(2).Hex()) {
			t.Errorf("keys: %s", b)
		}
		if strings.HasPrefix(path, "/v1/audit") && !strings.Contains(string(b), `"seq":2`) || strings.Contains(string(b), `"seq":1,`) {
			t.Errorf("audit page after 1: %s", b)
		}
	}
}

func TestOnlyTxmanagerGetsIn(t *testing.T) {
	t.Parallel()
	a := start(t)
	for _, identity := range []string{"gateway", "ledger", "mevrouter", "devstack", "stranger"} {
		resp, body := a.post(t, identity, "/v1/sign", transferJSON("tx-1", 0, "1"))
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %s; want 403", identity, resp.StatusCode, body)
		}
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d audit records after refused callers (%v)", n, err)
	}
}

func TestBadInputGetsAProblemDocument(t *testing.T) {
	t.Parallel()
	a := start(t)
	good := transferJSON("tx-1", 0, "1")
	tests := []struct {
		name, path, body, pointer string
	}{
		{"not JSON", "/v1/sign", `{"tx_id":`, ""},
		{"unknown field", "/v1/sign", strings.Replace(good, `"gas":21000`, `"gas":21000,"hash":"0x00"`, 1), ""},
		{"trailing data", "/v1/sign", good + `{}`, ""},
		{"bad address", "/v1/sign", strings.Replace(good, signertest.DevAddress(1).Hex(), "0x1234", 1), "/to"},
		{"value not a uint256", "/v1/sign", strings.Replace(good, `"value":"1"`, `"value":"-1"`, 1), "/value"},
		{"value too large", "/v1/sign", strings.Replace(good, `"value":"1"`, `"value":"`+new(big.Int).Lsh(big.NewInt(1), 256).String()+`"`, 1), "/value"},
		{"data not hex", "/v1/sign", strings.Replace(good, `"data":"0x"`, `"data":"0xzz"`, 1), "/data"},
		{"no nonce", "/v1/sign", strings.Replace(good, `"nonce":0,`, ``, 1), "/nonce"},
		{"blob type", "/v1/sign", strings.Replace(good, `"eip1559"`, `"blob"`, 1), ""},
		{"empty batch", "/v1/sign/batch", `{"requests":[]}`, "/requests"},
		{"oversized batch", "/v1/sign/batch", `{"requests":[` + strings.TrimSuffix(strings.Repeat(good+",", 257), ",") + `]}`, "/requests"},
		{"bad item in a batch", "/v1/sign/batch", `{"requests":[` + good + `,` + strings.Replace(good, `"value":"1"`, `"value":"x"`, 1) + `]}`, "/requests/1/value"},
		{"approval without a fee ceiling", "/v1/sign", withApprovals(good, `{"approver":"alice","expiry":"2030-01-01T00:00:00Z","signature":"`+sig64+`"}`),
			"/approvals/0/max_fee_per_gas"},
		{"approval with a fee ceiling in gwei", "/v1/sign", withApprovals(good, `{"approver":"alice","max_fee_per_gas":"30 gwei","expiry":"2030-01-01T00:00:00Z","signature":"`+sig64+`"}`),
			"/approvals/0/max_fee_per_gas"},
		{"approval with a fee ceiling beyond uint256", "/v1/sign/batch", `{"requests":[` + withApprovals(good,
			`{"approver":"alice","max_fee_per_gas":"`+new(big.Int).Lsh(big.NewInt(1), 256).String()+`","expiry":"2030-01-01T00:00:00Z","signature":"`+sig64+`"}`) + `]}`,
			"/requests/0/approvals/0/max_fee_per_gas"},
	}
	for _, tt := range tests {
		resp, body := a.post(t, "txmanager", tt.path, tt.body)
		var p errs.Problem
		_ = json.Unmarshal(body, &p)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != errs.ProblemContentType {
			t.Errorf("%s: %d %s; want a 400 problem document", tt.name, resp.StatusCode, body)
			continue
		}
		if tt.pointer != "" && (len(p.Errors) == 0 || p.Errors[0].Pointer != tt.pointer) {
			t.Errorf("%s: problem names %+v; want %s", tt.name, p.Errors, tt.pointer)
		}
	}
	var n int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&n); err != nil || n != 0 {
		t.Errorf("bad input left %d audit records (%v)", n, err)
	}
}

// sig64 is 64 zero bytes in base64: the shape of an Ed25519 signature.
var sig64 = base64.StdEncoding.EncodeToString(make([]byte, 64))

// withApprovals adds approvals (JSON objects) to a signing request's JSON.
func withApprovals(body string, approvals ...string) string {
	return strings.TrimSuffix(body, "}") + `,"approvals":[` + strings.Join(approvals, ",") + `]}`
}

// approvalJSON is an approval as txmanager passes it on.
func approvalJSON(a signer.Approval) string {
	return fmt.Sprintf(`{"approver":%q,"max_fee_per_gas":%q,"expiry":%q,"signature":%q}`,
		a.Approver, a.MaxFeePerGas.String(), a.Expiry.UTC().Format(time.RFC3339), base64.StdEncoding.EncodeToString(a.Signature))
}

// TestAFeeBumpAboveTheApprovalsCeilingNeedsNewApprovals: a policy wants
// alice's approval for every transfer of the first dev account. Signed at
// 30 gwei with her approval up to 40 gwei, the transaction is bumped to 40
// gwei under the same approval; a bump to 44 gwei is above it and waits
// for a new one, which then lets it through.
func TestAFeeBumpAboveTheApprovalsCeilingNeedsNewApprovals(t *testing.T) {
	t.Parallel()
	alice := signertest.ApproverKey("alice")
	policyFile := signertest.ApprovalPolicy{RuleID: "approved-transfers", From: signertest.DevAddress(0).Hex(),
		Approvers: map[string]ed25519.PublicKey{"alice": alice.Public().(ed25519.PublicKey)}}.Write(t)
	a := startWith(t, policyFile)
	to := signertest.DevAddress(1)
	intent := &signer.Request{TxID: "tx-1", ChainID: 31337, From: signertest.DevAddress(0), Type: signer.DynamicFee, To: &to, Value: big.NewInt(1)}
	upTo40 := approvalJSON(signer.SignApproval(alice, "alice", intent, big.NewInt(40e9), time.Now().Add(time.Hour)))
	upTo44 := approvalJSON(signer.SignApproval(alice, "alice", intent, big.NewInt(44e9), time.Now().Add(time.Hour)))
	at := func(maxFee, tip string, approvals ...string) string {
		body := strings.Replace(transferJSON("tx-1", 0, "1"), `"max_fee_per_gas":"30000000000","max_priority_fee_per_gas":"1000000000"`,
			`"max_fee_per_gas":"`+maxFee+`","max_priority_fee_per_gas":"`+tip+`"`, 1)
		if len(approvals) > 0 {
			body = withApprovals(body, approvals...)
		}
		return body
	}
	type outcome struct {
		Outcome string
		Reasons []string
	}
	sign := func(body string) outcome {
		t.Helper()
		resp, b := a.post(t, "txmanager", "/v1/sign", body)
		var res struct {
			Outcome  string `json:"outcome"`
			Decision struct {
				Reasons []string `json:"reasons"`
			} `json:"decision"`
		}
		if err := json.Unmarshal(b, &res); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("sign: %d %s", resp.StatusCode, b)
		}
		return outcome{res.Outcome, res.Decision.Reasons}
	}
	for _, step := range []struct {
		name, body, want, reason string
	}{
		{"no approval", at("30000000000", "1000000000"), "needs_approval", "needs 1 of 1 approvals"},
		{"approved up to 40 gwei, at 30", at("30000000000", "1000000000", upTo40), "signed", ""},
		{"bumped to 40 gwei", at("40000000000", "2000000000", upTo40), "signed", ""},
		{"bumped to 44 gwei", at("44000000000", "3000000000", upTo40), "needs_approval",
			`the approval by "alice" covers fee caps up to 40000000000 wei per gas, below this request's 44000000000: a new approval is needed`},
		{"bumped to 44 gwei, approved anew", at("44000000000", "3000000000", upTo44), "signed", ""},
	} {
		got := sign(step.body)
		if got.Outcome != step.want || !strings.Contains(strings.Join(got.Reasons, "\n"), step.reason) {
			t.Errorf("%s: %s %q, want %s saying %q", step.name, got.Outcome, got.Reasons, step.want, step.reason)
		}
	}
}

func TestKeysNeverLogged(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.post(t, "txmanager", "/v1/sign", transferJSON("tx-1", 0, "1"))
	a.post(t, "txmanager", "/v1/sign", transferJSON("tx-2", 0, "2")) // refused: logs an alert
	logs := a.logs.String()
	if !strings.Contains(logs, "double_sign_refused") {
		t.Fatalf("no refusal alert in the logs:\n%s", logs)
	}
	for _, k := range signertest.DevKeys {
		if strings.Contains(strings.ToLower(logs), k) {
			t.Fatal("a private key appears in the logs")
		}
	}
}

// FuzzDecodeSignRequest feeds arbitrary bodies to the decoder the sign
// route uses: it never panics, and whatever it accepts passed every shape
// check and describes a transaction that encodes.
func FuzzDecodeSignRequest(f *testing.F) {
	f.Add([]byte(transferJSON("tx-1", 0, "1")))
	f.Add([]byte(`{"tx_id":"a","chain_id":31337,"from":"0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266","nonce":1,"type":"legacy","to":null,"value":"0","data":"0x6000","gas":100000,"gas_price":"1"}`))
	f.Add([]byte(`{"approvals":[{"approver":"a","expiry":"2030-01-01T00:00:00Z","signature":"AAAA"}]}`))
	f.Add([]byte(`{"approvals":[{"approver":"a","max_fee_per_gas":"30000000000","expiry":"2030-01-01T00:00:00Z","signature":"AAAA"}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"value":"00"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := httpapi.DecodeSignRequest(bytes.NewReader(body), true)
		if err != nil {
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("a bad body is not an invalid-input error: %v", err)
			}
			return
		}
		if err := req.Validate(); err != nil {
			t.Fatalf("accepted a request that fails validation: %v", err)
		}
		if _, err := req.Transaction().EncodeUnsigned(); err != nil {
			t.Fatalf("accepted a request that does not encode: %v", err)
		}
		if _, err := req.SigningHash(); err != nil {
			t.Fatalf("accepted a request with no signing hash: %v", err)
		}
	})
}
