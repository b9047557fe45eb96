package follow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/testinfra/wait"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/follow"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
	"github.com/txfence/txfence/txmanager/worker"
)

// TestTheChainsWordBeatsASendVerdict: the worker left a transaction SIGNED
// (its broadcast refused for good and stuck, held for funds, or refused
// and waiting for a resend) and a node mined it anyway (here it goes
// straight to anvil). The follower records the receipt: SIGNED →
// BROADCASTED (included) with the hash, then CONFIRMED, or REVERTED when it
// reverted, and the signer's next nonce, broadcast after it, ends
// CONFIRMED too. Also when it was mined while no follower ran (found by the
// new follower's catch-up).
func TestTheChainsWordBeatsASendVerdict(t *testing.T) {
	t.Parallel()
	refused := txmanager.ReasonBroadcastRefused + ": rejected: execution reverted"
	for _, tc := range []struct {
		name        string
		sub         txmanager.SubState
		reason      string
		reverts     bool
		minedBefore bool // mined two blocks before the follower's first step
		want        txmanager.State
		events      string // after the move to BROADCASTED
	}{
		{name: "stuck on a refusal", sub: txmanager.SubStuck, reason: refused, want: txmanager.StateConfirmed,
			events: "confirmation:1 state:CONFIRMED"},
		{name: "stuck on a refusal, reverted", sub: txmanager.SubStuck, reason: refused, reverts: true, want: txmanager.StateReverted,
			events: "confirmation:1 state:REVERTED"},
		{name: "held for funds", sub: txmanager.SubInsufficientFunds, reason: txmanager.ReasonInsufficientFunds, want: txmanager.StateConfirmed,
			events: "confirmation:1 state:CONFIRMED"},
		{name: "refused, waiting for a resend", reverts: true, want: txmanager.StateReverted,
			events: "confirmation:1 state:REVERTED"},
		{name: "stuck, mined before the follower started", sub: txmanager.SubStuck, reason: refused, reverts: true, minedBefore: true,
			want: txmanager.StateReverted, events: "confirmation:2 state:REVERTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t, 2)
			if !tc.minedBefore {
				r.step(t)
			}
			build := r.transfer(t)
			if tc.reverts {
				build = r.reverting(t)
			}
			tx := build(0)
			if err := r.node.Client().SendTransaction(ctx, tx); err != nil {
				t.Fatal(err)
			}
			id := r.recordSigned(t, "refused", 0, tx)
			if tc.sub != txmanager.SubNone {
				if _, err := r.store.SetSubState(ctx, r.fence, id, txmanager.StateSigned, tc.sub, tc.reason); err != nil {
					t.Fatal(err)
				}
			}
			next := r.transfer(t)(1)
			if err := r.node.Client().SendTransaction(ctx, next); err != nil {
				t.Fatal(err)
			}
			nextID := r.record(t, "next", 1, next)
			if tc.minedBefore {
				if err := r.node.Mine(ctx, 2); err != nil {
					t.Fatal(err)
				}
				r.step(t)
			}
			r.mineAndStep(t, 2)
			r.requireEnd(t, id, tc.want, tc.events)
			r.requireFinalNamesItsBlock(t, id)
			var moved txmanager.StateChanged
			if err := r.pool.QueryRow(ctx, `SELECT payload FROM event WHERE tx_id = $1 AND payload->>'to_state' = 'BROADCASTED'`, id).Scan(&moved); err != nil {
				t.Fatal(err)
			}
			if moved.FromState != txmanager.StateSigned || moved.SubState != txmanager.SubIncluded || moved.Hash == nil || *moved.Hash != tx.Hash() {
				t.Errorf("the move to BROADCASTED: %+v, want from SIGNED, included, with hash %s", moved, tx.Hash())
			}
			if st, _ := r.state(t, nextID); st != txmanager.StateConfirmed {
				t.Errorf("the signer's next nonce: %s", st)
			}
			open, err := r.store.CountOpen(ctx, r.fence.Key, []txmanager.State{txmanager.StateAllocated, txmanager.StateSigned, txmanager.StateBroadcasted})
			if err != nil || open != 0 {
				t.Errorf("%d transactions still in flight (%v), want none", open, err)
			}
		})
	}
}

