package txmanager_test

import (
	"encoding/json"
	"reflect"
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

// TestParseChainsDropSettings: drop checks are on by default, looked up at
// 4 blocks, left to an operator after 3 drops; a chain may turn them off,
// and a window too short for two answers in a row is refused.
func TestParseChainsDropSettings(t *testing.T) {
	t.Parallel()
	c, err := txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 1, "rpc": ["http://127.0.0.1:8545"]},
		{"chain_id": 2, "rpc": ["http://127.0.0.1:8546"], "drop_checks": false, "drop_check_blocks": 6, "max_drops": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if ch := c.Chains[0]; !ch.DropChecking() || ch.DropCheckBlocks != txmanager.DefaultDropCheckBlocks || ch.MaxDrops != txmanager.DefaultMaxDrops {
		t.Errorf("defaults: checks %v, %d blocks, %d drops", ch.DropChecking(), ch.DropCheckBlocks, ch.MaxDrops)
	}
	if ch := c.Chains[1]; ch.DropChecking() || ch.DropCheckBlocks != 6 || ch.MaxDrops != 1 {
		t.Errorf("set: checks %v, %d blocks, %d drops", ch.DropChecking(), ch.DropCheckBlocks, ch.MaxDrops)
	}
	_, err = txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 1, "rpc": ["http://127.0.0.1:8545"], "drop_check_blocks": 1, "max_drops": -2}]}`))
	for _, want := range []string{"chains[0].drop_check_blocks: 1 is below 2", "chains[0].max_drops"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
}

// FuzzParseChains: any chains file is read or refused without a panic,
// and a file read, written out again, reads back to the same chains.
func FuzzParseChains(f *testing.F) {
	f.Add(`{"chains": [{"chain_id": 1, "rpc": ["http://127.0.0.1:8545"], "signers": [{"address": "0x00000000000000000000000000000000000000aa"}]}]}`)
	f.Add(`{"chains": [{"chain_id": 10, "rpc": ["http://a", "http://b"], "confirmations": 5, "resubmit_interval": "10s",
		"signers": [{"address": "0x00000000000000000000000000000000000000bb", "max_fee_per_gas": "100000000000", "fee_bumps": true, "cancels": true}]}]}`)
	f.Add(`{"chains": []}`)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := txmanager.ParseChains([]byte(in))
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := txmanager.ParseChains(out)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("%s read as %+v, written as %s, read back as %+v (%v)", in, c, out, again, err)
		}
	})
}
