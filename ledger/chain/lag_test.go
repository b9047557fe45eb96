package chain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/shared/errs"
)

// lagNode answers a Settled batch as a node whose transaction index lags
// its receipts: the transaction carries txBlock (null for none), the
// receipt receiptBlock. No node can be made to lag on purpose, so this one
// is canned.
func lagNode(t *testing.T, txBlock, receiptBlock string) *rpc.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var calls []struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if err := json.NewDecoder(r.Body).Decode(&calls); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := make([]json.RawMessage, len(calls))
		for i, c := range calls {
			var result string
			switch c.Method {
			case "eth_getTransactionByHash":
				result = fmt.Sprintf(`{"from":"0x00000000000000000000000000000000000000aa","to":"0x00000000000000000000000000000000000000bb","value":"0x5","blockHash":%s}`, txBlock)
			case "eth_getTransactionReceipt":
				result = fmt.Sprintf(`{"type":"0x2","status":"0x1","cumulativeGasUsed":"0x5208","logsBloom":"0x%0512x","logs":[],"transactionHash":"0x%064x","gasUsed":"0x5208","effectiveGasPrice":"0x1","blockHash":%s,"blockNumber":"0x7","transactionIndex":"0x0","contractAddress":null}`, 0, 1, receiptBlock)
			}
			out[i] = json.RawMessage(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, c.ID, result))
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	c, err := rpc.Dial(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestATransactionAnsweredWithoutItsBlockIsReadFromItsReceipt: the
// receipt in the named block settles the transaction even when the node
// answers the transaction itself without a block yet; a transaction the
// node places in another block is a conflict.
func TestATransactionAnsweredWithoutItsBlockIsReadFromItsReceipt(t *testing.T) {
	t.Parallel()
	block := common.HexToHash("0xb1")
	quoted := `"` + block.Hex() + `"`
	other := `"` + common.HexToHash("0xb2").Hex() + `"`
	ctx := context.Background()

	s, err := chain.NewReader(lagNode(t, "null", quoted), 31337).Settled(ctx, common.HexToHash("0x01"), block)
	if err != nil || s.Value.Int64() != 5 || s.Receipt.BlockHash != block {
		t.Fatalf("settled without the transaction's block hash: %+v, %v", s, err)
	}
	if _, err := chain.NewReader(lagNode(t, other, quoted), 31337).Settled(ctx, common.HexToHash("0x01"), block); !errs.Is(err, errs.Conflict) {
		t.Errorf("a transaction in another block than its receipt: %v, want a conflict", err)
	}
	if _, err := chain.NewReader(lagNode(t, "null", other), 31337).Settled(ctx, common.HexToHash("0x01"), block); !errs.Is(err, errs.Conflict) {
		t.Errorf("a receipt in another block: %v, want a conflict", err)
	}
}
