package httpapi

import (
	"strings"
	"testing"
)

// Thresholds are per chain and asset, in base units; a token's address
// in any letter case names the same asset; anything malformed or named
// twice is refused, naming the entry.
func TestAdjustmentThresholds(t *testing.T) {
	var th AdjustmentThresholds
	if err := th.UnmarshalText([]byte(" 1:native=1000000000000000000, 10:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48=5000000 ,31337:native=0")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chain uint64
		asset string
		want  string
	}{
		{1, "native", "1000000000000000000"}, {10, "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "5000000"}, {31337, "native", "0"},
		{10, "native", "<nil>"}, {2, "native", "<nil>"},
	} {
		if got := th.Of(c.chain, c.asset); got.String() != c.want {
			t.Errorf("%d:%s = %s, want %s", c.chain, c.asset, got, c.want)
		}
	}
	if got := th.String(); got != "1:native=1000000000000000000,10:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48=5000000,31337:native=0" {
		t.Errorf("String() = %s", got)
	}
	for _, bad := range []string{"native=1", "1:eth=1", "0:native=1", "1:native=-1", "1:native=1.5", "1:native=+1", "1:native",
		"1:0x12=1", "1:native=1,1:NATIVE=2", "1:native=" + strings.Repeat("9", 80)} {
		var th AdjustmentThresholds
		if err := th.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	var empty AdjustmentThresholds
	if err := empty.UnmarshalText(nil); err != nil || empty.Of(1, "native") != nil || empty.String() != "" {
		t.Errorf("empty: %v", err)
	}
}
