package txctl_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txctl"
	"github.com/txfence/txfence/txmanager"
)

// pendingApproval moves a transaction to PENDING_APPROVAL as the signer's
// owner node would when the policy asks for approvals.
func pendingApproval(t *testing.T, g *gatewaystack.Gateway, id string) {
	t.Helper()
	ctx := context.Background()
	key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress(signerA)}
	token, ok, err := g.TxM.Store.Acquire(ctx, "node-1", key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire %s: %v %v", key, ok, err)
	}
	if _, err := g.TxM.Store.PendingApproval(ctx, txmanager.Fence{Node: "node-1", Key: key, Token: token}, uuid.MustParse(id), 21000,
		time.Now().Add(time.Hour), txmanager.StateChanged{Rule: "x"}); err != nil {
		t.Fatal(err)
	}
}

// approverPolicy is a signerd policy file that holds every transaction of
// signer A for one approval of the approvers given (id → public key): the
// policy txmanager checks approvals and rejections with before it keeps
// them.
func approverPolicy(t *testing.T, approvers map[string]ed25519.PublicKey) string {
	t.Helper()
	return signertest.ApprovalPolicy{RuleID: "approved-payments", From: signerA, MaxGas: 30_000_000, MaxTTL: "24h", Approvers: approvers}.Write(t)
}

// writeApproverKey writes a key file as 'signerctl approver new' does and
// returns the public key.
func writeApproverKey(t *testing.T, path, id string, mode os.FileMode) ed25519.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.MarshalIndent(map[string]string{
		"kind": "txfence-approver-key-v1", "id": id,
		"seed":       base64.StdEncoding.EncodeToString(priv.Seed()),
		"public_key": base64.StdEncoding.EncodeToString(pub),
	}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(body, '\n'), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return pub
}

