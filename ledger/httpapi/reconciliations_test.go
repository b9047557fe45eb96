package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/httpapi"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/ledger/reconcile"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// reconciling is the API with a real reconciler over a real anvil, and a
// wallet opened at genesis.
type reconciling struct {
	*api
	node   *anvil.Node
	wallet common.Address
}

func startReconciling(t *testing.T) *reconciling {
	t.Helper()
	node := chaintest.Anvil(t, anvil.Options{})
	a := startWith(t, func(store *postgres.Store) *httpapi.API {
		// Depth 1: the block below the head, so that a movement mined in
		// the last block but one is compared. A run the books are not
		// ready for is refused after a short wait.
		return httpapi.New(store, nil).ReconcileWith(&reconcile.Reconciler{Store: store,
			Chains: map[uint64]*rpc.Client{node.ChainID(): node.RPC()}, Depth: 1, Grace: reconcile.NoGrace, Wait: 100 * time.Millisecond})
	})
	r := &reconciling{api: a, node: node, wallet: node.Accounts()[0].Address}
	ctx := context.Background()
	genesis, err := node.Client().HeaderByNumber(ctx, big.NewInt(0))
	if err != nil {
		t.Fatal(err)
	}
	held, err := node.Client().BalanceAt(ctx, r.wallet, big.NewInt(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.pool.Exec(ctx, `INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', 0, $3)`,
		int64(node.ChainID()), r.wallet.Bytes(), genesis.Hash().Bytes()); err != nil {
		t.Fatal(err)
	}
	wallet := ledger.AccountKey{ChainID: node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: r.wallet}
	equity := wallet
	equity.Kind = ledger.OpeningBalance
	hash := genesis.Hash()
	a.post(t, &ledger.Journal{Kind: ledger.Opening, Key: "opening:" + r.wallet.Hex(), ChainID: node.ChainID(), Block: &ledger.Block{Hash: hash},
		Legs: []ledger.Leg{{Account: wallet, Amount: held}, {Account: equity, Amount: new(big.Int).Neg(held)}}})
	return r
}

// scannedTo records that the scanner has booked the chain up to the head.
func (r *reconciling) scannedTo(t *testing.T) uint64 {
	t.Helper()
	ctx := context.Background()
	head, err := r.node.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Exec(ctx, `
		INSERT INTO scan_cursor (chain_id, block_number, block_hash) VALUES ($1, $2, $3)
		ON CONFLICT (chain_id) DO UPDATE SET block_number = $2, block_hash = $3`,
		int64(r.node.ChainID()), head.Number.Int64(), head.Hash().Bytes()); err != nil {
		t.Fatal(err)
	}
	return head.Number.Uint64()
}

func (a *api) send(t *testing.T, as, method, path, contentType, body string) (int, []byte) {
	t.Helper()
	resp, b := servicetest.Do(t, servicetest.Client(t, a.pki, as, "ledger"), method, a.url+path, body, "Content-Type", contentType)
	return resp.StatusCode, b
}

// A reconciliation asked for through the API books the movement the
// ledger never saw to suspense and answers its report; the stored runs
// are listed newest first, page by page, and read back whole.
func TestReconciliationOnDemand(t *testing.T) {
	t.Parallel()
	r := startReconciling(t)
	ctx := context.Background()
	held, err := r.node.Client().BalanceAt(ctx, r.wallet, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 5 wei the ledger never saw arrive.
	if err := r.node.SetBalance(ctx, r.wallet, new(big.Int).Add(held, big.NewInt(5))); err != nil {
		t.Fatal(err)
	}
	if err := r.node.Mine(ctx, 2); err != nil {
		t.Fatal(err)
	}
	r.scannedTo(t)
	body := fmt.Sprintf(`{"chain_id": %d}`, r.node.ChainID())
	code, b := r.send(t, "gateway", "POST", "/v1/reconciliations", "application/json", body)
	if code != http.StatusCreated {
		t.Fatalf("reconcile: %d %s", code, b)
	}
	var run ledgerapi.ReconciliationRun
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if run.Status != "complete" || run.Trigger != "request" || run.Differences != 1 || run.Items == nil || len(*run.Items) != 1 {
		t.Fatalf("run %s", b)
	}
	it := (*run.Items)[0]
	if it.Address != strings.ToLower(r.wallet.Hex()) || it.Asset != "native" || it.Difference == nil || *it.Difference != "5" ||
		it.JournalId == nil || !strings.Contains(it.Cause, "inbound movement") {
		t.Errorf("item %s", b)
	}
	suspense := read[ledgerapi.AccountList](t, r.api, "/v1/accounts?kind=suspense&address="+r.wallet.Hex())
	if len(suspense.Accounts) != 1 || suspense.Accounts[0].Balance != "-5" {
		t.Errorf("suspense after the run: %+v", suspense)
	}

	// Two more runs: at a later block, the wallet ties out.
	for range 2 {
		if err := r.node.Mine(ctx, 1); err != nil {
			t.Fatal(err)
		}
		r.scannedTo(t)
		if code, b := r.send(t, "gateway", "POST", "/v1/reconciliations", "application/json", body); code != http.StatusCreated ||
			!bytes.Contains(b, []byte(`"differences":0`)) {
			t.Fatalf("a later run: %d %s", code, b)
		}
	}
	first := read[ledgerapi.ReconciliationList](t, r.api, fmt.Sprintf("/v1/reconciliations?chain_id=%d&limit=2", r.node.ChainID()))
	if len(first.Runs) != 2 || first.NextCursor == nil || first.Runs[0].RunId <= first.Runs[1].RunId || first.Runs[0].Items != nil {
		t.Fatalf("first page: %+v", first)
	}
	second := read[ledgerapi.ReconciliationList](t, r.api, fmt.Sprintf("/v1/reconciliations?chain_id=%d&limit=2&cursor=%s", r.node.ChainID(), *first.NextCursor))
	if len(second.Runs) != 1 || second.NextCursor != nil || second.Runs[0].RunId != run.RunId {
		t.Fatalf("second page: %+v, want the first run", second)
	}
	whole := read[ledgerapi.ReconciliationRun](t, r.api, fmt.Sprintf("/v1/reconciliations/%d", run.RunId))
	if whole.Items == nil || len(*whole.Items) != 1 || (*whole.Items)[0].Difference == nil || *(*whole.Items)[0].Difference != "5" {
		t.Errorf("the stored run: %+v", whole)
	}
}

// Every bad request to the reconciliation routes is a problem document
// with the right status; a run the books are not ready for stores nothing.
func TestReconciliationBadInput(t *testing.T) {
	t.Parallel()
	r := startReconciling(t)
	chainBody := fmt.Sprintf(`{"chain_id": %d}`, r.node.ChainID())
	for _, c := range []struct {
		name, method, path, contentType, body string
		want                                  int
		detail                                string
	}{
		{"not JSON", "POST", "/v1/reconciliations", "application/json", `{`, 400, "request body"},
		{"another content type", "POST", "/v1/reconciliations", "text/plain", chainBody, 400, "content type"},
		{"no chain", "POST", "/v1/reconciliations", "application/json", `{}`, 400, "chain_id"},
		{"chain zero", "POST", "/v1/reconciliations", "application/json", `{"chain_id": 0}`, 400, "chain_id"},
		{"an unknown field", "POST", "/v1/reconciliations", "application/json", `{"chain_id": 1, "block": 7}`, 400, "unknown field"},
		{"a chain the ledger does not book", "POST", "/v1/reconciliations", "application/json", `{"chain_id": 999}`, 404, "not reconciled here"},
		{"the scanner behind", "POST", "/v1/reconciliations", "application/json", chainBody, 503, "scan"},
		{"a run id not a number", "GET", "/v1/reconciliations/x", "", "", 400, "run_id"},
		{"an unknown run", "GET", "/v1/reconciliations/12345", "", "", 404, "12345"},
		{"a forged cursor", "GET", "/v1/reconciliations?cursor=AAAA", "", "", 400, "cursor"},
		{"a limit out of range", "GET", "/v1/reconciliations?limit=0", "", "", 400, "limit"},
		{"a limit past the largest page", "GET", "/v1/reconciliations?limit=1001", "", "", 400, "limit"},
		{"the largest page", "GET", "/v1/reconciliations?limit=1000", "", "", 200, `"runs":[]`},
		{"a chain id out of range", "GET", "/v1/reconciliations?chain_id=-1", "", "", 400, "chain_id"},
	} {
		code, b := r.send(t, "gateway", c.method, c.path, c.contentType, c.body)
		if code != c.want || !strings.Contains(strings.ToLower(string(b)), strings.ToLower(c.detail)) {
			t.Errorf("%s: %d %s, want %d naming %q", c.name, code, b, c.want, c.detail)
		}
	}
	var runs int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM reconciliation_run`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs stored (%v) by refused requests", runs, err)
	}
	if code, _ := r.send(t, "txmanager", "POST", "/v1/reconciliations", "application/json", chainBody); code != http.StatusForbidden {
		t.Errorf("another service asked for a run: %d, want 403", code)
	}
}
