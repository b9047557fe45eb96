package worker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/txfence/txfence/openapi/mevrouterapi"
	"github.com/txfence/txfence/txmanager"
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

// TestRefusalsThatNoResendChangesLeaveTheTransactionStuck: a transaction
// every route refused as of a type the nodes do not take, too large,
// undecodable, or reverted at send stays SIGNED, stuck, with the category
// and the node's words as its reason, for an operator (and, for a revert,
// for the chain follower should the node have mined it). None is sent
// again and again, none is failed.
func TestRefusalsThatNoResendChangesLeaveTheTransactionStuck(t *testing.T) {
	t.Parallel()
	node := &refusingNode{}
	e := newEnvWith(t, envOptions{PublicNode: node})
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
