// Package vaulttest runs a real HashiCorp Vault dev server for tests: the
// pinned Version, built from the Go module proxy by
// deploy/scripts/build-vault.sh into <repo>/.tools (once per process, on
// first use), started per test on a free loopback port with transit and
// KV v2 mounted, and stopped when the test ends. Like pgtest, a test fails
// under CI or make test when Vault cannot be had, and is skipped otherwise.
//
// It talks to Vault over plain HTTP requests (stdlib only), so that test
// helpers do not pull the Vault client into modules that do not use it,
// and so that what the code under test does through vault/api is checked
// against requests written independently of it.
package vaulttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/pgcluster"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/pinned"
)

// Version is the Vault release the project pins; deploy/scripts/build-vault.sh
// builds the same one.
const Version = "1.21.4"

// The mounts every dev server has: the dev server's own KV v2 at secret/,
// and transit, which Server enables.
const (
	KVMount      = "secret"
	TransitMount = "transit"
)

const (
	// The first build compiles Vault and its ~500 modules: about ten
	// minutes on two cores, more on a cold module cache.
	buildTimeout = 40 * time.Minute
	startTimeout = 60 * time.Second
	stopGrace    = 10 * time.Second
	pollInterval = 25 * time.Millisecond
)

// binary is the pinned Vault: $TXFENCE_VAULT when set, else the build
// under <repo root>/.tools, built on first use by
// deploy/scripts/build-vault.sh (once per process).
var binary = pinned.Binary{
	Name: "vault", Version: Version, Env: "TXFENCE_VAULT",
	Installed: []string{".tools", "vault", Version, "vault"},
	Script:    filepath.Join("deploy", "scripts", "build-vault.sh"),
	Timeout:   buildTimeout,
}

// Find returns the vault binary to run: $TXFENCE_VAULT when set, else the
// pinned build under <repo root>/.tools, built on first use by running
// deploy/scripts/build-vault.sh (once per process).
func Find() (string, error) { return binary.Find() }

// Options configure a dev server. The zero value is a plain-HTTP server.
type Options struct {
	// TLS serves HTTPS with a CA and certificate the dev server makes
	// itself (-dev-tls); Dev.CACert is the CA's PEM file. Certificate auth
	// needs it: Vault reads client certificates from the TLS handshake.
	TLS bool
	// Output receives the server's log; nil keeps only its tail, shown
	// when the start fails.
	Output io.Writer
}

// Dev is a running Vault dev server: in memory, unsealed, with transit at
// TransitMount and KV v2 at KVMount. It is stopped when the test that
// started it ends.
type Dev struct {
	// Addr is the server's URL, http://127.0.0.1:PORT (https with TLS).
	Addr string
	// RootToken is the dev server's root token.
	RootToken string
	// CACert is the path of the CA certificate (PEM) that signed the
	// server's certificate, with Options.TLS; "" otherwise.
	CACert string

	cmd    *exec.Cmd
	http   *http.Client
	out    *output
	done   chan struct{}
	waited error

	stopOnce sync.Once
	stopErr  error
}

// Server starts a dev server for t and returns it once it is unsealed,
// serving, and has transit enabled. When no server can be had, the test
// fails under CI or make test and is skipped otherwise.
func Server(t testing.TB) *Dev {
	t.Helper()
	return ServerWith(t, Options{})
}

// ServerWith is Server with options.
func ServerWith(t testing.TB, opts Options) *Dev {
	t.Helper()
	d, err := Start(context.Background(), t.TempDir(), opts)
	if err != nil {
		pgtest.Unavailable(t, "Vault", err)
	}
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Errorf("stop vault: %v", err)
		}
	})
	return d
}

