// Package vault connects signerd to HashiCorp Vault through the official
// vault/api client, the only way signerd talks to Vault, and keeps
// signerd's keys there (Backend).
//
// Vault's transit engine has no secp256k1, so a key cannot live inside
// transit and be used there. Keys are kept in KV v2 instead, either
// wrapped by a transit key (mode "transit": KV holds transit's ciphertext,
// and reading a key needs both the KV secret and transit decrypt
// permission) or as they are (mode "kv": Vault's ACLs alone protect them).
// Either way a key is unwrapped only inside signerd, and used there only.
//
// signerd fails closed: a sealed, unreachable or denying Vault means no
// key, and so no signature, with an error that says which.
package vault

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/txfence/txfence/shared/config"
)

// The modes a Backend stores keys in.
const (
	// ModeTransit keeps each key in KV v2 as the ciphertext of Vault
	// transit encrypt with a named transit key.
	ModeTransit = "transit"
	// ModeKV keeps each key in KV v2 as hex, protected by Vault's ACLs
	// alone.
	ModeKV = "kv"
)

// The ways signerd authenticates to Vault.
const (
	// AuthToken uses a token given in the configuration.
	AuthToken = "token"
	// AuthCert logs in with signerd's TLS client certificate through
	// Vault's cert auth method, and logs in again whenever the token can
	// no longer be renewed.
	AuthCert = "cert"
)

// maxHealthInterval bounds how long a key may be served from memory
// without Vault vouching for it: the point of the interval is that sealing
// Vault stops signing promptly.
const maxHealthInterval = time.Minute

// maxKeyRecheckInterval bounds how long a key deleted in Vault may still
// be used from memory.
const maxKeyRecheckInterval = 30 * time.Second

// Config is signerd's Vault connection and key layout, from
// TXFENCE_SIGNER_VAULT_* variables. An empty Addr means signerd runs
// without Vault (the local keystore backend, for development).
//
// Only these settings are used: the client does not read Vault's own
// VAULT_* environment variables (VAULT_SKIP_VERIFY, VAULT_AGENT_ADDR,
// VAULT_TOKEN and the rest), so nothing outside this configuration changes
// where signerd's keys come from or how the connection is verified.
type Config struct {
	// Addr is Vault's URL, https://vault.example:8200.
	Addr string `env:"ADDR"`
	// Auth is "token" (Token) or "cert" (TLS certificate auth with
	// ClientCert and ClientKey).
	Auth string `env:"AUTH" default:"token"`
	// Token authenticates signerd with token auth. A renewable token is
	// kept alive with Vault's lifetime watcher.
	Token config.Secret `env:"TOKEN"`
	// ClientCert and ClientKey are signerd's TLS client certificate and
	// key (PEM files) for cert auth.
	ClientCert string `env:"CLIENT_CERT"`
	ClientKey  string `env:"CLIENT_KEY"`
	// CertMount is the path of the cert auth method; CertRole the
	// certificate role to log in as ("" lets Vault pick the role that
	// matches the certificate).
	CertMount string `env:"CERT_MOUNT" default:"cert"`
	CertRole  string `env:"CERT_ROLE"`
	// CACert verifies Vault's TLS certificate when it is not publicly
	// trusted.
	CACert  string        `env:"CACERT"`
	Timeout time.Duration `env:"TIMEOUT" default:"5s"`

	// Mode is how keys are stored: "transit" or "kv".
	Mode string `env:"MODE" default:"transit"`
	// KVMount is the KV v2 mount holding the keys, KVPrefix the path under
	// it; each key is the secret <KVPrefix>/<lowercase 0x address>.
	KVMount  string `env:"KV_MOUNT" default:"secret"`
	KVPrefix string `env:"KV_PREFIX" default:"txfence/signer/keys"`
	// TransitMount and TransitKey name the transit key that wraps the
	// keys in mode "transit".
	TransitMount string `env:"TRANSIT_MOUNT" default:"transit"`
	TransitKey   string `env:"TRANSIT_KEY" default:"txfence-signer"`
	// HealthInterval is how long an unwrapped key may be served from
	// memory after Vault last answered as unsealed with signerd's token
	// valid; after it, the next Key asks Vault again and fails while Vault
	// is sealed, unreachable or denying. 0 asks on every Key. At most 1m.
	HealthInterval time.Duration `env:"HEALTH_INTERVAL" default:"5s"`
	// KeyRecheckInterval is how long a cached key is used after Vault last
	// showed its secret unchanged; after it, the next Key reads the secret
	// again, and a key deleted, destroyed or rewritten in Vault (or no
	// longer readable) is dropped and zeroed, while Vault's health and
	// signerd's token stay good. More than 0 and at most 30s.
	KeyRecheckInterval time.Duration `env:"KEY_RECHECK_INTERVAL" default:"10s"`
	// AllowPlaintextHTTP accepts an http:// Addr with token auth, which
	// sends signerd's token and every key it reads unencrypted: for a
	// development Vault on loopback only.
	AllowPlaintextHTTP bool `env:"ALLOW_PLAINTEXT_HTTP" default:"false"`
}

// withDefaults fills what config.Load would have, for configs built in
// code.
func (c Config) withDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Auth, AuthToken)
	def(&c.CertMount, "cert")
	def(&c.Mode, ModeTransit)
	def(&c.KVMount, "secret")
	def(&c.KVPrefix, "txfence/signer/keys")
	def(&c.TransitMount, "transit")
	def(&c.TransitKey, "txfence-signer")
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	c.KVMount = strings.Trim(c.KVMount, "/")
	c.KVPrefix = strings.Trim(c.KVPrefix, "/")
	c.TransitMount = strings.Trim(c.TransitMount, "/")
	c.CertMount = strings.Trim(c.CertMount, "/")
	return c
}

