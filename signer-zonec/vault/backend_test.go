package vault_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/shared/config"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/vault"
	"github.com/txfence/txfence/testinfra/vaulttest"
)

const transitKey = "txfence-signer"

// knownKey is a throwaway test key (it appears in web3 documentation): it
// must never hold value.
const knownKey = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"

func knownAddress(t *testing.T) common.Address {
	t.Helper()
	priv, err := crypto.HexToECDSA(knownKey)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(priv.PublicKey)
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// setup starts a dev server with the transit key and returns it with a
// config for mode (no token yet) whose health interval is 0: every Key
// asks Vault. The dev server listens on loopback over plain HTTP, which
// the config must allow explicitly.
func setup(t *testing.T, mode string) (*vaulttest.Dev, vault.Config) {
	t.Helper()
	dev := vaulttest.Server(t)
	dev.CreateTransitKey(t, transitKey)
	return dev, vault.Config{
		Addr: dev.Addr, AllowPlaintextHTTP: true, Mode: mode, KVMount: vaulttest.KVMount, KVPrefix: "txfence/test/keys",
		TransitMount: vaulttest.TransitMount, TransitKey: transitKey, Timeout: 5 * time.Second,
		KeyRecheckInterval: 10 * time.Second,
	}
}

func open(t *testing.T, cfg vault.Config) *vault.Backend {
	t.Helper()
	b, err := vault.Open(ctx(t), cfg, slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// withTokens returns cfg with a token holding the manage policy and one
// holding the serve policy: the tests use the least privilege signerd's
// docs tell operators to grant.
func withTokens(t *testing.T, dev *vaulttest.Dev, cfg vault.Config) (manage, serve vault.Config) {
	t.Helper()
	manage, serve = cfg, cfg
	manage.Token = config.Secret(dev.ScopedToken(t, vault.ManagePolicy(cfg)))
	serve.Token = config.Secret(dev.ScopedToken(t, vault.ServePolicy(cfg)))
	return manage, serve
}

func TestCreateImportListAndKey(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{vault.ModeTransit, vault.ModeKV} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dev, cfg := setup(t, mode)
			manageCfg, serveCfg := withTokens(t, dev, cfg)
			manage := open(t, manageCfg)

			created, err := manage.Create(ctx(t))
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			in := []byte("0x" + knownKey + "\n")
			imported, err := manage.Import(ctx(t), in)
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			if !slices.Equal(in, make([]byte, len(in))) {
				t.Error("Import left the hex key in the caller's buffer")
			}
			if imported.Address != knownAddress(t) {
				t.Errorf("imported %s, want %s", imported.Address.Hex(), knownAddress(t).Hex())
			}
			wantBackend := "vault-" + mode
			for _, info := range []signer.KeyInfo{created, imported} {
				if info.Backend != wantBackend {
					t.Errorf("backend %q, want %q", info.Backend, wantBackend)
				}
			}
			// Keys are never overwritten.
			if _, err := manage.Import(ctx(t), []byte(knownKey)); !errors.Is(err, vault.ErrKeyExists) {
				t.Errorf("second import: %v, want ErrKeyExists", err)
			}
			// The manage token cannot read a key back.
			if _, err := manage.Key(ctx(t), created.Address); !errors.Is(err, vault.ErrDenied) {
				t.Errorf("Key with the manage policy: %v, want ErrDenied", err)
			}

			serve := open(t, serveCfg)
			list, err := serve.List(ctx(t))
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			want := []signer.KeyInfo{created, imported}
			sortInfos(want)
			sortInfos(list)
			if !slices.Equal(list, want) {
				t.Errorf("list = %v, want %v", list, want)
			}
			for _, info := range want {
				k, err := serve.Key(ctx(t), info.Address)
				if err != nil {
					t.Fatalf("key %s: %v", info.Address.Hex(), err)
				}
				if k.Address() != info.Address {
					t.Errorf("key for %s has address %s", info.Address.Hex(), k.Address().Hex())
				}
				if s := k.String(); strings.Contains(s, knownKey) {
					t.Errorf("key prints its private key: %s", s)
				}
			}
			// The serve token cannot write keys.
			if _, err := serve.Create(ctx(t)); !errors.Is(err, vault.ErrDenied) {
				t.Errorf("Create with the serve policy: %v, want ErrDenied", err)
			}

			// What Vault holds: in transit mode a ciphertext and nothing
			// else that could be the key; in kv mode the hex key.
			var secret struct {
				Data struct {
					Data map[string]any `json:"data"`
				} `json:"data"`
			}
			path := vaulttest.KVMount + "/data/" + cfg.KVPrefix + "/" + strings.ToLower(imported.Address.Hex())
			if err := dev.Do(ctx(t), dev.RootToken, "GET", path, nil, &secret); err != nil {
				t.Fatal(err)
			}
			stored := secret.Data.Data
			switch mode {
			case vault.ModeTransit:
				if ct, _ := stored["ciphertext"].(string); !strings.HasPrefix(ct, "vault:v1:") {
					t.Errorf("no transit ciphertext in %v", stored)
				}
				for k, v := range stored {
					if s, _ := v.(string); strings.Contains(strings.ToLower(s), knownKey) {
						t.Errorf("field %s holds the plain key", k)
					}
				}
			case vault.ModeKV:
				if stored["private_key"] != knownKey {
					t.Errorf("private_key not stored as hex: %v", stored["private_key"] != nil)
				}
			}
		})
	}
}

