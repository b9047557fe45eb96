package gatewayd_test

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway/gatewayd"
	"github.com/txfence/txfence/testinfra/devcert"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/redistest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// env configures a gatewayd in front of txmanager's real API (its own
// database, the chains of txmanagertest.DefaultChains).
func env(t *testing.T, pki, redisURL string, extra map[string]string) map[string]string {
	txm := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	return servicetest.Merge(servicetest.TLSEnv(gatewayd.Spec.EnvPrefix, pki, gatewayd.Spec.Identity), map[string]string{
		gatewayd.Spec.EnvPrefix + "DATABASE_URL":  pgtest.URL(t),
		gatewayd.Spec.EnvPrefix + "REDIS_URL":     redisURL,
		gatewayd.Spec.EnvPrefix + "PUBLIC_ADDR":   "127.0.0.1:0",
		gatewayd.Spec.EnvPrefix + "TXMANAGER_URL": txm.URL,
	}, extra)
}

func get(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRunServesPublicAndInternal runs the real gatewayd on port 0: health
// on the plain public listener (where /metrics is not exposed), and over
// mutual TLS on the internal one.
func TestRunServesPublicAndInternal(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	e := env(t, pki, redistest.URL(t), nil)
	servicetest.MigrateTwice(t, gatewayd.Run, e)
	svc := servicetest.Start(t, gatewayd.Run, nil, e, "internal", "public")

	if code := get(t, http.DefaultClient, svc.URL("public")+"/healthz"); code != http.StatusOK {
		t.Errorf("public /healthz: %d", code)
	}
	if code := get(t, http.DefaultClient, svc.URL("public")+"/readyz"); code != http.StatusOK {
		t.Errorf("public /readyz: %d\n%s", code, svc.Logs())
	}
	if code := get(t, http.DefaultClient, svc.URL("public")+"/console/"); code != http.StatusOK {
		t.Errorf("public /console/: %d", code)
	}
	if code := get(t, http.DefaultClient, svc.URL("public")+"/metrics"); code != http.StatusNotFound {
		t.Errorf("public /metrics: %d, want 404: metrics stay internal", code)
	}
	servicetest.RequireHealthyOverMTLS(t, svc, pki, "devstack", gatewayd.Spec.Identity)
}

func TestPublicListenerServesTLS(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	f := devcert.Files(pki, gatewayd.Spec.Identity)
	svc := servicetest.Start(t, gatewayd.Run, nil, env(t, pki, redistest.URL(t), map[string]string{
		gatewayd.Spec.EnvPrefix + "PUBLIC_TLS_CERT_FILE": f.Cert,
		gatewayd.Spec.EnvPrefix + "PUBLIC_TLS_KEY_FILE":  f.Key,
	}), "public")
	if !strings.HasPrefix(svc.URL("public"), "https://") {
		t.Fatalf("public URL %s is not https", svc.URL("public"))
	}
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	// A client with no certificate of its own, as any API client.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	if code := get(t, c, svc.URL("public")+"/healthz"); code != http.StatusOK {
		t.Errorf("public /healthz over TLS: %d", code)
	}
}

