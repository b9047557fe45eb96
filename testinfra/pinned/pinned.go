// Package pinned finds a binary the project pins to one version and
// installs into the repository with one of its own scripts (anvil from
// the npm registry, Vault built from the Go module proxy): an environment
// variable first, then the installed copy under <repo root>/.tools, then
// the script, run at most once per process.
package pinned

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Binary is one pinned binary.
type Binary struct {
	// Name and Version are for messages ("anvil", "1.7.1").
	Name, Version string
	// Env names the variable that points at a binary to use instead; set,
	// it must be executable: there is no silent fallback.
	Env string
	// Installed is the binary's path below the repository root once
	// installed.
	Installed []string
	// Script is the install script below the repository root; its last
	// line of output is the binary's path.
	Script string
	// Timeout bounds the script.
	Timeout time.Duration
}

// Find returns the path of the binary, installing it if needed.
func (b *Binary) Find() (string, error) {
	if p := os.Getenv(b.Env); p != "" {
		if err := Executable(p); err != nil {
			return "", fmt.Errorf("%s: %w", b.Env, err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("find %s: %w; set %s to a %s %s binary", b.Name, err, b.Env, b.Name, b.Version)
	}
	p := filepath.Join(append([]string{root}, b.Installed...)...)
	if Executable(p) == nil {
		return p, nil
	}
	return b.install(root)
}

var (
	installMu   sync.Mutex
	installRuns = map[string]installResult{} // by script path
)

type installResult struct {
	path string
	err  error
}

// install runs the script at most once per process and repository: a
// failed install is not retried by every test in the binary.
func (b *Binary) install(root string) (string, error) {
	script := filepath.Join(root, b.Script)
	installMu.Lock()
	defer installMu.Unlock()
	if r, ok := installRuns[script]; ok {
		return r.path, r.err
	}
	path, err := b.run(script)
	installRuns[script] = installResult{path, err}
	return path, err
}

func (b *Binary) run(script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("install %s %s with %s: %w: %s", b.Name, b.Version, script, err, Tail(stderr.String(), 4000))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	p := strings.TrimSpace(lines[len(lines)-1])
	if err := Executable(p); err != nil {
		return "", fmt.Errorf("install %s %s with %s: it printed %q: %w", b.Name, b.Version, script, p, err)
	}
	return p, nil
}

// Executable checks that p is an executable file.
func Executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// RepoRoot walks up from the working directory to the go.work file, which
// marks the root in tests (run in their package directory) and in the
// launchers alike.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.work in the working directory or above it, so the repository root is unknown")
		}
		dir = parent
	}
}

// Tail is the last n bytes of s, trimmed, marked when cut.
func Tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
