package signer_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/txfence/txfence/testinfra/doctest"
)

// TestSecurityDocNamesRealTests: every test SECURITY.md gives as the proof
// of a control exists, so a renamed or deleted test cannot leave a claim
// without its proof.
func TestSecurityDocNamesRealTests(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	// The tests live in this module and, for the shared TLS set-up, in the
	// repository's shared and testinfra packages; those of the approval
	// flow around the zone (txmanager asking signerd, the approvers'
	// txctl, the console) in txmanager, txctl and the gateway, and those
	// of the operator path to the books and of transit ids per tenant in
	// the gateway and the ledger; a test that runs two services together
	// lives in deploy/integration.
	if n := doctest.CitedTestsExist(t, string(doc), ".", filepath.Join("..", "shared"), filepath.Join("..", "testinfra"), filepath.Join("..", "txmanager"),
		filepath.Join("..", "gateway"), filepath.Join("..", "txctl"), filepath.Join("..", "ledger"), filepath.Join("..", "deploy")); n < 20 {
		t.Fatalf("SECURITY.md names %d tests; the control table alone names more", n)
	}
}