// TestReadinessFollowsRedis stops the gateway's Redis: the gateway stays
// alive (healthz) but reports not ready, naming Redis.
func TestReadinessFollowsRedis(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	own, err := redistest.Start(t)
	if err != nil {
		pgtest.Unavailable(t, "redis-server", err)
	}
	e := env(t, pki, own, nil)
	servicetest.MigrateTwice(t, gatewayd.Run, e)
	svc := servicetest.Start(t, gatewayd.Run, nil, e, "public")
	// The schema is current: readiness depends on Redis alone here.
	if code := get(t, http.DefaultClient, svc.URL("public")+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz with Redis up: %d\n%s", code, svc.Logs())
	}
	redistest.Stop(t, own)
	// Readiness results are reused for a second, so a client hammering the
	// public /readyz costs the dependencies nothing; the failure shows
	// after that. The public answer names no check.
	var code int
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(svc.URL("public") + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if code = resp.StatusCode; code == http.StatusServiceUnavailable {
			break
		}
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"not_ready"`) || strings.Contains(string(body), "redis") {
		t.Errorf("public readyz with Redis down: %d %s; want 503 naming no check", code, body)
	}
	if code := get(t, http.DefaultClient, svc.URL("public")+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz with Redis down: %d; the process itself is fine", code)
	}
}

// TestBootstrapMakesAWorkingAdminKey: `gatewayd bootstrap` makes the
// tenant, gives it the signer and prints a key that sends a transaction
// through the running gateway; a second run adds a key to the same
// tenant, and a signer another tenant owns is refused.
func TestBootstrapMakesAWorkingAdminKey(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	e := env(t, pki, redistest.URL(t), nil)
	servicetest.MigrateTwice(t, gatewayd.Run, e)
	const signer = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	out, err := servicetest.RunOnce(t, gatewayd.Run, []string{"bootstrap", "--tenant", "acme", "--signer", "31337:" + signer}, e)
	if err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
	token := strings.TrimSpace(out)
	if !strings.HasPrefix(token, "txf_") || strings.Contains(token, "\n") {
		t.Fatalf("bootstrap printed %q, want the token alone", out)
	}
	svc := servicetest.Start(t, gatewayd.Run, nil, e, "public")
	resp, body := servicetest.Do(t, http.DefaultClient, "POST", svc.URL("public")+"/api/v1/tx",
		`{"chain_id": 31337, "from": "`+signer+`", "to": "0x0000000000000000000000000000000000000b0b", "value": "1"}`,
		"Authorization", "Bearer "+token, "Idempotency-Key", "first")
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"state":"INIT"`) {
		t.Fatalf("create with the bootstrap key: %d %s\n%s", resp.StatusCode, body, svc.Logs())
	}
	if again, err := servicetest.RunOnce(t, gatewayd.Run, []string{"bootstrap", "--tenant", "acme", "--key-name", "second"}, e); err != nil || strings.TrimSpace(again) == token {
		t.Errorf("a second bootstrap: %q %v", again, err)
	}
	if _, err := servicetest.RunOnce(t, gatewayd.Run, []string{"bootstrap", "--tenant", "globex", "--signer", "31337:" + signer}, e); err == nil || !strings.Contains(err.Error(), "another tenant") {
		t.Errorf("bootstrap with another tenant's signer: %v", err)
	}
	if _, err := servicetest.RunOnce(t, gatewayd.Run, []string{"bootstrap", "--signer", "31337:nope"}, e); err == nil {
		t.Error("bootstrap with a malformed signer and no tenant succeeded")
	}
}

// TestLedgerURL: with TXFENCE_GATEWAY_LEDGER_URL the ledger routes read
// the ledger over mutual TLS as the gateway; without it they answer 503,
// saying the ledger is not configured, and the gateway is still ready.
func TestLedgerURL(t *testing.T) {
	t.Parallel()
	pki := servicetest.PKI(t)
	books := gatewaystack.ServeLedger(t, pki)
	const signer = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	books.Transfer(t, "tx-1", signer, gatewaystack.Bob, 1000, 21, 5)
	e := env(t, pki, redistest.URL(t), map[string]string{gatewayd.Spec.EnvPrefix + "LEDGER_URL": books.URL})
	servicetest.MigrateTwice(t, gatewayd.Run, e)
	out, err := servicetest.RunOnce(t, gatewayd.Run, []string{"bootstrap", "--tenant", "acme", "--signer", "31337:" + signer}, e)
	if err != nil {
		t.Fatalf("bootstrap: %v\n%s", err, out)
	}
	token := strings.TrimSpace(out)
	withLedger := servicetest.Start(t, gatewayd.Run, nil, e, "public")
	without := map[string]string{}
	for k, v := range e {
		if k != gatewayd.Spec.EnvPrefix+"LEDGER_URL" {
			without[k] = v
		}
	}
	noLedger := servicetest.Start(t, gatewayd.Run, nil, without, "public")

	balances := func(svc *servicetest.Service) (int, string) {
		req, _ := http.NewRequest("GET", svc.URL("public")+"/api/v1/ledger/accounts?chain_id=31337&address="+signer, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := balances(withLedger); code != http.StatusOK || !strings.Contains(body, `"balance":"-1021"`) {
		t.Errorf("with LEDGER_URL: %d %s\n%s", code, body, withLedger.Logs())
	}
	if code, body := balances(noLedger); code != http.StatusServiceUnavailable || !strings.Contains(body, "the ledger is not configured") {
		t.Errorf("without LEDGER_URL: %d %s", code, body)
	}
	if code := get(t, http.DefaultClient, noLedger.URL("public")+"/readyz"); code != http.StatusOK {
		t.Errorf("readyz without a ledger: %d\n%s", code, noLedger.Logs())
	}
}
