package policy

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
)

// ApproverKeyKind marks an approver key file, so that no other JSON file
// is taken for one.
const ApproverKeyKind = "txfence-approver-key-v1"

// ApproverKeyFile is an approver's key file, as `signerctl approver new`
// writes it: the Ed25519 seed and the id the policy knows the approver by.
// The public key is kept too, so a damaged file is noticed instead of
// signing under an unknown key. Approver tools (signerd's, txctl) read it
// with ReadApproverKey; the operator console reads the same format.
type ApproverKeyFile struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	Seed      string `json:"seed"`       // base64, 32 bytes
	PublicKey string `json:"public_key"` // base64, 32 bytes
}

// ReadApproverKey reads an approver key file and returns the approver's id
// and private key. It refuses a file that others may read: a key others
// could read may already be theirs.
func ReadApproverKey(path string) (string, ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", nil, fmt.Errorf("approver key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", nil, fmt.Errorf("approver key %s: mode %s lets others read it; chmod 600 it", path, st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("approver key: %w", err)
	}
	defer clear(raw)
	var kf ApproverKeyFile
	if err := DecodeStrict(raw, &kf); err != nil || kf.Kind != ApproverKeyKind {
		return "", nil, fmt.Errorf("approver key %s: not an approver key file", path)
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(kf.Seed)
	if err != nil || len(seed) != ed25519.SeedSize {
		return "", nil, fmt.Errorf("approver key %s: the seed is not 32 bytes of base64", path)
	}
	defer clear(seed)
	priv := ed25519.NewKeyFromSeed(seed)
	if base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)) != kf.PublicKey {
		clear(priv)
		return "", nil, fmt.Errorf("approver key %s: the seed does not give the public key the file lists", path)
	}
	if !ValidID(kf.ID) {
		clear(priv)
		return "", nil, fmt.Errorf("approver key %s: id %q is not an approver id", path, kf.ID)
	}
	return kf.ID, priv, nil
}
