package txmanager

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/shared/rpcpool"
)

// Chains is the chains and signers a deployment manages, from the file
// TXFENCE_TXMANAGER_CHAINS_FILE names:
//
//	{"chains": [{
//	  "chain_id": 31337,
//	  "rpc": ["http://127.0.0.1:8545"],     read endpoints (a pool): simulation, fees, balances, receipts; each a URL or
//	                                         {"name", "url", "weight", "rps", "credits": {"units", "period", "cost", "default"}}
//	  "rpc_pool": {"max_lag": 3, "timeout": "10s", "probe_every": "2s"},   optional: the pool's health rules
//	  "legacy": false,                       true: gas_price pricing instead of EIP-1559
//	  "confirmations": 3,                    depth at which a receipt is final
//	  "finality": "depth",                   depth (default) or finalized: final once the node's finalized block covers it
//	  "resubmit_interval": "30s",            an attempt not mined this long is sent again unchanged
//	  "stuck_timeout": "10m",                not mined this long after the first send: sub-state stuck, alert
//	  "drop_checks": true,                   look for attempts a node dropped after taking them (false: rpc cannot see pending transactions)
//	  "drop_check_blocks": 4,                each send is looked up at this many blocks after it; unknown at two in a row: dropped, resent
//	  "max_drops": 3,                        an attempt dropped this many times: sub-state stuck, reason dropped_by_node, alert
//	  "new_heads": "ws://127.0.0.1:8545",    optional: a newHeads subscription wakes the follower on each block
//	  "profile": "ethereum",                 fee rules of the kind of chain: ethereum (default), op-stack, arbitrum, polygon-pos, custom;
//	                                         each rule below defaults from the profile and may be set explicitly (custom: only what is set)
//	  "l1_data_fee": false,                  the L1 data fee counts in a transaction's cost (op-stack: true)
//	  "l1_fee_oracle": "0x4200…000F",        whose getL1Fee(bytes) prices it (default: the OP Stack GasPriceOracle predeploy)
//	  "l1_fee_margin_percent": 50,           added to the oracle's answer: the fee may rise before inclusion (default 50)
//	  "estimate_floor": false,               the gas limit is never below eth_estimateGas, even for an intent's own gas (arbitrum: true)
//	  "min_priority_fee_per_gas": null,      the least tip (or legacy gas price) offered, bumps included (polygon-pos: "25000000000")
//	  "signers": [{
//	    "address": "0x…",
//	    "external_use": true,                the key may also be used outside txfence
//	    "in_flight": 16,                     signed but unconfirmed transactions at most
//	    "max_fee_per_gas": "200000000000",   caps, in wei (decimal strings)
//	    "max_priority_fee_per_gas": "5000000000",
//	    "gap_policy": "halt",                halt (default) or fill: what to do about a nonce gap
//	    "fee_bumps": false,                  true: replace an attempt not mined after bump_after_blocks
//	    "bump_after_blocks": 3,
//	    "bump_market_percent": 300,          a bumped max fee is at most this % of the market's
//	    "cancels": false                     true: operators may cancel broadcast transactions
//	  }]
//	}]}
type Chains struct {
	Chains []Chain `json:"chains"`
}