// testLog sends the backend's log to the test's.
type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func sortInfos(s []signer.KeyInfo) {
	slices.SortFunc(s, func(a, b signer.KeyInfo) int { return strings.Compare(a.Address.Hex(), b.Address.Hex()) })
}

func TestUnknownAddressIsErrUnknownKey(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	cfg.Token = config.Secret(dev.RootToken)
	b := open(t, cfg)
	addr := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	_, err := b.Key(ctx(t), addr)
	if !errors.Is(err, signer.ErrUnknownKey) || !strings.Contains(err.Error(), addr.Hex()) {
		t.Errorf("got %v, want ErrUnknownKey naming %s", err, addr.Hex())
	}
	list, err := b.List(ctx(t))
	if err != nil || len(list) != 0 {
		t.Errorf("list of an empty prefix: %v, %v", list, err)
	}
}

// TestSealedVaultFailsClosed: a key served (and cached) while Vault is
// unsealed is refused once Vault is sealed and the health interval has
// passed, with an error that says sealed; it is served again after unseal.
func TestSealedVaultFailsClosed(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	cfg.Token = config.Secret(dev.RootToken)
	cfg.HealthInterval = 5 * time.Second
	b := open(t, cfg)
	clock := newClock(b)
	info, err := b.Import(ctx(t), []byte(knownKey))
	if err != nil {
		t.Fatal(err)
	}
	served, err := b.Key(ctx(t), info.Address)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Ready(ctx(t)); err != nil {
		t.Fatalf("readiness while unsealed: %v", err)
	}
	dev.Seal(t)
	clock.advance(cfg.HealthInterval)
	_, err = b.Key(ctx(t), info.Address)
	if !errors.Is(err, vault.ErrSealed) || !strings.Contains(err.Error(), "sealed") {
		t.Fatalf("key while sealed: %v, want ErrSealed", err)
	}
	if !served.Destroyed() {
		t.Error("the key served before the seal was dropped without being destroyed")
	}
	if _, err := b.List(ctx(t)); !errors.Is(err, vault.ErrSealed) {
		t.Errorf("list while sealed: %v, want ErrSealed", err)
	}
	if err := b.Ready(ctx(t)); err == nil || !strings.Contains(err.Error(), "sealed") {
		t.Errorf("readiness while sealed: %v", err)
	}
	dev.Unseal(t)
	if k, err := b.Key(ctx(t), info.Address); err != nil || k.Address() != info.Address {
		t.Errorf("key after unseal: %v", err)
	}
}

// TestCachedKeyServedOnlyWithinInterval pins the one window fail-closed
// allows: within HealthInterval of Vault's last good answer the cached key
// is served without asking, so an operator's seal takes effect within the
// interval, not instantly.
func TestCachedKeyServedOnlyWithinInterval(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeKV)
	cfg.Token = config.Secret(dev.RootToken)
	cfg.HealthInterval = 2 * time.Second
	b := open(t, cfg)
	clock := newClock(b)
	info, err := b.Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Key(ctx(t), info.Address); err != nil {
		t.Fatal(err)
	}
	dev.Seal(t)
	clock.advance(cfg.HealthInterval - time.Millisecond)
	if _, err := b.Key(ctx(t), info.Address); err != nil {
		t.Errorf("cached key refused within the interval: %v", err)
	}
	clock.advance(time.Millisecond)
	if _, err := b.Key(ctx(t), info.Address); !errors.Is(err, vault.ErrSealed) {
		t.Errorf("cached key after the interval while sealed: %v, want ErrSealed", err)
	}
}