// approvalMessage is the message docs/signer.md ("Approvals") says an
// approver signs, built here from the document rather than from the
// signer's code, so that the two are checked against each other:
//
//	"txfence/approval/v2" 0x00 ‖ intent ‖ uint64 BE len(tx_id) ‖ tx_id ‖ max_fee_per_gas (32, BE) ‖ uint64 BE expiry
//	intent = SHA-256("txfence/intent/v1" 0x00 ‖ uint64 BE chain_id ‖ from ‖ uint8 len(type) ‖ type
//	                 ‖ 0x00, or 0x01 ‖ to ‖ value (32, BE) ‖ uint64 BE len(data) ‖ data)
func approvalMessage(chainID uint64, from, to common.Address, value *big.Int, data []byte, txID string, maxFee *big.Int, expiry time.Time) []byte {
	const txType = "eip1559"
	in := []byte("txfence/intent/v1\x00")
	in = binary.BigEndian.AppendUint64(in, chainID)
	in = append(in, from.Bytes()...)
	in = append(in, byte(len(txType)))
	in = append(in, txType...)
	in = append(in, 1)
	in = append(in, to.Bytes()...)
	in = append(in, common.LeftPadBytes(value.Bytes(), 32)...)
	in = binary.BigEndian.AppendUint64(in, uint64(len(data)))
	in = append(in, data...)
	intent := sha256.Sum256(in)

	msg := []byte("txfence/approval/v2\x00")
	msg = append(msg, intent[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(len(txID)))
	msg = append(msg, txID...)
	msg = append(msg, common.LeftPadBytes(maxFee.Bytes(), 32)...)
	return binary.BigEndian.AppendUint64(msg, uint64(expiry.Unix()))
}

// TestApprove: txctl approve signs the docs/signer.md message with the
// approver's key file, up to the fee ceiling --max-fee gives, and posts
// it; the stored signature verifies with the approver's public key and
// that ceiling only. Without --max-fee the ceiling is the transaction's
// fee_ceiling, and a transaction without one needs the flag. A key file
// others may read is refused. A signed rejection fails the transaction,
// and the pending list works too. (--yes throughout:
// TestApproveAsksBeforeSigning tests the question.)
func TestApprove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, bobKey := filepath.Join(dir, "alice.key"), filepath.Join(dir, "bob.key")
	pub := writeApproverKey(t, key, "alice", 0o600)
	g := gatewaystack.Start(t, gatewaystack.Options{SignerPolicy: approverPolicy(t, map[string]ed25519.PublicKey{
		"alice": pub, "bob": writeApproverKey(t, bobKey, "bob", 0o600)})})
	ctx := context.Background()
	tx := g.Create(t, g.Acme, signerA, "big-payment")
	id := uuid.MustParse(tx.TxID)
	pendingApproval(t, g, tx.TxID)

	if r := mustRun(t, g.URL, g.Acme, "approvals"); !strings.Contains(r.stdout, tx.TxID) {
		t.Errorf("approvals:\n%s", r.stdout)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "approvals").stdout, "/api/v1/approvals", "GET", 200, "")

	// Others may read this key file: refused before anything is sent.
	open := filepath.Join(dir, "open.key")
	writeApproverKey(t, open, "alice", 0o644)
	if r := txctlRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", open); r.code != 2 || !strings.Contains(r.stderr, "lets others read it") {
		t.Errorf("a key file with mode 0644: exit %d %s", r.code, r.stderr)
	}
	if r := txctlRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key, "--approver", "bob"); r.code != 2 || !strings.Contains(r.stderr, "approver \"alice\"'s") {
		t.Errorf("--approver other than the key file's: exit %d %s", r.code, r.stderr)
	}
	// The transaction has no max_fee_per_gas of its own and its signer no
	// cap: no fee_ceiling to take, so the approver must name one.
	if r := txctlRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key); r.code != 2 || !strings.Contains(r.stderr, "no fee_ceiling") || !strings.Contains(r.stderr, "--max-fee") {
		t.Errorf("approve without --max-fee nor a fee_ceiling: exit %d %s", r.code, r.stderr)
	}
	for _, bad := range []string{"30gwei", "-1", "030", "0x10", new(big.Int).Lsh(big.NewInt(1), 256).String()} {
		if r := txctlRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key, "--max-fee", bad); r.code != 2 || !strings.Contains(r.stderr, "--max-fee") {
			t.Errorf("approve --max-fee %s: exit %d %s", bad, r.code, r.stderr)
		}
	}
	if stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{id}); err != nil || len(stored[id]) != 0 {
		t.Fatalf("refused approvals were stored: %v %v", stored, err)
	}

	before := time.Now()
	r := mustRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key, "--ttl", "2h", "--max-fee", "30000000000", "--yes")
	after := time.Now()
	if field(t, r.stdout, "approved_by") != "alice" || field(t, r.stdout, "state") != "PENDING_APPROVAL" ||
		field(t, r.stdout, "approval_max_fee_per_gas") != "30000000000 wei" {
		t.Errorf("approve:\n%s", r.stdout)
	}
	stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{id})
	if err != nil || len(stored[id]) != 1 {
		t.Fatalf("stored approvals: %v %v", stored, err)
	}
	a := stored[id][0]
	if a.Approver != "alice" || a.Expiry.Nanosecond() != 0 || a.Expiry.Before(before.Add(2*time.Hour).Truncate(time.Second)) || a.Expiry.After(after.Add(2*time.Hour)) ||
		a.MaxFeePerGas.Cmp(big.NewInt(30e9)) != 0 {
		t.Errorf("stored approval %+v, want alice's up to 30 gwei for 2h from now in whole seconds", a)
	}
	msg := approvalMessage(31337, common.HexToAddress(signerA), common.HexToAddress(bob), big.NewInt(1000), nil, tx.TxID, big.NewInt(30e9), a.Expiry)
	if !ed25519.Verify(pub, msg, a.Signature) {
		t.Errorf("the stored signature does not verify over the docs/signer.md message")
	}
	// And signerd's own check agrees, for that ceiling only.
	to := common.HexToAddress(bob)
	req := &signer.Request{TxID: tx.TxID, ChainID: 31337, From: common.HexToAddress(signerA), Type: signer.DynamicFee, To: &to, Value: big.NewInt(1000)}
	if !signer.VerifyApproval(pub, req, signer.Approval{Approver: a.Approver, MaxFeePerGas: a.MaxFeePerGas, Expiry: a.Expiry, Signature: a.Signature}) {
		t.Errorf("signer.VerifyApproval refuses the approval txctl made")
	}
	if signer.VerifyApproval(pub, req, signer.Approval{Approver: a.Approver, MaxFeePerGas: big.NewInt(3000e9), Expiry: a.Expiry, Signature: a.Signature}) {
		t.Errorf("the approval txctl made up to 30 gwei also verifies up to 3000 gwei")
	}

	// A transaction with a max_fee_per_gas of its own: that is its
	// fee_ceiling, which approve takes when --max-fee is not given.
	resp, b := g.Do(t, g.Acme, "POST", "/api/v1/tx", strings.Replace(gatewaystack.Transfer(signerA, "1000"), `"route"`, `"max_fee_per_gas": "40000000000", "route"`, 1),
		"Idempotency-Key", "capped-payment")
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	capped := servicetest.Decode[gatewaystack.Tx](t, b)
	pendingApproval(t, g, capped.TxID)
	if r := mustRun(t, g.URL, g.Acme, "approvals"); !strings.Contains(r.stdout, "FEE_CEILING") || !strings.Contains(r.stdout, "40000000000") {
		t.Errorf("approvals does not show the fee ceiling:\n%s", r.stdout)
	}
	if r := mustRun(t, g.URL, g.Acme, "get", capped.TxID); field(t, r.stdout, "fee_ceiling") != "40000000000" {
		t.Errorf("get does not show the fee ceiling:\n%s", r.stdout)
	}
	if r := mustRun(t, g.URL, g.Acme, "approve", capped.TxID, "--key-file", key, "--yes"); field(t, r.stdout, "approval_max_fee_per_gas") != "40000000000 wei" {
		t.Errorf("approve by the transaction's fee_ceiling:\n%s", r.stdout)
	}
	cappedID := uuid.MustParse(capped.TxID)
	if stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{cappedID}); err != nil || len(stored[cappedID]) != 1 || stored[cappedID][0].MaxFeePerGas.Cmp(big.NewInt(40e9)) != 0 {
		t.Errorf("stored approvals of the capped transaction: %v %v, want one up to its fee_ceiling of 40 gwei", stored, err)
	}

	// reject shows the intent and asks too; no is nothing sent.
	if r := txctlRunInput(t, g.URL, g.Acme, "n\n", "reject", tx.TxID, "--key-file", bobKey); r.code != 1 || !strings.Contains(r.stderr, "sign this rejection? [y/N]") ||
		row(r.stderr, "rejection_valid_for") != "1h0m0s from your answer" || row(r.stderr, "approval_fee_ceiling") != "" {
		t.Errorf("reject answered no: exit %d\n%s", r.code, r.stderr)
	}
	if r := mustRun(t, g.URL, g.Acme, "get", tx.TxID); field(t, r.stdout, "state") != "PENDING_APPROVAL" {
		t.Fatalf("a rejection answered no was sent:\n%s", r.stdout)
	}
	if r := txctlRun(t, g.URL, g.AcmeRead, "reject", tx.TxID, "--key-file", bobKey, "--yes"); r.code != 1 || !strings.Contains(r.stderr, "Forbidden") {
		t.Errorf("reject with a tx:read key: exit %d %s", r.code, r.stderr)
	}
	// A signed rejection fails the transaction; approving it then is refused.
	if r := mustRun(t, g.URL, g.Acme, "reject", tx.TxID, "--key-file", bobKey, "--yes"); field(t, r.stdout, "state") != "FAILED" ||
		field(t, r.stdout, "reason") != "approval_rejected" || field(t, r.stdout, "rejected_by") != "bob" {
		t.Errorf("reject:\n%s", r.stdout)
	}
	if r := txctlRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key); r.code != 1 || !strings.Contains(r.stderr, "is FAILED: only a transaction waiting for approvals") {
		t.Errorf("approve a failed transaction: exit %d %s", r.code, r.stderr)
	}
}

