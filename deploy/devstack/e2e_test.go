package devstack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// webhookReceiver verifies every delivery's Standard Webhooks signature
// and keeps the state each transaction reached by webhook.
type webhookReceiver struct {
	mu      sync.Mutex
	verify  *standardwebhooks.Webhook
	states  map[string][]string // tx_id -> to_state of each state change, in order
	invalid []string
}

func (rc *webhookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := rc.verify.Verify(body, r.Header); err != nil {
		rc.invalid = append(rc.invalid, err.Error())
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var e struct {
		TxID string `json:"tx_id"`
		Type string `json:"type"`
		Data struct {
			ToState string `json:"to_state"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &e); err == nil && e.Type == "tx.state_changed" {
		rc.states[e.TxID] = append(rc.states[e.TxID], e.Data.ToState)
	}
}

func (rc *webhookReceiver) reached(txID, state string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.states[txID] {
		if s == state {
			return true
		}
	}
	return false
}

// requireEndToEnd drives the whole stack through its front door, as a
// client would: with the admin key devstack made, it subscribes a webhook
// receiver, sends one transaction by the public route and one by the
// private route (the development relay), waits for both to be CONFIRMED
// through the gateway's API, and requires each CONFIRMED to arrive by
// webhook with a valid signature.
func requireEndToEnd(t *testing.T, gateway, adminKey string) (hashes []common.Hash) {
	t.Helper()
	call := func(method, path, body string, headers ...string) (int, []byte) {
		req, err := http.NewRequest(method, gateway+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminKey)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	rc := &webhookReceiver{states: map[string][]string{}}
	receiver := httptest.NewServer(rc)
	t.Cleanup(receiver.Close)
	code, b := call("POST", "/api/v1/webhooks", `{"url": "`+receiver.URL+`/txfence", "event_types": ["tx.state_changed"]}`)
	var sub struct{ Secret string }
	if err := json.Unmarshal(b, &sub); err != nil || code != http.StatusCreated {
		t.Fatalf("subscribe: %d %s", code, b)
	}
	verify, err := standardwebhooks.NewWebhook(sub.Secret)
	if err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	rc.verify = verify
	rc.mu.Unlock()

	ids := map[string]string{}
	for _, route := range []string{"public", "private"} {
		body := fmt.Sprintf(`{"chain_id": 31337, "from": "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
			"to": "0x0000000000000000000000000000000000000b0b", "value": "1000", "route": %q}`, route)
		code, b := call("POST", "/api/v1/tx", body, "Idempotency-Key", fmt.Sprintf("e2e-%s-%d", route, time.Now().UnixNano()))
		var tx struct {
			TxID string `json:"tx_id"`
		}
		if err := json.Unmarshal(b, &tx); err != nil || code != http.StatusCreated {
			t.Fatalf("create (%s): %d %s", route, code, b)
		}
		ids[route] = tx.TxID
	}
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for route, id := range ids {
		for {
			_, b := call("GET", "/api/v1/tx/"+id, "")
			var tx struct{ State, Route string }
			if err := json.Unmarshal(b, &tx); err != nil {
				t.Fatalf("get: %s", b)
			}
			if tx.State == "CONFIRMED" && rc.reached(id, "CONFIRMED") {
				break
			}
			if tx.State == "FAILED" || tx.State == "REVERTED" || tx.State == "CANCELLED" || time.Now().After(deadline) {
				rc.mu.Lock()
				t.Fatalf("%s transaction %s: %s; by webhook: %v", route, id, b, rc.states[id])
			}
			<-tick.C
		}
	}
	_, b = call("GET", "/api/v1/tx/"+ids["private"], "")
	if !strings.Contains(string(b), `"route":"private"`) {
		t.Errorf("the private transaction: %s", b)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.invalid) > 0 {
		t.Errorf("%d deliveries failed verification: %v", len(rc.invalid), rc.invalid)
	}
	for route, id := range ids {
		if got := rc.states[id]; len(got) == 0 || got[0] != "INIT" {
			t.Errorf("%s transaction's states by webhook: %v, want INIT first, in order", route, got)
		}
		_, b := call("GET", "/api/v1/tx/"+id, "")
		var tx struct{ Hash common.Hash }
		if err := json.Unmarshal(b, &tx); err != nil || tx.Hash == (common.Hash{}) {
			t.Fatalf("%s transaction's hash: %s", route, b)
		}
		hashes = append(hashes, tx.Hash)
	}
	return hashes
}

// requireBooked waits until the ledger (its database, databaseURL) has
// booked each transaction as confirmed, with a fee paid.
func requireBooked(t *testing.T, databaseURL string, hashes []common.Hash) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for _, h := range hashes {
		for {
			var fee *string
			err := conn.QueryRow(ctx, `
				SELECT sum(e.amount)::text FROM journal j JOIN entry e USING (journal_id) JOIN account a USING (account_id)
				WHERE j.tx_hash = $1 AND j.kind = 'confirmed' AND a.kind = 'fee_expense'`, h.Bytes()).Scan(&fee)
			if err != nil {
				t.Fatalf("read the ledger: %v", err)
			}
			if fee != nil && *fee != "0" && !strings.HasPrefix(*fee, "-") {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the ledger has not booked %s with its fee", h)
			case <-tick.C:
			}
		}
	}
}
