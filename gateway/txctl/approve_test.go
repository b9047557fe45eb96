package txctl_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/gateway/gatewaytest"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/txmanager"
)

// pendingApproval moves a transaction to PENDING_APPROVAL as the signer's
// owner node would when the policy asks for approvals.
func pendingApproval(t *testing.T, g *gatewaytest.Gateway, id string) {
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
// others may read is refused. reject and the pending list work too.
func TestApprove(t *testing.T) {
	t.Parallel()
	g := gatewaytest.Start(t, gatewaytest.Options{})
	ctx := context.Background()
	tx := g.Create(t, g.Acme, signerA, "big-payment")
	id := uuid.MustParse(tx.TxID)
	pendingApproval(t, g, tx.TxID)
	dir := t.TempDir()

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
	key := filepath.Join(dir, "alice.key")
	pub := writeApproverKey(t, key, "alice", 0o600)
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
	r := mustRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key, "--ttl", "2h", "--max-fee", "30000000000")
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
	resp, b := g.Do(t, g.Acme, "POST", "/api/v1/tx", strings.Replace(gatewaytest.Transfer(signerA, "1000"), `"route"`, `"max_fee_per_gas": "40000000000", "route"`, 1),
		"Idempotency-Key", "capped-payment")
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	capped := gatewaytest.Decode[gatewaytest.Tx](t, b)
	pendingApproval(t, g, capped.TxID)
	if r := mustRun(t, g.URL, g.Acme, "approvals"); !strings.Contains(r.stdout, "FEE_CEILING") || !strings.Contains(r.stdout, "40000000000") {
		t.Errorf("approvals does not show the fee ceiling:\n%s", r.stdout)
	}
	if r := mustRun(t, g.URL, g.Acme, "get", capped.TxID); field(t, r.stdout, "fee_ceiling") != "40000000000" {
		t.Errorf("get does not show the fee ceiling:\n%s", r.stdout)
	}
	if r := mustRun(t, g.URL, g.Acme, "approve", capped.TxID, "--key-file", key); field(t, r.stdout, "approval_max_fee_per_gas") != "40000000000 wei" {
		t.Errorf("approve by the transaction's fee_ceiling:\n%s", r.stdout)
	}
	cappedID := uuid.MustParse(capped.TxID)
	if stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{cappedID}); err != nil || len(stored[cappedID]) != 1 || stored[cappedID][0].MaxFeePerGas.Cmp(big.NewInt(40e9)) != 0 {
		t.Errorf("stored approvals of the capped transaction: %v %v, want one up to its fee_ceiling of 40 gwei", stored, err)
	}

	// reject fails the transaction; approving it then is refused.
	if r := mustRun(t, g.URL, g.Acme, "reject", tx.TxID, "--approver", "bob"); field(t, r.stdout, "state") != "FAILED" || field(t, r.stdout, "reason") != "approval_rejected" {
		t.Errorf("reject:\n%s", r.stdout)
	}
	if r := txctlRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key); r.code != 1 || !strings.Contains(r.stderr, "is FAILED: only a transaction waiting for approvals") {
		t.Errorf("approve a failed transaction: exit %d %s", r.code, r.stderr)
	}
	if r := txctlRun(t, g.URL, g.AcmeRead, "reject", tx.TxID, "--approver", "bob"); r.code != 1 || !strings.Contains(r.stderr, "Forbidden") {
		t.Errorf("reject with a tx:read key: exit %d %s", r.code, r.stderr)
	}
}
