// Package doctest checks documents against the code they cite: every
// test a document gives as the proof of a claim must exist, so that a
// renamed or deleted test cannot leave the claim without its proof.
package doctest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	cited   = regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)`")
	defined = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)\(`)
)

// CitedTestsExist fails t for each test, fuzz target or benchmark doc
// names in backquotes that no _test.go file under roots defines, and
// returns how many doc names.
func CitedTestsExist(t testing.TB, doc string, roots ...string) int {
	t.Helper()
	named := cited.FindAllStringSubmatch(doc, -1)
	have := map[string]bool{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			for _, m := range defined.FindAllStringSubmatch(string(src), -1) {
				have[m[1]] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range named {
		if !have[m[1]] {
			t.Errorf("the document names %s, which no test file defines", m[1])
		}
	}
	return len(named)
}
