package httpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/webhook"
)

// verifyingReceiver is a webhook receiver that checks every delivery's
// Standard Webhooks signature with the secret it was given and keeps the
// bodies of the valid ones.
type verifyingReceiver struct {
	mu      sync.Mutex
	secret  string
	bodies  []string
	invalid int
}

func (v *verifyingReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	defer v.mu.Unlock()
	wh, err := standardwebhooks.NewWebhook(v.secret)
	if err == nil {
		err = wh.Verify(body, r.Header)
	}
	if err != nil {
		v.invalid++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	v.bodies = append(v.bodies, string(body))
}

func (v *verifyingReceiver) received() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string{}, v.bodies...)
}

// TestWebhookSubscriptionsOverTheAPI: a subscription made over the API
// receives its tenant's events signed with the secret shown once; the
// test delivery, the delivery log, an update, a replay and a delete work
// over the API; another tenant can touch none of it.
func TestWebhookSubscriptionsOverTheAPI(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Webhooks: &webhook.Options{BackoffBase: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, FeedWait: time.Second}})
	rc := &verifyingReceiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)

	resp, b := g.Do(t, g.Acme, "POST", "/api/v1/webhooks", `{"url": "`+srv.URL+`/hook", "event_types": ["tx.state_changed"], "description": "ops"}`)
	made := decode[struct {
		ID     string `json:"id"`
		Secret string
	}](t, b)
	if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(made.Secret, "whsec_") {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	rc.mu.Lock()
	rc.secret = made.Secret
	rc.mu.Unlock()
	if resp, b := g.Do(t, g.Acme, "GET", "/api/v1/webhooks/"+made.ID, ""); resp.StatusCode != http.StatusOK || strings.Contains(string(b), made.Secret) {
		t.Errorf("get shows %d %s (and never the secret)", resp.StatusCode, b)
	}
	if resp, b := g.Do(t, g.Acme, "POST", "/api/v1/webhooks/"+made.ID+"/test", ""); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"ok":true`) {
		t.Errorf("test delivery: %d %s", resp.StatusCode, b)
	}

	mine := g.Create(t, g.Acme, signerA, "hooked")
	g.Create(t, g.Globex, signerB, "not-for-acme")
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// The receiver has the event, and then the log says it was delivered
	// (the dispatcher records the answer after it comes).
	logged := func() bool {
		_, b := g.Do(t, g.Acme, "GET", "/api/v1/webhooks/"+made.ID+"/deliveries?status=delivered", "")
		return strings.Contains(string(b), mine.TxID)
	}
	for !strings.Contains(strings.Join(rc.received(), "\n"), mine.TxID) || !logged() {
		select {
		case <-deadline:
			t.Fatalf("no delivery of %s within 30 s: %q", mine.TxID, rc.received())
		case <-tick.C:
		}
	}
	for _, body := range rc.received() {
		if strings.Contains(strings.ToLower(body), strings.ToLower(signerB)) {
			t.Errorf("acme's receiver got globex's event: %s", body)
		}
	}
	resp, b = g.Do(t, g.Acme, "GET", "/api/v1/webhooks/"+made.ID+"/deliveries?status=delivered", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), mine.TxID) || !strings.Contains(string(b), `"status_code":200`) {
		t.Errorf("delivery log: %d %s", resp.StatusCode, b)
	}
	if resp, b := g.Do(t, g.Acme, "PATCH", "/api/v1/webhooks/"+made.ID, `{"enabled": false}`); resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"enabled":false`) {
		t.Errorf("disable: %d %s", resp.StatusCode, b)
	}
	// A disabled subscription's replay would only queue rows that wait.
	if resp, b := g.Do(t, g.Acme, "POST", "/api/v1/webhooks/"+made.ID+"/replay", `{"from_seq": 1}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("replay of a disabled subscription: %d %s, want 409", resp.StatusCode, b)
	}
	if resp, b := g.Do(t, g.Acme, "PATCH", "/api/v1/webhooks/"+made.ID, `{"enabled": true}`); resp.StatusCode != http.StatusOK {
		t.Errorf("enable: %d %s", resp.StatusCode, b)
	}
	if resp, b := g.Do(t, g.Acme, "POST", "/api/v1/webhooks/"+made.ID+"/replay", `{"from_seq": 1}`); resp.StatusCode != http.StatusAccepted || !strings.Contains(string(b), `"queued":`) || !strings.Contains(string(b), `"from_seq":1`) {
		t.Errorf("replay: %d %s", resp.StatusCode, b)
	}

	// Globex can neither see nor change acme's subscription.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/webhooks/" + made.ID, ""},
		{"PATCH", "/api/v1/webhooks/" + made.ID, `{"enabled": true}`},
		{"DELETE", "/api/v1/webhooks/" + made.ID, ""},
		{"POST", "/api/v1/webhooks/" + made.ID + "/rotate-secret", `{"grace_seconds": 0}`},
		{"POST", "/api/v1/webhooks/" + made.ID + "/test", ""},
		{"GET", "/api/v1/webhooks/" + made.ID + "/deliveries", ""},
		{"POST", "/api/v1/webhooks/" + made.ID + "/replay", `{"from_seq": 1}`},
	} {
		if resp, b := g.Do(t, g.Globex, c.method, c.path, c.body); resp.StatusCode != http.StatusNotFound {
			t.Errorf("globex %s %s: %d %s, want 404", c.method, c.path, resp.StatusCode, b)
		}
	}
	if _, b := g.Do(t, g.Globex, "GET", "/api/v1/webhooks", ""); strings.Contains(string(b), made.ID) {
		t.Errorf("globex lists acme's subscription: %s", b)
	}
	// A subscription naming another tenant's signer is refused.
	if resp, b := g.Do(t, g.Globex, "POST", "/api/v1/webhooks", `{"url": "`+srv.URL+`", "signers": ["31337:`+signerA+`"]}`); resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusForbidden {
		t.Errorf("globex subscribes to acme's signer: %d %s", resp.StatusCode, b)
	}

	resp, b = g.Do(t, g.Acme, "POST", "/api/v1/webhooks/"+made.ID+"/rotate-secret", `{"grace_seconds": 60}`)
	if rotated := decode[struct{ Secret string }](t, b); resp.StatusCode != http.StatusOK || rotated.Secret == made.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Errorf("rotate: %d %s", resp.StatusCode, b)
	}
	if resp, b := g.Do(t, g.Acme, "DELETE", "/api/v1/webhooks/"+made.ID, ""); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d %s", resp.StatusCode, b)
	}
	if resp, _ := g.Do(t, g.Acme, "GET", "/api/v1/webhooks/"+made.ID, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a deleted subscription: %d, want 404", resp.StatusCode)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.invalid > 0 {
		t.Errorf("%d deliveries failed signature verification", rc.invalid)
	}
}
