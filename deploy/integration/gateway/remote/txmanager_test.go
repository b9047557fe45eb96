package remote_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const signer = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"

// TestCallsKeepTheirKinds: the client reaches the real API, and
// txmanager's refusals come back as the same error kinds.
func TestCallsKeepTheirKinds(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	srv := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	m, err := remote.NewTxManager(srv.URL, servicetest.Client(t, pki, "gateway", "txmanager"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	body := func(value string) []byte {
		return []byte(`{"chain_id": 31337, "from": "` + signer + `", "request_id": "r-1", "to": "0x0000000000000000000000000000000000000b0b",
			"value": "` + value + `", "metadata": {"order": 123456789012345678901234567890}}`)
	}
	tx, created, err := m.Create(ctx, body("5"))
	if err != nil || !created || tx.State != "INIT" || !strings.Contains(string(tx.JSON), "123456789012345678901234567890") {
		t.Fatalf("create: %+v %s %v %v", tx, tx.JSON, created, err)
	}
	if again, created, err := m.Create(ctx, body("5")); err != nil || created || again.ID != tx.ID {
		t.Errorf("the same create again: %+v %v %v", again, created, err)
	}
	if _, _, err := m.Create(ctx, body("6")); !errs.Is(err, errs.Conflict) {
		t.Errorf("another body under the request id: %v, want a conflict", err)
	}
	if got, err := m.Get(ctx, tx.ID); err != nil || got.ID != tx.ID {
		t.Errorf("get: %+v %v", got, err)
	}
	if got, err := m.GetByRequest(ctx, 31337, signer, "r-1"); err != nil || got.ID != tx.ID {
		t.Errorf("get by request: %+v %v", got, err)
	}
	if timeline, err := m.TxEvents(ctx, tx.ID); err != nil || len(timeline) != 1 {
		t.Errorf("timeline: %+v %v", timeline, err)
	}
	signers := "31337:" + signer
	if list, err := m.List(ctx, txmanagerapi.ListTxParams{Signers: &signers}); err != nil || strings.Count(string(list), `"tx_id"`) != 1 {
		t.Errorf("list: %s %v", list, err)
	}
	if _, err := m.Actions(ctx, tx.ID); err != nil {
		t.Errorf("actions: %v", err)
	}
	if _, _, err := m.RequestAction(ctx, tx.ID, txmanagerapi.TxActionRequest{Action: components.TxActionBump, Operator: "ops"}); !errs.Is(err, errs.Conflict) {
		t.Errorf("a bump before allocation: %v, want a conflict", err)
	}
	if st, err := m.SignerStatus(ctx, 31337, signer); err != nil || st.Counts["INIT"] != 1 {
		t.Errorf("signer status: %+v %v", st, err)
	}
	if got, err := m.Cancel(ctx, tx.ID); err != nil || got.State != "CANCELLED" {
		t.Errorf("cancel: %+v %v", got, err)
	}
	events, err := m.EventsAfter(ctx, 0, 10, 5*time.Second)
	if err != nil || len(events) == 0 || !strings.EqualFold(events[0].Signer, signer) {
		t.Errorf("events: %+v %v", events, err)
	}
	if _, err := m.Get(ctx, [16]byte{1}); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown tx: %v, want not found", err)
	}

	// A txmanager that is not there is Unavailable, so the gateway answers 503.
	gone, err := remote.NewTxManager("https://127.0.0.1:1", &http.Client{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gone.Get(ctx, tx.ID); !errs.Is(err, errs.Unavailable) {
		t.Errorf("no txmanager: %v, want unavailable", err)
	}
}
