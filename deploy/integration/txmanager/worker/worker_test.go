package worker_test

import (
	"context"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/wait"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/remote"
	"github.com/txfence/txfence/txmanager/worker"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	wait.For(t, time.Minute, what, cond)
}

// env is the pipeline over real services: PostgreSQL, anvil (mining only
// when asked), signerd's API with the development policy and anvil's keys,
// and mevrouterd's API with the development relay.
type env struct {
	store  *postgres.Store
	pool   *pgxpool.Pool
	chain  *mevroutertest.Stack
	deps   worker.Deps
	signer common.Address
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, envOptions{})
}

// envOptions change an env's defaults.
type envOptions struct {
	// PolicyFile is signerd's policy (default: the development policy).
	PolicyFile string
	// SignerSettings are extra JSON members of the signer's entry in the
	// chains file, such as `"gap_policy": "fill"`.
	SignerSettings string
	// InFlight is the signer's in-flight window (default 64).
	InFlight int
	// PublicNode, when set, is where mevrouterd's public route sends
	// instead of anvil (which still simulates): a node with answers of
	// its own.
	PublicNode http.Handler
	// Signers is how many of anvil's accounts the chains file lists as
	// signers, from the first (default 1); each has the settings above.
	Signers int
}

func newEnvWith(t testing.TB, opts envOptions) *env {
	t.Helper()
	pool, err := pg.Open(context.Background(), pgtest.URL(t), pg.PoolOptions{MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(context.Background(), pool, nil); err != nil {
		t.Fatal(err)
	}
	stack := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}})
	if opts.PublicNode != nil {
		front := httptest.NewServer(opts.PublicNode)
		t.Cleanup(front.Close)
		fanout, err := public.New(public.Endpoints{{Name: "front", URL: front.URL}}, public.Options{},
			metrics.New(prometheus.NewRegistry()).Chain(stack.Node.ChainID()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fanout.Close)
		stack.Router.Public = fanout // before the router is served
	}
	pki := servicetest.PKI(t)
	routerClient, err := remote.NewRouter(stack.Serve(t, pki, nil), servicetest.Client(t, pki, "txmanager", "mevrouter"))
	if err != nil {
		t.Fatal(err)
	}
	signerd := signertest.StartServer(t, signertest.ServerOptions{PKI: pki, PolicyFile: opts.PolicyFile})
	signerClient, err := remote.NewSigner(signerd.URL, servicetest.Client(t, pki, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}
	from := signertest.DevAddress(0)
	if opts.InFlight == 0 {
		opts.InFlight = 64
	}
	settings := ""
	if opts.SignerSettings != "" {
		settings = ", " + opts.SignerSettings
	}
	signers := make([]string, max(opts.Signers, 1))
	for i := range signers {
		signers[i] = fmt.Sprintf(`{"address": %q, "in_flight": %d%s}`, signertest.DevAddress(i).Hex(), opts.InFlight, settings)
	}
	chains, err := txmanager.ParseChains([]byte(fmt.Sprintf(`{"chains": [{"chain_id": %d, "rpc": [%q], "signers": [%s]}]}`,
		stack.Node.ChainID(), stack.Node.URL(), strings.Join(signers, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	reader, err := chain.Dial(context.Background(), chains.Chains[0], nil)
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

func (e *env) key() txmanager.SignerKey {
	return txmanager.SignerKey{ChainID: e.chain.Node.ChainID(), Signer: e.signer}
}

// own takes the signer's lease for node and starts its worker.
func (e *env) own(t testing.TB, node string) *worker.Pool {
	t.Helper()
	return e.ownKey(t, node, e.key())
}

// ownKey takes key's lease for node and starts its worker.
func (e *env) ownKey(t testing.TB, node string, key txmanager.SignerKey) *worker.Pool {
	t.Helper()
	token, ok, err := e.store.Acquire(ctx(t), node, key, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	base, cancel := context.WithCancel(context.Background())
	p := worker.NewPool(base, e.deps)
	p.Acquired(txmanager.Fence{Node: node, Key: key, Token: token})
	t.Cleanup(func() { p.Lost(key, "test over"); cancel() })
	return p
}

func (e *env) create(t *testing.T, requestID string, wei *big.Int) txmanager.Tx {
	t.Helper()
	to := common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	tx, _, err := e.store.Create(ctx(t), &txmanager.Intent{ChainID: e.chain.Node.ChainID(), From: e.signer, RequestID: requestID,
		To: &to, Value: wei, Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func (e *env) states(t testing.TB) map[txmanager.State]int {
	t.Helper()
	rows, err := e.pool.Query(ctx(t), `SELECT state, count(*) FROM tx GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[txmanager.State]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[txmanager.State(s)] = n
	}
	return out
}

// TestTransactionsFlowToTheChainWithContiguousNonces: transactions
// accepted as INIT are simulated, allowed by signerd's policy, given
// nonces, signed, broadcast and mined; a transaction sent with the key
// outside txfence is skipped past; the policy's denial fails a transaction
// without spending a nonce.
func TestTransactionsFlowToTheChainWithContiguousNonces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node := e.chain.Node
	// Someone uses the key directly first: nonce 0 is theirs.
	external := chaintest.SendTransfer(t, node, node.Accounts()[0].Key, common.HexToAddress("0xdead"), big.NewInt(1))

	const n = 20
	for i := range n {
		e.create(t, fmt.Sprintf("pay-%d", i), big.NewInt(int64(1000+i)))
	}
	tooBig := new(big.Int).Mul(big.NewInt(2000), big.NewInt(1e18)) // over the policy's 1000 ETH per transaction
	denied := e.create(t, "too-big", tooBig)
	e.own(t, "node-a")

	eventually(t, "every transaction broadcast or failed", func() bool {
		s := e.states(t)
		return s[txmanager.StateBroadcasted] == n && s[txmanager.StateFailed] == 1
	})
	got, err := e.store.Get(ctx(t), denied.ID)
	if err != nil || got.State != txmanager.StateFailed || got.Reason != "policy_denied" || got.Nonce != nil {
		t.Errorf("the denied transaction: %+v %v", got, err)
	}
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	chaintest.WaitReceipt(t, node, external.Hash())

	var nonces []uint64
	rows, err := e.pool.Query(ctx(t), `SELECT t.nonce, a.hash FROM tx t JOIN attempt a ON a.tx_id = t.tx_id WHERE t.state = 'BROADCASTED' ORDER BY t.nonce`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var nonce int64
		var hash []byte
		if err := rows.Scan(&nonce, &hash); err != nil {
			t.Fatal(err)
		}
		nonces = append(nonces, uint64(nonce))
		r := chaintest.WaitReceipt(t, node, common.BytesToHash(hash))
		if r.Status != 1 {
			t.Errorf("nonce %d: receipt status %d", nonce, r.Status)
		}
	}
	rows.Close()
	for i, nonce := range nonces {
		if nonce != uint64(i+1) {
			t.Fatalf("nonces %v: want 1..%d, skipping the external nonce 0", nonces, n)
		}
	}
	mined, err := node.Client().NonceAt(ctx(t), e.signer, nil)
	if err != nil || mined != n+1 {
		t.Errorf("anvil's mined nonce %d (%v), want %d", mined, err, n+1)
	}
	var changes, attempts int
	if err := e.pool.QueryRow(ctx(t), `SELECT count(*) FILTER (WHERE type = 'tx.state_changed'), count(*) FILTER (WHERE type = 'tx.attempt')
		FROM event`).Scan(&changes, &attempts); err != nil || changes != n*5+2 || attempts != n {
		t.Errorf("%d state changes and %d attempts (%v), want %d (INIT, SIMULATED, ALLOCATED, SIGNED, BROADCASTED each; INIT and FAILED) and %d (one first send each)",
			changes, attempts, err, n*5+2, n)
	}
}

// closedURL is an https URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "https://" + ln.Addr().String()
	ln.Close()
	return u
}

type snapshot struct {
	state string
	nonce *int64
	hash  []byte
}

func (e *env) snapshot(t *testing.T) map[string]snapshot {
	t.Helper()
	rows, err := e.pool.Query(ctx(t), `SELECT t.request_id, t.state, t.nonce, a.hash FROM tx t LEFT JOIN attempt a ON a.tx_id = t.tx_id AND a.attempt = t.current_attempt`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]snapshot{}
	for rows.Next() {
		var id string
		var s snapshot
		if err := rows.Scan(&id, &s.state, &s.nonce, &s.hash); err != nil {
			t.Fatal(err)
		}
		out[id] = s
	}
	return out
}

// TestANewOwnerResumesWithTheSameNoncesAndSignatures: an owner whose
// signerd is unreachable leaves transactions ALLOCATED; the next owner,
// whose mevrouterd is unreachable, signs them at the same nonces and
// leaves them SIGNED; the third broadcasts exactly those signatures.
func TestANewOwnerResumesWithTheSameNoncesAndSignatures(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		e.create(t, fmt.Sprintf("resume-%d", i), big.NewInt(int64(i+1)))
	}
	working := e.deps
	handOver := func(node string, deps worker.Deps, until txmanager.State) map[string]snapshot {
		t.Helper()
		e.deps = deps
		p := e.own(t, node)
		eventually(t, node+" reaching "+string(until), func() bool { return e.states(t)[until] == 5 })
		p.Lost(e.key(), "handover")
		if err := e.store.Release(ctx(t), node, []txmanager.SignerKey{e.key()}); err != nil {
			t.Fatal(err)
		}
		return e.snapshot(t)
	}

	// A signerd that evaluates but whose signing is down.
	pki := servicetest.PKI(t)
	broken := signertest.StartServer(t, signertest.ServerOptions{PKI: pki, Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/sign/batch" {
				http.Error(w, "signing is down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}})
	noSigning, err := remote.NewSigner(broken.URL, servicetest.Client(t, pki, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}
	deps := working
	deps.Signer = noSigning
	allocated := handOver("node-a", deps, txmanager.StateAllocated)

	noRouter, err := remote.NewRouter(closedURL(t), &http.Client{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	deps = working
	deps.Router = noRouter
	signed := handOver("node-b", deps, txmanager.StateSigned)

	sent := handOver("node-c", working, txmanager.StateBroadcasted)
	for id, a := range allocated {
		s, b := signed[id], sent[id]
		if a.nonce == nil || s.nonce == nil || b.nonce == nil || *a.nonce != *s.nonce || *s.nonce != *b.nonce {
			t.Errorf("%s: nonce %v, then %v, then %v; want one nonce throughout", id, a.nonce, s.nonce, b.nonce)
		}
		if string(s.hash) != string(b.hash) || len(b.hash) != 32 {
			t.Errorf("%s: signed %x, broadcast %x; want the same signature", id, s.hash, b.hash)
		}
	}
	if err := e.chain.Node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	for id, b := range sent {
		if r := chaintest.WaitReceipt(t, e.chain.Node, common.BytesToHash(b.hash)); r.Status != 1 {
			t.Errorf("%s: status %d", id, r.Status)
		}
	}
}
