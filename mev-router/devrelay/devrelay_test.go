package devrelay_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/params"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/devrelay"
	"github.com/txfence/txfence/mev-router/flashbots"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
)

// waitTimeout bounds every wait here; anvil answers in milliseconds, the
// margin is for a loaded two-core machine.
const waitTimeout = 30 * time.Second

// fixture is an anvil node that does not mine by itself, a relay in front
// of it, and a client with its own relay identity.
type fixture struct {
	node   *anvil.Node
	relay  *devrelay.Relay
	url    string
	client *flashbots.Client
}

func newFixture(t *testing.T, opts anvil.Options, configure ...func(*devrelay.Options)) *fixture {
	t.Helper()
	opts.NoMining = true
	node := chaintest.Anvil(t, opts)
	ro := devrelay.Options{
		NodeURL: node.URL(),
		ChainID: node.ChainID(),
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, f := range configure {
		f(&ro)
	}
	relay, err := devrelay.New(ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	srv := httptest.NewServer(relay)
	t.Cleanup(srv.Close)
	return &fixture{node: node, relay: relay, url: srv.URL, client: &flashbots.Client{URL: srv.URL, AuthKey: newKey(t)}}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// transfer signs (and does not send) a 1-wei transfer with a fee cap well
// above the current base fee.
func (f *fixture) transfer(t *testing.T, key *ecdsa.PrivateKey, nonce uint64) (*types.Transaction, []byte) {
	t.Helper()
	return signTransfer(t, f.node, key, nonce, new(big.Int).SetUint64(f.node.ChainID()))
}

func signTransfer(t *testing.T, node *anvil.Node, key *ecdsa.PrivateKey, nonce uint64, chainID *big.Int) (*types.Transaction, []byte) {
	t.Helper()
	head, err := node.Client().HeaderByNumber(ctxFor(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	tip := big.NewInt(params.GWei)
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(3)))
	to := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: params.TxGas, To: &to, Value: big.NewInt(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return tx, raw
}

// assertPrivate fails unless the node neither pools nor has mined hash.
func (f *fixture) assertPrivate(t *testing.T, hashes ...common.Hash) {
	t.Helper()
	pool, err := f.node.TxPoolContent(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hashes {
		if pool.Contains(h) {
			t.Errorf("the node's public pool holds private transaction %s", h)
		}
		if _, err := f.node.Client().TransactionReceipt(ctxFor(t), h); !errors.Is(err, ethereum.NotFound) {
			t.Errorf("receipt of private transaction %s: %v, want not found", h, err)
		}
	}
}

func (f *fixture) receipt(t *testing.T, h common.Hash) *types.Receipt {
	t.Helper()
	r, err := f.node.Client().TransactionReceipt(ctxFor(t), h)
	if err != nil {
		t.Fatalf("receipt of %s: %v", h, err)
	}
	return r
}

func (f *fixture) build(t *testing.T) (uint64, []common.Hash) {
	t.Helper()
	block, included, err := f.relay.BuildBlock(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	return block, included
}

func (f *fixture) status(t *testing.T, h common.Hash) flashbots.Status {
	t.Helper()
	st, err := f.client.TxStatus(ctxFor(t), h)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) head(t *testing.T) uint64 {
	t.Helper()
	n, err := f.node.BlockNumber(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPrivateTransactionStaysPrivateUntilBuilt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	accounts := f.node.Accounts()
	head := f.head(t)
	tx, raw := f.transfer(t, accounts[0].Key, 0)

	got, err := f.client.SendPrivateTransaction(ctxFor(t), raw, 0, &flashbots.Preferences{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if got != tx.Hash() {
		t.Fatalf("relay answered %s, want %s", got, tx.Hash())
	}
	// Someone else's public transaction, straight to the node.
	public := chaintest.SendTransfer(t, f.node, accounts[1].Key, accounts[2].Address, big.NewInt(1))
	pool, err := f.node.TxPoolContent(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if !pool.Contains(public.Hash()) {
		t.Fatalf("the public transaction %s is not in the node's pool", public.Hash())
	}
	f.assertPrivate(t, tx.Hash())
	want := flashbots.Status{Status: flashbots.StatePending, Hash: tx.Hash(), MaxBlockNumber: head + devrelay.DefaultBlocks, FastMode: true}
	if diff := cmp.Diff(want, f.status(t, tx.Hash())); diff != "" {
		t.Errorf("status before the block (-want +got):\n%s", diff)
	}

	block, included := f.build(t)
	if block != head+1 {
		t.Errorf("BuildBlock mined block %d, want %d", block, head+1)
	}
	if diff := cmp.Diff([]common.Hash{tx.Hash()}, included); diff != "" {
		t.Errorf("included (-want +got):\n%s", diff)
	}
	for _, h := range []common.Hash{tx.Hash(), public.Hash()} {
		if r := f.receipt(t, h); r.BlockNumber.Uint64() != block || r.Status != types.ReceiptStatusSuccessful {
			t.Errorf("receipt of %s: block %d status %d, want block %d status 1", h, r.BlockNumber, r.Status, block)
		}
	}
	want.Status = flashbots.StateIncluded
	want.Transaction = flashbots.StatusTx{
		From: accounts[0].Address.Hex(), To: tx.To().Hex(), GasLimit: "21000",
		MaxFeePerGas: tx.GasFeeCap().String(), MaxPriorityFeePerGas: tx.GasTipCap().String(), Nonce: "0", Value: "1",
	}
	if diff := cmp.Diff(want, f.status(t, tx.Hash())); diff != "" {
		t.Errorf("status after the block (-want +got):\n%s", diff)
	}
	if pool, err = f.node.TxPoolContent(ctxFor(t)); err != nil || len(pool.All()) != 0 {
		t.Errorf("pool after the block: %v, %v; want empty", pool.All(), err)
	}
	// Sending it again changes nothing.
	if again, err := f.client.SendPrivateTransaction(ctxFor(t), raw, 0, nil); err != nil || again != tx.Hash() {
		t.Errorf("send again: %s, %v; want %s", again, err, tx.Hash())
	}
	if _, included := f.build(t); len(included) != 0 {
		t.Errorf("next block included %v again", included)
	}
}

func TestExpiredPrivateTransactionFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	key := f.node.Accounts()[0].Key
	head := f.head(t)
	tx, raw := f.transfer(t, key, 0)
	if _, err := f.client.SendPrivateTransaction(ctxFor(t), raw, head+1, nil); err != nil {
		t.Fatal(err)
	}
	// The chain moves past maxBlockNumber without the relay building.
	if err := f.node.Mine(ctxFor(t), 1); err != nil {
		t.Fatal(err)
	}
	f.assertPrivate(t, tx.Hash())
	if _, included := f.build(t); len(included) != 0 {
		t.Errorf("BuildBlock included %v, want nothing", included)
	}
	f.assertPrivate(t, tx.Hash())
	st := f.status(t, tx.Hash())
	if st.Status != flashbots.StateFailed || st.MaxBlockNumber != head+1 || st.Transaction != (flashbots.StatusTx{}) {
		t.Errorf("status %+v, want FAILED, maxBlockNumber %d, no transaction fields", st, head+1)
	}
	f.build(t)
	f.assertPrivate(t, tx.Hash())
}

func TestCancelledPrivateTransactionIsNeverIncluded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	tx, raw := f.transfer(t, f.node.Accounts()[0].Key, 0)
	if _, err := f.client.SendPrivateTransaction(ctxFor(t), raw, 0, nil); err != nil {
		t.Fatal(err)
	}
	stranger := &flashbots.Client{URL: f.url, AuthKey: newKey(t)}
	tests := []struct {
		name   string
		client *flashbots.Client
		hash   common.Hash
		want   bool
	}{
		{"by another identity", stranger, tx.Hash(), false},
		{"unknown hash", f.client, common.Hash{1}, false},
		{"by the sender", f.client, tx.Hash(), true},
		{"again", f.client, tx.Hash(), false},
	}
	for _, tc := range tests {
		got, err := tc.client.CancelPrivateTransaction(ctxFor(t), tc.hash)
		if err != nil || got != tc.want {
			t.Errorf("cancel %s: %t, %v; want %t", tc.name, got, err, tc.want)
		}
	}
	if st := f.status(t, tx.Hash()); st.Status != flashbots.StateCancelled {
		t.Errorf("status %s, want CANCELLED", st.Status)
	}
	if _, included := f.build(t); len(included) != 0 {
		t.Errorf("BuildBlock included %v, want nothing", included)
	}
	f.assertPrivate(t, tx.Hash())
	if st := f.status(t, common.Hash{1}); st.Status != flashbots.StateUnknown {
		t.Errorf("status of an unknown hash: %s, want UNKNOWN", st.Status)
	}
}

func TestRequestsWithoutValidSignatureAreRefused(t *testing.T) {
	t.Parallel()
	allowed := newKey(t)
	f := newFixture(t, anvil.Options{}, func(o *devrelay.Options) {
		o.AllowedSigners = []common.Address{crypto.PubkeyToAddress(allowed.PublicKey)}
	})
	tx, raw := f.transfer(t, f.node.Accounts()[0].Key, 0)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"0x` + common.Bytes2Hex(raw) + `"}]}`)
	sign := func(key *ecdsa.PrivateKey, b []byte) string {
		h, err := flashbots.Sign(key, b)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tests := map[string]struct {
		header    string
		wantError string
	}{
		"no header":            {"", "missing X-Flashbots-Signature header"},
		"signed another body":  {sign(allowed, []byte(`{}`)), "invalid X-Flashbots-Signature header"},
		"malformed":            {"0x1234:0xabcd", "invalid X-Flashbots-Signature header"},
		"signer not allowed":   {sign(newKey(t), body), "is not allowed by this relay"},
		"address of the other": {crypto.PubkeyToAddress(allowed.PublicKey).Hex() + ":" + strings.SplitN(sign(newKey(t), body), ":", 2)[1], "invalid X-Flashbots-Signature header"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			status, answer := post(t, f.url, tc.header, body)
			if status != http.StatusForbidden {
				t.Errorf("HTTP %d, want 403", status)
			}
			var plain struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(answer, &plain); err != nil || !strings.Contains(plain.Error, tc.wantError) {
				t.Errorf(`answer %s, want {"error": "...%s..."}`, answer, tc.wantError)
			}
		})
	}
	// The same, through the client: a typed, permanent refusal.
	_, err := f.client.SendPrivateTransaction(ctxFor(t), raw, 0, nil)
	var re *flashbots.RelayError
	if !errors.As(err, &re) || re.HTTPStatus != http.StatusForbidden || re.Code != 0 || re.Temporary() {
		t.Errorf("client error %v, want a 403 *RelayError that is not temporary", err)
	}
	f.assertPrivate(t, tx.Hash())
	if st := f.status(t, tx.Hash()); st.Status != flashbots.StateUnknown {
		t.Errorf("status %s, want UNKNOWN: refused requests must hold nothing", st.Status)
	}
	// The allowed identity gets through.
	ok := &flashbots.Client{URL: f.url, AuthKey: allowed}
	if _, err := ok.SendPrivateTransaction(ctxFor(t), raw, 0, nil); err != nil {
		t.Errorf("allowed signer: %v", err)
	}
}

func post(t *testing.T, url, header string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if header != "" {
		req.Header.Set(flashbots.SignatureHeader, header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, answer
}

func TestMevBundleIsIncludedInOneBlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	accounts := f.node.Accounts()
	head := f.head(t)
	tx0, raw0 := f.transfer(t, accounts[0].Key, 0)
	tx1, raw1 := f.transfer(t, accounts[0].Key, 1)
	tx2, raw2 := f.transfer(t, accounts[1].Key, 0)
	bundle := &flashbots.MevBundle{
		Inclusion: flashbots.Inclusion{Block: head + 1, MaxBlock: head + 3},
		Body:      []flashbots.BundleItem{{Tx: raw0}, {Tx: raw1}, {Tx: raw2, CanRevert: true}},
		Privacy:   &flashbots.Privacy{Hints: []flashbots.Hint{flashbots.HintHash}},
	}
	want, err := bundle.Hash()
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.client.SendBundle(ctxFor(t), bundle)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("bundle hash %s, want %s", got, want)
	}
	hashes := []common.Hash{tx0.Hash(), tx1.Hash(), tx2.Hash()}
	f.assertPrivate(t, hashes...)

	block, included := f.build(t)
	if diff := cmp.Diff(hashes, included); diff != "" {
		t.Errorf("included (-want +got):\n%s", diff)
	}
	for _, h := range hashes {
		if r := f.receipt(t, h); r.BlockNumber.Uint64() != block {
			t.Errorf("%s is in block %d, want all in block %d", h, r.BlockNumber, block)
		}
		if st := f.status(t, h); st.Status != flashbots.StateIncluded || st.MaxBlockNumber != head+3 {
			t.Errorf("status of %s: %s, maxBlockNumber %d; want INCLUDED, %d", h, st.Status, st.MaxBlockNumber, head+3)
		}
	}
}

// TestBundleThatCannotBeMinedWhole: a bundle one of whose transactions the
// next block cannot take (a nonce gap) is not sent at all, so its other
// transaction is neither mined alone nor left in the public pool.
func TestBundleThatCannotBeMinedWhole(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	accounts := f.node.Accounts()
	head := f.head(t)
	tx0, raw0 := f.transfer(t, accounts[0].Key, 0)
	gap, rawGap := f.transfer(t, accounts[1].Key, 5)
	if _, err := f.client.SendBundle(ctxFor(t), &flashbots.MevBundle{
		Inclusion: flashbots.Inclusion{Block: head + 1, MaxBlock: head + 2},
		Body:      []flashbots.BundleItem{{Tx: raw0}, {Tx: rawGap}},
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // both blocks of the window, and one past it
		if _, included := f.build(t); len(included) != 0 {
			t.Errorf("BuildBlock included %v, want nothing", included)
		}
		f.assertPrivate(t, tx0.Hash(), gap.Hash())
	}
	for _, h := range []common.Hash{tx0.Hash(), gap.Hash()} {
		if st := f.status(t, h); st.Status != flashbots.StateFailed || st.SimError == "" {
			t.Errorf("status of %s: %+v, want FAILED with a reason", h, st)
		}
	}
}

// TestHeldOutOfOrder: private transactions that arrive out of nonce order
// wait privately until they can go into one block together.
func TestHeldOutOfOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	key := f.node.Accounts()[0].Key
	tx1, raw1 := f.transfer(t, key, 1)
	tx0, raw0 := f.transfer(t, key, 0)
	if _, err := f.client.SendPrivateTransaction(ctxFor(t), raw1, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, included := f.build(t); len(included) != 0 {
		t.Errorf("BuildBlock included %v before nonce 0 arrived", included)
	}
	f.assertPrivate(t, tx1.Hash())
	if st := f.status(t, tx1.Hash()); st.Status != flashbots.StatePending || !strings.Contains(st.SimError, "nonce") {
		t.Errorf("status %+v, want PENDING with a nonce reason", st)
	}
	if _, err := f.client.SendPrivateTransaction(ctxFor(t), raw0, 0, nil); err != nil {
		t.Fatal(err)
	}
	block, included := f.build(t)
	if diff := cmp.Diff([]common.Hash{tx0.Hash(), tx1.Hash()}, included); diff != "" {
		t.Errorf("included (-want +got):\n%s", diff)
	}
	if r := f.receipt(t, tx1.Hash()); r.BlockNumber.Uint64() != block {
		t.Errorf("nonce 1 in block %d, want %d", r.BlockNumber, block)
	}
}

func TestEthBundleTargetsOneBlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	accounts := f.node.Accounts()
	head := f.head(t)
	tx0, raw0 := f.transfer(t, accounts[0].Key, 0)
	tx1, raw1 := f.transfer(t, accounts[1].Key, 0)
	b := flashbots.EthBundle{Txs: [][]byte{raw0, raw1}, BlockNumber: head + 2, RevertingTxHashes: []common.Hash{tx1.Hash()}}
	want, err := b.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := f.client.SendEthBundle(ctxFor(t), b); err != nil || got != want {
		t.Fatalf("SendEthBundle: %s, %v; want %s", got, err, want)
	}
	if _, included := f.build(t); len(included) != 0 {
		t.Errorf("block %d included %v, want nothing before block %d", head+1, included, head+2)
	}
	f.assertPrivate(t, tx0.Hash(), tx1.Hash())
	block, included := f.build(t)
	if block != head+2 {
		t.Fatalf("built block %d, want %d", block, head+2)
	}
	if diff := cmp.Diff([]common.Hash{tx0.Hash(), tx1.Hash()}, included); diff != "" {
		t.Errorf("included (-want +got):\n%s", diff)
	}
}

func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	accounts := f.node.Accounts()
	if err := f.node.Mine(ctxFor(t), 3); err != nil {
		t.Fatal(err)
	}
	_, good := f.transfer(t, accounts[0].Key, 0)
	goodHex := "0x" + common.Bytes2Hex(good)
	_, otherChain := signTransfer(t, f.node, accounts[0].Key, 0, big.NewInt(1))
	legacy, err := types.SignTx(types.NewTransaction(0, common.Address{1}, big.NewInt(1), params.TxGas, big.NewInt(10e9), nil),
		types.HomesteadSigner{}, accounts[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	unprotected, err := legacy.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	hexOf := func(b []byte) string { return "0x" + common.Bytes2Hex(b) }

	tests := map[string]struct {
		body       string
		wantStatus int
		wantCode   int
		wantMsg    string
	}{
		"not rlp": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"0x010203"}]}`,
			200, -32602, "not a signed transaction"},
		"empty tx": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"0x"}]}`,
			200, -32602, "empty transaction"},
		"wrong chain id": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"` + hexOf(otherChain) + `"}]}`,
			200, -32602, "is for chain id 1, this relay's chain id is 31337"},
		"no chain id": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"` + hexOf(unprotected) + `"}]}`,
			200, -32602, "has no chain id"},
		"maxBlockNumber passed": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"` + goodHex + `","maxBlockNumber":"0x2"}]}`,
			200, -32602, "maxBlockNumber 2 has passed: the chain is at block 3"},
		"params not an array": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":{"tx":"` + goodHex + `"}}`,
			200, -32602, "want an array holding one object"},
		"tx not hex": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendPrivateTransaction","params":[{"tx":"zz"}]}`,
			200, -32602, "invalid params"},
		"cancel without hash": {`{"jsonrpc":"2.0","id":1,"method":"eth_cancelPrivateTransaction","params":[{"txHash":"0x12"}]}`,
			200, -32602, "invalid params"},
		"bundle backrunning a hash": {`{"jsonrpc":"2.0","id":1,"method":"mev_sendBundle","params":[{"version":"v0.1","inclusion":{"block":"0x5"},
			"body":[{"hash":"0x24e6e999b8abf2c4df46e8a02516c0983043039a5a54f89fa87274427ce64798"},{"tx":"` + goodHex + `"}]}]}`,
			200, -32602, "backrunning a pending transaction by hash is not supported"},
		"nested bundle": {`{"jsonrpc":"2.0","id":1,"method":"mev_sendBundle","params":[{"version":"v0.1","inclusion":{"block":"0x5"},
			"body":[{"bundle":{"version":"v0.1"}}]}]}`,
			200, -32602, "nested bundles are not supported"},
		"bundle window passed": {`{"jsonrpc":"2.0","id":1,"method":"mev_sendBundle","params":[{"version":"v0.1","inclusion":{"block":"0x2","maxBlock":"0x3"},
			"body":[{"tx":"` + goodHex + `"}]}]}`,
			200, -32602, "the bundle's last block 3 has passed"},
		"bundle tx for another chain": {`{"jsonrpc":"2.0","id":1,"method":"mev_sendBundle","params":[{"version":"v0.1","inclusion":{"block":"0x5"},
			"body":[{"tx":"` + goodHex + `"},{"tx":"` + hexOf(otherChain) + `"}]}]}`,
			200, -32602, "transaction 1: transaction"},
		"eth bundle not rlp": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendBundle","params":[{"txs":["0xc0"],"blockNumber":"0x5"}]}`,
			200, -32602, "not a signed transaction"},
		"eth bundle without block": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendBundle","params":[{"txs":["` + goodHex + `"]}]}`,
			200, -32602, "blockNumber is required"},
		"unknown method": {`{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransaction","params":["` + goodHex + `"]}`,
			200, -32601, "method eth_sendRawTransaction not found"},
		"not json":  {`{"jsonrpc":`, 400, -32700, "parse error"},
		"batch":     {`[{"jsonrpc":"2.0","id":1,"method":"eth_sendBundle","params":[]}]`, 400, -32700, "parse error"},
		"no method": {`{"jsonrpc":"2.0","id":1,"params":[]}`, 400, -32600, "invalid request"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			header, err := flashbots.Sign(f.client.AuthKey, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			status, answer := post(t, f.url, header, []byte(tc.body))
			var rpc struct {
				Error *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(answer, &rpc); err != nil || rpc.Error == nil {
				t.Fatalf("HTTP %d %s: want a JSON-RPC error", status, answer)
			}
			if status != tc.wantStatus || rpc.Error.Code != tc.wantCode || !strings.Contains(rpc.Error.Message, tc.wantMsg) {
				t.Errorf("HTTP %d, error %d %q; want HTTP %d, error %d containing %q", status, rpc.Error.Code, rpc.Error.Message,
					tc.wantStatus, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestStatusOfMalformedHash(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	resp, err := http.Get(f.url + "/tx/0x1234")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP %d, want 400", resp.StatusCode)
	}
}

func TestRunBuildsBlocks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, anvil.Options{})
	tx, raw := f.transfer(t, f.node.Accounts()[0].Key, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.relay.Run(ctx, 20*time.Millisecond) }()
	if _, err := f.client.SendPrivateTransaction(ctxFor(t), raw, 0, nil); err != nil {
		t.Fatal(err)
	}
	r := chaintest.WaitReceipt(t, f.node, tx.Hash())
	if st := f.status(t, tx.Hash()); st.Status != flashbots.StateIncluded {
		t.Errorf("status %s after the receipt in block %d, want INCLUDED", st.Status, r.BlockNumber)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestConcurrentSendsCancelsAndBuilds: senders, cancellers and the block
// builder race. Whatever was cancelled (true) is never mined, whatever was
// not is mined exactly once, and nothing is left in the public pool.
func TestConcurrentSendsCancelsAndBuilds(t *testing.T) {
	t.Parallel()
	const senders, perSender = 6, 3
	f := newFixture(t, anvil.Options{Accounts: senders})
	accounts := f.node.Accounts()

	type sent struct {
		hash      common.Hash
		cancelled bool
	}
	results := make(chan sent, senders*perSender)
	stop := make(chan struct{})
	builderDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				builderDone <- nil
				return
			default:
			}
			if _, _, err := f.relay.BuildBlock(t.Context()); err != nil {
				builderDone <- err
				return
			}
		}
	}()

	var wg sync.WaitGroup
	for i, acct := range accounts {
		txs := make([][]byte, perSender)
		hashes := make([]common.Hash, perSender)
		for n := range perSender {
			tx, raw := f.transfer(t, acct.Key, uint64(n))
			txs[n], hashes[n] = raw, tx.Hash()
		}
		wg.Go(func() {
			// The last transaction of every other sender is cancelled at
			// once; which of those a block beats is up to the race.
			for n, raw := range txs {
				if _, err := f.client.SendPrivateTransaction(t.Context(), raw, 0, nil); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				cancelled := false
				if i%2 == 0 && n == perSender-1 {
					ok, err := f.client.CancelPrivateTransaction(t.Context(), hashes[n])
					if err != nil {
						t.Errorf("cancel: %v", err)
					}
					cancelled = ok
				}
				results <- sent{hashes[n], cancelled}
			}
		})
	}
	wg.Wait()
	close(results)
	close(stop)
	if err := <-builderDone; err != nil {
		t.Fatal(err)
	}
	f.build(t) // anything sent after the builder's last block

	pool, err := f.node.TxPoolContent(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(pool.All()) != 0 {
		t.Errorf("the public pool holds %d transactions, want none", len(pool.All()))
	}
	for s := range results {
		_, err := f.node.Client().TransactionReceipt(ctxFor(t), s.hash)
		st := f.status(t, s.hash)
		switch {
		case s.cancelled && !errors.Is(err, ethereum.NotFound):
			t.Errorf("%s was cancelled yet mined (receipt error %v)", s.hash, err)
		case s.cancelled && st.Status != flashbots.StateCancelled:
			t.Errorf("%s was cancelled, status %s", s.hash, st.Status)
		case !s.cancelled && err != nil:
			t.Errorf("%s was not cancelled yet has no receipt: %v (status %+v)", s.hash, err, st)
		case !s.cancelled && st.Status != flashbots.StateIncluded:
			t.Errorf("%s is mined, status %s", s.hash, st.Status)
		}
	}
}

func TestNewRefusesIncompleteOptions(t *testing.T) {
	for name, opts := range map[string]devrelay.Options{
		"no node":     {ChainID: 1},
		"no chain id": {NodeURL: "http://127.0.0.1:8545"},
	} {
		if _, err := devrelay.New(opts); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