// liar fronts node as a node that answers every eth_sendRawTransaction
// with an error ("execution reverted", as some clients answer the send of
// a transaction that reverts under automine) after passing it on to node,
// which mines it. before runs before each send is passed on.
func liar(node *anvil.Node, before func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		forward := func() ([]byte, error) {
			fwd, err := http.NewRequestWithContext(req.Context(), http.MethodPost, node.URL(), bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			fwd.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(fwd)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			return io.ReadAll(resp.Body)
		}
		w.Header().Set("Content-Type", "application/json")
		call := struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}{}
		if err := json.Unmarshal(body, &call); err != nil || call.Method != "eth_sendRawTransaction" {
			answer, err := forward()
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			_, _ = w.Write(answer)
			return
		}
		if before != nil {
			if err := before(req.Context()); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
		}
		if _, err := forward(); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		id, _ := json.Marshal(call.ID)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"execution reverted"}}`, id)
	})
}

// TestANodeThatRefusesASendAndMinesItAnyway runs the worker and the
// follower against a node (anvil, automining, behind liar) that answers
// each send with an error and mines the transaction all the same. The
// first transaction's destination turns into a contract that reverts
// between its simulation and its send (someone else's transaction, as on a
// busy chain), so it is mined and reverts: it ends REVERTED, not stuck on
// the refusal. The signer's window holds one transaction in flight: the
// second transaction is allocated only once the first is settled, and ends
// CONFIRMED the same way.
func TestANodeThatRefusesASendAndMinesItAnyway(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := pgtest.Migrated(t, postgres.Migrations)
	store := postgres.New(pool)

	stack := mevroutertest.New(t, mevroutertest.Options{})
	node := stack.Node
	if err := node.SetAutomine(ctx, true); err != nil {
		t.Fatal(err)
	}
	reverter := common.HexToAddress("0xb0b")
	front := httptest.NewServer(liar(node, func(ctx context.Context) error {
		// PUSH1 0 PUSH1 0 REVERT: whatever calls it reverts.
		return node.RPC().CallContext(ctx, nil, "anvil_setCode", reverter, hexutil.Bytes(common.FromHex("60006000fd")))
	}))
	t.Cleanup(front.Close)
	fanout, err := public.New(public.Endpoints{{Name: "liar", URL: front.URL}}, public.Options{NoBatch: []string{"liar"}},
		metrics.New(prometheus.NewRegistry()).Chain(stack.Node.ChainID()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	stack.Public, stack.Router.Public = fanout, fanout
	pki := servicetest.PKI(t)
	router, err := remote.NewRouter(stack.Serve(t, pki, nil), servicetest.Client(t, pki, "txmanager", "mevrouter"))
	if err != nil {
		t.Fatal(err)
	}
	signerd := signertest.StartServer(t, signertest.ServerOptions{PKI: pki})
	signer, err := remote.NewSigner(signerd.URL, servicetest.Client(t, pki, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}
	from := signertest.DevAddress(0)
	chains, err := txmanager.ParseChains([]byte(fmt.Sprintf(`{"chains": [{"chain_id": %d, "rpc": [%q], "confirmations": 1,
		"signers": [{"address": %q, "in_flight": 1}]}]}`, node.ChainID(), node.URL(), from.Hex())))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := chain.Dial(ctx, chains.Chains[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)

	key := txmanager.SignerKey{ChainID: node.ChainID(), Signer: from}
	token, ok, err := store.Acquire(ctx, "node-a", key, time.Hour)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	fence := txmanager.Fence{Node: "node-a", Key: key, Token: token}
	workers := worker.NewPool(ctx, worker.Deps{Store: store, Chains: chains, Readers: map[uint64]*chain.Reader{node.ChainID(): reader},
		Signer: signer, Router: router, PollEvery: 10 * time.Millisecond})
	workers.Acquired(fence)
	t.Cleanup(func() { workers.Lost(key, "test over") })
	fl := follow.New(follow.Config{Chain: chains.Chains[0], RPC: &follow.RPC{Client: node.RPC()}, Store: store, Router: router,
		Fences: func() []txmanager.Fence { return []txmanager.Fence{fence} }})

	create := func(requestID string, to common.Address) uuid.UUID {
		tx, _, err := store.Create(ctx, &txmanager.Intent{ChainID: key.ChainID, From: from, RequestID: requestID, To: &to, Value: big.NewInt(1),
			Route: txmanager.RoutePublic})
		if err != nil {
			t.Fatal(err)
		}
		return tx.ID
	}
	reverted := create("reverts", reverter)
	confirmed := create("goes-on", common.HexToAddress("0xc0c"))
	states := func() string {
		var out []string
		for _, id := range []uuid.UUID{reverted, confirmed} {
			tx, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s/%s %s", tx.State, tx.SubState, tx.Reason))
		}
		return strings.Join(out, ", ")
	}
	wait.ForDescribed(t, time.Minute, func() bool {
		for {
			n, err := store.Sequence(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		if err := fl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		a, errA := store.Get(ctx, reverted)
		b, errB := store.Get(ctx, confirmed)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		return a.State.Terminal() && b.State.Terminal()
	}, func() string { return "both settled: " + states() })
	for id, want := range map[uuid.UUID]txmanager.State{reverted: txmanager.StateReverted, confirmed: txmanager.StateConfirmed} {
		if tx, err := store.Get(ctx, id); err != nil || tx.State != want {
			t.Fatalf("%s: want REVERTED, then CONFIRMED", states())
		}
	}
	for id, status := range map[uuid.UUID]uint64{reverted: types.ReceiptStatusFailed, confirmed: types.ReceiptStatusSuccessful} {
		tx, _ := store.Get(ctx, id)
		receipt, err := node.Client().TransactionReceipt(ctx, *tx.Hash)
		if err != nil || receipt.Status != status {
			t.Errorf("%s on chain: %+v %v, want status %d", id, receipt, err, status)
		}
	}
}