// Chain is one chain's settings.
type Chain struct {
	ID uint64 `json:"chain_id"`
	// RPC is the chain's read endpoints, a provider pool (package
	// rpcpool): each read goes to a healthy endpoint at the head it needs,
	// within its budget; sends go through mevrouterd, not here.
	RPC           []rpcpool.Endpoint `json:"rpc"`
	RPCPool       RPCPool            `json:"rpc_pool"`
	Legacy        bool               `json:"legacy"`
	Confirmations uint64             `json:"confirmations"`
	// Finality is FinalityDepth (final at Confirmations) or
	// FinalityFinalized (final once the node's "finalized" block is at
	// or above the receipt's; confirmations are still reported).
	Finality string `json:"finality"`
	// ResubmitInterval: an attempt not mined this long after it was last
	// sent is sent again, unchanged (a node may have dropped it).
	ResubmitInterval Duration `json:"resubmit_interval"`
	// StuckTimeout: a transaction not mined this long after its first
	// send is marked stuck, with an alert; it stays tracked.
	StuckTimeout Duration `json:"stuck_timeout"`
	// DropChecks (on unless false) looks for silent drops: a node may
	// answer a send with the hash and drop the transaction later (gas too
	// low for its data, an empty authorization list, pool eviction). At
	// each of the DropCheckBlocks blocks after a send, the chain follower
	// asks whether the attempt is known (one batched
	// eth_getTransactionByHash per block for every recent send, through
	// the pool; then each endpoint, pinned, only for the hashes no answer
	// so far knew); unknown to
	// every endpoint at two blocks in a row, it is dropped (a tx.attempt
	// event of kind dropped) and resent at once, and once it was dropped
	// MaxDrops times it is left stuck (reason dropped_by_node) with an
	// alert, for an operator. Turn it off on a chain whose read endpoints
	// cannot see pending transactions (a rollup whose sequencer keeps its
	// pool to itself): there every send would look dropped until mined.
	DropChecks      *bool `json:"drop_checks"`
	DropCheckBlocks int   `json:"drop_check_blocks"`
	MaxDrops        int   `json:"max_drops"`
	// NewHeads, when set, is a WebSocket endpoint (ws:// or wss://) whose
	// eth_subscribe("newHeads") wakes the chain follower on every block;
	// it polls the RPC endpoint beside it all the same.
	NewHeads string `json:"new_heads"`

	// Profile names the kind of chain whose fee rules apply (ProfileEthereum,
	// the default, ProfileOPStack, ProfileArbitrum, ProfilePolygonPoS or
	// ProfileCustom). A profile only gives the rules below their defaults:
	// each may be set explicitly, and on a custom chain only what is set
	// applies. ParseChains fills every rule in.
	Profile string `json:"profile"`
	// L1DataFee (op-stack) counts a rollup's L1 data fee in what a
	// transaction costs: the fee an OP Stack chain charges on top of gas
	// for posting the transaction's bytes to L1, which eth_estimateGas
	// does not include and which the sender's balance must cover all the
	// same. The worker adds it to the cost it checks the balance against
	// and to what it keeps for the open transactions.
	L1DataFee *bool `json:"l1_data_fee"`
	// L1FeeOracle is the contract whose getL1Fee(bytes) prices the L1 data
	// fee of an unsigned RLP-encoded transaction: the OP Stack's
	// GasPriceOracle predeploy (OPGasPriceOracle) unless set.
	L1FeeOracle *common.Address `json:"l1_fee_oracle"`
	// L1FeeMarginPercent is added to the oracle's answer: the fee is
	// charged at inclusion at the L1 prices of then, which may have risen
	// (DefaultL1FeeMarginPercent).
	L1FeeMarginPercent *int `json:"l1_fee_margin_percent"`
	// EstimateFloor (arbitrum) makes the node's gas estimate the floor of
	// every gas limit: an intent that gives its own gas is estimated too,
	// and fails simulation if it gave less. On Arbitrum eth_estimateGas
	// includes the L1 (poster) component in gas units, so a gas limit
	// under the estimate cannot pay for the transaction's own bytes.
	EstimateFloor *bool `json:"estimate_floor"`
	// MinPriorityFeePerGas (polygon-pos) is the least tip a transaction
	// offers, and the least gas price of a legacy one, new and bumped
	// alike: nodes refuse less. A signer's caps below it are refused at
	// load. nil: no minimum.
	MinPriorityFeePerGas *Wei `json:"min_priority_fee_per_gas"`

	Signers []SignerConfig `json:"signers"`
}

// RPCPool tunes a chain's provider pool; zero values take the defaults.
type RPCPool struct {
	// MaxLag is how many blocks behind the best head an endpoint may be
	// and still serve reads that need no particular head (default 3).
	MaxLag uint64 `json:"max_lag"`
	// Timeout bounds one call to one endpoint before the next is tried
	// (default 10s).
	Timeout Duration `json:"timeout"`
	// ProbeEvery is how often every endpoint is asked for its head and
	// chain id (default 2s).
	ProbeEvery Duration `json:"probe_every"`
	// Cooldown is how long an endpoint whose recent calls mostly failed
	// is left out before a health check may bring it back (default 10s).
	Cooldown Duration `json:"cooldown"`
}

// Default pool settings (see RPCPool).
const (
	DefaultRPCMaxLag     = 3
	DefaultRPCTimeout    = 10 * time.Second
	DefaultRPCProbeEvery = 2 * time.Second
	DefaultRPCCooldown   = 10 * time.Second
)

