package signer_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	signer "github.com/txfence/txfence/signer-zonec"
)

// approverOf derives a test approver's key from its name.
func approverOf(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("txfence decision test approver " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// TestApprovalMessageIsTheDocumentedOne: the approval message is built
// here from docs/signer.md ("Approvals"), not from the code, so that the
// two are checked against each other:
//
//	"txfence/approval/v2" 0x00 ‖ intent (32) ‖ uint64 BE len(tx_id) ‖ tx_id
//	  ‖ max_fee_per_gas (32, BE) ‖ uint64 BE expiry (Unix seconds)
func TestApprovalMessageIsTheDocumentedOne(t *testing.T) {
	t.Parallel()
	req := transfer("tx-42", 5, gwei(30), gwei(1))
	intent := req.Intent()
	expiry := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []byte("txfence/approval/v2\x00")
	want = append(want, intent[:]...)
	want = binary.BigEndian.AppendUint64(want, uint64(len("tx-42")))
	want = append(want, "tx-42"...)
	want = append(want, common.LeftPadBytes(gwei(30).Bytes(), 32)...)
	want = binary.BigEndian.AppendUint64(want, uint64(expiry.Unix()))
	if got := signer.ApprovalMessage(intent, "tx-42", gwei(30), expiry); !bytes.Equal(got, want) {
		t.Errorf("approval message\n got %x\nwant %x", got, want)
	}
}

// TestTheFeeCeilingIsInsideTheSignature: an approval verifies with the
// ceiling it was signed with and no other; without one, or beyond uint256,
// it verifies for nothing; and a v1 approval (no ceiling) no longer
// verifies at all.
func TestTheFeeCeilingIsInsideTheSignature(t *testing.T) {
	t.Parallel()
	priv := approverOf("alice")
	pub := priv.Public().(ed25519.PublicKey)
	req := transfer("tx-1", 5, gwei(30), gwei(1))
	expiry := time.Now().Add(time.Hour)
	a := signer.SignApproval(priv, "alice", req, gwei(30), expiry)
	if !signer.VerifyApproval(pub, req, a) {
		t.Fatal("the approval does not verify as signed")
	}
	if a.MaxFeePerGas.Cmp(gwei(30)) != 0 {
		t.Errorf("the approval carries a ceiling of %s, signed %s", a.MaxFeePerGas, gwei(30))
	}

	for name, ceiling := range map[string]*big.Int{
		"raised a hundredfold": gwei(3000),
		"lowered":              gwei(29),
		"one wei more":         new(big.Int).Add(gwei(30), big.NewInt(1)),
		"none":                 nil,
		"beyond uint256":       new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 256), gwei(30)),
		"negative":             new(big.Int).Neg(gwei(30)),
	} {
		changed := a
		changed.MaxFeePerGas = ceiling
		if signer.VerifyApproval(pub, req, changed) {
			t.Errorf("the approval verifies with its ceiling %s (%v)", name, ceiling)
		}
	}
	// SignApproval copies the ceiling: the caller's value may change.
	mine := gwei(40)
	b := signer.SignApproval(priv, "alice", req, mine, expiry)
	mine.SetInt64(1)
	if !signer.VerifyApproval(pub, req, b) {
		t.Error("an approval changed with the caller's ceiling variable")
	}

	// What approvers signed before the ceiling was in the message.
	intent := req.Intent()
	v1 := []byte("txfence/approval/v1\x00")
	v1 = append(v1, intent[:]...)
	v1 = binary.BigEndian.AppendUint64(v1, uint64(len(req.TxID)))
	v1 = append(v1, req.TxID...)
	v1 = binary.BigEndian.AppendUint64(v1, uint64(a.Expiry.Unix()))
	old := signer.Approval{Approver: "alice", Expiry: a.Expiry, Signature: ed25519.Sign(priv, v1)}
	for _, ceiling := range []*big.Int{nil, new(big.Int), gwei(30)} {
		old.MaxFeePerGas = ceiling
		if signer.VerifyApproval(pub, req, old) {
			t.Errorf("a v1 approval verifies (ceiling %v)", ceiling)
		}
	}
}
