package signer_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	named := regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1)
	if len(named) < 20 {
		t.Fatalf("SECURITY.md names %d tests; the control table alone names more", len(named))
	}
	defined := map[string]bool{}
	funcs := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
	// The tests live in this module and, for the shared TLS set-up, in the
	// repository's shared packages; those of the approval flow around the
	// zone (txmanager asking signerd, the approvers' txctl, the console)
	// in txmanager and the gateway, and those of the operator path to the
	// books and of transit ids per tenant in the gateway and the ledger.
	for _, root := range []string{".", filepath.Join("..", "shared"), filepath.Join("..", "txmanager"), filepath.Join("..", "gateway"), filepath.Join("..", "ledger")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			for _, m := range funcs.FindAllStringSubmatch(string(src), -1) {
				defined[m[1]] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range named {
		if !defined[m[1]] {
			t.Errorf("SECURITY.md names %s, which no test file defines", m[1])
		}
	}
}