func (p *RPCPool) defaults() {
	if p.MaxLag == 0 {
		p.MaxLag = DefaultRPCMaxLag
	}
	for _, d := range []struct {
		v   *Duration
		def time.Duration
	}{{&p.Timeout, DefaultRPCTimeout}, {&p.ProbeEvery, DefaultRPCProbeEvery}, {&p.Cooldown, DefaultRPCCooldown}} {
		if d.v.Duration == 0 {
			d.v.Duration = d.def
		}
	}
}

// Chain profiles (Chain.Profile).
const (
	ProfileEthereum   = "ethereum"
	ProfileOPStack    = "op-stack"
	ProfileArbitrum   = "arbitrum"
	ProfilePolygonPoS = "polygon-pos"
	ProfileCustom     = "custom"
)

// OPGasPriceOracle is the OP Stack's GasPriceOracle predeploy, the same
// address on every OP Stack chain (OP Mainnet, Base, ...).
var OPGasPriceOracle = common.HexToAddress("0x420000000000000000000000000000000000000F")

// DefaultL1FeeMarginPercent covers three L1 blocks of the steepest rise
// of the L1 base fee (12.5% a block: 1.125³ ≈ 1.42) between the estimate
// and inclusion; the blob base fee rises at most as fast.
const DefaultL1FeeMarginPercent = 50

// PolygonMinPriorityFeePerGas is Polygon PoS's minimum tip, 25 gwei, from
// the Polygon Improvement Proposals: PIP-35 (2024, "MinGas Increase")
// fixed it in bor's txpool.pricelimit and miner.gasprice (30 gwei was the
// figure asked before), and PIP-59 (a draft of February 2025) still names
// 25 gwei as the floor enforced on the priority fee. A pool refuses a
// transaction offering less. PIP-59 would move the floor into the base
// fee: once that is live, set min_priority_fee_per_gas on the chain to
// what the network then asks.
var PolygonMinPriorityFeePerGas = big.NewInt(25_000_000_000)

// ChargesL1Fee reports whether a transaction's L1 data fee counts in its
// cost (L1DataFee), and the oracle and margin to price it with.
func (c *Chain) ChargesL1Fee() (oracle common.Address, marginPercent int, ok bool) {
	if c.L1DataFee == nil || !*c.L1DataFee {
		return common.Address{}, 0, false
	}
	oracle, marginPercent = OPGasPriceOracle, DefaultL1FeeMarginPercent
	if c.L1FeeOracle != nil {
		oracle = *c.L1FeeOracle
	}
	if c.L1FeeMarginPercent != nil {
		marginPercent = *c.L1FeeMarginPercent
	}
	return oracle, marginPercent, true
}

// FloorsAtEstimate reports whether the node's gas estimate is the floor
// of every gas limit (EstimateFloor).
func (c *Chain) FloorsAtEstimate() bool { return c.EstimateFloor != nil && *c.EstimateFloor }

// Duration is a duration written as a string ("30s", "10m").
type Duration struct{ time.Duration }

// UnmarshalJSON reads "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return fmt.Errorf("%q is not a positive duration such as \"30s\"", s)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes "30s", what UnmarshalJSON reads.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// SignerConfig is one signer's settings.
type SignerConfig struct {
	Address              common.Address `json:"address"`
	ExternalUse          *bool          `json:"external_use"`
	InFlight             int            `json:"in_flight"`
	MaxFeePerGas         *Wei           `json:"max_fee_per_gas"`
	MaxPriorityFeePerGas *Wei           `json:"max_priority_fee_per_gas"`
	GapPolicy            string         `json:"gap_policy"`
	// FeeBumps turns automatic fee bumps on: an attempt not mined
	// BumpAfterBlocks blocks after it was sent is replaced by one with
	// both fee caps up at least 10% and at least to the market, never
	// above MaxFeePerGas / MaxPriorityFeePerGas (and the intent's own
	// caps) nor above BumpMarketPercent % of the market's price.
	// Operators may bump by hand whatever the switch.
	FeeBumps          bool `json:"fee_bumps"`
	BumpAfterBlocks   int  `json:"bump_after_blocks"`
	BumpMarketPercent int  `json:"bump_market_percent"`
	// Cancels lets operators cancel a broadcast transaction (a same-nonce
	// 0-value transfer to the signer itself); signerd's policy must allow
	// it as well.
	Cancels bool `json:"cancels"`
	// ChainMinPriorityFeePerGas is the chain's MinPriorityFeePerGas, copied
	// here by ParseChains (it is not read from the file): whatever prices a
	// transaction or a bump has the signer's settings at hand, the chain
	// follower's automatic bumps included, and so keeps the minimum.
	ChainMinPriorityFeePerGas *Wei `json:"-"`
}

