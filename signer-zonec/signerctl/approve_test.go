package signerctl

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
)

// approverRun runs the approver command and returns its output.
func approverRun(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := approverCommand(args, strings.NewReader(stdin), &out)
	return out.String(), err
}

// newApprover creates a key file for id in dir and returns its path and
// the policy line the command printed.
func newApprover(t *testing.T, dir, id string) (path, line string) {
	t.Helper()
	path = filepath.Join(dir, id+".key")
	line, err := approverRun(t, "", "new", "--out", path, "--id", id)
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(line)
}

const approvalRequestJSON = `{
  "tx_id": "01JD6Z4Q4W0000000000000000",
  "chain_id": 1,
  "from": "0x1000000000000000000000000000000000000001",
  "type": "eip1559",
  "to": "0x4000000000000000000000000000000000000004",
  "value": "50000000000000000000",
  "data": "0x",
  "nonce": 12,
  "max_fee_per_gas": "30000000000"
}`

// TestApprovalFromTheCommandSatisfiesThePolicy: keys made by `approver new`,
// listed in a policy by the lines it printed, sign with `approver sign` an
// approval that policy counts, for the request signerd then evaluates
// (with its gas and its fees, up to the fee ceiling the approver signed:
// a fee bump above it needs new approvals).
func TestApprovalFromTheCommandSatisfiesThePolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFiles := map[string]string{}
	var lines []string
	for _, id := range []string{"alice", "bob", "carol"} {
		path, line := newApprover(t, dir, id)
		keyFiles[id] = path
		lines = append(lines, line)
	}
	p, err := policy.Parse([]byte(`{"version": "approve-test", "chains": [1],
		"approvers": {` + strings.Join(lines, ", ") + `},
		"rules": [{"id": "treasury", "effect": "allow",
			"match": {"from": ["0x1000000000000000000000000000000000000001"]},
			"limits": {"max_value_per_tx": "100000000000000000000", "windows": [{"duration": "24h", "max_value": "250000000000000000000"}],
				"max_fee_per_gas": "300000000000", "max_gas": 21000, "fee_windows": [{"duration": "24h", "max_fee": "1000000000000000000"}]},
			"approval": {"threshold": 2, "approvers": ["alice", "bob", "carol"], "max_ttl": "2h"}}]}`))
	if err != nil {
		t.Fatalf("the printed lines do not make a policy: %v", err)
	}

	reqFile := filepath.Join(dir, "request.json")
	if err := os.WriteFile(reqFile, []byte(approvalRequestJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	sign := func(id string, args ...string) signer.Approval {
		t.Helper()
		out, err := approverRun(t, approvalRequestJSON, append([]string{"sign", "--key", keyFiles[id]}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var aj approvalJSON
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&aj); err != nil {
			t.Fatalf("approval output %q: %v", out, err)
		}
		a, err := aj.approval()
		if err != nil {
			t.Fatal(err)
		}
		if a.Approver != id || a.MaxFeePerGas.Cmp(big.NewInt(30e9)) != 0 {
			t.Errorf("approval by %q up to %s wei per gas, want %q up to the request file's 30 gwei", a.Approver, a.MaxFeePerGas, id)
		}
		return a
	}
	alice := sign("alice", "--request", reqFile)
	carol := sign("carol", "--request", "-", "--ttl", "90m")

	to := common.HexToAddress("0x4000000000000000000000000000000000000004")
	value, _ := new(big.Int).SetString("50000000000000000000", 10)
	req := &signer.Request{
		TxID: "01JD6Z4Q4W0000000000000000", ChainID: 1, From: common.HexToAddress("0x1000000000000000000000000000000000000001"),
		Nonce: 40, Type: signer.DynamicFee, To: &to, Value: value, Gas: 21000,
		MaxFeePerGas: big.NewInt(30e9), MaxPriorityFeePerGas: big.NewInt(1e9),
	}
	now := time.Now()
	evaluate := func(approvals ...signer.Approval) signer.Decision {
		t.Helper()
		req.Approvals = approvals
		d, err := p.Evaluate(context.Background(), req, now, nothingSigned{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	type got struct {
		Verdict  signer.Verdict
		Approved []string
	}
	for _, tc := range []struct {
		name      string
		approvals []signer.Approval
		want      got
	}{
		{"one approval", []signer.Approval{alice}, got{signer.NeedsApproval, []string{"alice"}}},
		{"two approvals", []signer.Approval{carol, alice}, got{signer.Allow, []string{"alice", "carol"}}},
	} {
		d := evaluate(tc.approvals...)
		if diff := cmp.Diff(tc.want, got{d.Verdict, d.Approved}); diff != "" {
			t.Errorf("%s (-want +got):\n%s\nreasons: %q", tc.name, diff, d.Reasons)
		}
	}

	// They cover fee bumps up to the ceiling, and no further.
	req.MaxFeePerGas, req.MaxPriorityFeePerGas = big.NewInt(30e9), big.NewInt(3e9)
	if d := evaluate(alice, carol); d.Verdict != signer.Allow {
		t.Errorf("a fee bump to the ceiling: %s %q", d.Verdict, d.Reasons)
	}
	req.MaxFeePerGas = big.NewInt(30e9 + 1)
	if d := evaluate(alice, carol); d.Verdict != signer.NeedsApproval || len(d.Approved) != 0 || !strings.Contains(strings.Join(d.Reasons, "\n"), "covers fee caps up to 30000000000 wei per gas") {
		t.Errorf("a fee bump above the ceiling: %s, approved %v, %q", d.Verdict, d.Approved, d.Reasons)
	}
	req.MaxFeePerGas, req.MaxPriorityFeePerGas = big.NewInt(30e9), big.NewInt(1e9)

	// The approvals are for this intent and tx id only.
	req.Value = new(big.Int).Add(value, big.NewInt(1))
	if d := evaluate(alice, carol); d.Verdict != signer.NeedsApproval || len(d.Approved) != 0 {
		t.Errorf("another value: %s, approved %v", d.Verdict, d.Approved)
	}
	req.Value, req.TxID = value, "another-tx"
	if d := evaluate(alice, carol); d.Verdict != signer.NeedsApproval || len(d.Approved) != 0 {
		t.Errorf("another tx id: %s, approved %v", d.Verdict, d.Approved)
	}

	// Expiry: --ttl from now, in whole seconds.
	if d := carol.Expiry.Sub(now); d < 89*time.Minute || d > 90*time.Minute || carol.Expiry.Nanosecond() != 0 {
		t.Errorf("a 90m approval expires at %s (now %s)", carol.Expiry, now)
	}
}

func TestApproverNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, line := newApprover(t, dir, "alice@example.com")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %s, want 0600", st.Mode().Perm())
	}
	id, priv, err := policy.ReadApproverKey(path)
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]string
	if err := json.Unmarshal([]byte("{"+line+"}"), &entry); err != nil {
		t.Fatalf("printed %q, not a JSON member: %v", line, err)
	}
	pub, err := policy.ParsePublicKey(entry[id])
	if err != nil || !pub.Equal(priv.Public()) || id != "alice@example.com" {
		t.Errorf("printed %q for a key file of %q", line, id)
	}

	before, _ := os.ReadFile(path)
	if _, err := approverRun(t, "", "new", "--out", path, "--id", "bob"); err == nil {
		t.Error("new overwrote an existing key file")
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a refused new changed the existing key file")
	}
	if strings.Contains(line, string(before)) {
		t.Error("the printed line holds the key file")
	}
}

func TestApproverRefusesBadUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key, _ := newApprover(t, dir, "alice")
	loose := filepath.Join(dir, "loose.key")
	b, _ := os.ReadFile(key)
	if err := os.WriteFile(loose, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	notKey := filepath.Join(dir, "not.key")
	if err := os.WriteFile(notKey, []byte(`{"kind": "something-else", "id": "alice", "seed": "", "public_key": ""}`), 0o600); err != nil {
		t.Fatal(err)
	}
	edit := func(from, to string) string { return strings.Replace(approvalRequestJSON, from, to, 1) }
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"no command", "", nil, "usage: signerctl approver"},
		{"unknown command", "", []string{"approve"}, `unknown approver command "approve"`},
		{"new without id", "", []string{"new", "--out", filepath.Join(dir, "x.key")}, "needs --out and --id"},
		{"new with a bad id", "", []string{"new", "--out", filepath.Join(dir, "y.key"), "--id", "al ice"}, "an approver id is"},
		{"new with stray arguments", "", []string{"new", "--out", filepath.Join(dir, "z.key"), "--id", "z", "extra"}, "unexpected arguments extra"},
		{"sign without request", "", []string{"sign", "--key", key}, "needs --key and --request"},
		{"sign with a zero ttl", approvalRequestJSON, []string{"sign", "--key", key, "--request", "-", "--ttl", "0s"}, "--ttl 0s"},
		{"sign with a year's ttl", approvalRequestJSON, []string{"sign", "--key", key, "--request", "-", "--ttl", "8760h"}, "at most 720h"},
		{"sign with an unknown flag", "", []string{"sign", "--key", key, "--request", "-", "--force"}, "flag provided but not defined: -force"},
		{"key readable by others", approvalRequestJSON, []string{"sign", "--key", loose, "--request", "-"}, "lets others read it"},
		{"not a key file", approvalRequestJSON, []string{"sign", "--key", notKey, "--request", "-"}, "not an approver key file"},
		{"missing key", approvalRequestJSON, []string{"sign", "--key", filepath.Join(dir, "none.key"), "--request", "-"}, "no such file"},
		{"gas is not approved", edit(`"nonce": 12`, `"nonce": 12, "gas": 21000`), []string{"sign", "--key", key, "--request", "-"}, `unknown field "gas"`},
		{"no fee ceiling", edit(`,
  "max_fee_per_gas": "30000000000"`, ``), []string{"sign", "--key", key, "--request", "-"}, "max_fee_per_gas is required"},
		{"a fee ceiling in gwei", edit(`"30000000000"`, `"30 gwei"`), []string{"sign", "--key", key, "--request", "-"}, `max_fee_per_gas "30 gwei": want a decimal amount of wei`},
		{"a fee ceiling as a number", edit(`"30000000000"`, `30000000000`), []string{"sign", "--key", key, "--request", "-"}, "max_fee_per_gas"},
		{"a fee ceiling beyond uint256", edit(`"30000000000"`, `"115792089237316195423570985008687907853269984665640564039457584007913129639936"`), []string{"sign", "--key", key, "--request", "-"}, "max_fee_per_gas"},
		{"a gas price is no ceiling", edit(`"max_fee_per_gas"`, `"gas_price"`), []string{"sign", "--key", key, "--request", "-"}, `unknown field "gas_price"`},
		{"duplicate to", edit(`"data": "0x",`, `"data": "0x", "to": "0xd90e2f925da726b50c4ed8d0fb90ad053324f31b",`), []string{"sign", "--key", key, "--request", "-"}, "to: duplicate key"},
		{"field in another case", edit(`"value"`, `"Value"`), []string{"sign", "--key", key, "--request", "-"}, `unknown field "Value"`},
		{"two requests", approvalRequestJSON + approvalRequestJSON, []string{"sign", "--key", key, "--request", "-"}, "data after the object"},
		{"bad checksum", edit(`0x1000000000000000000000000000000000000001`, `0x1000000000000000000000000000000000000aBc`), []string{"sign", "--key", key, "--request", "-"}, "from"},
		{"bad type", edit(`"eip1559"`, `"eip4844"`), []string{"sign", "--key", key, "--request", "-"}, `type "eip4844"`},
		{"bad value", edit(`"50000000000000000000"`, `"50 ether"`), []string{"sign", "--key", key, "--request", "-"}, `value "50 ether"`},
		{"bad data", edit(`"data": "0x"`, `"data": "0xabc"`), []string{"sign", "--key", key, "--request", "-"}, "data: want 0x"},
		{"creation without data", edit(`"to": "0x4000000000000000000000000000000000000004",`, ``), []string{"sign", "--key", key, "--request", "-"}, "needs data"},
		{"no tx id", edit(`"tx_id": "01JD6Z4Q4W0000000000000000"`, `"tx_id": ""`), []string{"sign", "--key", key, "--request", "-"}, "tx_id is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := approverRun(t, tc.stdin, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
			if out != "" {
				t.Errorf("printed %q on failure", out)
			}
		})
	}
}

