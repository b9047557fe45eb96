package gateway_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/txfence/txfence/testinfra/doctest"
)

// TestSecurityRulesNameRealTests: every test docs/gateway.md gives as the
// proof of a security rule exists, here or in the services the rule spans.
func TestSecurityRulesNameRealTests(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "gateway.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rules, ok := strings.Cut(string(doc), "\n## Security rules\n")
	if !ok {
		t.Fatal(`docs/gateway.md has no "Security rules" section`)
	}
	rules, _, _ = strings.Cut(rules, "\n## ")
	if n := doctest.CitedTestsExist(t, rules, ".", filepath.Join("..", "txctl"), filepath.Join("..", "txmanager"), filepath.Join("..", "ledger"),
		filepath.Join("..", "shared"), filepath.Join("..", "signer-zonec"), filepath.Join("..", "deploy")); n < 20 {
		t.Errorf("the security rules name %d tests; they name more", n)
	}
}