// FeeCeiling is the highest fee cap per gas (max_fee_per_gas, or the gas
// price of a legacy transaction) txmanager signs in's transaction with,
// fee bumps included: the lower of the intent's own max_fee_per_gas and
// the signer's; nil when neither is set (in may be nil). An approval whose
// fee ceiling is at least this covers every attempt txmanager may make,
// whatever the market does. The result is never one of the caps
// themselves.
func (s SignerConfig) FeeCeiling(in *Intent) *big.Int {
	var ceiling *big.Int
	if s.MaxFeePerGas != nil {
		ceiling = new(big.Int).Set(&s.MaxFeePerGas.Int)
	}
	if in != nil && in.MaxFeePerGas != nil && (ceiling == nil || in.MaxFeePerGas.Cmp(ceiling) < 0) {
		ceiling = new(big.Int).Set(in.MaxFeePerGas)
	}
	return ceiling
}

// Wei is an amount written as a decimal string.
type Wei struct{ big.Int }

// UnmarshalJSON reads "123" (a string, never a JSON number, which most
// parsers would round).
func (w *Wei) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("a wei amount is a decimal string")
	}
	if _, ok := w.SetString(s, 10); !ok || w.Sign() < 0 || w.Cmp(maxUint256) > 0 {
		return fmt.Errorf("%q is not a wei amount", s)
	}
	return nil
}

// MarshalJSON writes "123", what UnmarshalJSON reads.
func (w Wei) MarshalJSON() ([]byte, error) { return json.Marshal(w.String()) }

// big is the amount, nil for a nil one.
func (w *Wei) big() *big.Int {
	if w == nil {
		return nil
	}
	return &w.Int
}

// Default signer settings.
const (
	DefaultInFlight      = 16
	DefaultConfirmations = 3
	// DefaultResubmitInterval and DefaultStuckTimeout suit a chain with
	// blocks every few seconds.
	DefaultResubmitInterval = 30 * time.Second
	DefaultStuckTimeout     = 10 * time.Minute
	FinalityDepth           = "depth"
	FinalityFinalized       = "finalized"
	GapHalt                 = "halt"
	GapFill                 = "fill"
	// DefaultBumpAfterBlocks and DefaultBumpMarketPercent: a bump after 3
	// blocks without inclusion, to at most 3 × the market's price.
	DefaultBumpAfterBlocks   = 3
	DefaultBumpMarketPercent = 300
	// DefaultDropCheckBlocks and DefaultMaxDrops: a send is looked up at
	// the 4 blocks after it, so that one lagging answer still leaves room
	// for two unknown answers in a row; an attempt dropped 3 times is
	// left to an operator.
	DefaultDropCheckBlocks = 4
	DefaultMaxDrops        = 3
)

// DropChecking reports whether the chain's follower looks for silent
// drops (DropChecks, on by default).
func (c *Chain) DropChecking() bool { return c.DropChecks == nil || *c.DropChecks }

// LoadChains reads and checks the chains file, filling in defaults.
func LoadChains(path string) (*Chains, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chains file: %w", err)
	}
	return ParseChains(raw)
}

