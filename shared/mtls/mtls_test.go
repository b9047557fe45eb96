package mtls_test

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/testinfra/devcert"
)

// pki is a CA and the files of the services it issued, in a temp dir.
type pki struct {
	dir string
	ca  *devcert.CA
}

func newPKI(t *testing.T, services ...string) *pki {
	t.Helper()
	ca, err := devcert.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: t.TempDir(), ca: ca}
	for _, s := range services {
		p.issue(t, s, s)
	}
	return p
}

// issue writes a certificate for identity into the files named after fileName.
func (p *pki) issue(t *testing.T, fileName, identity string) mtls.Files {
	t.Helper()
	leaf, err := p.ca.Issue(identity, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := devcert.Files(p.dir, fileName)
	mustWrite(t, f.CA, p.ca.CertPEM())
	mustWrite(t, f.Cert, leaf.CertPEM)
	mustWrite(t, f.Key, leaf.KeyPEM)
	return f
}

func mustWrite(t *testing.T, file string, data []byte) {
	t.Helper()
	if err := writeFile(file, data); err != nil {
		t.Fatal(err)
	}
}

func load(t *testing.T, f mtls.Files) *mtls.Source {
	t.Helper()
	src, err := mtls.Load(f, mtls.Options{CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// serve starts an mTLS server whose only route lets the allowed identities in
// and answers with the caller's identity.
func serve(t *testing.T, src *mtls.Source, allowed ...string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", src.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := mtls.Allow(allowed...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"peer": mtls.Peer(r.Context())})
	}))
	srv := &http.Server{Handler: h, ErrorLog: nil, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String()
}

func client(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, url string) (string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", errs.FromResponse(resp)
	}
	var body struct{ Peer string }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.Peer, nil
}

func TestAllowedPeerGetsIn(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer", "txmanager")
	url := serve(t, load(t, devcert.Files(p.dir, "signer")), "txmanager")
	peer, err := get(t, client(load(t, devcert.Files(p.dir, "txmanager")).ClientConfig("signer")), url)
	if err != nil {
		t.Fatal(err)
	}
	if peer != "txmanager" {
		t.Errorf("handler saw peer %q, want txmanager", peer)
	}
}

func TestClientWithoutCertificateIsRefused(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer")
	url := serve(t, load(t, devcert.Files(p.dir, "signer")), "txmanager")
	// The client trusts the server (it is not the server's certificate that
	// fails) but has nothing to present.
	_, err := get(t, client(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}), url)
	if err == nil || !strings.Contains(err.Error(), "remote error: tls: certificate required") {
		t.Fatalf("got %v; want the handshake refused for a missing certificate", err)
	}
}

func TestClientFromAnotherCAIsRefused(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer")
	url := serve(t, load(t, devcert.Files(p.dir, "signer")), "txmanager")

	other := newPKI(t, "txmanager") // same identity, foreign CA
	cfg := load(t, devcert.Files(other.dir, "txmanager")).ClientConfig("signer")
	cfg.VerifyConnection = nil // trust the server, so that only the server's check can fail
	_, err := get(t, client(cfg), url)
	if err == nil || !strings.Contains(err.Error(), "remote error: tls: unknown certificate authority") {
		t.Fatalf("got %v; want the handshake refused for a foreign CA", err)
	}
}

func TestIdentityNotOnAllowlistIsForbidden(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer", "gateway")
	url := serve(t, load(t, devcert.Files(p.dir, "signer")), "txmanager")
	_, err := get(t, client(load(t, devcert.Files(p.dir, "gateway")).ClientConfig("signer")), url)
	if !errs.Is(err, errs.Forbidden) {
		t.Fatalf("got %v; want forbidden", err)
	}
	if !strings.Contains(err.Error(), `"gateway"`) {
		t.Errorf("problem %q does not name the refused identity", err)
	}
}

