package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/openapi/mevrouterapi"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/shared/pgtest"
	"github.com/txfence/txfence/shared/servicetest"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
	"github.com/txfence/txfence/txmanager/worker"
)

// refusingNode answers every eth_sendRawTransaction, single or batched,
// with one JSON-RPC error object, the one last set: a node refusing in
// words anvil cannot be made to say.
type refusingNode struct {
	mu     sync.Mutex
	answer string
}

func (n *refusingNode) set(answer string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.answer = answer
}

func (n *refusingNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n.mu.Lock()
	answer := n.answer
	n.mu.Unlock()
	reply := func(id json.RawMessage) string {
		return `{"jsonrpc":"2.0","id":` + string(id) + `,"error":` + answer + `}`
	}
	w.Header().Set("Content-Type", "application/json")
	var batch []struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &batch) == nil {
		out := make([]string, len(batch))
		for i, c := range batch {
			out[i] = reply(c.ID)
		}
		_, _ = io.WriteString(w, "["+strings.Join(out, ",")+"]")
		return
	}
	var single struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &single); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	_, _ = io.WriteString(w, reply(single.ID))
}

// newEnvSendingTo is newEnv with mevrouterd's public route sending to
// node instead of anvil (which still simulates and signs nothing itself).
func newEnvSendingTo(t *testing.T, node http.Handler) *env {
	t.Helper()
	pool, err := pg.Open(context.Background(), pgtest.URL(t), pg.PoolOptions{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(context.Background(), pool, nil); err != nil {
		t.Fatal(err)
	}
	stack := mevroutertest.New(t, mevroutertest.Options{Kinds: []mevrouter.RelayKind{mevrouter.RelayProtect}})
	front := httptest.NewServer(node)
	t.Cleanup(front.Close)
	public, err := mevrouter.NewPublic(mevrouter.Endpoints{{Name: "refusing", URL: front.URL}}, mevrouter.PublicOptions{}, mevrouter.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(public.Close)
	stack.Router.Public = public // before the router is served
	pki := servicetest.PKI(t)
	routerClient, err := remote.NewRouter(stack.Serve(t, pki, nil), servicetest.Client(t, pki, "txmanager", "mevrouter"))
	if err != nil {
		t.Fatal(err)
	}
	signerd := signertest.StartServer(t, signertest.ServerOptions{PKI: pki})
	signerClient, err := remote.NewSigner(signerd.URL, servicetest.Client(t, pki, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}
	from := signertest.DevAddress(0)
	chains, err := txmanager.ParseChains([]byte(fmt.Sprintf(`{"chains": [{"chain_id": %d, "rpc": [%q], "signers": [{"address": %q, "in_flight": 64}]}]}`,
		stack.Node.ChainID(), stack.Node.URL(), from.Hex())))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := chain.Dial(context.Background(), chains.Chains[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	store := postgres.New(pool)
	return &env{store: store, pool: pool, chain: stack, signer: from, deps: worker.Deps{
		Store: store, Chains: chains, Readers: map[uint64]*chain.Reader{stack.Node.ChainID(): reader},
		Signer: signerClient, Router: routerClient, PollEvery: 10 * time.Millisecond,
	}}
}

// TestRefusalsThatNoResendChangesLeaveTheTransactionStuck: a transaction
// every route refused as of a type the nodes do not take, too large,
// undecodable, or reverted at send stays SIGNED, stuck, with the category
// and the node's words as its reason, for an operator (and, for a revert,
// for the chain follower should the node have mined it). None is sent
// again and again, none is failed.
func TestRefusalsThatNoResendChangesLeaveTheTransactionStuck(t *testing.T) {
	t.Parallel()
	node := &refusingNode{}
	e := newEnvSendingTo(t, node)
	e.own(t, "node-a")
	tests := []struct {
		category mevrouterapi.ErrorCategory
		answer   string // the JSON-RPC error object
		message  string
	}{
		{mevrouterapi.TxTypeNotSupported, `{"code":-32000,"message":"transaction type not supported"}`, "transaction type not supported"},
		{mevrouterapi.Oversized, `{"code":-32000,"message":"oversized data: transaction size 200000, limit 131072"}`, "oversized data: transaction size 200000, limit 131072"},
		{mevrouterapi.Malformed, `{"code":-32602,"message":"Failed to decode transaction"}`, "Failed to decode transaction"},
		{mevrouterapi.ExecutionReverted, `{"code":3,"message":"execution reverted","data":"0x"}`, "execution reverted"},
	}
	for _, tt := range tests {
		node.set(tt.answer)
		tx := e.create(t, "refused-"+string(tt.category), big.NewInt(1))
		eventually(t, string(tt.category)+": stuck", func() bool { return e.get(t, tx.ID).SubState == txmanager.SubStuck })
		got := e.get(t, tx.ID)
		want := fmt.Sprintf("%s: %s: %s", txmanager.ReasonBroadcastRefused, tt.category, tt.message)
		if got.State != txmanager.StateSigned || got.Reason != want {
			t.Errorf("%s: %s/%s, reason %q; want SIGNED/stuck, reason %q", tt.category, got.State, got.SubState, got.Reason, want)
		}
	}
}