// Start starts a dev server whose files (the TLS material) go to dir;
// the caller stops it. Most tests want Server.
func Start(ctx context.Context, dir string, opts Options) (*Dev, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 { // a free port can be taken before the server binds it
		port, err := pgcluster.FreePort()
		if err != nil {
			return nil, err
		}
		d, err := start(ctx, bin, dir, port, opts)
		if err == nil {
			return d, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(ctx context.Context, bin, dir string, port int, opts Options) (*Dev, error) {
	token := "root-" + randomHex(12)
	args := []string{
		"server", "-dev",
		"-dev-root-token-id=" + token,
		"-dev-listen-address=127.0.0.1:" + strconv.Itoa(port),
		// The dev server would write its root token to ~/.vault-token,
		// the developer's own token helper file.
		"-dev-no-store-token",
	}
	scheme := "http"
	d := &Dev{RootToken: token, out: newOutput(opts.Output), done: make(chan struct{})}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.TLS {
		certDir := filepath.Join(dir, "vault-tls-"+strconv.Itoa(port))
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		args = append(args, "-dev-tls", "-dev-tls-cert-dir="+certDir)
		scheme = "https"
		d.CACert = filepath.Join(certDir, "vault-ca.pem")
	}
	d.Addr = fmt.Sprintf("%s://127.0.0.1:%d", scheme, port)

	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = childEnv(dir)
	cmd.Stdout, cmd.Stderr = d.out, d.out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
		// A test binary killed by its timeout takes the server with it.
		Pdeathsig: syscall.SIGKILL,
	}
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start vault %s: %w", bin, err)
	}
	d.cmd = cmd
	go func() {
		d.waited = cmd.Wait()
		close(d.done)
	}()

	fail := func(err error) (*Dev, error) {
		_ = d.Stop()
		return nil, fmt.Errorf("start vault server -dev on port %d: %w; output: %s", port, err, d.out.tail())
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if opts.TLS {
		// The dev server writes its CA before it listens.
		pem, err := waitFile(ctx, d, d.CACert)
		if err != nil {
			return fail(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fail(fmt.Errorf("no certificate in %s", d.CACert))
		}
		tlsConfig.RootCAs = pool
	}
	d.http = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 30 * time.Second}
	if err := d.waitHealthy(ctx); err != nil {
		return fail(err)
	}
	if err := d.Do(ctx, d.RootToken, "POST", "sys/mounts/"+TransitMount, map[string]any{"type": "transit"}, nil); err != nil {
		return fail(fmt.Errorf("enable transit: %w", err))
	}
	if err := d.waitKV(ctx); err != nil {
		return fail(err)
	}
	return d, nil
}

// childEnv is this process's environment without VAULT_* variables (a
// developer's VAULT_ADDR or VAULT_TOKEN must not steer the dev server) and
// with HOME in the test's directory.
func childEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "VAULT_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+dir)
}

func waitFile(ctx context.Context, d *Dev, path string) ([]byte, error) {
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b, nil
		}
		select {
		case <-d.done:
			return nil, fmt.Errorf("vault exited: %v", d.waited)
		case <-ctx.Done():
			return nil, fmt.Errorf("no %s: %w", path, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// waitHealthy polls sys/health until the server reports itself
// initialized, unsealed and active (HTTP 200): the dev server has no other
// readiness signal.
func (d *Dev) waitHealthy(ctx context.Context) error {
	var last error
	for {
		code, err := d.health(ctx)
		switch {
		case err != nil:
			last = err
		case code == http.StatusOK:
			return nil
		default:
			last = fmt.Errorf("sys/health answered %d", code)
		}
		select {
		case <-d.done:
			return fmt.Errorf("vault exited: %v", d.waited)
		case <-ctx.Done():
			return fmt.Errorf("vault did not become healthy: %w (last: %v)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

func (d *Dev) health(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", d.Addr+"/v1/sys/health", nil)
	if err != nil {
		return 0, err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// waitKV writes and deletes a probe in the KV v2 mount: a version-2 mount
// can answer before it is ready for writes.
func (d *Dev) waitKV(ctx context.Context) error {
	var last error
	for {
		last = d.Do(ctx, d.RootToken, "POST", KVMount+"/data/vaulttest-probe", map[string]any{"data": map[string]any{"ok": true}}, nil)
		if last == nil {
			return d.Do(ctx, d.RootToken, "DELETE", KVMount+"/metadata/vaulttest-probe", nil, nil)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("KV v2 at %s/ not writable: %w (last: %v)", KVMount, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// Error is a non-2xx answer from Vault.
type Error struct {
	Method, Path string
	Status       int
	Errors       []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("vault %s %s: %d %s", e.Method, e.Path, e.Status, strings.Join(e.Errors, "; "))
}

// Do sends one API request (path without the /v1/ prefix) with token,
// body as JSON when not nil, and decodes the answer into out when not nil.
// A non-2xx answer is an *Error.
func (d *Dev) Do(ctx context.Context, token, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.Addr+"/v1/"+strings.TrimPrefix(path, "/"), rd)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("X-Vault-Token", token)
	}
	req.Header.Set("X-Vault-Request", "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct{ Errors []string }
		_ = json.Unmarshal(b, &e)
		if len(e.Errors) == 0 && len(b) > 0 {
			e.Errors = []string{strings.TrimSpace(string(b))}
		}
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Errors: e.Errors}
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("vault %s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// do is Do with the root token, failing t on error.
func (d *Dev) do(t testing.TB, method, path string, body, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Do(ctx, d.RootToken, method, path, body, out); err != nil {
		t.Fatal(err)
	}
}

// CreateTransitKey creates an aes256-gcm96 transit key named name.
func (d *Dev) CreateTransitKey(t testing.TB, name string) {
	t.Helper()
	d.do(t, "POST", TransitMount+"/keys/"+name, map[string]any{"type": "aes256-gcm96"}, nil)
}

// PutPolicy writes an ACL policy (HCL) named name.
func (d *Dev) PutPolicy(t testing.TB, name, hcl string) {
	t.Helper()
	d.do(t, "PUT", "sys/policies/acl/"+name, map[string]any{"policy": hcl}, nil)
}

// TokenRequest describes a token to create. Zero durations take Vault's
// defaults (32 days for the dev server).
type TokenRequest struct {
	Policies []string
	// NoDefaultPolicy leaves out Vault's default policy, which lets a
	// token look itself up and renew itself.
	NoDefaultPolicy bool
	TTL             time.Duration
	ExplicitMaxTTL  time.Duration
	// NotRenewable makes a token that cannot be renewed.
	NotRenewable bool
}

// CreateToken creates a token as the root token and returns it.
func (d *Dev) CreateToken(t testing.TB, r TokenRequest) string {
	t.Helper()
	body := map[string]any{
		"policies":          r.Policies,
		"no_default_policy": r.NoDefaultPolicy,
		"renewable":         !r.NotRenewable,
	}
	if r.TTL > 0 {
		body["ttl"] = r.TTL.String()
	}
	if r.ExplicitMaxTTL > 0 {
		body["explicit_max_ttl"] = r.ExplicitMaxTTL.String()
	}
	var resp struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		}
	}
	d.do(t, "POST", "auth/token/create", body, &resp)
	if resp.Auth.ClientToken == "" {
		t.Fatal("vault created a token but returned none")
	}
	return resp.Auth.ClientToken
}

// ScopedToken creates a policy from hcl under a fresh name and a
// renewable token holding it (and the default policy), with Vault's
// default TTL.
func (d *Dev) ScopedToken(t testing.TB, hcl string) string {
	t.Helper()
	name := "vaulttest-" + randomHex(6)
	d.PutPolicy(t, name, hcl)
	return d.CreateToken(t, TokenRequest{Policies: []string{name}})
}

// TokenTTL returns the remaining TTL of token, as token/lookup reports it.
func (d *Dev) TokenTTL(t testing.TB, token string) time.Duration {
	t.Helper()
	var resp struct {
		Data struct {
			TTL int64 `json:"ttl"`
		}
	}
	d.do(t, "POST", "auth/token/lookup", map[string]any{"token": token}, &resp)
	return time.Duration(resp.Data.TTL) * time.Second
}

// CertRole is a role of Vault's cert auth method: clients presenting a
// certificate signed by CA log in with its policies.
type CertRole struct {
	Name     string
	CA       []byte // PEM
	Policies []string
	// TTL and MaxTTL bound the tokens it issues; 0 takes Vault's default.
	TTL, MaxTTL time.Duration
}

// EnableCertAuth enables TLS certificate auth at auth/cert (once per
// server) and writes role. Needs a server started with Options.TLS.
func (d *Dev) EnableCertAuth(t testing.TB, role CertRole) {
	t.Helper()
	if d.CACert == "" {
		t.Fatal("vaulttest: certificate auth needs a server started with Options.TLS")
	}
	var mounts map[string]any
	d.do(t, "GET", "sys/auth", nil, &mounts)
	if _, ok := mounts["cert/"]; !ok {
		d.do(t, "POST", "sys/auth/cert", map[string]any{"type": "cert"}, nil)
	}
	body := map[string]any{"certificate": string(role.CA), "token_policies": role.Policies}
	if role.TTL > 0 {
		body["token_ttl"] = role.TTL.String()
	}
	if role.MaxTTL > 0 {
		body["token_max_ttl"] = role.MaxTTL.String()
	}
	d.do(t, "POST", "auth/cert/certs/"+role.Name, body, nil)
}

// Seal seals the server: every request but sys/health, sys/seal-status
// and sys/unseal answers 503 until Unseal.
func (d *Dev) Seal(t testing.TB) {
	t.Helper()
	d.do(t, "PUT", "sys/seal", nil, nil)
}

var unsealKeyLine = regexp.MustCompile(`(?m)^Unseal Key: (\S+)`)

// Unseal unseals the server with the unseal key it printed at start.
func (d *Dev) Unseal(t testing.TB) {
	t.Helper()
	m := unsealKeyLine.FindStringSubmatch(d.out.all())
	if m == nil {
		t.Fatalf("vaulttest: no unseal key in the dev server's output: %s", d.out.tail())
	}
	var resp struct {
		Sealed bool `json:"sealed"`
	}
	d.do(t, "PUT", "sys/unseal", map[string]any{"key": m[1]}, &resp)
	if resp.Sealed {
		t.Fatal("vaulttest: still sealed after the unseal key")
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := d.waitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
}

// Stop stops the server (SIGTERM to its process group, SIGKILL after a
// grace period). Stopping twice is harmless.
func (d *Dev) Stop() error {
	d.stopOnce.Do(func() {
		if d.cmd == nil || d.cmd.Process == nil {
			return
		}
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
			d.stopErr = fmt.Errorf("vault did not stop within %s of SIGTERM and was killed", stopGrace)
		}
	})
	return d.stopErr
}

// Output is what the server has logged so far (its tail when no
// Options.Output was given and the log is long).
func (d *Dev) Output() string { return d.out.all() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// output keeps the head of the server's log (the unseal key is printed
// there) and its tail, and copies it to w.
type output struct {
	w    io.Writer
	mu   sync.Mutex
	head []byte
	last []byte
}

const keepBytes = 64 << 10

func newOutput(w io.Writer) *output { return &output{w: w} }

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if room := keepBytes - len(o.head); room > 0 {
		o.head = append(o.head, b[:min(room, len(b))]...)
	}
	o.last = append(o.last, b...)
	if len(o.last) > keepBytes {
		o.last = append(o.last[:0], o.last[len(o.last)-keepBytes:]...)
	}
	if o.w != nil {
		_, _ = o.w.Write(b)
	}
	return len(b), nil
}

func (o *output) all() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return string(o.head) + string(o.last)
}

func (o *output) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return pinned.Tail(string(o.last), 4000)
}
