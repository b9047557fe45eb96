package mevrouterd_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/mev-router/mevrouterd"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// BenchmarkPublicBroadcast prints transactions per second into anvil
// (started with --no-mining, mined between rounds outside the timer):
// sent directly with eth_sendRawTransaction, and through a running
// mevrouterd's /v1/broadcast over mutual TLS, for the same kind of
// pre-signed transfers, in the same run. The ratio is mevrouterd's cost.
func BenchmarkPublicBroadcast(b *testing.B) {
	node := chaintest.Anvil(b, anvil.Options{NoMining: true, Accounts: 4})
	pki := servicetest.PKI(b)
	env := servicetest.Merge(servicetest.TLSEnv(mevrouterd.Spec.EnvPrefix, pki, mevrouterd.Spec.Identity),
		chainEnv(node, fmt.Sprint(node.ChainID())))
	svc := servicetest.Start(b, mevrouterd.Run, nil, env, "internal")
	client := servicetest.Client(b, pki, "txmanager", mevrouterd.Spec.Identity)
	direct := node.RPC()

	accounts := node.Accounts()
	for i, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("anvil-direct/batch=%d", batch), func(b *testing.B) {
			send := func(raws [][]byte) error {
				elems := make([]rpc.BatchElem, len(raws))
				for j, raw := range raws {
					elems[j] = rpc.BatchElem{Method: "eth_sendRawTransaction", Args: []any{hexutil.Bytes(raw)}, Result: new(common.Hash)}
				}
				if err := direct.BatchCallContext(context.Background(), elems); err != nil {
					return err
				}
				for _, e := range elems {
					if e.Error != nil {
						return e.Error
					}
				}
				return nil
			}
			runRounds(b, node, accounts[2*i].Key, batch, send)
		})
		b.Run(fmt.Sprintf("mevrouterd/batch=%d", batch), func(b *testing.B) {
			url := svc.URL("internal") + "/v1/broadcast"
			send := func(raws [][]byte) error {
				body, _ := json.Marshal(map[string]any{"transactions": hexAll(raws), "route": "public"})
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				var out struct {
					Results []struct {
						Accepted bool
						Error    json.RawMessage
					}
				}
				if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d: %v", resp.StatusCode, err)
				}
				for _, r := range out.Results {
					if !r.Accepted {
						return fmt.Errorf("not accepted: %s", r.Error)
					}
				}
				return nil
			}
			runRounds(b, node, accounts[2*i+1].Key, batch, send)
		})
	}
}

// runRounds pre-signs b.N transfers from key, then times sending them in
// batches, mining (untimed) every 2,048 so the pool stays small.
func runRounds(b *testing.B, node *anvil.Node, key *ecdsa.PrivateKey, batch int, send func([][]byte) error) {
	ctx := context.Background()
	raws := presign(b, node, key, b.N)
	b.ResetTimer()
	sinceMine := 0
	for start := 0; start < len(raws); start += batch {
		end := min(start+batch, len(raws))
		if err := send(raws[start:end]); err != nil {
			b.Fatal(err)
		}
		if sinceMine += end - start; sinceMine >= 2048 {
			b.StopTimer()
			if err := node.Mine(ctx, 1); err != nil {
				b.Fatal(err)
			}
			sinceMine = 0
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(len(raws))/b.Elapsed().Seconds(), "tx/s")
	b.StopTimer()
	if err := node.Mine(ctx, 1); err != nil {
		b.Fatal(err)
	}
}

// presign signs n transfers from key, from its pending nonce on, with a
// fee cap far above anvil's base fee so none waits.
func presign(b *testing.B, node *anvil.Node, key *ecdsa.PrivateKey, n int) [][]byte {
	b.Helper()
	from := node.Accounts()[0].Address
	for _, a := range node.Accounts() {
		if a.Key.Equal(key) {
			from = a.Address
		}
	}
	nonce, err := node.Client().PendingNonceAt(context.Background(), from)
	if err != nil {
		b.Fatal(err)
	}
	chainID := new(big.Int).SetUint64(node.ChainID())
	signer := types.LatestSignerForChainID(chainID)
	to := common.HexToAddress("0xb0b")
	raws := make([][]byte, n)
	for i := range raws {
		tx, err := types.SignNewTx(key, signer, &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce + uint64(i),
			GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei), Gas: params.TxGas, To: &to, Value: big.NewInt(1)})
		if err != nil {
			b.Fatal(err)
		}
		if raws[i], err = tx.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
	return raws
}

func hexAll(raws [][]byte) []string {
	out := make([]string, len(raws))
	for i, r := range raws {
		out[i] = hexutil.Encode(r)
	}
	return out
}