// ParseChains decodes a chains file strictly and checks it, naming every
// problem at once.
func ParseChains(raw []byte) (*Chains, error) {
	var c Chains
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("chains file: %w", err)
	}
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	// positive fills an unset (zero) count with its default and names a
	// negative one.
	positive := func(v *int, def int, field string) {
		if *v == 0 {
			*v = def
		}
		if *v < 0 {
			add("%s: must be positive", field)
		}
	}
	if len(c.Chains) == 0 {
		add("chains: none configured")
	}
	chains := map[uint64]bool{}
	for i := range c.Chains {
		ch := &c.Chains[i]
		at := fmt.Sprintf("chains[%d]", i)
		if ch.ID == 0 || chains[ch.ID] {
			add("%s.chain_id: %d is missing or configured twice", at, ch.ID)
		}
		chains[ch.ID] = true
		if len(ch.RPC) == 0 {
			add("%s.rpc: at least one read endpoint", at)
		}
		ch.RPCPool.defaults()
		names := map[string]bool{}
		for j, e := range ch.RPC {
			if p, err := url.Parse(e.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") {
				add("%s.rpc[%d]: read endpoints are http(s) URLs (a WebSocket endpoint goes in new_heads)", at, j)
			}
			if names[e.Name] {
				add("%s.rpc[%d]: endpoint name %q used twice: give each a name", at, j, e.Name)
			}
			names[e.Name] = true
		}
		if ch.NewHeads != "" {
			if p, err := url.Parse(ch.NewHeads); err != nil || p.Host == "" || (p.Scheme != "ws" && p.Scheme != "wss") {
				add("%s.new_heads: not a ws:// or wss:// URL", at)
			}
		}
		if ch.Confirmations == 0 {
			ch.Confirmations = DefaultConfirmations
		}
		switch ch.Finality {
		case "":
			ch.Finality = FinalityDepth
		case FinalityDepth, FinalityFinalized:
		default:
			add("%s.finality: %q is not depth or finalized", at, ch.Finality)
		}
		if ch.ResubmitInterval.Duration == 0 {
			ch.ResubmitInterval.Duration = DefaultResubmitInterval
		}
		if ch.StuckTimeout.Duration == 0 {
			ch.StuckTimeout.Duration = DefaultStuckTimeout
		}
		if ch.DropChecks == nil {
			ch.DropChecks = new(true)
		}
		if ch.DropCheckBlocks == 0 {
			ch.DropCheckBlocks = DefaultDropCheckBlocks
		}
		if ch.DropCheckBlocks < 2 {
			add("%s.drop_check_blocks: %d is below 2 (a drop takes two unknown answers in a row)", at, ch.DropCheckBlocks)
		}
		positive(&ch.MaxDrops, DefaultMaxDrops, at+".max_drops")
		problems = append(problems, ch.feeRules(at)...)
		signers := map[common.Address]bool{}
		for j := range ch.Signers {
			s := &ch.Signers[j]
			sat := fmt.Sprintf("%s.signers[%d]", at, j)
			if s.Address == (common.Address{}) || signers[s.Address] {
				add("%s.address: missing or configured twice", sat)
			}
			signers[s.Address] = true
			if s.ExternalUse == nil {
				s.ExternalUse = new(true)
			}
			positive(&s.InFlight, DefaultInFlight, sat+".in_flight")
			positive(&s.BumpAfterBlocks, DefaultBumpAfterBlocks, sat+".bump_after_blocks")
			if s.BumpMarketPercent == 0 {
				s.BumpMarketPercent = DefaultBumpMarketPercent
			}
			if s.BumpMarketPercent < 110 {
				add("%s.bump_market_percent: %d is below 110 (a bump raises fees by at least 10%%)", sat, s.BumpMarketPercent)
			}
			switch s.GapPolicy {
			case "":
				s.GapPolicy = GapHalt
			case GapHalt, GapFill:
			default:
				add("%s.gap_policy: %q is not halt or fill", sat, s.GapPolicy)
			}
			s.ChainMinPriorityFeePerGas = ch.MinPriorityFeePerGas
			// A cap under the minimum prices every transaction of the
			// signer out of the pool: refused here, not found out one stuck
			// transaction at a time.
			for _, c := range capsUnderMinimum(ch.MinPriorityFeePerGas, s.MaxPriorityFeePerGas.big(), s.MaxFeePerGas.big()) {
				add("%s.%s is below the chain's min_priority_fee_per_gas %s", sat, c, ch.MinPriorityFeePerGas)
			}
		}
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fmt.Errorf("chains file:\n%w", err)
	}
	return &c, nil
}

