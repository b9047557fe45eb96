package httpapi_test

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	erc20 "github.com/txfence/txfence/ledger/ledgertest/token"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/gatewayapi"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/wait"
)

// crossChain is the whole stack on two anvils of different chain ids: A
// (31337) mines only when the test mines, so that its transactions stay
// unconfirmed as long as the test needs; B (4242) mines a block every
// half second. Acme owns a signer on each: on A the holder of A's token
// (minted to it by another account), on B the deployer of B's token,
// which mints there as a bridge's release would.
type crossChain struct {
	g              *gatewaystack.Gateway
	a, b           *anvil.Node
	signerA        common.Address // acme's on chain A
	signerC        common.Address // acme's on chain B
	tokenA, tokenB common.Address
	bridge         common.Address
}

func newCrossChain(t *testing.T) *crossChain {
	t.Helper()
	x := &crossChain{
		a:       chaintest.Anvil(t, anvil.Options{NoMining: true}),
		b:       chaintest.Anvil(t, anvil.Options{ChainID: 4242, BlockTime: 500 * time.Millisecond}),
		signerA: common.HexToAddress(signerA),
		signerC: signertest.DevAddress(2),
		bridge:  common.HexToAddress("0x00000000000000000000000000000000b81d9e00"),
	}
	// The tokens, before any service starts: the ledger opens the wallets
	// with their balances. Chain A mines each of these as it comes, and
	// then only when the test mines.
	if err := x.a.SetAutomine(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	minter := x.a.Accounts()[9].Key
	x.tokenA = erc20.Deploy(t, x.a, minter)
	erc20.Mint(t, x.a, minter, x.tokenA, x.signerA, big.NewInt(1_000_000))
	if err := x.a.SetAutomine(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	x.tokenB = erc20.Deploy(t, x.b, x.b.Accounts()[2].Key)
	x.g = gatewaystack.Start(t, gatewaystack.Options{Chains: []gatewaystack.Chain{
		{Node: x.a, Signers: []common.Address{x.signerA}, Tokens: []common.Address{x.tokenA}},
		{Node: x.b, Signers: []common.Address{x.signerC}, Tokens: []common.Address{x.tokenB}},
	}})
	x.g.AssignSigner(t, x.g.AcmeTenant, x.b.ChainID(), x.signerC.Hex())
	// Both wallets are opened before anything is sent.
	for _, w := range []struct {
		chain  uint64
		wallet common.Address
	}{{x.a.ChainID(), x.signerA}, {x.b.ChainID(), x.signerC}} {
		x.await(t, fmt.Sprintf("the ledger opening %s on chain %d", w.wallet, w.chain), func() bool {
			return len(x.accounts(t, w.chain, w.wallet, "wallet").Accounts) > 0
		})
	}
	return x
}

// await polls cond, failing with every service's logs.
func (x *crossChain) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	wait.ForDescribed(t, 2*time.Minute, cond, func() string { return what + "\n" + x.g.Services.Logs() })
}

// create posts a transaction of acme's through the gateway and returns
// its id: a call of to with data on chain, marked with transitID when not
// empty, depending on parents.
func (x *crossChain) create(t *testing.T, idem string, chain uint64, from, to common.Address, data []byte, transitID string, parents ...string) string {
	t.Helper()
	body := fmt.Sprintf(`{"chain_id": %d, "from": %q, "to": %q, "value": "0", "data": %q, "route": "public"`, chain, from.Hex(), to.Hex(), hexutil.Encode(data))
	if transitID != "" {
		body += fmt.Sprintf(`, "metadata": {"transit_id": %q}`, transitID)
	}
	if len(parents) > 0 {
		body += `, "depends_on": ["` + strings.Join(parents, `", "`) + `"]`
	}
	resp, b := x.g.Do(t, x.g.Acme, "POST", "/api/v1/tx", body+"}", "Idempotency-Key", idem)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s: %d %s", idem, resp.StatusCode, b)
	}
	return decode[components.Tx](t, b).TxId.String()
}

