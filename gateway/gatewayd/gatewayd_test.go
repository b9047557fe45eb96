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

	"github.com/txfence/txfence/gateway/gatewayd"
	"github.com/txfence/txfence/shared/devcert"
	"github.com/txfence/txfence/shared/pgtest"
	"github.com/txfence/txfence/shared/redistest"
	"github.com/txfence/txfence/shared/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func env(t *testing.T, pki, redisURL string, extra map[string]string) map[string]string {
	return servicetest.Merge(servicetest.TLSEnv(gatewayd.Spec.EnvPrefix, pki, gatewayd.Spec.Identity), map[string]string{
		gatewayd.Spec.EnvPrefix + "DATABASE_URL": pgtest.URL(t),
		gatewayd.Spec.EnvPrefix + "REDIS_URL":    redisURL,
		gatewayd.Spec.EnvPrefix + "PUBLIC_ADDR":  "127.0.0.1:0",
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
	resp, err := http.Get(svc.URL("public") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"failing":["redis"]`) {
		t.Errorf("readyz with Redis down: %d %s", resp.StatusCode, body)
	}
	if code := get(t, http.DefaultClient, svc.URL("public")+"/healthz"); code != http.StatusOK {
		t.Errorf("healthz with Redis down: %d; the process itself is fine", code)
	}
}
