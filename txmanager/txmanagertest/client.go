package txmanagertest

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/testinfra/servicetest"
)

// Signer is DefaultChains' first signer, and Bob receives test transfers.
const (
	Signer = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	Bob    = "0x0000000000000000000000000000000000000b0b"
)

// Do sends a request as the client identity as ("gateway", "ledger": the
// certificate's name in the test's PKI) and returns the status and body.
func (s *Server) Do(t testing.TB, as, method, path, body string) (int, []byte) {
	t.Helper()
	resp, b := servicetest.Do(t, servicetest.Client(t, s.PKI, as, "txmanager"), method, s.URL+path, body)
	return resp.StatusCode, b
}

// TransferBody is a create request: value wei from Signer to Bob on chain
// 31337 under requestID.
func TransferBody(requestID, value string) string {
	return fmt.Sprintf(`{"chain_id": 31337, "from": %q, "request_id": %q, "to": %q, "value": %q, "data": "0x",
		"route": "auto", "metadata": {"order": "A-1"}}`, Signer, requestID, Bob, value)
}

// Create creates a transfer of 1 wei under requestID, as the gateway, and
// returns its id.
func (s *Server) Create(t testing.TB, requestID string) string {
	t.Helper()
	code, b := s.Do(t, "gateway", "POST", "/internal/v1/tx", TransferBody(requestID, "1"))
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, b)
	}
	return servicetest.Decode[struct {
		TxID string `json:"tx_id"`
	}](t, b).TxID
}

// AwaitingApproval creates a transfer and parks it as the owner's worker
// does after the policy's dry run asked for approvals.
func (s *Server) AwaitingApproval(t testing.TB, requestID string) string {
	t.Helper()
	id := s.Create(t, requestID)
	if _, err := s.Pool.Exec(context.Background(), `UPDATE tx SET state = 'PENDING_APPROVAL', gas_limit = 21000,
		approval_expires_at = now() + interval '1 hour' WHERE tx_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	return id
}

// API is a generated client of the server, calling as the client
// identity as ("ledger" reads the feed).
func (s *Server) API(t testing.TB, as string) *txmanagerapi.ClientWithResponses {
	t.Helper()
	api, err := txmanagerapi.NewClientWithResponses(s.URL, txmanagerapi.WithHTTPClient(servicetest.Client(t, s.PKI, as, "txmanager")))
	if err != nil {
		t.Fatal(err)
	}
	return api
}
