package chain_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
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

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func gwei(n float64) *big.Int {
	v, _ := new(big.Float).Mul(big.NewFloat(n), big.NewFloat(params.GWei)).Int(nil)
	return v
}

func ptr[T any](v T) *T { return &v }

// dial connects a Reader to url for chain id, closed when t ends.
func dial(t *testing.T, url string, id uint64) *chain.Reader {
	t.Helper()
	r, err := chain.Dial(testContext(t), txmanager.Chain{ID: id, RPC: rpcpool.URLs(url)}, nil)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// signDynamic signs an EIP-1559 transaction paying tip, with a fee cap
// well above the current base fee.
func signDynamic(t *testing.T, node *anvil.Node, key *ecdsa.PrivateKey, nonce uint64, to *common.Address, value *big.Int, data []byte, tip *big.Int) *types.Transaction {
	t.Helper()
	head, err := node.Client().HeaderByNumber(testContext(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	gas := params.TxGas
	if len(data) > 0 {
		gas = 1_000_000
	}
	chainID := new(big.Int).SetUint64(node.ChainID())
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID:   chainID,
		Nonce:     nonce,
		GasTipCap: tip,
		GasFeeCap: new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(4))),
		Gas:       gas,
		To:        to,
		Value:     value,
		Data:      data,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// rpcRequest is the part of a JSON-RPC request the fakes look at.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// fakeNode serves eth_chainId as 31337 and answers every other method
// with the JSON-RPC error object errJSON; with status other than 200 it
// answers with that HTTP status and errJSON as the body instead, and
// with status 0 it never answers (until the client gives up).
func fakeNode(t *testing.T, status int, errJSON string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		if isBatch(body) {
			answerProbe(w, body) // the pool's health probe: the node is up
			return
		}
		var req rpcRequest
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch {
		case req.Method == "eth_chainId":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"0x7a69"}`, req.ID)
		case status == 0:
			<-r.Context().Done()
		case status != http.StatusOK:
			w.WriteHeader(status)
			io.WriteString(w, errJSON)
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, req.ID, errJSON)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func isBatch(body []byte) bool { return bytes.HasPrefix(bytes.TrimSpace(body), []byte("[")) }

// answerProbe answers a batch of eth_chainId and eth_blockNumber as a
// node of chain 31337 at block 1.
func answerProbe(w http.ResponseWriter, body []byte) {
	var reqs []rpcRequest
	_ = json.Unmarshal(body, &reqs)
	var out []string
	for _, req := range reqs {
		result := `"0x1"`
		if req.Method == "eth_chainId" {
			result = `"0x7a69"`
		}
		out = append(out, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result))
	}
	fmt.Fprintf(w, "[%s]", strings.Join(out, ","))
}

// proxy forwards JSON-RPC to a node, counting calls by method; with
// refusePending it answers any request that names the "pending" block
// tag with an invalid-params error instead, as providers without a
// pending state do.
type proxy struct {
	URL           string
	refusePending bool
	target        string

	mu      sync.Mutex
	calls   map[string]int
	refused int
	l1Gas   uint64
}

// addToEstimates makes the proxy add gas to every eth_estimateGas answer,
// as an Arbitrum node adds the L1 poster component to the execution's.
func (p *proxy) addToEstimates(gas uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.l1Gas = gas
}

func newProxy(t *testing.T, target string, refusePending bool) *proxy {
	t.Helper()
	p := &proxy{target: target, refusePending: refusePending, calls: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if isBatch(body) { // the pool's health probe
		chaintest.Forward(r.Context(), w, p.target, body)
		return
	}
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if p.refusePending && bytes.Contains(req.Params, []byte(`"pending"`)) {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"invalid argument 1: unsupported block tag"}}`, req.ID)
		return
	}
	p.mu.Lock()
	p.calls[req.Method]++
	l1Gas := p.l1Gas
	p.mu.Unlock()
	if req.Method != "eth_estimateGas" || l1Gas == 0 {
		chaintest.Forward(r.Context(), w, p.target, body)
		return
	}
	rec := httptest.NewRecorder()
	chaintest.Forward(r.Context(), rec, p.target, body)
	var answer struct {
		Result *hexutil.Uint64 `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Result == nil {
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":"%s"}`, req.ID, *answer.Result+hexutil.Uint64(l1Gas))
}

// counts returns the forwarded calls by method and the refused ones.
func (p *proxy) counts() (map[string]int, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	calls := make(map[string]int, len(p.calls))
	for m, n := range p.calls {
		calls[m] = n
	}
	return calls, p.refused
}
