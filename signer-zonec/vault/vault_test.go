package vault_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/signer-zonec/vault"
	"github.com/txfence/txfence/testinfra/vaulttest"
)

// TestCheckFailsClosedWhenVaultIsUnreachable points the client at a port
// where nothing listens: readiness must fail, naming Vault and its address.
// (Checks against a real Vault dev server come with the key backend.)
func TestCheckFailsClosedWhenVaultIsUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close() // nothing listens here now
	c, err := vault.New(vault.Config{Addr: addr, Token: "t", Timeout: 2e9})
	if err != nil {
		t.Fatal(err)
	}
	err = vault.Check(c)(context.Background())
	if err == nil || !strings.Contains(err.Error(), "vault at "+addr+" unreachable") {
		t.Errorf("got %v; want Vault reported unreachable", err)
	}
}

func TestConfigNeedsATokenWithAnAddress(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Vault vault.Config `envprefix:"VAULT_"`
	}
	err := config.Load("S_", func(k string) string { return map[string]string{"S_VAULT_ADDR": "https://vault:8200"}[k] }, &cfg)
	if err == nil || !strings.Contains(err.Error(), "VAULT_TOKEN is required") {
		t.Errorf("got %v", err)
	}
	if (vault.Config{}).Enabled() {
		t.Error("an empty config enables Vault")
	}
}

// loadConfig loads a Vault config from env as signerd does (prefix S_).
func loadConfig(env map[string]string) (vault.Config, error) {
	var cfg struct {
		Vault vault.Config `envprefix:"VAULT_"`
	}
	err := config.Load("S_", func(k string) string { return env[k] }, &cfg)
	return cfg.Vault, err
}

// TestKeyRecheckIntervalIsBounded: a key deleted in Vault is served until
// its next re-check, so the interval has a default of at most 30 s and no
// setting may stretch it; 0 is refused rather than read as "never" or
// "always".
func TestKeyRecheckIntervalIsBounded(t *testing.T) {
	t.Parallel()
	base := map[string]string{"S_VAULT_ADDR": "https://vault:8200", "S_VAULT_TOKEN": "t"}
	cfg, err := loadConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.KeyRecheckInterval <= 0 || cfg.KeyRecheckInterval > 30*time.Second {
		t.Errorf("default re-check interval %s, want more than 0 and at most 30s", cfg.KeyRecheckInterval)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{
		{"30s", true}, {"1s", true}, {"0", false}, {"0s", false}, {"31s", false}, {"1m", false}, {"-1s", false},
	} {
		env := map[string]string{"S_VAULT_KEY_RECHECK_INTERVAL": tc.value}
		for k, v := range base {
			env[k] = v
		}
		_, err := loadConfig(env)
		if tc.ok && err != nil {
			t.Errorf("VAULT_KEY_RECHECK_INTERVAL=%s refused: %v", tc.value, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "VAULT_KEY_RECHECK_INTERVAL")) {
			t.Errorf("VAULT_KEY_RECHECK_INTERVAL=%s: %v, want a refusal naming the setting", tc.value, err)
		}
	}
}

// TestPlainHTTPTokenAuthIsRefusedByDefault: with token auth over http://
// the token, and every key read, would cross the network in the clear.
// signerd refuses that unless a development setup says so explicitly.
func TestPlainHTTPTokenAuthIsRefusedByDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string // "" means accepted
	}{
		{map[string]string{"S_VAULT_ADDR": "http://127.0.0.1:8200"}, "VAULT_ALLOW_PLAINTEXT_HTTP=true"},
		{map[string]string{"S_VAULT_ADDR": "HTTP://vault.internal:8200"}, "use https://"},
		{map[string]string{"S_VAULT_ADDR": "http://127.0.0.1:8200", "S_VAULT_ALLOW_PLAINTEXT_HTTP": "false"}, "VAULT_ALLOW_PLAINTEXT_HTTP=true"},
		{map[string]string{"S_VAULT_ADDR": "http://127.0.0.1:8200", "S_VAULT_ALLOW_PLAINTEXT_HTTP": "true"}, ""},
		{map[string]string{"S_VAULT_ADDR": "https://vault.internal:8200"}, ""},
	} {
		tc.env["S_VAULT_TOKEN"] = "t"
		_, err := loadConfig(tc.env)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v refused: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want a refusal saying %q", tc.env, err, tc.want)
		}
	}

	// Open refuses it too, before it sends the token: the real Vault here
	// would have accepted it.
	dev := vaulttest.Server(t)
	cfg := vault.Config{Addr: dev.Addr, Token: config.Secret(dev.RootToken), KeyRecheckInterval: time.Second}
	if b, err := vault.Open(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "plain http") {
		if b != nil {
			b.Close()
		}
		t.Errorf("Open over plain http without the allowance: %v, want a refusal", err)
	}
}

// TestKeyFromBytesClearsItsInput: the buffer a key is unwrapped into (a
// transit plaintext, decoded hex) is zeroed whether or not it holds a
// valid key.
func TestKeyFromBytesClearsItsInput(t *testing.T) {
	t.Parallel()
	valid, err := hex.DecodeString(knownKey)
	if err != nil {
		t.Fatal(err)
	}
	k, err := vault.KeyFromBytes(valid)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Destroy()
	if !slices.Equal(valid, make([]byte, len(valid))) {
		t.Error("the unwrapped key's buffer was not cleared")
	}
	for _, bad := range [][]byte{
		bytes.Repeat([]byte{0xff}, 32), // above the curve order
		bytes.Repeat([]byte{0x01}, 31), // too short
	} {
		if _, err := vault.KeyFromBytes(bad); err == nil {
			t.Errorf("%d bytes accepted", len(bad))
		}
		if !slices.Equal(bad, make([]byte, len(bad))) {
			t.Error("a rejected buffer was not cleared")
		}
	}
}