func TestUnreachableVault(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close()
	_, err = vault.Open(ctx(t), vault.Config{Addr: addr, AllowPlaintextHTTP: true, Token: "t", Timeout: 2 * time.Second, KeyRecheckInterval: time.Second}, nil)
	if !errors.Is(err, vault.ErrUnreachable) || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), addr) {
		t.Errorf("open: %v, want ErrUnreachable naming %s", err, addr)
	}

	// Vault going away after Open.
	dev, cfg := setup(t, vault.ModeTransit)
	cfg.Token = config.Secret(dev.RootToken)
	b := open(t, cfg)
	info, err := b.Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	served, err := b.Key(ctx(t), info.Address)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Key(ctx(t), info.Address); !errors.Is(err, vault.ErrUnreachable) {
		t.Errorf("key with vault stopped: %v, want ErrUnreachable", err)
	}
	if !served.Destroyed() {
		t.Error("the key served before Vault went away was dropped without being destroyed")
	}
}

func TestWrongOrRevokedTokenIsDenied(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	bad := cfg
	bad.Token = "hvs.not-a-token"
	_, err := vault.Open(ctx(t), bad, nil)
	if !errors.Is(err, vault.ErrDenied) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("open with a wrong token: %v, want ErrDenied", err)
	}

	manageCfg, serveCfg := withTokens(t, dev, cfg)
	info, err := open(t, manageCfg).Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, serveCfg)
	if _, err := b.Key(ctx(t), info.Address); err != nil {
		t.Fatal(err)
	}
	if err := dev.Do(ctx(t), dev.RootToken, "POST", "auth/token/revoke", map[string]any{"token": serveCfg.Token.Reveal()}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Key(ctx(t), info.Address); !errors.Is(err, vault.ErrDenied) {
		t.Errorf("cached key with the token revoked: %v, want ErrDenied", err)
	}
	// Readiness turns red with it: Vault is up and unsealed, but of no use.
	if err := b.Ready(ctx(t)); !errors.Is(err, vault.ErrDenied) {
		t.Errorf("readiness with the token revoked: %v, want ErrDenied", err)
	}
}

// TestTransitDecryptIsRequired: a token that may read the KV secret but not
// decrypt with the transit key gets no key; what KV holds is useless alone.
func TestTransitDecryptIsRequired(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	manageCfg, _ := withTokens(t, dev, cfg)
	info, err := open(t, manageCfg).Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	kvOnly := cfg
	kvOnly.Token = config.Secret(dev.ScopedToken(t, strings.ReplaceAll(vault.ServePolicy(cfg), "/decrypt/", "/nothing/")))
	_, err = open(t, kvOnly).Key(ctx(t), info.Address)
	if !errors.Is(err, vault.ErrDenied) || !strings.Contains(err.Error(), "transit decrypt") {
		t.Errorf("key without transit decrypt: %v, want ErrDenied from transit decrypt", err)
	}
}

// TestStoredKeyMustMatchItsAddress: a secret copied to another address's
// path, or stored in the other mode, is refused rather than used.
func TestStoredKeyMustMatchItsAddress(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeKV)
	cfg.Token = config.Secret(dev.RootToken)
	b := open(t, cfg)
	info, err := b.Import(ctx(t), []byte(knownKey))
	if err != nil {
		t.Fatal(err)
	}
	other := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	prefix := vaulttest.KVMount + "/data/" + cfg.KVPrefix + "/"
	var secret struct {
		Data struct {
			Data map[string]any `json:"data"`
		} `json:"data"`
	}
	if err := dev.Do(ctx(t), dev.RootToken, "GET", prefix+strings.ToLower(info.Address.Hex()), nil, &secret); err != nil {
		t.Fatal(err)
	}
	if err := dev.Do(ctx(t), dev.RootToken, "POST", prefix+strings.ToLower(other.Hex()), map[string]any{"data": secret.Data.Data}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Key(ctx(t), other); err == nil || !strings.Contains(err.Error(), "belongs to "+info.Address.Hex()) {
		t.Errorf("key copied to another address: %v, want a refusal", err)
	}

	transitCfg := cfg
	transitCfg.Mode = vault.ModeTransit
	if _, err := open(t, transitCfg).Key(ctx(t), info.Address); err == nil || !strings.Contains(err.Error(), `stored in mode "kv"`) {
		t.Errorf("a kv-mode key read in transit mode: %v, want a refusal", err)
	}
}

