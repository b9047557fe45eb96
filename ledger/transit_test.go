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
	} {
		if got := ledger.ValidTransitID(id); got != want {
			t.Errorf("ValidTransitID(%q) = %v", id, got)
		}
	}
}
