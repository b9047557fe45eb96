// Package servicetest runs a service's real Run function inside a test, on
// port 0, with development certificates, and finds its listeners from the
// "listening" lines it logs, the way an operator would.
package servicetest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/mtls"
	"github.com/txfence/txfence/testinfra/devcert"
	"github.com/txfence/txfence/testinfra/logtest"
)

// Identities are the service identities a test PKI issues certificates for.
var Identities = []string{"gateway", "txmanager", "signer", "mevrouter", "ledger", "devstack", "stranger"}

// PKI writes a CA and a certificate per identity into a temp dir and
// returns the dir. "stranger" is a valid identity no route allows.
func PKI(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := devcert.WriteDir(dir, Identities); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TLSEnv is the environment naming identity's files in dir, under prefix.
func TLSEnv(prefix, dir, identity string) map[string]string {
	f := devcert.Files(dir, identity)
	return map[string]string{
		prefix + "TLS_CA_FILE":   f.CA,
		prefix + "TLS_CERT_FILE": f.Cert,
		prefix + "TLS_KEY_FILE":  f.Key,
	}
}

// Client is an HTTP client presenting identity's certificate and
// accepting only a server that proves to be server.
func Client(t testing.TB, dir, identity, server string) *http.Client {
	t.Helper()
	src, err := mtls.Load(devcert.Files(dir, identity), mtls.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Kept-alive connections like the services' own clients
	// (httpclient): with net/http's default of 2 per host, concurrent
	// tests and benchmarks would pay a TLS handshake on most requests.
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: src.ClientConfig(server),
		MaxIdleConns: 256, MaxIdleConnsPerHost: 64}}
}

// PlainTLSClient trusts the CA in dir but presents no certificate, as a
// browser or a plain curl --cacert would.
func PlainTLSClient(t testing.TB, dir string) *http.Client {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s/ca.pem", dir)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13},
	}}
}

// Service is a Run function running in the background.
type Service struct {
	mu   sync.Mutex // guards urls
	urls map[string]string
	done chan error
	logs *logtest.Buffer
}

// URL is the base URL of the named listener ("internal", "public", "ops").
func (s *Service) URL(listener string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.urls[listener]
}

// Logs is everything the service logged so far.
func (s *Service) Logs() string { return s.logs.String() }

// Start runs run with args and env and waits until it has logged a
// "listening" line for each of the listeners named. At cleanup it cancels
// the context and requires Run to return nil within the shutdown bound.
func Start(t testing.TB, run daemon.RunFunc, args []string, env map[string]string, listeners ...string) *Service {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &Service{urls: map[string]string{}, done: make(chan error, 1), logs: &logtest.Buffer{}}
	go func() {
		err := run(ctx, args, func(k string) string { return env[k] }, pw)
		_ = pw.Close()
		s.done <- err
	}()

	found := make(chan struct{})
	var foundOnce sync.Once
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.logs.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Listener, URL string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				s.mu.Lock()
				s.urls[line.Listener] = line.URL
				complete := true
				for _, l := range listeners {
					complete = complete && s.urls[l] != ""
				}
				s.mu.Unlock()
				if complete {
					foundOnce.Do(func() { close(found) })
				}
			}
		}
	}()

	t.Cleanup(func() {
		cancel()
		select {
		case err := <-s.done:
			if err != nil {
				t.Errorf("Run returned %v at shutdown", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return within 30s of cancellation")
		}
	})
	select {
	case <-found:
		return s
	case err := <-s.done:
		s.done <- err // for the cleanup
		t.Fatalf("Run ended before listening: %v\nlogs:\n%s", err, s.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not listen on %v within 30s\nlogs:\n%s", listeners, s.logs)
	}
	return nil
}

// RunOnce runs a one-shot subcommand (such as migrate) to completion and
// returns its error and logs.
func RunOnce(t testing.TB, run daemon.RunFunc, args []string, env map[string]string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out logtest.Buffer
	err := run(ctx, args, func(k string) string { return env[k] }, &out)
	return out.String(), err
}

// Merge combines environments; later ones win.
func Merge(envs ...map[string]string) map[string]string {
	all := map[string]string{}
	for _, e := range envs {
		for k, v := range e {
			all[k] = v
		}
	}
	return all
}

// RequireHealthyOverMTLS checks what every service's internal listener must
// do: answer /healthz and /readyz with 200 to a caller presenting the
// client identity's certificate, proving to be server, and refuse the
// handshake of a caller without a certificate.
func RequireHealthyOverMTLS(t testing.TB, svc *Service, pki, client, server string) {
	t.Helper()
	c := Client(t, pki, client, server)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := c.Get(svc.URL("internal") + path)
		if err != nil {
			t.Fatalf("%s over mTLS: %v", path, err)
		}
		var body struct{ Status, Service string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || body.Service != server {
			t.Errorf("%s over mTLS: %d %+v\nlogs:\n%s", path, resp.StatusCode, body, svc.Logs())
		}
	}
	_, err := PlainTLSClient(t, pki).Get(svc.URL("internal") + "/healthz")
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a client without a certificate: %v; want the handshake refused", err)
	}
}

// MigrateTwice runs the migrate subcommand twice: the second run must find
// nothing to do and succeed.
func MigrateTwice(t testing.TB, run daemon.RunFunc, env map[string]string) {
	t.Helper()
	for range 2 {
		if logs, err := RunOnce(t, run, []string{daemon.Migrate}, env); err != nil {
			t.Fatalf("migrate: %v\n%s", err, logs)
		}
	}
}
