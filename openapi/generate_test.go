package openapi_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent fails when a *.gen.go differs from what the
// specs produce, so that `make test` catches a spec edited without
// regenerating (make verify runs generate.sh --check as well).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "./generate.sh", "--check").CombinedOutput()
	if err != nil {
		t.Fatalf("generate.sh --check: %v\n%s", err, out)
	}
}

// TestGeneratedPackagesStayLight keeps the generated packages free of
// kin-openapi and of oapi-codegen itself: every service links them, and
// the signer bans both (signer-zonec/deps_test.go). Specs for validation
// come from this root package instead (openapi.Load).
func TestGeneratedPackagesStayLight(t *testing.T) {
	banned := []string{"github.com/getkin/kin-openapi", "github.com/oapi-codegen/oapi-codegen"}
	pkgs := []string{"./components", "./gatewayapi", "./txmanagerapi", "./signerapi", "./mevrouterapi", "./ledgerapi"}
	out, err := exec.CommandContext(t.Context(), "go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(dep, b) {
				t.Errorf("a generated package links %s", dep)
			}
		}
	}
}