// feeRules fills the chain's fee rules in from its profile where the file
// does not set them, and names what is wrong with them (at is the chain's
// path in the file).
func (ch *Chain) feeRules(at string) []error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	var l1, floor bool
	var least *big.Int
	switch ch.Profile {
	case "":
		ch.Profile = ProfileEthereum
	case ProfileEthereum, ProfileCustom:
	case ProfileOPStack:
		l1 = true
	case ProfileArbitrum:
		floor = true
	case ProfilePolygonPoS:
		least = PolygonMinPriorityFeePerGas
	default:
		add("%s.profile: %q is not %s, %s, %s, %s or %s", at, ch.Profile,
			ProfileEthereum, ProfileOPStack, ProfileArbitrum, ProfilePolygonPoS, ProfileCustom)
	}
	if ch.L1DataFee == nil {
		ch.L1DataFee = &l1
	}
	if *ch.L1DataFee {
		if ch.L1FeeOracle == nil {
			ch.L1FeeOracle = new(OPGasPriceOracle)
		}
		if ch.L1FeeMarginPercent == nil {
			ch.L1FeeMarginPercent = new(DefaultL1FeeMarginPercent)
		}
		if *ch.L1FeeMarginPercent < 0 {
			add("%s.l1_fee_margin_percent: %d is negative", at, *ch.L1FeeMarginPercent)
		}
	} else if ch.L1FeeOracle != nil || ch.L1FeeMarginPercent != nil {
		add("%s: l1_fee_oracle and l1_fee_margin_percent are set but l1_data_fee is off", at)
	}
	if ch.EstimateFloor == nil {
		ch.EstimateFloor = &floor
	}
	if ch.MinPriorityFeePerGas == nil && least != nil {
		ch.MinPriorityFeePerGas = &Wei{}
		ch.MinPriorityFeePerGas.Set(least)
	}
	return problems
}

// Chain returns the chain with id.
func (c *Chains) Chain(id uint64) (*Chain, bool) {
	for i := range c.Chains {
		if c.Chains[i].ID == id {
			return &c.Chains[i], true
		}
	}
	return nil, false
}

// Signer returns the settings of key's signer.
func (c *Chains) Signer(key SignerKey) (*SignerConfig, bool) {
	ch, ok := c.Chain(key.ChainID)
	if !ok {
		return nil, false
	}
	for i := range ch.Signers {
		if ch.Signers[i].Address == key.Signer {
			return &ch.Signers[i], true
		}
	}
	return nil, false
}

// Signers lists every configured signer.
func (c *Chains) Signers() []SignerKey {
	var out []SignerKey
	for _, ch := range c.Chains {
		for _, s := range ch.Signers {
			out = append(out, SignerKey{ChainID: ch.ID, Signer: s.Address})
		}
	}
	return out
}

// CheckIntent refuses an intent for a chain or signer this deployment does
// not manage.
func (c *Chains) CheckIntent(in *Intent) error {
	ch, ok := c.Chain(in.ChainID)
	if !ok {
		return fmt.Errorf("chain_id: %d is not a configured chain", in.ChainID)
	}
	if _, ok := c.Signer(SignerKey{ChainID: in.ChainID, Signer: in.From}); !ok {
		return fmt.Errorf("from: %s is not a signer configured on chain %d", in.From.Hex(), in.ChainID)
	}
	// Fee caps under the chain's minimum tip could never be sent: refused
	// now rather than left to wait for ever.
	var problems []error
	for _, c := range capsUnderMinimum(ch.MinPriorityFeePerGas, in.MaxPriorityFeePerGas, in.MaxFeePerGas) {
		problems = append(problems, fmt.Errorf("%s is below chain %d's minimum priority fee of %s wei", c, in.ChainID, ch.MinPriorityFeePerGas))
	}
	return errors.Join(problems...)
}

// capsUnderMinimum describes each of the fee caps under least, the
// chain's minimum tip (nil: none), as "max_fee_per_gas: 1000"; a nil cap
// is not set. A max fee under the minimum tip cannot pay it either.
func capsUnderMinimum(least *Wei, maxPriorityFee, maxFee *big.Int) []string {
	if least == nil {
		return nil
	}
	var out []string
	for _, c := range []struct {
		name string
		v    *big.Int
	}{{"max_priority_fee_per_gas", maxPriorityFee}, {"max_fee_per_gas", maxFee}} {
		if c.v != nil && c.v.Cmp(&least.Int) < 0 {
			out = append(out, fmt.Sprintf("%s: %s", c.name, c.v))
		}
	}
	return out
}
