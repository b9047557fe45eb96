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

// writeApproverKey writes a key file as 'signerd approver new' does and
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
//	"txfence/approval/v1" 0x00 ‖ intent ‖ uint64 BE len(tx_id) ‖ tx_id ‖ uint64 BE expiry
//	intent = SHA-256("txfence/intent/v1" 0x00 ‖ uint64 BE chain_id ‖ from ‖ uint8 len(type) ‖ type
//	                 ‖ 0x00, or 0x01 ‖ to ‖ value (32, BE) ‖ uint64 BE len(data) ‖ data)
func approvalMessage(chainID uint64, from, to common.Address, value *big.Int, data []byte, txID string, expiry time.Time) []byte {
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

	msg := []byte("txfence/approval/v1\x00")
	msg = append(msg, intent[:]...)
	msg = binary.BigEndian.AppendUint64(msg, uint64(len(txID)))
	msg = append(msg, txID...)
	return binary.BigEndian.AppendUint64(msg, uint64(expiry.Unix()))
}

// TestApprove: txctl approve signs the docs/signer.md message with the
// approver's key file and posts it; the stored signature verifies with
// the approver's public key. A key file others may read is refused.
// reject and the pending list work too.
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
	if stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{id}); err != nil || len(stored[id]) != 0 {
		t.Fatalf("refused approvals were stored: %v %v", stored, err)
	}

	before := time.Now()
	r := mustRun(t, g.URL, g.Acme, "approve", tx.TxID, "--key-file", key, "--ttl", "2h")
	after := time.Now()
	if field(t, r.stdout, "approved_by") != "alice" || field(t, r.stdout, "state") != "PENDING_APPROVAL" {
		t.Errorf("approve:\n%s", r.stdout)
	}
	stored, err := g.TxM.Store.Approvals(ctx, []uuid.UUID{id})
	if err != nil || len(stored[id]) != 1 {
		t.Fatalf("stored approvals: %v %v", stored, err)
	}
	a := stored[id][0]
	if a.Approver != "alice" || a.Expiry.Nanosecond() != 0 || a.Expiry.Before(before.Add(2*time.Hour).Truncate(time.Second)) || a.Expiry.After(after.Add(2*time.Hour)) {
		t.Errorf("stored approval %+v, want alice's for 2h from now in whole seconds", a)
	}
	msg := approvalMessage(31337, common.HexToAddress(signerA), common.HexToAddress(bob), big.NewInt(1000), nil, tx.TxID, a.Expiry)
	if !ed25519.Verify(pub, msg, a.Signature) {
		t.Errorf("the stored signature does not verify over the docs/signer.md message")
	}
	// And signerd's own check agrees.
	to := common.HexToAddress(bob)
	req := &signer.Request{TxID: tx.TxID, ChainID: 31337, From: common.HexToAddress(signerA), Type: signer.DynamicFee, To: &to, Value: big.NewInt(1000)}
	if !signer.VerifyApproval(pub, req, signer.Approval{Approver: a.Approver, Expiry: a.Expiry, Signature: a.Signature}) {
		t.Errorf("signer.VerifyApproval refuses the approval txctl made")
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
