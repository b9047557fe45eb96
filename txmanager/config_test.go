package txmanager_test

import (
	"strings"
	"testing"

	"github.com/txfence/txfence/txmanager"
)

// TestParseChainsSignerSettings: the signer settings default as documented
// and bad ones are named by their path, all at once.
func TestParseChainsSignerSettings(t *testing.T) {
	t.Parallel()
	c, err := txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 1, "rpc": ["http://127.0.0.1:8545"],
		"signers": [{"address": "0x00000000000000000000000000000000000000aa"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Chains[0].Signers[0]
	if s.FeeBumps || s.Cancels || s.BumpAfterBlocks != txmanager.DefaultBumpAfterBlocks || s.BumpMarketPercent != txmanager.DefaultBumpMarketPercent ||
		s.GapPolicy != txmanager.GapHalt || s.InFlight != txmanager.DefaultInFlight || s.ExternalUse == nil || !*s.ExternalUse {
		t.Errorf("defaults: %+v", s)
	}
	_, err = txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 1, "rpc": ["http://127.0.0.1:8545"],
		"signers": [{"address": "0x00000000000000000000000000000000000000aa", "fee_bumps": true, "bump_after_blocks": -1,
			"bump_market_percent": 105, "gap_policy": "skip"}]}]}`))
	for _, want := range []string{"chains[0].signers[0].bump_after_blocks", "chains[0].signers[0].bump_market_percent: 105 is below 110",
		"chains[0].signers[0].gap_policy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
	if _, err := txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 1, "rpc": ["http://x"], "signers": [{"address": "0x00000000000000000000000000000000000000aa", "fee_bump": true}]}]}`)); err == nil {
		t.Error("a misspelt setting was accepted")
	}
}
