package vault_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/signer-zonec/vault"
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