// erc20Transfer is the call data of an ERC-20 transfer(to, amount),
// encoded here by hand from the ABI rather than by the decoder under test.
func erc20Transfer(to common.Address, amount *big.Int) []byte {
	data := []byte{0xa9, 0x05, 0x9c, 0xbb}
	data = append(data, common.LeftPadBytes(to.Bytes(), 32)...)
	return append(data, common.LeftPadBytes(amount.Bytes(), 32)...)
}

// row is the value of the first line of out that names name, indented or
// not, as txctl aligns name/value pairs; "" when there is none.
func row(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimLeft(l, " "), name+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// TestApproveAsksBeforeSigning: txctl approve prints the decoded intent
// (an ERC-20 transfer here: its token, recipient and amount) and signs
// and posts only when the approver answers yes on standard input. No, an
// empty line, anything else or no answer at all (end of input) signs
// nothing, which the gateway's side confirms: no approval is stored.
// --yes signs without asking, and without reading standard input.
func TestApproveAsksBeforeSigning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	aliceKey, bobKey, carolKey := filepath.Join(dir, "alice.key"), filepath.Join(dir, "bob.key"), filepath.Join(dir, "carol.key")
	alice := writeApproverKey(t, aliceKey, "alice", 0o600)
	g := gatewaystack.Start(t, gatewaystack.Options{SignerPolicy: approverPolicy(t, map[string]ed25519.PublicKey{
		"alice": alice, "bob": writeApproverKey(t, bobKey, "bob", 0o600), "carol": writeApproverKey(t, carolKey, "carol", 0o600)})})
	ctx := context.Background()

	token := common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	recipient := common.HexToAddress("0x90F79bf6EB2c4f870365E785982E1f101E93b906")
	amount, _ := new(big.Int).SetString("123456789000000000000", 10)
	data := erc20Transfer(recipient, amount)
	body := `{"chain_id": 31337, "from": "` + signerA + `", "to": "` + token.Hex() + `", "value": "0", "data": "0x` +
		common.Bytes2Hex(data) + `", "max_fee_per_gas": "40000000000", "route": "public"}`
	resp, b := g.Do(t, g.Acme, "POST", "/api/v1/tx", body, "Idempotency-Key", "token-payment")
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	tx := servicetest.Decode[gatewaystack.Tx](t, b)
	id := uuid.MustParse(tx.TxID)
	pendingApproval(t, g, tx.TxID)
	req := &signer.Request{TxID: tx.TxID, ChainID: 31337, From: common.HexToAddress(signerA), Type: signer.DynamicFee, To: &token, Value: new(big.Int), Data: data}

	stored := func() []txmanager.Approval {
		t.Helper()
		got, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{id})
		if err != nil {
			t.Fatal(err)
		}
		return got[id]
	}

	for _, answer := range []string{"n\n", "no\n", "N\n", "\n", "", "yes please\n", "yy\n", "\x1b[Ay\n"} {
		for _, json := range []bool{false, true} {
			args := []string{"approve", tx.TxID, "--key-file", aliceKey}
			if json {
				args = append([]string{"--json"}, args...)
			}
			r := txctlRunInput(t, g.URL, g.Acme, answer, args...)
			if r.code != 1 || !strings.Contains(r.stderr, "nothing was signed") || r.stdout != "" {
				t.Errorf("answer %q (json %v): exit %d, stdout %q, stderr:\n%s\nwant exit 1, nothing on stdout and a refusal", answer, json, r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, "sign this approval? [y/N]") {
				t.Errorf("answer %q (json %v): no question asked:\n%s", answer, json, r.stderr)
			}
			if answer == "" && !strings.Contains(r.stderr, "--yes") {
				t.Errorf("no answer: the refusal does not say how to sign without asking:\n%s", r.stderr)
			}
			if a := stored(); len(a) != 0 {
				t.Fatalf("answer %q (json %v): the gateway stored approvals %+v", answer, json, a)
			}
		}
	}

	// What the approver is shown before the question: the call decoded,
	// the destination as the token contract, the fees and the ceiling.
	r := txctlRunInput(t, g.URL, g.Acme, "n\n", "approve", tx.TxID, "--key-file", aliceKey, "--ttl", "2h")
	shown, _, _ := strings.Cut(r.stderr, "sign this approval?")
	for name, want := range map[string]string{
		"chain_id":                 "31337",
		"from":                     common.HexToAddress(signerA).Hex(),
		"to":                       token.Hex(),
		"value":                    "0 wei (0 ether)",
		"type":                     "eip1559",
		"call":                     "ERC-20 transfer(address,uint256), token contract " + token.Hex(),
		"recipient":                recipient.Hex(),
		"amount":                   amount.String(),
		"effect":                   "moves " + amount.String() + " units of the token to " + recipient.Hex(),
		"max_fee_per_gas":          "40000000000 wei (40 gwei)",
		"max_priority_fee_per_gas": "not set",
		"gas_limit":                "21000",
		"approval_fee_ceiling":     "40000000000 wei per gas (40 gwei)",
		"approval_valid_for":       "2h0m0s from your answer",
		"approver":                 "alice",
		"intent":                   req.Intent().Hex(),
	} {
		if got := row(shown, name); !strings.HasPrefix(got, want) {
			t.Errorf("%s shows %q, want %q; shown:\n%s", name, got, want, shown)
		}
	}

	// y signs and posts, and only once asked.
	before := time.Now()
	r = txctlRunInput(t, g.URL, g.Acme, "y\n", "approve", tx.TxID, "--key-file", aliceKey)
	if r.code != 0 || field(t, r.stdout, "approved_by") != "alice" || !strings.Contains(r.stderr, "sign this approval? [y/N]") {
		t.Fatalf("answer y: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	a := stored()
	if len(a) != 1 || a[0].Approver != "alice" || a[0].MaxFeePerGas.Cmp(big.NewInt(40e9)) != 0 {
		t.Fatalf("after y: stored approvals %+v, want alice's up to 40 gwei", a)
	}
	// The approval's life starts at the answer, not before the question.
	if a[0].Expiry.Before(before.Add(time.Hour).Truncate(time.Second)) {
		t.Errorf("expiry %s is earlier than an hour after the answer", a[0].Expiry)
	}
	if !signer.VerifyApproval(alice, req, signer.Approval{Approver: "alice", MaxFeePerGas: a[0].MaxFeePerGas, Expiry: a[0].Expiry, Signature: a[0].Signature}) {
		t.Error("the approval signed after y does not verify for the intent shown")
	}

	// --yes: no question, and standard input is not read at all (nil).
	var out, errb strings.Builder
	err := txctl.Run(ctx, []string{"--json", "approve", tx.TxID, "--key-file", bobKey, "--yes"}, testEnv(g.URL, g.Acme), nil, &out, &errb)
	if err != nil || strings.Contains(errb.String(), "[y/N]") || row(errb.String(), "recipient") != recipient.Hex() {
		t.Fatalf("--yes: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	if len(lines(out.String())) != 1 {
		t.Errorf("--json --yes prints %q on stdout, want one JSON document", out.String())
	}
	conforms(t, out.String(), "/api/v1/tx/{tx_id}/approvals", "POST", 200, "")
	if a := stored(); len(a) != 2 {
		t.Errorf("after --yes: %d approvals stored, want alice's and bob's", len(a))
	}
	// Without --yes, no standard input at all is no answer.
	errb.Reset()
	if err := txctl.Run(ctx, []string{"approve", tx.TxID, "--key-file", carolKey}, testEnv(g.URL, g.Acme), nil, io.Discard, &errb); txctl.ExitCode(err) != 1 || !strings.Contains(errb.String(), "nothing was signed") {
		t.Errorf("no standard input: %v\n%s", err, errb.String())
	}
	if a := stored(); len(a) != 2 {
		t.Errorf("without standard input: %d approvals stored, want 2", len(a))
	}
}

// slowReader answers only after a delay: a person reading before typing.
type slowReader struct {
	after  time.Duration
	answer *strings.Reader
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.after > 0 {
		time.Sleep(r.after) // stands for the person, not a wait for the code under test
		r.after = 0
	}
	return r.answer.Read(p)
}

// TestApproveTimeoutIsNotTheReadersTime: --timeout bounds the requests,
// not how long the approver takes to read: an answer given after the
// command's timeout still signs and posts.
func TestApproveTimeoutIsNotTheReadersTime(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "alice.key")
	g := gatewaystack.Start(t, gatewaystack.Options{SignerPolicy: approverPolicy(t, map[string]ed25519.PublicKey{"alice": writeApproverKey(t, key, "alice", 0o600)})})
	tx := g.Create(t, g.Acme, signerA, "slow-reader")
	pendingApproval(t, g, tx.TxID)

	const timeout = 2 * time.Second
	var out, errb strings.Builder
	err := txctl.Run(context.Background(), []string{"--timeout", timeout.String(), "approve", tx.TxID, "--key-file", key, "--max-fee", "30000000000"},
		testEnv(g.URL, g.Acme), &slowReader{after: timeout + timeout/4, answer: strings.NewReader("y\n")}, &out, &errb)
	if err != nil || field(t, out.String(), "approved_by") != "alice" {
		t.Fatalf("an answer after the timeout: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	id := uuid.MustParse(tx.TxID)
	if stored, err := g.TxM.Store.Approvals(context.Background(), []uuid.UUID{id}); err != nil || len(stored[id]) != 1 {
		t.Errorf("stored approvals %v %v, want alice's", stored, err)
	}
}
