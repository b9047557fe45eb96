package openapi_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/openapi"
)

// problemResponse is how every operation's default response must read.
const problemResponse = "./components.yaml#/components/responses/Problem"

// opsPaths are the endpoints that exist today: the spec of a service
// describes exactly these. Add a path here with the handler that serves it.
var opsPaths = map[string][]string{
	openapi.Gateway:   {"/api/v1/approvals", "/api/v1/events", "/api/v1/keys", "/api/v1/keys/{key_id}", "/api/v1/ledger/accounts", "/api/v1/ledger/accounts/{account_id}", "/api/v1/ledger/accounts/{account_id}/entries", "/api/v1/ledger/adjustments", "/api/v1/ledger/adjustments/{adjustment_id}", "/api/v1/ledger/adjustments/{adjustment_id}/approve", "/api/v1/ledger/adjustments/{adjustment_id}/reject", "/api/v1/ledger/journals/{journal_id}", "/api/v1/ledger/transits", "/api/v1/ledger/transits/{transit_id}", "/api/v1/me", "/api/v1/signers", "/api/v1/signers/{chain_id}/{address}", "/api/v1/tx", "/api/v1/tx/by-request", "/api/v1/tx/{tx_id}", "/api/v1/tx/{tx_id}/actions", "/api/v1/tx/{tx_id}/approvals", "/api/v1/tx/{tx_id}/cancel", "/api/v1/tx/{tx_id}/events", "/api/v1/tx/{tx_id}/reject", "/api/v1/webhooks", "/api/v1/webhooks/{webhook_id}", "/api/v1/webhooks/{webhook_id}/deliveries", "/api/v1/webhooks/{webhook_id}/replay", "/api/v1/webhooks/{webhook_id}/rotate-secret", "/api/v1/webhooks/{webhook_id}/test", "/healthz", "/readyz"}, // the public listener serves no /metrics
	openapi.TxManager: {"/healthz", "/internal/v1/events", "/internal/v1/signers/{chain_id}/{address}", "/internal/v1/tx", "/internal/v1/tx/batch", "/internal/v1/tx/by-request", "/internal/v1/tx/{tx_id}", "/internal/v1/tx/{tx_id}/actions", "/internal/v1/tx/{tx_id}/approvals", "/internal/v1/tx/{tx_id}/cancel", "/internal/v1/tx/{tx_id}/events", "/internal/v1/tx/{tx_id}/reject", "/metrics", "/readyz"},
	openapi.Signer:    {"/healthz", "/metrics", "/readyz", "/v1/approvals/check", "/v1/audit", "/v1/evaluate", "/v1/keys", "/v1/sign", "/v1/sign/batch"},
	openapi.MEVRouter: {"/healthz", "/metrics", "/readyz", "/v1/broadcast", "/v1/private/{hash}", "/v1/private/{hash}/cancel"},
	openapi.Ledger:    {"/healthz", "/metrics", "/readyz", "/v1/accounts", "/v1/accounts/{account_id}", "/v1/accounts/{account_id}/entries", "/v1/adjustments", "/v1/journals", "/v1/journals/{journal_id}", "/v1/reconciliations", "/v1/reconciliations/{run_id}", "/v1/transits", "/v1/transits/{transit_id}"},
}

var operationIDs = map[string]string{
	"/healthz": "getHealth", "/readyz": "getReadiness", "/metrics": "getMetrics",
	"/v1/sign": "sign", "/v1/sign/batch": "signBatch", "/v1/evaluate": "evaluate", "/v1/keys": "listKeys", "/v1/audit": "listAudit", "/v1/approvals/check": "checkApprovals",
	"POST /internal/v1/tx": "createTx", "/internal/v1/tx/batch": "createTxBatch", "GET /internal/v1/tx": "listTx", "/internal/v1/tx/{tx_id}": "getTx", "/internal/v1/tx/{tx_id}/cancel": "cancelTx", "/internal/v1/tx/{tx_id}/approvals": "approveTx", "/internal/v1/tx/{tx_id}/reject": "rejectTx", "POST /internal/v1/tx/{tx_id}/actions": "requestTxAction", "GET /internal/v1/tx/{tx_id}/actions": "listTxActions", "/internal/v1/events": "listEvents", "/internal/v1/tx/by-request": "getTxByRequest", "/internal/v1/tx/{tx_id}/events": "listTxEvents", "/internal/v1/signers/{chain_id}/{address}": "getSignerStatus",
	"POST /api/v1/tx": "createTx", "GET /api/v1/tx": "listTx", "/api/v1/tx/by-request": "getTxByRequest", "/api/v1/tx/{tx_id}": "getTx", "/api/v1/tx/{tx_id}/events": "listTxEvents", "/api/v1/tx/{tx_id}/cancel": "cancelTx",
	"POST /api/v1/tx/{tx_id}/actions": "requestTxAction", "GET /api/v1/tx/{tx_id}/actions": "listTxActions", "/api/v1/approvals": "listPendingApprovals", "/api/v1/tx/{tx_id}/approvals": "approveTx", "/api/v1/tx/{tx_id}/reject": "rejectTx",
	"/api/v1/signers": "listSigners", "/api/v1/signers/{chain_id}/{address}": "getSignerStatus", "/api/v1/events": "streamEvents",
	"POST /api/v1/webhooks": "createWebhook", "GET /api/v1/webhooks": "listWebhooks", "GET /api/v1/webhooks/{webhook_id}": "getWebhook", "PATCH /api/v1/webhooks/{webhook_id}": "updateWebhook", "DELETE /api/v1/webhooks/{webhook_id}": "deleteWebhook",
	"/api/v1/webhooks/{webhook_id}/rotate-secret": "rotateWebhookSecret", "/api/v1/webhooks/{webhook_id}/test": "testWebhook", "/api/v1/webhooks/{webhook_id}/deliveries": "listWebhookDeliveries", "/api/v1/webhooks/{webhook_id}/replay": "replayWebhook",
	"POST /api/v1/keys": "createKey", "GET /api/v1/keys": "listKeys", "/api/v1/keys/{key_id}": "revokeKey", "/api/v1/me": "getMe",
	"/api/v1/ledger/accounts": "listLedgerAccounts", "/api/v1/ledger/accounts/{account_id}": "getLedgerAccount", "/api/v1/ledger/accounts/{account_id}/entries": "listLedgerAccountEntries", "/api/v1/ledger/journals/{journal_id}": "getLedgerJournal",
	"/api/v1/ledger/transits": "listLedgerTransits", "/api/v1/ledger/transits/{transit_id}": "getLedgerTransit",
	"POST /api/v1/ledger/adjustments": "proposeLedgerAdjustment", "GET /api/v1/ledger/adjustments": "listLedgerAdjustments", "/api/v1/ledger/adjustments/{adjustment_id}": "getLedgerAdjustment",
	"/api/v1/ledger/adjustments/{adjustment_id}/approve": "approveLedgerAdjustment", "/api/v1/ledger/adjustments/{adjustment_id}/reject": "rejectLedgerAdjustment",
	"/v1/broadcast": "broadcast", "/v1/private/{hash}": "getPrivateStatus", "/v1/private/{hash}/cancel": "cancelPrivate",
	"/v1/accounts": "listAccounts", "/v1/accounts/{account_id}": "getAccount", "/v1/accounts/{account_id}/entries": "listAccountEntries", "/v1/journals": "listJournals", "/v1/journals/{journal_id}": "getJournal",
	"POST /v1/reconciliations": "createReconciliation", "GET /v1/reconciliations": "listReconciliations", "/v1/reconciliations/{run_id}": "getReconciliation",
	"/v1/transits": "listTransits", "/v1/transits/{transit_id}": "getTransit", "/v1/adjustments": "createAdjustment",
}

