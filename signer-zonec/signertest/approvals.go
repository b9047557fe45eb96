package signertest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// ApproverKey is approver name's Ed25519 key, the same in every test run:
// derived from the name, never secret.
func ApproverKey(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("txfence test approver " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// ApprovalPolicy is a policy of one rule: transfers from From on chain
// 31337 are allowed within fee limits once Threshold of RuleApprovers
// approve them.
type ApprovalPolicy struct {
	// RuleID names the rule (what a PENDING_APPROVAL event cites).
	RuleID string
	From   string
	// Approvers are every approver the policy knows, by name.
	Approvers map[string]ed25519.PublicKey
	// RuleApprovers are those the rule counts; all Approvers when empty.
	RuleApprovers []string
	// Threshold defaults to 1, MaxGas to 21000, MaxTTL to 2h.
	Threshold int
	MaxGas    uint64
	MaxTTL    string
}

// Write writes the policy file into the test's temporary directory and
// returns its path.
func (p ApprovalPolicy) Write(t testing.TB) string {
	t.Helper()
	if p.Threshold == 0 {
		p.Threshold = 1
	}
	if p.MaxGas == 0 {
		p.MaxGas = 21000
	}
	if p.MaxTTL == "" {
		p.MaxTTL = "2h"
	}
	if len(p.RuleApprovers) == 0 {
		for name := range p.Approvers {
			p.RuleApprovers = append(p.RuleApprovers, name)
		}
		slices.Sort(p.RuleApprovers)
	}
	doc, err := json.Marshal(map[string]any{
		"version": "approvals-" + p.RuleID, "chains": []int{31337}, "approvers": p.Approvers,
		"rules": []any{map[string]any{
			"id": p.RuleID, "effect": "allow", "match": map[string]any{"from": []string{p.From}},
			"limits": map[string]any{"max_fee_per_gas": "1000000000000", "max_gas": p.MaxGas,
				"fee_windows": []any{map[string]string{"duration": "24h", "max_fee": "1000000000000000000"}}},
			"approval": map[string]any{"threshold": p.Threshold, "approvers": p.RuleApprovers, "max_ttl": p.MaxTTL},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
