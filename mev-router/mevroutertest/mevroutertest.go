// Package mevroutertest builds a working router for tests: a real anvil
// that mines only when asked (our node and the public endpoint), the
// development relay in front of it, and a Router with both routes. It is
// for tests only; mevrouterd never links it.
package mevroutertest

import (
	"context"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	mevrouter "github.com/txfence/txfence/mev-router"
	"github.com/txfence/txfence/mev-router/devrelay"
	"github.com/txfence/txfence/mev-router/flashbots"
	"github.com/txfence/txfence/mev-router/httpapi"
	"github.com/txfence/txfence/mev-router/metrics"
	"github.com/txfence/txfence/mev-router/public"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// Options shape a Stack.
type Options struct {
	// Kinds are the relays, one of each kind, named after it; none gives
	// a router without a private route.
	Kinds []relay.Kind
	// AllowedSigners, when set, are the only relay-auth addresses the
	// relay admits.
	AllowedSigners []common.Address
	// Blocks is the private sends' default distance to their max block.
	Blocks uint64
	// RelayFront, when set, wraps the relay's handler: a test sees (and
	// checks) every request the router makes of the relay.
	RelayFront func(http.Handler) http.Handler
	// ChainID is the anvil's chain id (anvil's 31337 when 0).
	ChainID uint64
}

// Stack is a router over a real chain.
type Stack struct {
	Node     *anvil.Node
	Relay    *devrelay.Relay
	RelayURL string
	Router   *mevrouter.Router
	Public   *public.Fanout
	Private  *relay.Private
	Registry *prometheus.Registry
}

// New starts the stack; everything stops at the test's cleanup.
func New(t testing.TB, opts Options) *Stack {
	t.Helper()
	node := chaintest.Anvil(t, anvil.Options{NoMining: true, ChainID: opts.ChainID})
	reg := prometheus.NewRegistry()
	m := metrics.New(reg).Chain(node.ChainID())
	fanout, err := public.New(public.Endpoints{{Name: "anvil", URL: node.URL()}}, public.Options{}, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fanout.Close)
	s := &Stack{Node: node, Public: fanout, Registry: reg,
		Router: &mevrouter.Router{ChainID: new(big.Int).SetUint64(node.ChainID()), Public: fanout, Auto: mevrouter.NewAutoRule(nil, nil, nil), Metrics: m}}
	if len(opts.Kinds) == 0 {
		return s
	}

	dev, err := devrelay.New(devrelay.Options{NodeURL: node.URL(), ChainID: node.ChainID(), AllowedSigners: opts.AllowedSigners})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dev.Close)
	var handler http.Handler = dev
	if opts.RelayFront != nil {
		handler = opts.RelayFront(dev)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	authKey, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	var relays []*relay.Relay
	for _, k := range opts.Kinds {
		relays = append(relays, &relay.Relay{Name: string(k), Kind: k, Client: &flashbots.Client{URL: srv.URL, AuthKey: authKey}})
	}
	private, err := relay.New(relays, node.RPC(), fanout, relay.Options{Blocks: opts.Blocks}, m)
	if err != nil {
		t.Fatal(err)
	}
	s.Relay, s.RelayURL, s.Private, s.Router.Private = dev, srv.URL, private, private
	return s
}

// Serve serves the stack's router through mevrouterd's API over mutual
// TLS with the "mevrouter" identity of pki (servicetest.PKI), wrapped by
// wrap when given (a spec check), and returns its URL.
func (s *Stack) Serve(t testing.TB, pki string, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	return serve(t, pki, wrap, s)
}

// ServeChains serves several stacks, each of its own chain, through one
// mevrouterd API, as one mevrouterd serves every chain of its chains
// file, and returns its URL.
func ServeChains(t testing.TB, pki string, stacks ...*Stack) string {
	t.Helper()
	return serve(t, pki, nil, stacks...)
}

func serve(t testing.TB, pki string, wrap func(http.Handler) http.Handler, stacks ...*Stack) string {
	t.Helper()
	srv := httpserver.New(httpserver.Options{Service: "mevrouter"})
	var all []*mevrouter.Router
	for _, s := range stacks {
		all = append(all, s.Router)
	}
	routers, err := mevrouter.NewRouters(all...)
	if err != nil {
		t.Fatal(err)
	}
	(&httpapi.API{Routers: routers}).Mount(srv.Router)
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	return servicetest.ServeMTLS(t, pki, "mevrouter", h).URL
}

// Context is a context for one test step.
func Context(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// InPool reports whether hash is anywhere in the node's pool.
func (s *Stack) InPool(t testing.TB, hash common.Hash) bool {
	t.Helper()
	pool, err := s.Node.TxPoolContent(Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return pool.Contains(hash)
}

// Status polls the watcher once and returns the send's status.
func (s *Stack) Status(t testing.TB, hash common.Hash) mevrouter.Status {
	t.Helper()
	if err := s.Private.Poll(Context(t)); err != nil {
		t.Fatal(err)
	}
	st, ok := s.Private.Status(hash)
	if !ok {
		t.Fatalf("no status for %s", hash)
	}
	return st
}

// Head is the node's block number.
func (s *Stack) Head(t testing.TB) uint64 {
	t.Helper()
	n, err := s.Node.BlockNumber(Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Transfers signs n transfers from the node's dev account i, from its
// pending nonce on, and returns them raw and their hashes. The pending
// nonce does not count transactions the relay holds: use another account
// for each private send that is not yet included.
func (s *Stack) Transfers(t testing.TB, i, n int) ([][]byte, []common.Hash) {
	t.Helper()
	acct := s.Node.Accounts()[i]
	nonce, err := s.Node.Client().PendingNonceAt(Context(t), acct.Address)
	if err != nil {
		t.Fatal(err)
	}
	var raws [][]byte
	var hashes []common.Hash
	for j := range n {
		tx := chaintest.SignTransfer(t, s.Node, acct.Key, common.HexToAddress("0xb0b"), big.NewInt(1), nonce+uint64(j))
		raw, err := tx.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		raws, hashes = append(raws, raw), append(hashes, tx.Hash())
	}
	return raws, hashes
}

// Counter reads one sample of a counter or gauge from reg: the first whose
// labels include labels; zero when there is none.
func Counter(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				if m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