func TestClientRefusesServerWithWrongIdentity(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "ledger", "txmanager")
	url := serve(t, load(t, devcert.Files(p.dir, "ledger")), "txmanager")
	// txmanager means to call the signer, but the address answers as ledger.
	_, err := get(t, client(load(t, devcert.Files(p.dir, "txmanager")).ClientConfig("signer")), url)
	if err == nil || !strings.Contains(err.Error(), `server identity is "ledger"`) {
		t.Fatalf("got %v; want the client to refuse a server that is not the signer", err)
	}
}

func TestCertificatesReloadWithoutRestart(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer", "txmanager", "gateway")
	serverSrc := load(t, devcert.Files(p.dir, "signer"))
	url := serve(t, serverSrc, "txmanager")

	// The client's files are rewritten in place with the gateway's identity:
	// the next handshake must present the new certificate and be refused.
	clientFiles := devcert.Files(p.dir, "txmanager")
	clientSrc := load(t, clientFiles)
	c := client(clientSrc.ClientConfig("signer"))
	if _, err := get(t, c, url); err != nil {
		t.Fatal(err)
	}
	p.issue(t, "txmanager", "gateway")
	if _, err := get(t, c, url); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("after the client's files changed to the gateway identity: %v; want forbidden", err)
	}
	if got := clientSrc.Identity(); got != "gateway" {
		t.Errorf("client identity after reload = %q", got)
	}

	// Rotate the whole PKI on disk, server side included: a new CA and new
	// leaves. The running server must trust only the new CA.
	ca2, err := devcert.NewCA("rotated CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p.ca = ca2
	p.issue(t, "signer", "signer")
	p.issue(t, "txmanager", "txmanager")
	if peer, err := get(t, c, url); err != nil || peer != "txmanager" {
		t.Fatalf("after rotating the CA: peer %q, err %v", peer, err)
	}
	old := newPKI(t, "txmanager")
	oldCfg := load(t, devcert.Files(old.dir, "txmanager")).ClientConfig("signer")
	oldCfg.VerifyConnection = nil
	if _, err := get(t, client(oldCfg), url); err == nil {
		t.Fatal("a certificate from a CA that is no longer trusted got in")
	}
}

func TestBrokenFilesKeepTheLastGoodCertificate(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer", "txmanager")
	url := serve(t, load(t, devcert.Files(p.dir, "signer")), "txmanager")
	files := devcert.Files(p.dir, "txmanager")
	c := client(load(t, files).ClientConfig("signer"))
	mustWrite(t, files.Cert, []byte("-----BEGIN CERTIFICATE-----\ntruncated"))
	if _, err := get(t, c, url); err != nil {
		t.Fatalf("a half-written certificate file broke the client: %v", err)
	}
}

func TestLoadRejectsCertificateWithoutIdentity(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer")
	f := devcert.Files(p.dir, "signer")
	f.Cert = filepath.Join(p.dir, "ca.pem") // a CA certificate has no spiffe URI
	f.Key = filepath.Join(p.dir, "signer-key.pem")
	if _, err := mtls.Load(f, mtls.Options{}); err == nil {
		t.Fatal("Load accepted a certificate that does not match its key or has no identity")
	}
}

func TestServerRejectsOlderTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "signer", "txmanager")
	url := serve(t, load(t, devcert.Files(p.dir, "signer")), "txmanager")
	cfg := load(t, devcert.Files(p.dir, "txmanager")).ClientConfig("signer")
	cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
	if _, err := get(t, client(cfg), url); err == nil {
		t.Fatal("a TLS 1.2 client got in")
	}
}

func TestPublicServerConfigNeedsNoClientCertificateAndReloads(t *testing.T) {
	t.Parallel()
	p := newPKI(t, "gateway")
	f := devcert.Files(p.dir, "gateway")
	cfg, err := mtls.PublicServerConfig(f.Cert, f.Key, mtls.Options{CheckInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	served := func() string {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return string(conn.ConnectionState().PeerCertificates[0].Raw)
	}
	before := served()
	p.issue(t, "gateway", "gateway")
	if served() == before {
		t.Error("the public listener still serves the old certificate after the files changed")
	}
}

// writeFile writes beside and renames, as cert-manager and devcert do.
func writeFile(file string, data []byte) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