func allSpecs() []string { return append([]string{openapi.Components}, openapi.Services...) }

func TestEverySpecFileIsKnown(t *testing.T) {
	onDisk, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := allSpecs()
	slices.Sort(want)
	if diff := cmp.Diff(want, onDisk); diff != "" {
		t.Errorf("spec files on disk differ from openapi.Components + openapi.Services (-known +on disk):\n%s", diff)
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(opsPaths)), slices.Sorted(slices.Values(openapi.Services))); diff != "" {
		t.Errorf("opsPaths does not cover the services (-opsPaths +Services):\n%s", diff)
	}
}

// TestSpecsLoadAndValidate loads every spec the way tools do (from disk,
// external references allowed) and the way services do (openapi.Load, from
// the embedded copies), and validates it.
func TestSpecsLoadAndValidate(t *testing.T) {
	for _, name := range allSpecs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(raw, []byte("openapi: 3.0.3\n")) {
				t.Errorf("%s does not start with `openapi: 3.0.3`", name)
			}

			loader := openapi3.NewLoader()
			loader.IsExternalRefsAllowed = true
			doc, err := loader.LoadFromFile(name)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if err := doc.Validate(t.Context()); err != nil {
				t.Fatalf("validate: %v", err)
			}
			if doc.OpenAPI != "3.0.3" {
				t.Errorf("openapi: %q, want 3.0.3", doc.OpenAPI)
			}
			if doc.Info.Version != "0.1.0" {
				t.Errorf("info.version: %q, want 0.1.0", doc.Info.Version)
			}

			embedded, err := openapi.Load(t.Context(), name)
			if err != nil {
				t.Fatalf("openapi.Load: %v", err)
			}
			if embedded.Paths.Len() != doc.Paths.Len() {
				t.Errorf("embedded copy has %d paths, the file %d", embedded.Paths.Len(), doc.Paths.Len())
			}
		})
	}
}

// TestOperations checks the conventions every service spec follows.
func TestOperations(t *testing.T) {
	for _, name := range openapi.Services {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			doc, err := openapi.Load(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			internal := name != openapi.Gateway
			if len(doc.Servers) == 0 {
				t.Error("no servers")
			}
			if internal && !strings.Contains(doc.Info.Description, "**Mutual TLS.**") {
				t.Error("info.description does not declare mutual TLS")
			}
			if diff := cmp.Diff(opsPaths[name], slices.Sorted(maps.Keys(doc.Paths.Map()))); diff != "" {
				t.Errorf("paths differ from the endpoints that exist (-want +got):\n%s", diff)
			}
			for path, item := range doc.Paths.Map() {
				for method, op := range item.Operations() {
					where := method + " " + path
					want, ok := operationIDs[method+" "+path] // a path with several operations
					if !ok {
						want = operationIDs[path]
					}
					if op.OperationID != want {
						t.Errorf("%s: operationId %q, want %q", where, op.OperationID, want)
					}
					if len(op.Tags) == 0 {
						t.Errorf("%s: no tags", where)
					}
					def := op.Responses.Default()
					if def == nil || def.Ref != problemResponse {
						t.Errorf("%s: the default response is not $ref %s", where, problemResponse)
					}
					if def != nil && def.Value.Content.Get("application/problem+json") == nil {
						t.Errorf("%s: the default response is not application/problem+json", where)
					}
					if internal && !strings.Contains(op.Description, "mutual") {
						t.Errorf("%s: the description does not say the operation needs mutual TLS", where)
					}
				}
			}
		})
	}
}
