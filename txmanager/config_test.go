package txmanager_test

import (
	"encoding/json"
	"math/big"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"

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

// TestParseChainsProfiles: each profile gives its fee rules their
// defaults, an explicit field overrides the profile's, and custom applies
// only what is set.
func TestParseChainsProfiles(t *testing.T) {
	t.Parallel()
	type rules struct {
		Profile      string
		L1           bool
		Oracle       common.Address
		Margin       int
		Floor        bool
		MinTip       string // "" for none
		SignerMinTip string
	}
	other := common.HexToAddress("0x00000000000000000000000000000000000000f1")
	for _, tt := range []struct {
		name, fields string
		want         rules
	}{
		{"no profile: ethereum", ``, rules{Profile: "ethereum"}},
		{"ethereum", `"profile": "ethereum"`, rules{Profile: "ethereum"}},
		{"op-stack", `"profile": "op-stack"`, rules{Profile: "op-stack", L1: true, Oracle: txmanager.OPGasPriceOracle, Margin: 50}},
		{"op-stack, another oracle and margin", `"profile": "op-stack", "l1_fee_oracle": "` + other.Hex() + `", "l1_fee_margin_percent": 0`,
			rules{Profile: "op-stack", L1: true, Oracle: other, Margin: 0}},
		{"op-stack without the L1 data fee", `"profile": "op-stack", "l1_data_fee": false`, rules{Profile: "op-stack"}},
		{"arbitrum", `"profile": "arbitrum"`, rules{Profile: "arbitrum", Floor: true}},
		{"arbitrum without the floor", `"profile": "arbitrum", "estimate_floor": false`, rules{Profile: "arbitrum"}},
		{"polygon-pos", `"profile": "polygon-pos"`, rules{Profile: "polygon-pos", MinTip: "25000000000", SignerMinTip: "25000000000"}},
		{"polygon-pos, a minimum of its own", `"profile": "polygon-pos", "min_priority_fee_per_gas": "30000000000"`,
			rules{Profile: "polygon-pos", MinTip: "30000000000", SignerMinTip: "30000000000"}},
		{"custom", `"profile": "custom"`, rules{Profile: "custom"}},
		{"custom, every rule set", `"profile": "custom", "l1_data_fee": true, "estimate_floor": true, "min_priority_fee_per_gas": "7"`,
			rules{Profile: "custom", L1: true, Oracle: txmanager.OPGasPriceOracle, Margin: 50, Floor: true, MinTip: "7", SignerMinTip: "7"}},
		{"ethereum with a minimum tip", `"min_priority_fee_per_gas": "1000000000"`,
			rules{Profile: "ethereum", MinTip: "1000000000", SignerMinTip: "1000000000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.fields != "" {
				tt.fields += ","
			}
			c, err := txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 1, "rpc": ["http://127.0.0.1:8545"], ` + tt.fields + `
				"signers": [{"address": "0x00000000000000000000000000000000000000aa"}]}]}`))
			if err != nil {
				t.Fatal(err)
			}
			ch := &c.Chains[0]
			got := rules{Profile: ch.Profile, Floor: ch.FloorsAtEstimate()}
			got.Oracle, got.Margin, got.L1 = ch.ChargesL1Fee()
			if ch.MinPriorityFeePerGas != nil {
				got.MinTip = ch.MinPriorityFeePerGas.String()
			}
			if m := ch.Signers[0].ChainMinPriorityFeePerGas; m != nil {
				got.SignerMinTip = m.String()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseChainsFeeRuleProblems: a fee rule that cannot work is named at
// load, with its path: an unknown profile, L1 fee settings without the L1
// data fee, a negative margin, and a signer's fee caps under the chain's
// minimum tip (every transaction of that signer would be refused by the
// pool).
func TestParseChainsFeeRuleProblems(t *testing.T) {
	t.Parallel()
	_, err := txmanager.ParseChains([]byte(`{"chains": [
		{"chain_id": 1, "rpc": ["http://a"], "profile": "optimism"},
		{"chain_id": 2, "rpc": ["http://a"], "l1_fee_margin_percent": 10},
		{"chain_id": 3, "rpc": ["http://a"], "profile": "op-stack", "l1_fee_margin_percent": -5},
		{"chain_id": 137, "rpc": ["http://a"], "profile": "polygon-pos", "signers": [
			{"address": "0x00000000000000000000000000000000000000aa", "max_priority_fee_per_gas": "24999999999"},
			{"address": "0x00000000000000000000000000000000000000bb", "max_fee_per_gas": "20000000000", "max_priority_fee_per_gas": "25000000000"},
			{"address": "0x00000000000000000000000000000000000000cc", "max_fee_per_gas": "100000000000", "max_priority_fee_per_gas": "25000000000"}]},
		{"chain_id": 5, "rpc": ["http://a"], "profile": "polygon-pos", "min_priority_fee_per_gas": "1000",
			"signers": [{"address": "0x00000000000000000000000000000000000000aa", "max_priority_fee_per_gas": "1000"}]}]}`))
	for _, want := range []string{
		`chains[0].profile: "optimism" is not ethereum, op-stack, arbitrum, polygon-pos or custom`,
		"chains[1]: l1_fee_oracle and l1_fee_margin_percent are set but l1_data_fee is off",
		"chains[2].l1_fee_margin_percent: -5 is negative",
		"chains[3].signers[0].max_priority_fee_per_gas: 24999999999 is below the chain's min_priority_fee_per_gas 25000000000",
		"chains[3].signers[1].max_fee_per_gas: 20000000000 is below the chain's min_priority_fee_per_gas 25000000000",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %q", err, want)
		}
	}
	for _, wrong := range []string{"chains[3].signers[2]", "chains[4]", "chains[3].signers[1].max_priority"} {
		if err != nil && strings.Contains(err.Error(), wrong) {
			t.Errorf("error %v names %q, which is right", err, wrong)
		}
	}
}

// TestCheckIntentMinimumTip: on a chain with a minimum tip, an intent
// whose own fee caps are under it is refused at creation (it could never
// be sent); at or above it, or without caps, it is accepted.
func TestCheckIntentMinimumTip(t *testing.T) {
	t.Parallel()
	c, err := txmanager.ParseChains([]byte(`{"chains": [{"chain_id": 137, "rpc": ["http://a"], "profile": "polygon-pos",
		"signers": [{"address": "0x00000000000000000000000000000000000000aa"}]}, {"chain_id": 1, "rpc": ["http://b"],
		"signers": [{"address": "0x00000000000000000000000000000000000000aa"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	from := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	gwei := func(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), big.NewInt(1e9)) }
	for _, tt := range []struct {
		name         string
		chain        uint64
		maxFee, tip  *big.Int
		wantProblems []string
	}{
		{"no caps", 137, nil, nil, nil},
		{"at the minimum", 137, gwei(25), gwei(25), nil},
		{"tip under the minimum", 137, gwei(100), gwei(24), []string{"max_priority_fee_per_gas: 24000000000 is below chain 137's minimum priority fee of 25000000000 wei"}},
		{"both under the minimum", 137, gwei(20), gwei(1), []string{"max_priority_fee_per_gas: 1000000000", "max_fee_per_gas: 20000000000"}},
		{"another chain has no minimum", 1, gwei(20), gwei(1), nil},
	} {
		in := &txmanager.Intent{ChainID: tt.chain, From: from, MaxFeePerGas: tt.maxFee, MaxPriorityFeePerGas: tt.tip}
		err := c.CheckIntent(in)
		if (err != nil) != (len(tt.wantProblems) > 0) {
			t.Errorf("%s: CheckIntent = %v, want problems %q", tt.name, err, tt.wantProblems)
			continue
		}
		for _, want := range tt.wantProblems {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: CheckIntent = %v; does not name %q", tt.name, err, want)
			}
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
	f.Add(`{"chains": [{"chain_id": 10, "rpc": ["http://a"], "profile": "op-stack"}, {"chain_id": 42161, "rpc": ["http://b"], "profile": "arbitrum"},
		{"chain_id": 137, "rpc": ["http://c"], "profile": "polygon-pos", "signers": [{"address": "0x00000000000000000000000000000000000000cc", "max_priority_fee_per_gas": "30000000000"}]}]}`)
	f.Add(`{"chains": [{"chain_id": 8453, "rpc": ["http://a"], "profile": "op-stack", "l1_fee_oracle": "0x00000000000000000000000000000000000000f1",
		"l1_fee_margin_percent": 0, "estimate_floor": true}, {"chain_id": 5, "rpc": ["http://b"], "profile": "custom", "l1_data_fee": true,
		"min_priority_fee_per_gas": "1"}]}`)
	f.Add(`{"chains": [{"chain_id": 1, "rpc": ["http://a"], "profile": "polygon-pos", "min_priority_fee_per_gas": "0", "legacy": true}]}`)
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