func TestCloseDestroysKeys(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	cfg.Token = config.Secret(dev.RootToken)
	b, err := vault.Open(ctx(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	k, err := b.Key(ctx(t), info.Address)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := b.Key(ctx(t), info.Address); err == nil {
		t.Error("Key after Close succeeded")
	}
	if !k.Destroyed() {
		t.Error("Close left a key it handed out usable")
	}
	if k.Address() != info.Address {
		t.Error("destroyed key lost its address")
	}
}

// TestTokenRenewal: a renewable token with a 4 s TTL outlives it because
// the lifetime watcher renews it.
func TestTokenRenewal(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	policy := "vaulttest-renew"
	dev.PutPolicy(t, policy, vault.ServePolicy(cfg)+vault.ManagePolicy(cfg))
	const ttl = 4 * time.Second
	cfg.Token = config.Secret(dev.CreateToken(t, vaulttest.TokenRequest{Policies: []string{policy}, TTL: ttl, ExplicitMaxTTL: time.Hour}))
	b := open(t, cfg)
	info, err := b.Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	// Use the key every half second for three TTLs: each use asks Vault
	// (HealthInterval 0), so a lapsed token would show at once.
	useKeyUntil(t, b, info.Address, time.Now().Add(3*ttl))
	if left := dev.TokenTTL(t, cfg.Token.Reveal()); left <= 0 {
		t.Errorf("token TTL %s after %s; the watcher did not renew it", left, 3*ttl)
	}
}

// TestCertAuth logs in with a TLS client certificate, and logs in again
// when the token reaches its maximum TTL.
func TestCertAuth(t *testing.T) {
	t.Parallel()
	dev := vaulttest.ServerWith(t, vaulttest.Options{TLS: true})
	dev.CreateTransitKey(t, transitKey)
	cfg := vault.Config{
		Addr: dev.Addr, Auth: vault.AuthCert, CACert: dev.CACert, CertRole: "signerd",
		KVMount: vaulttest.KVMount, KVPrefix: "txfence/test/keys", TransitMount: vaulttest.TransitMount, TransitKey: transitKey,
		KeyRecheckInterval: 10 * time.Second,
	}
	caPEM, cert, key := clientCert(t)
	cfg.ClientCert, cfg.ClientKey = cert, key
	dev.PutPolicy(t, "signerd", vault.ServePolicy(cfg)+vault.ManagePolicy(cfg))
	dev.EnableCertAuth(t, vaulttest.CertRole{Name: "signerd", CA: caPEM, Policies: []string{"signerd"}, TTL: 3 * time.Second, MaxTTL: 6 * time.Second})

	b := open(t, cfg)
	info, err := b.Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	first := b.Client().Token()
	useKeyUntil(t, b, info.Address, time.Now().Add(10*time.Second))
	if b.Client().Token() == first {
		t.Error("no new login after the token's maximum TTL")
	}

	// Without the certificate there is no login.
	noCert := cfg
	_, otherCert, otherKey := clientCert(t) // a CA Vault does not trust
	noCert.ClientCert, noCert.ClientKey = otherCert, otherKey
	if _, err := vault.Open(ctx(t), noCert, nil); err == nil {
		t.Error("login with an untrusted certificate succeeded")
	}
}

// useKeyUntil reads the key every half second until deadline, failing at
// the first refusal: Vault's token lifetimes run on Vault's clock, so these
// tests spend real time.
func useKeyUntil(t *testing.T, b *vault.Backend, addr common.Address, deadline time.Time) {
	t.Helper()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := b.Key(ctx(t), addr); err != nil {
			t.Fatalf("key %s before the deadline: %v", time.Until(deadline).Round(time.Millisecond), err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		<-tick.C
	}
}

// clock is a backend's clock under the test's control.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(b *vault.Backend) *clock {
	c := &clock{now: time.Now()}
	vault.SetClock(b, func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now
	})
	return c
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// clientCert makes a CA and a client certificate it signed, written as PEM
// files; it returns the CA's PEM and the certificate and key paths.
func clientCert(t *testing.T) (caPEM []byte, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test client CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "signerd"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), certFile, keyFile
}
