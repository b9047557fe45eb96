package mevrouterd_test

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/devrelay"
	"github.com/txfence/txfence/mev-router/mevrouterd"
	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// writeFile writes content to a new file of the test and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// signed is a transfer from node's dev account i, signed for chainID
// (which may be another chain than the node's), raw and its hash.
func signed(t *testing.T, node *anvil.Node, i int, chainID uint64) (string, common.Hash) {
	t.Helper()
	acct := node.Accounts()[i]
	nonce, err := node.Client().PendingNonceAt(mevroutertest.Context(t), acct.Address)
	if err != nil {
		t.Fatal(err)
	}
	to := common.HexToAddress("0xb0b")
	tx, err := types.SignNewTx(acct.Key, types.LatestSignerForChainID(new(big.Int).SetUint64(chainID)), &types.DynamicFeeTx{
		ChainID: new(big.Int).SetUint64(chainID), Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: big.NewInt(100e9),
		Gas: 21000, To: &to, Value: big.NewInt(1),
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return hexutil.Encode(raw), tx.Hash()
}

func inPool(t *testing.T, node *anvil.Node, hash common.Hash) bool {
	t.Helper()
	pool, err := node.TxPoolContent(mevroutertest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return pool.Contains(hash)
}

func mined(t *testing.T, node *anvil.Node, hash common.Hash) bool {
	t.Helper()
	_, err := node.Client().TransactionReceipt(mevroutertest.Context(t), hash)
	if err != nil && err != ethereum.NotFound {
		t.Fatal(err)
	}
	return err == nil
}

// TestOneMevrouterdServesTwoChains runs the real mevrouterd with a chains
// file of two anvils of different chain ids, the second with a private
// relay: each chain's transaction reaches its own node and no other, a
// private send is found by its hash, and a batch mixing chains or of a
// chain not served is refused with a problem naming the chains.
func TestOneMevrouterdServesTwoChains(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	one := chaintest.Anvil(t, anvil.Options{})                               // automine: public sends are mined
	two := chaintest.Anvil(t, anvil.Options{ChainID: 31338, NoMining: true}) // the relay mines
	relay, err := devrelay.New(devrelay.Options{NodeURL: two.URL(), ChainID: two.ChainID()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	relaySrv := httptest.NewServer(relay)
	t.Cleanup(relaySrv.Close)
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	chains := writeFile(t, "chains.json", fmt.Sprintf(`{"chains": [
		{"chain_id": 31337, "public_rpc": [{"name": "one", "url": %q}]},
		{"chain_id": 31338, "public_rpc": [{"name": "two", "url": %q, "no_batch": true}],
		 "relays": [{"name": "dev", "url": %q, "kind": "protect"}], "private_blocks": 5}
	]}`, one.URL(), two.URL(), relaySrv.URL))
	env := servicetest.Merge(servicetest.TLSEnv(mevrouterd.Spec.EnvPrefix, pki, mevrouterd.Spec.Identity), map[string]string{
		prefix + "CHAINS_FILE":    chains,
		prefix + "RELAY_KEY_FILE": writeFile(t, "relay.key", hexutil.Encode(crypto.FromECDSA(key))),
	})
	svc := servicetest.Start(t, mevrouterd.Run, nil, env, "internal")
	client := servicetest.Client(t, pki, "txmanager", "mevrouter")
	broadcast := func(body string) (*http.Response, []byte) {
		return servicetest.Do(t, client, "POST", svc.URL("internal")+"/v1/broadcast", body)
	}
	type result struct {
		Hash       common.Hash `json:"hash"`
		Route      string      `json:"route"`
		Accepted   bool        `json:"accepted"`
		AcceptedBy []string    `json:"accepted_by"`
		MaxBlock   uint64      `json:"max_block"`
	}
	accepted := func(body string) result {
		t.Helper()
		resp, b := broadcast(body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("broadcast %s: %d %s", body, resp.StatusCode, b)
		}
		res := servicetest.Decode[struct{ Results []result }](t, b).Results
		if len(res) != 1 || !res[0].Accepted {
			t.Fatalf("broadcast %s: %s", body, b)
		}
		return res[0]
	}

	rawOne, hashOne := signed(t, one, 0, one.ChainID())
	if r := accepted(fmt.Sprintf(`{"transactions": [%q]}`, rawOne)); r.AcceptedBy[0] != "one" {
		t.Errorf("chain 31337's transaction accepted by %v, want one", r.AcceptedBy)
	}
	rawTwo, hashTwo := signed(t, two, 0, two.ChainID())
	if r := accepted(fmt.Sprintf(`{"transactions": [%q]}`, rawTwo)); r.AcceptedBy[0] != "two" {
		t.Errorf("chain 31338's transaction accepted by %v, want two", r.AcceptedBy)
	}
	chaintest.WaitReceipt(t, one, hashOne)
	if !inPool(t, two, hashTwo) {
		t.Error("chain 31338's transaction is not in its node's pool")
	}
	if inPool(t, one, hashTwo) || mined(t, one, hashTwo) || inPool(t, two, hashOne) || mined(t, two, hashOne) {
		t.Error("a transaction reached the other chain's node")
	}

	// A private send on the second chain is found by its hash alone.
	rawPrivate, hashPrivate := signed(t, two, 1, two.ChainID())
	if r := accepted(fmt.Sprintf(`{"transactions": [%q], "route": "private"}`, rawPrivate)); r.Route != "private" || r.AcceptedBy[0] != "dev" {
		t.Errorf("private send: %+v", r)
	}
	resp, b := servicetest.Do(t, client, "GET", svc.URL("internal")+"/v1/private/"+hashPrivate.Hex(), "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"state":"pending"`) {
		t.Errorf("status of the private send: %d %s", resp.StatusCode, b)
	}
	if inPool(t, two, hashPrivate) {
		t.Error("the private send is in the public pool")
	}
	// The first chain has no relay: private is refused there.
	rawNoRelay, _ := signed(t, one, 1, one.ChainID())
	if resp, b := broadcast(fmt.Sprintf(`{"transactions": [%q], "route": "private"}`, rawNoRelay)); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("private on a chain without relays: %d %s", resp.StatusCode, b)
	}

	rawOther, _ := signed(t, one, 2, 5)
	rawOneAgain, _ := signed(t, one, 2, one.ChainID())
	rawTwoAgain, _ := signed(t, two, 2, two.ChainID())
	for _, tt := range []struct {
		name string
		txs  []string
		want []string
	}{
		{"a batch mixing chains", []string{rawOneAgain, rawTwoAgain, rawOne},
			[]string{"2 chains", "chain 31337: transactions[0,2]", "chain 31338: transactions[1]"}},
		{"a chain not served", []string{rawOther}, []string{"chain id 5", "chains 31337, 31338"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(map[string]any{"transactions": tt.txs})
			if err != nil {
				t.Fatal(err)
			}
			resp, b := broadcast(string(body))
			problem := servicetest.Decode[struct {
				Status int    `json:"status"`
				Detail string `json:"detail"`
			}](t, b)
			if resp.StatusCode != http.StatusBadRequest || problem.Status != http.StatusBadRequest ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
				t.Fatalf("%d %s %s, want a 400 problem", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			for _, w := range tt.want {
				if !strings.Contains(problem.Detail, w) {
					t.Errorf("detail %q does not name %q", problem.Detail, w)
				}
			}
		})
	}
	for _, node := range []*anvil.Node{one, two} {
		if nonce, err := node.Client().PendingNonceAt(mevroutertest.Context(t), node.Accounts()[2].Address); err != nil || nonce != 0 {
			t.Errorf("chain %d: account 2's pending nonce %d (%v) after refused broadcasts, want 0", node.ChainID(), nonce, err)
		}
	}
}

// TestRunRefusesABadChainsFile: each mistake of a chains file, or of its
// use with the other variables, is named with its chain and field, and
// mevrouterd does not start.
func TestRunRefusesABadChainsFile(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	node := chaintest.Anvil(t, anvil.Options{})
	tlsEnv := servicetest.TLSEnv(mevrouterd.Spec.EnvPrefix, pki, mevrouterd.Spec.Identity)
	good := fmt.Sprintf(`{"chain_id": 31337, "public_rpc": [{"name": "anvil", "url": %q}]}`, node.URL())
	file := func(chains ...string) string { return `{"chains": [` + strings.Join(chains, ",") + `]}` }
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		want  []string
		never string // a secret the error must not quote
	}{
		{name: "CHAIN_ID beside the file", file: file(good), env: map[string]string{prefix + "CHAIN_ID": "31337"},
			want: []string{"CHAINS_FILE and CHAIN_ID are both set"}},
		{name: "a per-chain variable beside the file", file: file(good), env: map[string]string{prefix + "PUBLIC_RPC": "x=http://127.0.0.1:1", prefix + "WATCH_RPC": "http://127.0.0.1:1"},
			want: []string{"PUBLIC_RPC is set with CHAINS_FILE", "WATCH_RPC is set with CHAINS_FILE"}},
		{name: "not JSON", file: `chains: [1]`, want: []string{"not a chains file"}},
		{name: "an unknown field", file: `{"chains": [{"chain_id": 1, "publc_rpc": []}]}`, want: []string{"not a chains file", "publc_rpc"}},
		{name: "trailing data", file: file(good) + `{}`, want: []string{"data after the JSON object"}},
		{name: "no chain", file: `{"chains": []}`, want: []string{"at least one chain"}},
		{name: "no chain id", file: file(`{"public_rpc": [{"name": "a", "url": "http://127.0.0.1:1"}]}`), want: []string{"chains[0]: chain_id"}},
		{name: "a chain twice", file: file(good, good), want: []string{"chains[1] (chain 31337): chain_id: chain 31337 is chains[0] already"}},
		{name: "no public endpoint", file: file(`{"chain_id": 10}`), want: []string{"chains[0] (chain 10): public_rpc: at least one"}},
		{name: "a bad endpoint URL", file: file(`{"chain_id": 10, "public_rpc": [{"name": "a", "url": "ftp://node.example/SECRETKEY"}]}`),
			want: []string{"chains[0] (chain 10): public_rpc[0].url"}, never: "SECRETKEY"},
		{name: "a bad endpoint name", file: file(`{"chain_id": 10, "public_rpc": [{"name": "a b", "url": "http://127.0.0.1:1"}]}`),
			want: []string{"chains[0] (chain 10): public_rpc[0].name"}},
		{name: "a name twice", file: file(`{"chain_id": 10, "public_rpc": [{"name": "a", "url": "http://127.0.0.1:1"}], "relays": [{"name": "a", "url": "http://127.0.0.1:2"}]}`),
			want: []string{`chains[0] (chain 10): relays[0].name: "a" is public_rpc[0] already`}},
		{name: "a bad relay kind", file: file(`{"chain_id": 10, "public_rpc": [{"name": "a", "url": "http://127.0.0.1:1"}], "relays": [{"name": "r", "url": "http://127.0.0.1:2", "kind": "mevshare"}]}`),
			want: []string{`chains[0] (chain 10): relays[0].kind: "mevshare"`}},
		{name: "a bad watch_rpc", file: file(`{"chain_id": 10, "public_rpc": [{"name": "a", "url": "http://127.0.0.1:1"}], "watch_rpc": "127.0.0.1:8545"}`),
			want: []string{"chains[0] (chain 10): watch_rpc"}},
		{name: "every problem at once", file: file(`{"chain_id": 10}`, `{"chain_id": 11, "public_rpc": [{"name": "", "url": "x"}]}`),
			want: []string{"(chain 10): public_rpc", "(chain 11): public_rpc[0].name", "(chain 11): public_rpc[0].url"}},
		{name: "relays without a key", file: file(`{"chain_id": 10, "public_rpc": [{"name": "a", "url": "http://127.0.0.1:1"}], "relays": [{"name": "r", "url": "http://127.0.0.1:2"}]}`),
			want: []string{"chain 10 has relays", "RELAY_KEY_FILE"}},
		{name: "an endpoint of another chain", file: file(fmt.Sprintf(`{"chain_id": 1, "public_rpc": [{"name": "anvil", "url": %q}]}`, node.URL())),
			want: []string{"chain 1 of CHAINS_FILE: public endpoint anvil is on chain 31337, not 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := servicetest.Merge(tlsEnv, tt.env, map[string]string{prefix + "CHAINS_FILE": writeFile(t, "chains.json", tt.file)})
			_, err := servicetest.RunOnce(t, mevrouterd.Run, nil, env)
			if err == nil {
				t.Fatal("mevrouterd started")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to mention %q", err, w)
				}
			}
			if tt.never != "" && strings.Contains(err.Error(), tt.never) {
				t.Errorf("err quotes a secret: %v", err)
			}
		})
	}
	t.Run("a missing file", func(t *testing.T) {
		t.Parallel()
		env := servicetest.Merge(tlsEnv, map[string]string{prefix + "CHAINS_FILE": filepath.Join(t.TempDir(), "none.json")})
		if _, err := servicetest.RunOnce(t, mevrouterd.Run, nil, env); err == nil || !strings.Contains(err.Error(), "CHAINS_FILE") {
			t.Errorf("err = %v, want it to name CHAINS_FILE", err)
		}
	})
}

// FuzzChainsFile: the parser never panics, and what it accepts encodes
// and parses again to the same chains.
func FuzzChainsFile(f *testing.F) {
	f.Add([]byte(`{"chains": [{"chain_id": 1, "public_rpc": [{"name": "a", "url": "https://node.example/v3/key", "no_batch": true}],
		"relays": [{"name": "fb", "url": "https://relay.example", "kind": "mev-share"}], "watch_rpc": "http://10.0.0.5:8545", "private_blocks": 25}]}`))
	f.Add([]byte(`{"chains": [{"chain_id": 1, "public_rpc": [{"name": "a", "url": "ws://x"}]}, {"chain_id": 10, "public_rpc": [{"name": "a", "url": "wss://y"}]}]}`))
	f.Add([]byte(`{"chains": [{"chain_id": 1, "public_rpc": []}]}`))
	f.Add([]byte(`{"chains": null}`))
	f.Add([]byte(`{"CHAINS": [{"Chain_Id": 18446744073709551615, "public_rpc": [{"name": "\u00e9", "url": "http://h"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		parsed, err := mevrouterd.ParseChainsFile(data)
		if err != nil {
			return
		}
		encoded, err := json.Marshal(parsed)
		if err != nil {
			t.Fatalf("accepted %q, but it does not encode: %v", data, err)
		}
		again, err := mevrouterd.ParseChainsFile(encoded)
		if err != nil {
			t.Fatalf("accepted %q, but not its encoding %s: %v", data, encoded, err)
		}
		if diff := cmp.Diff(parsed, again); diff != "" {
			t.Errorf("%q parsed again differs (-first +again):\n%s", data, diff)
		}
	})
}
