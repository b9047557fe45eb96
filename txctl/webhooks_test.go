package txctl_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/webhook"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

// receiver is a webhook receiver that answers status and tells when a
// delivery came.
type receiver struct {
	status int
	mu     sync.Mutex
	bodies []string
	got    chan struct{}
}

func newReceiver(t *testing.T, status int) (*receiver, string) {
	rc := &receiver{status: status, got: make(chan struct{}, 1)}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, string(body))
	rc.mu.Unlock()
	select {
	case rc.got <- struct{}{}:
	default:
	}
	w.WriteHeader(rc.status)
}

func (rc *receiver) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		rc.mu.Lock()
		all := strings.Join(rc.bodies, "\n")
		rc.mu.Unlock()
		if strings.Contains(all, s) {
			return
		}
		select {
		case <-rc.got:
		case <-deadline.C:
			t.Fatalf("no delivery with %s within %s", s, waitLimit)
		}
	}
}

// TestWebhooks runs every webhooks command against the real API and
// webhook engine.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	g := gatewaystack.Start(t, gatewaystack.Options{Webhooks: &webhook.Options{BackoffBase: 50 * time.Millisecond, PollInterval: 50 * time.Millisecond, FeedWait: time.Second}})
	rc, rcURL := newReceiver(t, http.StatusOK)

	made := mustRun(t, g.URL, g.Acme, "--json", "webhooks", "create", "--url", rcURL+"/hook", "--event-type", "tx.state_changed", "--description", "ops")
	conforms(t, made.stdout, "/api/v1/webhooks", "POST", 201, "")
	hook := decodeJSON[gatewayapi.WebhookCreated](t, made.stdout)
	hookID := hook.Id.String()
	if !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("webhooks create: %s", made.stdout)
	}
	text := mustRun(t, g.URL, g.Acme, "webhooks", "create", "--url", rcURL+"/other", "--signer", "31337:"+signerA, "--disabled").stdout
	if !strings.HasPrefix(field(t, text, "secret"), "whsec_") || field(t, text, "enabled") != "false" || !strings.Contains(field(t, text, "signers"), "31337:") {
		t.Errorf("webhooks create as text:\n%s", text)
	}
	other := field(t, text, "id")

	got := mustRun(t, g.URL, g.Acme, "webhooks", "get", hookID).stdout
	if field(t, got, "url") != rcURL+"/hook" || field(t, got, "event_types") != "tx.state_changed" || field(t, got, "description") != "ops" ||
		strings.Contains(got, hook.Secret) {
		t.Errorf("webhooks get (never the secret):\n%s", got)
	}
	if list := mustRun(t, g.URL, g.Acme, "webhooks", "list", "--limit", "1", "--all").stdout; !strings.Contains(list, hookID) || !strings.Contains(list, other) ||
		strings.Count(list, "URL") != 1 {
		t.Errorf("webhooks list --all:\n%s", list)
	}
	if r := mustRun(t, g.URL, g.Acme, "webhooks", "test", hookID); field(t, r.stdout, "ok") != "true" || field(t, r.stdout, "status_code") != "200" {
		t.Errorf("webhooks test:\n%s", r.stdout)
	}

	// A delivery, then the delivery log.
	tx := g.Create(t, g.Acme, signerA, "hooked")
	rc.waitFor(t, tx.TxID)
	var log string
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(log, tx.TxID) { // the outcome is stored just after the receiver answers
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("no delivered delivery of %s in the log:\n%s", tx.TxID, log)
		}
		log = mustRun(t, g.URL, g.Acme, "webhooks", "deliveries", hookID, "--status", "delivered").stdout
	}
	if !strings.Contains(log, "tx.state_changed") || !strings.Contains(log, "delivered") || !strings.Contains(log, " 200 ") {
		t.Errorf("webhooks deliveries:\n%s", log)
	}
	conforms(t, mustRun(t, g.URL, g.Acme, "--json", "webhooks", "deliveries", hookID).stdout, "/api/v1/webhooks/{webhook_id}/deliveries", "GET", 200, "")

	updated := mustRun(t, g.URL, g.Acme, "webhooks", "update", hookID, "--disable", "--all-events", "--description", "paused").stdout
	if field(t, updated, "enabled") != "false" || field(t, updated, "event_types") != "all" || field(t, updated, "description") != "paused" {
		t.Errorf("webhooks update:\n%s", updated)
	}
	if r := mustRun(t, g.URL, g.Acme, "webhooks", "update", other, "--all-signers", "--enable"); field(t, r.stdout, "signers") != "all the tenant's" || field(t, r.stdout, "enabled") != "true" {
		t.Errorf("webhooks update --all-signers:\n%s", r.stdout)
	}
	if r := txctlRun(t, g.URL, g.Acme, "webhooks", "replay", hookID, "--from-seq", "1"); r.code == 0 || !strings.Contains(r.err.Error()+r.stderr, "is disabled: enable it, then replay") {
		t.Errorf("webhooks replay of a disabled subscription: exit %d\n%s", r.code, r.stderr)
	}
	if r := mustRun(t, g.URL, g.Acme, "webhooks", "replay", other, "--from-seq", "1"); !strings.HasPrefix(r.stdout, "queued ") || !strings.Contains(r.stdout, "from seq 1 through ") {
		t.Errorf("webhooks replay: %s", r.stdout)
	}
	rotated := mustRun(t, g.URL, g.Acme, "webhooks", "rotate-secret", hookID, "--grace", "60s").stdout
	if s := field(t, rotated, "secret"); !strings.HasPrefix(s, "whsec_") || strings.HasPrefix(s, hook.Secret) || !strings.Contains(rotated, "expires") {
		t.Errorf("webhooks rotate-secret:\n%s", rotated)
	}

	// Globex sees none of it.
	if r := txctlRun(t, g.URL, g.Globex, "webhooks", "get", hookID); r.code != 1 || !strings.Contains(r.stderr, "Not Found") {
		t.Errorf("globex reads acme's webhook: exit %d %s", r.code, r.stderr)
	}
	// A receiver that fails its test: exit 1, with what it answered.
	_, failing := newReceiver(t, http.StatusInternalServerError)
	bad := decodeJSON[gatewayapi.WebhookCreated](t, mustRun(t, g.URL, g.Acme, "--json", "webhooks", "create", "--url", failing).stdout)
	if r := txctlRun(t, g.URL, g.Acme, "webhooks", "test", bad.Id.String()); r.code != 1 || field(t, r.stdout, "ok") != "false" ||
		field(t, r.stdout, "status_code") != "500" || !strings.Contains(r.stderr, "did not accept") {
		t.Errorf("a failing test delivery: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "update", hookID}, "needs at least one change"},
		{[]string{"webhooks", "update", hookID, "--enable", "--disable"}, "not both"},
		{[]string{"webhooks", "create"}, "webhooks create needs --url"},
		{[]string{"webhooks", "create", "--url", rcURL, "--event-type", "tx.mined"}, `--event-type "tx.mined"`},
		{[]string{"webhooks", "replay", hookID}, "needs --from-seq"},
		{[]string{"webhooks", "rotate-secret", hookID, "--grace", "1.5s"}, "whole seconds"},
		{[]string{"webhooks", "deliveries", hookID, "--status", "lost"}, `--status "lost"`},
		{[]string{"webhooks", "get"}, "webhooks get takes 1 argument(s)"},
	} {
		if r := txctlRun(t, g.URL, g.Acme, c.args...); r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("txctl %s: exit %d %s, want 2 and %q", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}

	if r := mustRun(t, g.URL, g.Acme, "webhooks", "delete", hookID); !strings.Contains(r.stdout, "deleted webhook "+hookID) {
		t.Errorf("webhooks delete: %s", r.stdout)
	}
	if r := txctlRun(t, g.URL, g.Acme, "webhooks", "get", hookID); r.code != 1 || !strings.Contains(r.stderr, "Not Found") {
		t.Errorf("a deleted webhook: exit %d %s", r.code, r.stderr)
	}
}
