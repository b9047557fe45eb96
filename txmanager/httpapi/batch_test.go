package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

type outcomeJSON struct {
	Status  int     `json:"status"`
	Tx      *txJSON `json:"tx"`
	Problem *struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	} `json:"problem"`
}

func batchOf(items ...string) string {
	return `{"items": [` + strings.Join(items, ",") + `]}`
}

// TestBatchAnswersEachItemAsCreateWould: every item of a batch gets the
// answer a create of its own would get (201, 200 for a repeat, 409 for a
// request id reused with another body, 400 for bad input), in order; bad
// items store nothing and spoil nothing.
func TestBatchAnswersEachItemAsCreateWould(t *testing.T) {
	t.Parallel()
	a := start(t)
	code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx", txmanagertest.TransferBody("before", "1"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	before := servicetest.Decode[txJSON](t, b)
	unknownChain := strings.Replace(txmanagertest.TransferBody("chain", "1"), `"chain_id": 31337`, `"chain_id": 5`, 1)
	unknownField := strings.Replace(txmanagertest.TransferBody("field", "1"), `"route"`, `"nonce": 7, "route"`, 1)
	orphan := strings.Replace(txmanagertest.TransferBody("orphan", "1"), `"route"`, `"depends_on": "0193a1f4-8c2e-7d6b-9f10-4be0c2d1e5a7", "route"`, 1)
	items := []string{
		txmanagertest.TransferBody("new", "5"),     // 201
		txmanagertest.TransferBody("before", "1"),  // 200, the transaction made before
		txmanagertest.TransferBody("new", "5"),     // 200, the first item's
		txmanagertest.TransferBody("new", "6"),     // 409
		unknownChain,                               // 400
		unknownField,                               // 400
		orphan,                                     // 400
		txmanagertest.TransferBody("another", "7"), // 201
		`{"chain_id": "not a number"}`,             // 400
	}
	code, b = a.Do(t, "gateway", "POST", "/internal/v1/tx/batch", batchOf(items...))
	if code != http.StatusOK {
		t.Fatalf("batch: %d %s", code, b)
	}
	out := servicetest.Decode[struct{ Items []outcomeJSON }](t, b).Items
	if len(out) != len(items) {
		t.Fatalf("%d answers for %d items: %s", len(out), len(items), b)
	}
	wantStatus := []int{201, 200, 200, 409, 400, 400, 400, 201, 400}
	wantDetail := map[int]string{4: "chain_id: 5 is not a configured chain", 5: "nonce", 6: "depends_on", 8: "request body"}
	for i, o := range out {
		if o.Status != wantStatus[i] {
			t.Errorf("item %d: status %d, want %d: %+v", i, o.Status, wantStatus[i], o)
			continue
		}
		if o.Status >= 400 {
			if o.Tx != nil || o.Problem == nil || o.Problem.Status != o.Status || !strings.HasPrefix(o.Problem.Type, "urn:txfence:problem:") {
				t.Errorf("item %d: a failure must carry its problem and no tx: %+v", i, o)
			} else if want, ok := wantDetail[i]; ok && !strings.Contains(o.Problem.Detail, want) {
				t.Errorf("item %d: problem %q, want it to mention %q", i, o.Problem.Detail, want)
			}
			continue
		}
		if o.Tx == nil || o.Problem != nil || o.Tx.State != "INIT" {
			t.Errorf("item %d: a success must carry its INIT tx and no problem: %+v", i, o)
		}
	}
	if out[1].Tx != nil && out[1].Tx.TxID != before.TxID {
		t.Errorf("the repeat of an earlier create answered %s, want %s", out[1].Tx.TxID, before.TxID)
	}
	if out[0].Tx != nil && out[2].Tx != nil && out[0].Tx.TxID != out[2].Tx.TxID {
		t.Errorf("a repeat inside the batch answered %s, want the first item's %s", out[2].Tx.TxID, out[0].Tx.TxID)
	}
	if out[0].Tx != nil && strings.ReplaceAll(string(out[0].Tx.Metadata), " ", "") != `{"order":"A-1"}` {
		t.Errorf("metadata %s, want the client's object", out[0].Tx.Metadata)
	}
	var txs, events int
	if err := a.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM tx), (SELECT count(*) FROM event)`).Scan(&txs, &events); err != nil {
		t.Fatal(err)
	}
	if txs != 3 || events != 3 {
		t.Errorf("%d transactions and %d events stored, want 3 of each", txs, events)
	}
}

func TestBadBatches(t *testing.T) {
	t.Parallel()
	a := start(t)
	many := make([]string, 257)
	for i := range many {
		many[i] = txmanagertest.TransferBody("r", "1")
	}
	for name, body := range map[string]string{
		"no items":       `{"items": []}`,
		"too many items": batchOf(many...),
		"not JSON":       `{"items": [`,
		"no list":        `{"items": {}}`,
		"another member": `{"items": [], "more": 1}`,
		"over 8 MiB":     `{"items": [{"metadata": {"x": "` + strings.Repeat("a", 8<<20) + `"}}]}`,
	} {
		code, b := a.Do(t, "gateway", "POST", "/internal/v1/tx/batch", body)
		var p struct{ Type string }
		if code != http.StatusBadRequest || json.Unmarshal(b, &p) != nil || p.Type != "urn:txfence:problem:invalid" {
			t.Errorf("%s: %d %s, want a 400 problem", name, code, b)
		}
	}
	if code, _ := a.Do(t, "ledger", "POST", "/internal/v1/tx/batch", batchOf(txmanagertest.TransferBody("x", "1"))); code != http.StatusForbidden {
		t.Errorf("ledger sends a batch: %d, want 403", code)
	}
	var n int
	if err := a.Pool.QueryRow(context.Background(), `SELECT count(*) FROM tx`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d transactions stored by refused batches (%v)", n, err)
	}
}
