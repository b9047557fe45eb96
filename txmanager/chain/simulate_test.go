package chain_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
)

var stranger = common.HexToAddress("0x000000000000000000000000000000000000bEEF")

// newAddress is an address nobody has used: no balance, no nonce.
func newAddress(t *testing.T) common.Address {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(key.PublicKey)
}

func TestSimulateTransfer(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	r := dial(t, node.URL(), node.ChainID())
	head, err := node.Client().HeaderByNumber(testContext(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	in := &txmanager.Intent{ChainID: node.ChainID(), From: node.Accounts()[1].Address, To: &stranger, Value: chaintest.Ether}
	tests := []struct {
		name       string
		multiplier float64
		want       chain.Simulation
	}{
		{"default multiplier", 0, chain.Simulation{Estimate: 21000, GasLimit: 25200}},
		{"1.2 given", 1.2, chain.Simulation{Estimate: 21000, GasLimit: 25200}},
		// The float64 nearest 1.1 is slightly above it: read as the
		// decimal it prints as, the product is exact.
		{"1.1", 1.1, chain.Simulation{Estimate: 21000, GasLimit: 23100}},
		{"no headroom", 1, chain.Simulation{Estimate: 21000, GasLimit: 21000}},
		{"rounded up", 1.00001, chain.Simulation{Estimate: 21000, GasLimit: 21001}},
		{"capped at the block gas limit", 10_000, chain.Simulation{Estimate: 21000, GasLimit: head.GasLimit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Simulate(testContext(t), in, chain.GasRules{Multiplier: tt.multiplier})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Simulate (-want +got):\n%s", diff)
			}
		})
	}

	for _, m := range []float64{0.5, -1, math.NaN(), math.Inf(1)} {
		if _, err := r.Simulate(testContext(t), in, chain.GasRules{Multiplier: m}); err == nil {
			t.Errorf("Simulate with gas multiplier %v: no error", m)
		}
	}
	other := *in
	other.ChainID = 1
	if sim, err := r.Simulate(testContext(t), &other, chain.GasRules{}); err == nil {
		t.Errorf("Simulate of an intent for chain 1 on chain %d = %+v, want an error", node.ChainID(), sim)
	}
	if fees, err := r.Fees(testContext(t), txmanager.SignerConfig{}, &other, false); err == nil {
		t.Errorf("Fees of an intent for chain 1 on chain %d = %+v, want an error", node.ChainID(), fees)
	}
}

func TestSimulateReverts(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	var (
		errorC  = deploy(t, node, revertsWithError)
		panicC  = deploy(t, node, revertsWithPanic)
		customC = deploy(t, node, revertsWithCustom())
		emptyC  = deploy(t, node, revertsEmpty)
		invalid = deploy(t, node, haltsInvalid)
		loops   = deploy(t, node, loopsForever)
		stores  = deploy(t, node, storesOne)
	)
	r := dial(t, node.URL(), node.ChainID())
	from := node.Accounts()[1].Address
	customData := concat(selector(insufficientBalance), word(1), word(2))

	tests := []struct {
		name string
		to   *common.Address // nil: a contract creation
		data []byte
		gas  *uint64
		want chain.Simulation
	}{
		{name: "Error(string)", to: &errorC, want: chain.Simulation{Reverted: true, Reason: "nope", RevertData: errorData("nope")}},
		{name: "Panic(uint256)", to: &panicC, want: chain.Simulation{Reverted: true, Reason: "panic 0x11: arithmetic underflow or overflow", RevertData: panicData(0x11)}},
		{name: "custom error", to: &customC, want: chain.Simulation{
			Reverted:   true,
			Reason:     "custom error " + hexutil.Encode(customData[:4]) + ": " + hexutil.Encode(customData[4:]),
			RevertData: customData,
		}},
		{name: "empty revert data", to: &emptyC, want: chain.Simulation{Reverted: true, Reason: "reverted without a reason", RevertData: []byte{}}},
		// Halts are not reverts to the EVM, but the transaction fails all
		// the same; anvil words them "EVM error <revm halt reason>".
		{name: "invalid opcode", to: &invalid, want: chain.Simulation{Reverted: true, Reason: "EVM error InvalidFEOpcode"}},
		{name: "out of gas", to: &loops, want: chain.Simulation{Reverted: true, Reason: "EVM error OutOfGas"}},
		{name: "given gas too low", to: &stores, gas: ptr[uint64](30_000), want: chain.Simulation{Reverted: true, Reason: "EVM error OutOfGas"}},
		{name: "given gas below the intrinsic cost", to: &stores, gas: ptr[uint64](20_000), want: chain.Simulation{Reverted: true, Reason: "intrinsic gas too high -- CallGasCostMoreThanGasLimit"}},
		{name: "given gas above the block gas limit", to: &stores, gas: ptr[uint64](1 << 30), want: chain.Simulation{Reverted: true, Reason: "gas limit 1073741824 exceeds the block gas limit 30000000"}},
		{name: "creation that reverts", data: revertsWithError, want: chain.Simulation{Reverted: true, Reason: "nope", RevertData: errorData("nope")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := &txmanager.Intent{ChainID: node.ChainID(), From: from, To: tt.to, Value: new(big.Int), Data: tt.data, Gas: tt.gas}
			got, err := r.Simulate(testContext(t), in, chain.GasRules{})
			if err != nil {
				t.Fatalf("Simulate: %v; a revert is not an error", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Simulate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSimulateEstimates checks the estimate against the node's own and
// that a given gas limit is used as is, without asking for an estimate.
func TestSimulateEstimates(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	stores := deploy(t, node, storesOne)
	p := newProxy(t, node.URL(), false)
	r := dial(t, p.URL, node.ChainID())
	from := node.Accounts()[1].Address
	ctx := testContext(t)

	call := &txmanager.Intent{ChainID: node.ChainID(), From: from, To: &stores, Value: new(big.Int)}
	est, err := node.Client().EstimateGas(ctx, ethereum.CallMsg{From: from, To: &stores})
	if err != nil {
		t.Fatal(err)
	}
	if est <= 21000 {
		t.Fatalf("the storing contract estimates %d gas: it should cost more than a transfer", est)
	}
	got, err := r.Simulate(ctx, call, chain.GasRules{Multiplier: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chain.Simulation{Estimate: est, GasLimit: (est*3 + 1) / 2}, got); diff != "" {
		t.Errorf("Simulate with multiplier 1.5 (-want +got):\n%s", diff)
	}

	creation := &txmanager.Intent{ChainID: node.ChainID(), From: from, Value: new(big.Int), Data: initCode(storesOne)}
	got, err = r.Simulate(ctx, creation, chain.GasRules{})
	if err != nil || got.Reverted || got.Estimate <= 21000 || got.GasLimit < got.Estimate {
		t.Errorf("Simulate of a contract creation = %+v, %v; want it to succeed with an estimate", got, err)
	}

	before, _ := p.counts()
	given := *call
	given.Gas = ptr[uint64](100_000)
	got, err = r.Simulate(ctx, &given, chain.GasRules{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chain.Simulation{GasLimit: 100_000}, got); diff != "" {
		t.Errorf("Simulate with Gas 100000 (-want +got):\n%s", diff)
	}
	after, _ := p.counts()
	if after["eth_estimateGas"] != before["eth_estimateGas"] {
		t.Errorf("eth_estimateGas called %d times with the gas given", after["eth_estimateGas"]-before["eth_estimateGas"])
	}
	if after["eth_call"] != before["eth_call"]+1 {
		t.Errorf("eth_call called %d times with the gas given, want 1", after["eth_call"]-before["eth_call"])
	}
}

// TestSimulateEstimateFloor: on a chain whose estimate is the floor of
// the gas limit (the arbitrum profile), the gas limit is never below the
// node's estimate. Arbitrum's eth_estimateGas adds the L1 poster
// component to the execution's gas; a proxy in front of anvil adds one
// the same way. Without a gas of its own the multiplier only adds to the
// estimate, and the block gas limit only trims that headroom; an intent's
// own gas is estimated too, kept when it covers the estimate and failed
// (no nonce spent) when it only covers the execution.
func TestSimulateEstimateFloor(t *testing.T) {
	t.Parallel()
	const l1Gas = 30_000
	node := chaintest.Anvil(t, anvil.Options{})
	stores := deploy(t, node, storesOne)
	p := newProxy(t, node.URL(), false)
	p.addToEstimates(l1Gas)
	r := dial(t, p.URL, node.ChainID())
	ctx := testContext(t)
	call := &txmanager.Intent{ChainID: node.ChainID(), From: node.Accounts()[1].Address, To: &stores, Value: new(big.Int)}
	execution, err := node.Client().EstimateGas(ctx, ethereum.CallMsg{From: call.From, To: &stores})
	if err != nil {
		t.Fatal(err)
	}
	est := execution + l1Gas
	floor := chain.GasRules{EstimateFloor: true}

	got, err := r.Simulate(ctx, call, floor)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chain.Simulation{Estimate: est, GasLimit: (est*6 + 4) / 5}, got); diff != "" {
		t.Errorf("Simulate without a gas of its own (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		name string
		gas  uint64
		want chain.Simulation
	}{
		{"above the estimate: kept", est + 1000, chain.Simulation{Estimate: est, GasLimit: est + 1000}},
		{"at the estimate: kept", est, chain.Simulation{Estimate: est, GasLimit: est}},
		{"enough for the execution, not for the L1 component: failed", execution + 1000, chain.Simulation{Reverted: true,
			Reason: fmt.Sprintf("gas limit %d is below the node's estimate of %d, which on this chain includes the L1 data component", execution+1000, est)}},
	} {
		before, _ := p.counts()
		given := *call
		given.Gas = &tt.gas
		got, err := r.Simulate(ctx, &given, floor)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: Simulate (-want +got):\n%s", tt.name, diff)
		}
		if after, _ := p.counts(); after["eth_estimateGas"] != before["eth_estimateGas"]+1 {
			t.Errorf("%s: eth_estimateGas called %d times, want 1", tt.name, after["eth_estimateGas"]-before["eth_estimateGas"])
		}
	}
	// Without the rule, the same gas is the intent's to choose.
	given := *call
	given.Gas = ptr(execution + 1000)
	if got, err := r.Simulate(ctx, &given, chain.GasRules{}); err != nil || !cmp.Equal(got, chain.Simulation{GasLimit: execution + 1000}) {
		t.Errorf("Simulate without the rule = %+v, %v; want the given gas", got, err)
	}

	// A block gas limit between the estimate and the estimate × 1.2 trims
	// the headroom, never the estimate.
	if err := node.RPC().CallContext(ctx, nil, "anvil_setBlockGasLimit", hexutil.Uint64(est+100)); err != nil {
		t.Fatal(err)
	}
	if err := node.Mine(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got, err = r.Simulate(ctx, call, floor)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(chain.Simulation{Estimate: est, GasLimit: est + 100}, got); diff != "" {
		t.Errorf("Simulate under a block gas limit of the estimate + 100 (-want +got):\n%s", diff)
	}
}

// TestSimulateInsufficientFunds: anvil refuses to run a call whose value
// the sender cannot pay (JSON-RPC -32003 "Insufficient funds for gas *
// price + value"), before any code runs. That is neither a revert (the
// transaction would never be mined, so it cannot fail on chain) nor a
// flaky node, so Simulate returns ErrInsufficientFunds and the worker
// holds the transaction (sub-state insufficient_funds). Either way no
// nonce is consumed: nothing was sent.
func TestSimulateInsufficientFunds(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	contract := deploy(t, node, storesOne)
	r := dial(t, node.URL(), node.ChainID())
	ctx := testContext(t)
	poor := newAddress(t)
	if err := node.SetBalance(ctx, poor, big.NewInt(1000)); err != nil {
		t.Fatal(err)
	}

	for name, to := range map[string]common.Address{"to an account": stranger, "to a contract": contract} {
		in := &txmanager.Intent{ChainID: node.ChainID(), From: poor, To: &to, Value: big.NewInt(1001)}
		sim, err := r.Simulate(ctx, in, chain.GasRules{})
		if !errors.Is(err, chain.ErrInsufficientFunds) {
			t.Errorf("%s: Simulate of 1001 wei from a balance of 1000 = %+v, %v; want ErrInsufficientFunds", name, sim, err)
		}
	}
	if n, err := r.PendingNonce(ctx, poor); err != nil || n != 0 {
		t.Errorf("pending nonce %d, %v after the simulations; want 0", n, err)
	}

	// The call carries no gas price: a value the sender can just pay
	// simulates, and it is the worker's balance check, against Cost with
	// the fees, that holds the transaction.
	in := &txmanager.Intent{ChainID: node.ChainID(), From: poor, To: &stranger, Value: big.NewInt(1000)}
	sim, err := r.Simulate(ctx, in, chain.GasRules{})
	if err != nil || sim.Reverted {
		t.Fatalf("Simulate of the whole balance = %+v, %v; want success", sim, err)
	}
	fees, err := r.Fees(ctx, txmanager.SignerConfig{}, in, false)
	if err != nil {
		t.Fatal(err)
	}
	bal, err := r.Balance(ctx, poor)
	if err != nil {
		t.Fatal(err)
	}
	if cost := chain.Cost(sim.GasLimit, fees, in.Value, nil); cost.Cmp(bal) <= 0 {
		t.Errorf("Cost %s within the balance %s: the gas is not counted", cost, bal)
	}

	// The pending state counts what the pool has already spent: with a
	// transfer waiting, the rest of the balance no longer simulates.
	if err := node.SetAutomine(ctx, false); err != nil {
		t.Fatal(err)
	}
	rich := node.Accounts()[2]
	full, err := r.Balance(ctx, rich.Address)
	if err != nil {
		t.Fatal(err)
	}
	chaintest.SendTransfer(t, node, rich.Key, stranger, chaintest.Ether)
	in = &txmanager.Intent{ChainID: node.ChainID(), From: rich.Address, To: &stranger, Value: full}
	if sim, err := r.Simulate(ctx, in, chain.GasRules{}); !errors.Is(err, chain.ErrInsufficientFunds) {
		t.Errorf("Simulate of the whole mined balance with a transfer pending = %+v, %v; want ErrInsufficientFunds", sim, err)
	}
}

// TestSimulatePendingRefused runs against a node that refuses the
// "pending" tag: Simulate and Balance fall back to "latest" and stop
// asking for pending; PendingNonce has no fallback and fails.
func TestSimulatePendingRefused(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	errorC := deploy(t, node, revertsWithError)
	p := newProxy(t, node.URL(), true)
	r := dial(t, p.URL, node.ChainID())
	ctx := testContext(t)
	from := node.Accounts()[1].Address

	sim, err := r.Simulate(ctx, &txmanager.Intent{ChainID: node.ChainID(), From: from, To: &stranger, Value: chaintest.Ether}, chain.GasRules{})
	if want := (chain.Simulation{Estimate: 21000, GasLimit: 25200}); err != nil || sim.Reverted || sim.GasLimit != want.GasLimit {
		t.Fatalf("Simulate = %+v, %v; want %+v", sim, err, want)
	}
	_, refused := p.counts()
	if refused != 1 {
		t.Errorf("%d requests at pending refused, want 1 (then latest only)", refused)
	}
	sim, err = r.Simulate(ctx, &txmanager.Intent{ChainID: node.ChainID(), From: from, To: &errorC, Value: new(big.Int)}, chain.GasRules{})
	if err != nil || !sim.Reverted || sim.Reason != "nope" {
		t.Errorf("Simulate of a revert = %+v, %v; want reverted with nope", sim, err)
	}
	if bal, err := r.Balance(ctx, from); err != nil || bal.Sign() <= 0 {
		t.Errorf("Balance = %v, %v; want the latest balance", bal, err)
	}
	if _, refused := p.counts(); refused != 1 {
		t.Errorf("%d requests at pending refused in all, want 1", refused)
	}
	if n, err := r.PendingNonce(ctx, from); err == nil {
		t.Errorf("PendingNonce = %d from a node without a pending state; want an error", n)
	}
}

// TestSimulateNodeFailures: whatever a failing node answers, Simulate
// returns an error (the worker retries) and never a revert (the worker
// would fail the transaction), unless the answer is a JSON-RPC error that
// says what the transaction does.
func TestSimulateNodeFailures(t *testing.T) {
	t.Parallel()
	const nopeHex = "0x08c379a0000000000000000000000000000000000000000000000000000000000000002000000000000000000000000000000000000000000000000000000000000000046e6f706500000000000000000000000000000000000000000000000000000000"
	const panicHex = "0x4e487b710000000000000000000000000000000000000000000000000000000000000011"
	tests := []struct {
		name         string
		status       int
		body         string
		wantErr      bool
		insufficient bool
		want         chain.Simulation
	}{
		{name: "HTTP 502 whose body says reverted", status: 502, body: "bad gateway: execution reverted", wantErr: true},
		{name: "HTTP 429", status: 429, body: "too many requests", wantErr: true},
		{name: "HTTP 500 with a JSON-RPC revert body", status: 500, body: `{"jsonrpc":"2.0","id":1,"error":{"code":3,"message":"execution reverted","data":"0x"}}`, wantErr: true},
		{name: "internal error", status: 200, body: `{"code":-32603,"message":"internal error"}`, wantErr: true},
		{name: "header not found", status: 200, body: `{"code":-32000,"message":"header not found"}`, wantErr: true},
		{name: "rate limited", status: 200, body: `{"code":-32005,"message":"request rate exceeded"}`, wantErr: true},
		{name: "google cloud", status: 200, body: `{"code":-32000,"message":"upstream googleapis.com unavailable"}`, wantErr: true},
		{name: "no answer", status: 0, wantErr: true},
		{name: "a Java node's own crash", status: 200, body: `{"code":-32603,"message":"Internal error: java.lang.StackOverflowError"}`, wantErr: true},
		{name: "a paid provider out of credits", status: 200, body: `{"code":-32000,"message":"insufficient balance: top up your plan"}`, wantErr: true},
		{name: "anvil failing to read a forked chain", status: 200, body: `{"code":-32603,"message":"EVM error FatalExternalError"}`, wantErr: true},
		{name: "pending refused and latest failing too", status: 200, body: `{"code":-32602,"message":"unsupported block tag pending"}`, wantErr: true},

		{name: "geth insufficient funds", status: 200, body: `{"code":-32000,"message":"insufficient funds for gas * price + value: address 0x70997970C51812dc3A079C51812dc3A079C51812 have 0 want 1"}`, wantErr: true, insufficient: true},
		{name: "besu upfront cost", status: 200, body: `{"code":-32004,"message":"Upfront cost exceeds account balance"}`, wantErr: true, insufficient: true},

		{name: "geth revert", status: 200, body: `{"code":3,"message":"execution reverted: nope","data":"` + nopeHex + `"}`, want: chain.Simulation{Reverted: true, Reason: "nope", RevertData: errorData("nope")}},
		{name: "revert without data", status: 200, body: `{"code":3,"message":"execution reverted: nope"}`, want: chain.Simulation{Reverted: true, Reason: "execution reverted: nope"}},
		{name: "besu revert", status: 200, body: `{"code":-32000,"message":"Execution reverted","data":"` + nopeHex + `"}`, want: chain.Simulation{Reverted: true, Reason: "nope", RevertData: errorData("nope")}},
		{name: "older nethermind revert", status: 200, body: `{"code":-32015,"message":"VM execution error.","data":"Reverted ` + panicHex + `"}`, want: chain.Simulation{Reverted: true, Reason: "panic 0x11: arithmetic underflow or overflow", RevertData: panicData(0x11)}},
		{name: "hardhat revert", status: 200, body: `{"code":-32603,"message":"Error: VM Exception while processing transaction: reverted with panic code 0x11","data":{"message":"reverted with panic code 0x11","data":"` + panicHex + `"}}`, want: chain.Simulation{Reverted: true, Reason: "panic 0x11: arithmetic underflow or overflow", RevertData: panicData(0x11)}},
		{name: "geth invalid opcode", status: 200, body: `{"code":-32000,"message":"invalid opcode: INVALID"}`, want: chain.Simulation{Reverted: true, Reason: "invalid opcode: INVALID"}},
		{name: "geth estimate out of gas", status: 200, body: `{"code":-32000,"message":"gas required exceeds allowance (30000000)"}`, want: chain.Simulation{Reverted: true, Reason: "gas required exceeds allowance (30000000)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := dial(t, fakeNode(t, tt.status, tt.body), anvil.DefaultChainID)
			ctx := testContext(t)
			if tt.status == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
				defer cancel()
			}
			in := &txmanager.Intent{ChainID: anvil.DefaultChainID, From: stranger, To: &stranger, Value: new(big.Int)}
			got, err := r.Simulate(ctx, in, chain.GasRules{})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Simulate = %+v, nil; want an error", got)
				}
				if errors.Is(err, chain.ErrInsufficientFunds) != tt.insufficient {
					t.Errorf("Simulate error %v: errors.Is ErrInsufficientFunds %t, want %t", err, !tt.insufficient, tt.insufficient)
				}
				return
			}
			if err != nil {
				t.Fatalf("Simulate: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Simulate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDial(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{ChainID: 1001})
	ctx := testContext(t)

	r, err := chain.Dial(ctx, txmanager.Chain{ID: 1001, RPC: rpcpool.URLs(node.URL(), "http://127.0.0.1:1")}, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer r.Close()
	if r.ChainID() != 1001 {
		t.Errorf("ChainID %d, want 1001", r.ChainID())
	}

	if r, err := chain.Dial(ctx, txmanager.Chain{ID: 31337, RPC: rpcpool.URLs(node.URL())}, nil); err == nil {
		r.Close()
		t.Errorf("Dial for chain 31337 of a node serving 1001 succeeded")
	} else if !strings.Contains(err.Error(), "serves another chain") || !strings.Contains(err.Error(), "on chain 1001") {
		t.Errorf("Dial for the wrong chain: %v; want it to name the chain served", err)
	}
	if _, err := chain.Dial(ctx, txmanager.Chain{ID: 1001}, nil); err == nil {
		t.Errorf("Dial without an RPC endpoint succeeded")
	}
	// An endpoint down at the start is no reason to stop a daemon serving
	// other chains: the reader starts, and its reads fail until a probe
	// finds the endpoint up and on the right chain.
	down, err := chain.Dial(ctx, txmanager.Chain{ID: 1001, RPC: rpcpool.URLs(chaintest.ClosedURL(t))}, nil)
	if err != nil {
		t.Fatalf("Dial of an unreachable endpoint: %v", err)
	}
	defer down.Close()
	if _, err := down.Head(ctx); err == nil || !strings.Contains(err.Error(), "chain id not confirmed yet") {
		t.Errorf("a read with no endpoint up: %v, want an error saying why", err)
	}
}

// TestNodeGone: a reader whose node has died answers errors, never a
// revert, so nothing is failed for it.
func TestNodeGone(t *testing.T) {
	t.Parallel()
	node := chaintest.Anvil(t, anvil.Options{})
	errorC := deploy(t, node, revertsWithError)
	r := dial(t, node.URL(), node.ChainID())
	from := node.Accounts()[0].Address
	if err := node.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	for _, to := range []common.Address{stranger, errorC} {
		sim, err := r.Simulate(ctx, &txmanager.Intent{ChainID: node.ChainID(), From: from, To: &to, Value: new(big.Int)}, chain.GasRules{})
		if err == nil || sim.Reverted || errors.Is(err, chain.ErrInsufficientFunds) {
			t.Errorf("Simulate against a stopped node = %+v, %v; want a plain error", sim, err)
		}
	}
	if _, err := r.Fees(ctx, txmanager.SignerConfig{}, nil, false); err == nil {
		t.Errorf("Fees against a stopped node: no error")
	}
	if _, err := r.Balance(ctx, from); err == nil {
		t.Errorf("Balance against a stopped node: no error")
	}
	if _, err := r.PendingNonce(ctx, from); err == nil {
		t.Errorf("PendingNonce against a stopped node: no error")
	}
	if _, err := r.MinedNonce(ctx, from); err == nil {
		t.Errorf("MinedNonce against a stopped node: no error")
	}
}
