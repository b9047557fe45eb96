package worker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/remote"
)

// fundsStore answers the WorkStore calls of intake's balance check: the
// INIT queue, the signer's open transactions and what Store.PendingCost
// says they may cost. Any other call panics on the nil embedded
// interface, so a test also proves nothing was moved on.
type fundsStore struct {
	txmanager.WorkStore

	init, open  []txmanager.Tx
	pendingCost *big.Int
	subStates   []txmanager.SubState
}

func (s *fundsStore) Open(_ context.Context, _ txmanager.SignerKey, states []txmanager.State, _ int) ([]txmanager.Tx, error) {
	switch {
	case slices.Equal(states, []txmanager.State{txmanager.StateInit}):
		return s.init, nil
	case slices.Equal(states, pendingStates):
		return s.open, nil
	}
	return nil, fmt.Errorf("the fake lists no transactions in %v", states)
}

func (s *fundsStore) OpenAfter(ctx context.Context, key txmanager.SignerKey, states []txmanager.State, _ uuid.UUID, limit int) ([]txmanager.Tx, error) {
	return s.Open(ctx, key, states, limit)
}

func (s *fundsStore) PendingCost(context.Context, txmanager.SignerKey, uint64, *big.Int) (*big.Int, error) {
	return new(big.Int).Set(s.pendingCost), nil
}

func (s *fundsStore) SetSubState(_ context.Context, _ txmanager.Fence, _ uuid.UUID, _ txmanager.State, sub txmanager.SubState, _ string) (txmanager.Tx, error) {
	s.subStates = append(s.subStates, sub)
	return txmanager.Tx{}, nil
}

