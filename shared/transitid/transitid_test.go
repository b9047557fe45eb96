package transitid_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/shared/transitid"
)

func TestTheSyntaxOfATransitID(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]bool{
		"rebalance-2026-11-29": true, "INC:41.a_b": true, strings.Repeat("a", transitid.MaxLen): true,
		"": false, strings.Repeat("a", transitid.MaxLen+1): false, "a b": false, "a/b": false, "a~b": false, "é": false, "a\x00": false,
	} {
		if got := transitid.Valid(id); got != want {
			t.Errorf("Valid(%q) = %v, want %v", id, got, want)
		}
	}
	if !transitid.ValidNamespace("0b3f2c1e-8d4a-4c5e-9f6a-1b2c3d4e5f60") || transitid.ValidNamespace(strings.Repeat("a", transitid.MaxNamespaceLen+1)) {
		t.Error("a namespace is a UUID's length at most")
	}
}