// Enabled reports whether Vault is configured.
func (c Config) Enabled() bool { return c.Addr != "" }

// Validate checks the settings that go with an address.
func (c Config) Validate() error {
	if c.Addr == "" {
		return nil
	}
	c = c.withDefaults()
	var problems []error
	switch c.Auth {
	case AuthToken:
		if c.Token == "" {
			problems = append(problems, errors.New("VAULT_TOKEN is required with VAULT_ADDR and VAULT_AUTH=token"))
		}
	case AuthCert:
		if c.ClientCert == "" || c.ClientKey == "" {
			problems = append(problems, errors.New("VAULT_CLIENT_CERT and VAULT_CLIENT_KEY are required with VAULT_AUTH=cert"))
		}
		if !strings.HasPrefix(c.Addr, "https://") {
			problems = append(problems, errors.New("VAULT_AUTH=cert needs an https:// VAULT_ADDR: the certificate is presented in the TLS handshake"))
		}
	default:
		problems = append(problems, fmt.Errorf("VAULT_AUTH=%q: want token or cert", c.Auth))
	}
	switch c.Mode {
	case ModeTransit, ModeKV:
	default:
		problems = append(problems, fmt.Errorf("VAULT_MODE=%q: want transit or kv", c.Mode))
	}
	if c.HealthInterval < 0 || c.HealthInterval > maxHealthInterval {
		problems = append(problems, fmt.Errorf("VAULT_HEALTH_INTERVAL=%s: want 0 to %s", c.HealthInterval, maxHealthInterval))
	}
	if c.KeyRecheckInterval <= 0 || c.KeyRecheckInterval > maxKeyRecheckInterval {
		problems = append(problems, fmt.Errorf("VAULT_KEY_RECHECK_INTERVAL=%s: want more than 0 and at most %s: a key deleted in Vault is used until its next re-check", c.KeyRecheckInterval, maxKeyRecheckInterval))
	}
	if c.Auth == AuthToken && isPlainHTTP(c.Addr) && !c.AllowPlaintextHTTP {
		problems = append(problems, fmt.Errorf("VAULT_ADDR=%s is plain http: signerd's Vault token and every key it reads would cross the network unencrypted; use https:// (with VAULT_CACERT for a private CA), or, for a development Vault only, set VAULT_ALLOW_PLAINTEXT_HTTP=true", c.Addr))
	}
	if c.KVPrefix == "" {
		problems = append(problems, errors.New("VAULT_KV_PREFIX must not be empty: signerd's keys need a path of their own"))
	}
	return errors.Join(problems...)
}

// isPlainHTTP reports whether addr is an http:// URL.
func isPlainHTTP(addr string) bool {
	u, err := url.Parse(addr)
	return err == nil && strings.EqualFold(u.Scheme, "http")
}

// New makes a client for cfg. It does not contact Vault; with cert auth
// the client presents the certificate but holds no token until Open logs
// in.
func New(cfg Config) (*api.Client, error) {
	cfg = cfg.withDefaults()
	// Built by hand rather than from api.DefaultConfig, which reads
	// VAULT_* variables (VAULT_SKIP_VERIFY among them).
	transport := &http.Transport{
		// No proxy: signerd talks to its Vault directly.
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   runtime.GOMAXPROCS(0) + 1,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
	}
	vc := &api.Config{
		Address: cfg.Addr,
		HttpClient: &http.Client{
			Transport: transport,
			// vault/api handles redirects itself.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		Timeout: cfg.Timeout,
		// signerd fails closed and says so; it does not sit in retries
		// while a caller waits for a signature. One quick retry rides out
		// a dropped connection.
		MaxRetries:   1,
		MinRetryWait: 100 * time.Millisecond,
		MaxRetryWait: 500 * time.Millisecond,
	}
	tlsCfg := &api.TLSConfig{CACert: cfg.CACert}
	if cfg.Auth == AuthCert {
		tlsCfg.ClientCert, tlsCfg.ClientKey = cfg.ClientCert, cfg.ClientKey
	}
	if err := vc.ConfigureTLS(tlsCfg); err != nil {
		return nil, fmt.Errorf("vault TLS: %w", err)
	}
	c, err := api.NewClient(vc)
	if err != nil {
		return nil, fmt.Errorf("vault client: %w", err)
	}
	// NewClient picks up VAULT_TOKEN, VAULT_NAMESPACE and VAULT_HEADERS
	// from the environment; undo that.
	c.SetToken(cfg.Token.Reveal())
	c.ClearNamespace()
	c.SetHeaders(http.Header{api.RequestHeaderName: []string{"true"}})
	return c, nil
}

// Check is a readiness check: Vault answers, is initialized and unsealed.
func Check(c *api.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		h, err := c.Sys().HealthWithContext(ctx)
		if err != nil {
			return fmt.Errorf("vault at %s unreachable: %w", c.Address(), err)
		}
		switch {
		case !h.Initialized:
			return fmt.Errorf("vault at %s is not initialized", c.Address())
		case h.Sealed:
			return fmt.Errorf("vault at %s is sealed", c.Address())
		}
		return nil
	}
}
