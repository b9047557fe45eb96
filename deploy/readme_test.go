package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestREADMEPackageMapMatchesGoList: the README's package map and its
// tables of shared and testinfra packages name exactly the packages `go list` finds in
// the repository's modules, so the map cannot drift from the code.
func TestREADMEPackageMapMatchesGoList(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	backquoted := regexp.MustCompile("`([a-z0-9/_.-]+)`")
	for _, sec := range []struct{ title, prefix string }{{"### Package map", ""}, {"### shared packages", "shared/"}, {"### testinfra packages", "testinfra/"}} {
		_, body, ok := strings.Cut(string(readme), "\n"+sec.title+"\n")
		if !ok {
			t.Fatalf("README.md has no %q section", sec.title)
		}
		body, _, _ = strings.Cut(body, "\n#")
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "| `") {
				continue
			}
			first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|") // the package column
			for _, m := range backquoted.FindAllStringSubmatch(first, -1) {
				named[sec.prefix+m[1]] = true
			}
		}
	}

	modules := goList(t, "..", "list", "-m", "-f", "{{.Dir}}")
	listed := map[string]bool{}
	for _, dir := range modules {
		for _, pkg := range goList(t, dir, "list", "-f", "{{if .GoFiles}}{{.ImportPath}}{{end}}", "./...") {
			listed[strings.TrimPrefix(pkg, "github.com/txfence/txfence/")] = true
		}
	}
	for pkg := range listed {
		if !named[pkg] {
			t.Errorf("go list finds %s, which the README's package map does not name", pkg)
		}
	}
	for pkg := range named {
		if !listed[pkg] {
			t.Errorf("the README's package map names %s, which go list does not find", pkg)
		}
	}
}

func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v", strings.Join(args, " "), dir, err)
	}
	return slices.DeleteFunc(strings.Split(strings.TrimSpace(string(out)), "\n"), func(s string) bool { return s == "" })
}