func (x *crossChain) tx(t *testing.T, id string) components.Tx {
	t.Helper()
	return read[components.Tx](t, x.g, x.g.Acme, "/api/v1/tx/"+id)
}

// awaitState waits for transaction id to reach state through the API.
func (x *crossChain) awaitState(t *testing.T, id string, state components.TxState) components.Tx {
	t.Helper()
	var tx components.Tx
	x.await(t, fmt.Sprintf("%s %s (last: %+v)", id, state, &tx), func() bool { tx = x.tx(t, id); return tx.State == state })
	return tx
}

// mineUntil mines chain A a block at a time until transaction id is in
// state: evm_mine is chain A's only way to new blocks.
func (x *crossChain) mineUntil(t *testing.T, id string, state components.TxState) {
	t.Helper()
	x.await(t, fmt.Sprintf("%s %s, mining chain A", id, state), func() bool {
		if x.tx(t, id).State == state {
			return true
		}
		if err := x.a.Mine(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		return false
	})
}

// seq is the feed's number of the first state change of id into state.
func (x *crossChain) seq(t *testing.T, id string, state components.TxState) int64 {
	t.Helper()
	var seq int64
	x.await(t, fmt.Sprintf("the event of %s into %s numbered", id, state), func() bool {
		for _, ev := range read[components.EventList](t, x.g, x.g.Acme, "/api/v1/tx/"+id+"/events").Events {
			if ev.Type == components.EventTxStateChanged && ev.Seq > 0 && decode[components.TxStateChangedData](t, ev.Data).ToState == state {
				seq = ev.Seq
				return true
			}
		}
		return false
	})
	return seq
}

func (x *crossChain) accounts(t *testing.T, chain uint64, wallet common.Address, kind string) gatewayapi.LedgerAccountList {
	t.Helper()
	return read[gatewayapi.LedgerAccountList](t, x.g, x.g.Acme, fmt.Sprintf("/api/v1/ledger/accounts?chain_id=%d&address=%s&kind=%s", chain, wallet.Hex(), kind))
}

// balance is wallet's balance of kind in asset on chain, 0 for none.
func (x *crossChain) balance(t *testing.T, chain uint64, wallet common.Address, kind string, asset common.Address) *big.Int {
	t.Helper()
	for _, a := range x.accounts(t, chain, wallet, kind).Accounts {
		if strings.EqualFold(string(a.Asset), asset.Hex()) {
			v, ok := new(big.Int).SetString(a.Balance, 10)
			if !ok {
				t.Fatalf("balance %q", a.Balance)
			}
			return v
		}
	}
	return new(big.Int)
}

// awaitCompleted waits for acme's transit id to be completed in the
// ledger, through the gateway, and returns it.
func (x *crossChain) awaitCompleted(t *testing.T, id string) gatewayapi.LedgerTransit {
	t.Helper()
	var tr gatewayapi.LedgerTransit
	x.await(t, "transit "+id+" completed", func() bool {
		resp, b := x.g.Do(t, x.g.Acme, "GET", "/api/v1/ledger/transits/"+id, "")
		if resp.StatusCode != http.StatusOK {
			return false
		}
		tr = decode[gatewayapi.LedgerTransit](t, b)
		return tr.Status == "completed"
	})
	return tr
}

// TestACrossChainTransferEndToEnd drives a transfer between two chains
// through the public API on the real stack: the source on chain A sends
// 1000 of A's token to the bridge, the destination on chain B, depending
// on it, mints 990 of B's token into acme's wallet there. The destination
// waits (no nonce) until the source is CONFIRMED, and only then is sent;
// the ledger books the source into in_transit on A and the destination
// out of it on B, with the difference as the bridge's fee, so in_transit
// nets to zero over the two chains. Then a child with two parents on two
// chains waits for both, also after one of them is CONFIRMED.
func TestACrossChainTransferEndToEnd(t *testing.T) {
	t.Parallel()
	x := newCrossChain(t)
	chainA, chainB := x.a.ChainID(), x.b.ChainID()
	sent, received := big.NewInt(1000), big.NewInt(990)

	source := x.create(t, "move-x-out", chainA, x.signerA, x.tokenA, erc20.TransferCalldata(x.bridge, sent), "move-x")
	destination := x.create(t, "move-x-in", chainB, x.signerC, x.tokenB, erc20.MintCalldata(x.signerC, received), "move-x", source)
	x.awaitState(t, source, components.StateBroadcasted)
	x.await(t, "the destination waiting for its source", func() bool {
		tx := x.tx(t, destination)
		return tx.SubState != nil && *tx.SubState == components.SubStateWaitingDependency
	})
	if tx := x.tx(t, destination); tx.State != components.StateInit || tx.Nonce != nil || tx.DependsOn == nil ||
		len(*tx.DependsOn) != 1 || (*tx.DependsOn)[0].String() != source {
		t.Errorf("the destination before its source is mined: %+v", tx)
	}
	x.mineUntil(t, source, components.StateConfirmed)
	x.awaitState(t, destination, components.StateConfirmed)
	if confirmed, simulated := x.seq(t, source, components.StateConfirmed), x.seq(t, destination, components.StateSimulated); simulated < confirmed {
		t.Errorf("the destination was simulated at seq %d, before its source was CONFIRMED at %d", simulated, confirmed)
	}

	tr := x.awaitCompleted(t, "move-x")
	if tr.Source.TxId != source || tr.Destination == nil || tr.Destination.TxId != destination || tr.Source.ChainId != int64(chainA) ||
		tr.Destination.ChainId != int64(chainB) || tr.BridgeFee == nil || *tr.BridgeFee != "10" ||
		tr.Source.Amount == nil || *tr.Source.Amount != "1000" || tr.Destination.Amount == nil || *tr.Destination.Amount != "990" {
		t.Errorf("transit move-x: %+v", tr)
	}
	onA, onB := x.balance(t, chainA, x.signerA, "in_transit", x.tokenA), x.balance(t, chainB, x.signerC, "in_transit", x.tokenB)
	if onA.Cmp(received) != 0 || new(big.Int).Add(onA, onB).Sign() != 0 {
		t.Errorf("in_transit: %s on chain A, %s on chain B; want +990 and -990, netting to zero", onA, onB)
	}

	// A child on chain B with two parents: a source on chain A (transit
	// move-y) and a payment on chain B. B's parent confirms by itself; the
	// child still waits for A's.
	ySource := x.create(t, "move-y-out", chainA, x.signerA, x.tokenA, erc20.TransferCalldata(x.bridge, big.NewInt(500)), "move-y")
	payment := x.create(t, "payment", chainB, x.signerC, common.HexToAddress(bob), nil, "")
	child := x.create(t, "move-y-in", chainB, x.signerC, x.tokenB, erc20.MintCalldata(x.signerC, big.NewInt(500)), "move-y", payment, ySource)
	x.awaitState(t, payment, components.StateConfirmed)
	// A transaction accepted now is taken on by a pass of chain B's worker
	// that read the child's parents after the payment was CONFIRMED.
	marker := x.create(t, "marker", chainB, x.signerC, common.HexToAddress(bob), nil, "")
	x.awaitState(t, marker, components.StateBroadcasted)
	if tx := x.tx(t, child); tx.State != components.StateInit || tx.Nonce != nil || tx.SubState == nil || *tx.SubState != components.SubStateWaitingDependency {
		t.Errorf("the child with one of two parents CONFIRMED: %+v", tx)
	}
	x.mineUntil(t, ySource, components.StateConfirmed)
	x.awaitState(t, child, components.StateConfirmed)
	for _, parent := range []string{ySource, payment} {
		if confirmed, simulated := x.seq(t, parent, components.StateConfirmed), x.seq(t, child, components.StateSimulated); simulated < confirmed {
			t.Errorf("the child was simulated at seq %d, before its parent %s was CONFIRMED at %d", simulated, parent, confirmed)
		}
	}
	if tr := x.awaitCompleted(t, "move-y"); tr.Destination == nil || tr.Destination.TxId != child || tr.BridgeFee == nil || *tr.BridgeFee != "0" {
		t.Errorf("transit move-y: %+v", tr)
	}
}
