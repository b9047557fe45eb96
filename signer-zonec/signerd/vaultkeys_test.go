package signerd_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/shared/config"
	"github.com/txfence/txfence/signer-zonec/signerctl"
	"github.com/txfence/txfence/signer-zonec/signerd"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/signer-zonec/vault"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/testinfra/vaulttest"
)

// transferFrom is a transfer request from dev account i to dev account 2.
func transferFrom(i int, txID string, nonce int) string {
	return fmt.Sprintf(`{"tx_id":%q,"chain_id":31337,"from":%q,"nonce":%d,"type":"eip1559","to":%q,"value":"1",
		"gas":21000,"max_fee_per_gas":"30000000000","max_priority_fee_per_gas":"1000000000"}`,
		txID, signertest.DevAddress(i).Hex(), nonce, signertest.DevAddress(2).Hex())
}

// TestDeletedVaultKeyStopsSigning runs signerd on two keys held in a real
// Vault and deletes one of them there: signerd stops signing with it
// (within VAULT_KEY_RECHECK_INTERVAL, here 50 ms), although Vault stays up
// and signerd's token valid, and goes on signing with the other.
func TestDeletedVaultKeyStopsSigning(t *testing.T) {
	t.Parallel()
	dev := vaulttest.Server(t)
	dev.CreateTransitKey(t, "txfence-signer")
	ctx := context.Background()
	backend, err := vault.Open(ctx, vault.Config{
		Addr: dev.Addr, AllowPlaintextHTTP: true, Token: config.Secret(dev.RootToken),
		Timeout: 5 * time.Second, KeyRecheckInterval: time.Second,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range signertest.DevKeys[:2] {
		if _, err := backend.Import(ctx, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	_ = backend.Close()

	pki, env := baseEnv(t)
	env = servicetest.Merge(env, map[string]string{
		prefix + "KEY_BACKEND":                "vault",
		prefix + "VAULT_ADDR":                 dev.Addr,
		prefix + "VAULT_ALLOW_PLAINTEXT_HTTP": "true",
		prefix + "VAULT_TOKEN":                dev.RootToken,
		// Vault's health is vouched for longer than the test runs: only
		// the key's own re-check can notice the deletion.
		prefix + "VAULT_HEALTH_INTERVAL":      "1m",
		prefix + "VAULT_KEY_RECHECK_INTERVAL": "50ms",
	})
	svc := servicetest.Start(t, signerd.Run, nil, env, "internal")
	client := servicetest.Client(t, pki, "txmanager", signerd.Spec.Identity)
	for i := range 2 {
		if code, o := sign(t, client, svc.URL("internal"), transferFrom(i, fmt.Sprintf("tx-%d-0", i), 0)); code != 200 || o != "signed" {
			t.Fatalf("sign with dev key %d: %d %s\n%s", i, code, o, svc.Logs())
		}
	}

	path := vaulttest.KVMount + "/data/txfence/signer/keys/" + strings.ToLower(signertest.DevAddress(0).Hex())
	if err := dev.Do(ctx, dev.RootToken, "DELETE", path, nil, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for nonce := 1; ; nonce++ {
		code, body := sign(t, client, svc.URL("internal"), transferFrom(0, fmt.Sprintf("tx-0-%d", nonce), nonce))
		if code == http.StatusBadRequest && strings.Contains(body, "no key for "+signertest.DevAddress(0).Hex()) {
			break
		}
		if code != 200 || body != "signed" {
			t.Fatalf("signing with the deleted key: %d %s; want it signed until the re-check, then refused as unknown", code, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("signerd still signs with a key deleted from Vault\n%s", svc.Logs())
		}
	}
	if code, o := sign(t, client, svc.URL("internal"), transferFrom(1, "tx-1-1", 1)); code != 200 || o != "signed" {
		t.Errorf("sign with the key that was not deleted: %d %s", code, o)
	}
}

// TestVaultOverPlainHTTPIsRefusedByDefault: serve and signerctl's keys commands
// refuse token auth over http:// unless VAULT_ALLOW_PLAINTEXT_HTTP says
// it is a development Vault, and say what to do; the token is not logged.
func TestVaultOverPlainHTTPIsRefusedByDefault(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		prefix + "KEY_BACKEND": "vault",
		prefix + "VAULT_ADDR":  "http://127.0.0.1:8200",
		prefix + "VAULT_TOKEN": "dev-only-token",
	}
	// Settings are validated once every required one is present; these
	// are never used, since the configuration is refused.
	serveEnv := servicetest.Merge(env, map[string]string{
		prefix + "DATABASE_URL":  "postgres://unused@127.0.0.1:1/unused",
		prefix + "TLS_CA_FILE":   "unused",
		prefix + "TLS_CERT_FILE": "unused",
		prefix + "TLS_KEY_FILE":  "unused",
	})
	logs, err := servicetest.RunOnce(t, signerd.Run, nil, serveEnv)
	if err == nil || !strings.Contains(err.Error(), "VAULT_ALLOW_PLAINTEXT_HTTP=true") || !strings.Contains(err.Error(), "https://") {
		t.Errorf("serve with an http:// Vault: %v; want a refusal saying to use https:// or allow it for development", err)
	}
	if strings.Contains(logs, "dev-only-token") || (err != nil && strings.Contains(err.Error(), "dev-only-token")) {
		t.Error("the Vault token appears in the logs or the error")
	}
	var out bytes.Buffer
	err = signerctl.Run(context.Background(), []string{"keys", "list"}, func(k string) string { return env[k] }, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "VAULT_ALLOW_PLAINTEXT_HTTP=true") {
		t.Errorf("signerctl keys list with an http:// Vault: %v; want a refusal", err)
	}
}
