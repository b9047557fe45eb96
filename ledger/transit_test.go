package ledger_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/ledger"
)

func TestValidTransitID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"rb-1": true, "A.b_c:D-9": true, strings.Repeat("a", ledger.MaxTransitIDLen): true,
		"": false, strings.Repeat("a", ledger.MaxTransitIDLen+1): false, "a b": false, "a/b": false, "é": false, "a\n": false,
		// Namespaced: a tenant's namespace, "~", the client's id.
		"3f2c9a1e-7b4d-4c2a-9e8f-0a1b2c3d4e5f~rb-1": true, strings.Repeat("n", ledger.MaxTransitNamespaceLen) + "~a": true,
		strings.Repeat("n", ledger.MaxTransitNamespaceLen+1) + "~a": false, "~a": false, "ns~": false, "a~b~c": false, "n s~a": false,
	} {
		if got := ledger.ValidTransitID(id); got != want {
			t.Errorf("ValidTransitID(%q) = %v", id, got)
		}
	}
}

// A client's id in a namespace is apart from the same id in another, and
// from the id without one; splitting gives both parts back.
func TestTransitKey(t *testing.T) {
	t.Parallel()
	a, b := ledger.TransitKey("tenant-a", "rb-1"), ledger.TransitKey("tenant-b", "rb-1")
	if a == b || a == "rb-1" || ledger.TransitKey("", "rb-1") != "rb-1" {
		t.Errorf("keys %q, %q, %q", a, b, ledger.TransitKey("", "rb-1"))
	}
	for key, want := range map[string][2]string{a: {"tenant-a", "rb-1"}, "rb-1": {"", "rb-1"}} {
		if ns, id := ledger.SplitTransitKey(key); ns != want[0] || id != want[1] {
			t.Errorf("SplitTransitKey(%q) = %q, %q", key, ns, id)
		}
	}
}