// TestApprovalRequestIntent: the intent the command signs is the one signerd
// computes from the same fields, whatever nonce, gas and fees, and the fee
// ceiling is the file's.
func TestApprovalRequestIntent(t *testing.T) {
	t.Parallel()
	got, ceiling, err := parseApprovalRequest([]byte(`{"tx_id": "t", "chain_id": 8453, "from": "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266", "type": "legacy", "value": "0", "data": "0x6080604052", "max_fee_per_gas": "7"}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if ceiling.Cmp(big.NewInt(7)) != 0 {
		t.Errorf("fee ceiling %s, want the file's 7", ceiling)
	}
	want := &signer.Request{
		TxID: "t", ChainID: 8453, From: common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"), Type: signer.Legacy,
		Value: big.NewInt(0), Data: []byte{0x60, 0x80, 0x60, 0x40, 0x52}, Nonce: 9, Gas: 1e6, GasPrice: big.NewInt(1),
	}
	if got.Intent() != want.Intent() || got.TxID != want.TxID {
		t.Errorf("intent %s, want %s", got.Intent().Hex(), want.Intent().Hex())
	}
}

// nothingSigned is the record of a signer that has signed nothing yet: the
// policy's value and fee windows read it.
type nothingSigned struct{}

func (nothingSigned) Value(context.Context, time.Duration) (*big.Int, error) {
	return new(big.Int), nil
}
func (nothingSigned) Token(context.Context, common.Address, time.Duration) (*big.Int, error) {
	return new(big.Int), nil
}
func (nothingSigned) Fees(context.Context, time.Duration) (*big.Int, error) { return new(big.Int), nil }

// TestRejectionFromTheCommandVerifies: `approver sign --reject` signs a
// rejection (no fee ceiling needed) that verifies for the request's
// intent and tx id with the approver's public key, and not as an
// approval, nor for another transaction.
func TestRejectionFromTheCommandVerifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, line := newApprover(t, dir, "bob")
	_, pubB64, _ := strings.Cut(line, ": ")
	pubRaw, err := base64.StdEncoding.DecodeString(strings.Trim(pubB64, `"`))
	if err != nil {
		t.Fatalf("the printed public key %q: %v", pubB64, err)
	}
	pub := ed25519.PublicKey(pubRaw)
	noCeiling := strings.Replace(approvalRequestJSON, `,
  "max_fee_per_gas": "30000000000"`, "", 1)
	out, err := approverRun(t, noCeiling, "sign", "--key", path, "--request", "-", "--reject", "--ttl", "30m")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Approver  string    `json:"approver"`
		Expiry    time.Time `json:"expiry"`
		Signature string    `json:"signature"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.Approver != "bob" {
		t.Fatalf("rejection %q: %v", out, err)
	}
	sig, err := base64.StdEncoding.DecodeString(got.Signature)
	if err != nil {
		t.Fatal(err)
	}
	req, _, err := parseApprovalRequest([]byte(noCeiling), false)
	if err != nil {
		t.Fatal(err)
	}
	rej := signer.Rejection{Approver: got.Approver, Expiry: got.Expiry, Signature: sig}
	if !signer.VerifyRejection(pub, req, rej) {
		t.Error("the rejection does not verify for its request")
	}
	other := *req
	other.TxID = "another-tx"
	if signer.VerifyRejection(pub, &other, rej) {
		t.Error("the rejection verifies for another transaction")
	}
	if signer.VerifyApproval(pub, req, signer.Approval{Approver: "bob", MaxFeePerGas: big.NewInt(30e9), Expiry: got.Expiry, Signature: sig}) {
		t.Error("the rejection's signature verifies as an approval")
	}
	// An approval still needs its ceiling.
	if _, err := approverRun(t, noCeiling, "sign", "--key", path, "--request", "-"); err == nil || !strings.Contains(err.Error(), "max_fee_per_gas is required") {
		t.Errorf("an approval without a fee ceiling: %v", err)
	}
}