// TestTheL1DataFeeIsPaidFor: on an op-stack chain (anvil with the
// GasPriceOracle stand-in at the predeploy) a signer whose balance covers
// a transaction's value and L2 gas but not its L1 data fee is held
// (insufficient_funds), not passed on to be signed; so is one whose
// balance does not also cover the L1 data fees of its open transactions.
// One wei more and the transaction goes on to the policy's dry run
// (signerd, unreachable here, answers with an error). An oracle that
// cannot answer holds nothing and passes nothing: it is an error, and the
// worker retries the round.
func TestTheL1DataFeeIsPaidFor(t *testing.T) {
	node := chaintest.Anvil(t, anvil.Options{})
	ctx := t.Context()
	// 10 szabo a byte: a transfer's L1 data fee is about 1e15 wei, well
	// above its L2 gas at anvil's prices, as on OP Mainnet when L1 is busy.
	chaintest.SetL1FeeOracle(t, node, txmanager.OPGasPriceOracle, 10_000_000_000_000)
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	chains, err := txmanager.ParseChains(fmt.Appendf(nil, `{"chains": [{"chain_id": %d, "rpc": [%q], "profile": "op-stack",
		"signers": [{"address": %q}]}]}`, node.ChainID(), node.URL(), from.Hex()))
	if err != nil {
		t.Fatal(err)
	}
	ch := chains.Chains[0]
	r, err := chain.Dial(ctx, ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	oracle, margin, _ := ch.ChargesL1Fee()
	signer, err := remote.NewSigner(chaintest.ClosedURL(t), &http.Client{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	to := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	intent := func(data []byte) txmanager.Intent {
		return txmanager.Intent{ChainID: ch.ID, From: from, To: &to, Value: big.NewInt(1_000_000), Data: data}
	}
	// An open transaction, simulated and waiting for its nonce: what
	// Store.PendingCost counts of it is its value and L2 gas.
	open := txmanager.Tx{ID: uuid.New(), Intent: intent(bytes.Repeat([]byte{0xab}, 500)), State: txmanager.StateSimulated, GasLimit: new(uint64(25_200))}
	openL2 := big.NewInt(1_000_000 + 25_200*1_000_000_000)

	// price is what intake reckons the new transaction costs, L1 data fee
	// included, and that fee; then that of the open transaction's L1 data
	// fee: the chain functions the worker calls, at the same market (no
	// block is mined in between).
	in := intent(nil)
	price := func(t *testing.T) (cost, l1, openL1 *big.Int) {
		t.Helper()
		if err := node.SetBalance(ctx, from, chaintest.Ether); err != nil { // enough to simulate
			t.Fatal(err)
		}
		sim, err := r.Simulate(ctx, &in, chain.GasRules{Multiplier: chain.DefaultGasMultiplier})
		if err != nil {
			t.Fatal(err)
		}
		market, err := r.Market(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		fees := market.Fees(chains.Chains[0].Signers[0], &in)
		if l1, err = r.L1Fee(ctx, oracle, &in, sim.GasLimit, fees, margin); err != nil {
			t.Fatal(err)
		}
		if openL1, err = r.L1Fee(ctx, oracle, &open.Intent, *open.GasLimit, market.Fees(chains.Chains[0].Signers[0], &open.Intent), margin); err != nil {
			t.Fatal(err)
		}
		return chain.Cost(sim.GasLimit, fees, in.Value, l1), l1, openL1
	}

	for _, tt := range []struct {
		name     string
		withOpen bool
		short    int64 // wei below what intake needs
		wantHeld bool
	}{
		{"the L1 data fee not covered", false, 1, true},
		{"the L1 data fee covered", false, 0, false},
		{"an open transaction's L1 data fee not covered", true, 1, true},
		{"an open transaction's L1 data fee covered", true, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cost, l1, openL1 := price(t)
			store := &fundsStore{init: []txmanager.Tx{{ID: uuid.New(), Intent: in, State: txmanager.StateInit}}, pendingCost: new(big.Int)}
			balance := new(big.Int).Sub(cost, big.NewInt(tt.short))
			if tt.withOpen {
				store.open, store.pendingCost = []txmanager.Tx{open}, openL2
				balance.Add(balance, openL2)
				balance.Add(balance, openL1)
			}
			// Short by less than the L1 data fee: the value and the L2 gas
			// are covered.
			if l1.Cmp(big.NewInt(tt.short)) <= 0 {
				t.Fatalf("L1 data fee %s: the stand-in charges too little to tell", l1)
			}
			if err := node.SetBalance(ctx, from, balance); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			w := newFundsWorker(store, chains, r, signer, &logged)
			err := w.intake(ctx)
			if tt.wantHeld {
				if err != nil || !slices.Equal(store.subStates, []txmanager.SubState{txmanager.SubInsufficientFunds}) {
					t.Fatalf("intake = %v, sub-states %v; want the transaction held for funds", err, store.subStates)
				}
				if want := fmt.Sprintf("its L1 data fee %s included", l1); !strings.Contains(logged.String(), want) {
					t.Errorf("the hold does not say %q:\n%s", want, &logged)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "policy dry run") || len(store.subStates) != 0 {
				t.Fatalf("intake = %v, sub-states %v; want it past the balance check, at the policy's dry run", err, store.subStates)
			}
		})
	}

	t.Run("the oracle gone", func(t *testing.T) {
		if err := node.RPC().CallContext(ctx, nil, "anvil_setCode", txmanager.OPGasPriceOracle, hexutil.Bytes{}); err != nil {
			t.Fatal(err)
		}
		if err := node.SetBalance(ctx, from, new(big.Int).Mul(big.NewInt(100), chaintest.Ether)); err != nil {
			t.Fatal(err)
		}
		store := &fundsStore{init: []txmanager.Tx{{ID: uuid.New(), Intent: in, State: txmanager.StateInit}}, pendingCost: new(big.Int)}
		err := newFundsWorker(store, chains, r, signer, new(bytes.Buffer)).intake(ctx)
		if err == nil || !strings.Contains(err.Error(), "answered nothing") || len(store.subStates) != 0 {
			t.Fatalf("intake = %v, sub-states %v; want an error and nothing moved", err, store.subStates)
		}
	})
}

// newFundsWorker is a worker of the chains' one signer over store, its
// log written to out.
func newFundsWorker(store txmanager.WorkStore, chains *txmanager.Chains, r *chain.Reader, signer *remote.Signer, out *bytes.Buffer) *worker {
	ch := chains.Chains[0]
	log := slog.New(slog.NewTextHandler(out, nil))
	return &worker{
		Deps: Deps{Store: store, Chains: chains, Readers: map[uint64]*chain.Reader{ch.ID: r}, Signer: signer, Log: log,
			GasMultiplier: chain.DefaultGasMultiplier, FundsHold: time.Hour, FundsRetry: time.Hour},
		fence:        txmanager.Fence{Node: "node-1", Key: txmanager.SignerKey{ChainID: ch.ID, Signer: ch.Signers[0].Address}, Token: 1},
		log:          log,
		fundsRetryAt: map[uuid.UUID]time.Time{},
	}
}
