package pinned_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/pinned"
)

// TestFind: the variable wins and must name an executable; without it the
// installed copy is used; without that the script installs it, once per
// process even when it fails.
func TestFind(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	if err := os.WriteFile(filepath.Join(root, "go.work"), []byte("go 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(root, ".tools", "demo", "demo")
	runs := filepath.Join(root, "runs")
	script := `echo run >> ` + runs + `; mkdir -p ` + filepath.Dir(installed) + `; printf '#!/bin/sh\n' > ` + installed +
		`; chmod +x ` + installed + `; echo installing >&2; echo ` + installed + "\n"
	if err := os.WriteFile(filepath.Join(root, "install.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	b := pinned.Binary{Name: "demo", Version: "1", Env: "TXFENCE_TEST_DEMO", Installed: []string{".tools", "demo", "demo"},
		Script: "install.sh", Timeout: time.Minute}

	t.Setenv(b.Env, filepath.Join(root, "go.work"))
	if _, err := b.Find(); err == nil || !strings.Contains(err.Error(), b.Env) {
		t.Errorf("a variable naming a file that is not executable: %v", err)
	}
	t.Setenv(b.Env, "")
	for range 2 {
		p, err := b.Find()
		if err != nil || p != installed {
			t.Fatalf("Find: %q %v, want %q", p, err, installed)
		}
	}
	got, err := os.ReadFile(runs)
	if err != nil || strings.Count(string(got), "run") != 1 {
		t.Errorf("the script ran %q times (%v), want once", got, err)
	}

	failing := pinned.Binary{Name: "broken", Version: "1", Env: "TXFENCE_TEST_BROKEN", Installed: []string{"nowhere"},
		Script: "missing.sh", Timeout: time.Minute}
	_, err1 := failing.Find()
	_, err2 := failing.Find()
	if err1 == nil || err2 == nil || err1.Error() != err2.Error() || !strings.Contains(err1.Error(), "install broken 1") {
		t.Errorf("a failing install: %v, then %v", err1, err2)
	}
}
