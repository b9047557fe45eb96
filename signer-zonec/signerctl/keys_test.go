package signerctl

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/signer-zonec/keystore"
	"github.com/txfence/txfence/signer-zonec/signerd/devsignerd"
	"github.com/txfence/txfence/signer-zonec/vault"
	"github.com/txfence/txfence/testinfra/vaulttest"
)

// Keys written by these tests use light scrypt: a standard cost per key
// would make them slow, under the race detector most of all.
func init() { keystoreScryptN, keystoreScryptP = keystore.LightScryptN, keystore.LightScryptP }

// testKey is a throwaway test key (it appears in web3 documentation): it
// must never hold value.
const testKey = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"

func testKeyAddress(t *testing.T) string {
	t.Helper()
	priv, err := crypto.HexToECDSA(testKey)
	if err != nil {
		t.Fatal(err)
	}
	return crypto.PubkeyToAddress(priv.PublicKey).Hex()
}

// keys runs keysCommand with env and stdin, returning its output.
func keys(t *testing.T, env map[string]string, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := keysCommand(context.Background(), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out)
	if strings.Contains(out.String(), testKey) {
		t.Fatalf("keys %s printed the private key", strings.Join(args, " "))
	}
	if err != nil && strings.Contains(err.Error(), testKey) {
		t.Fatalf("keys %s put the private key in an error", strings.Join(args, " "))
	}
	return out.String(), err
}

// checkKeysCommand runs new, import and list against env's backend and
// checks what they print.
func checkKeysCommand(t *testing.T, env map[string]string, backend string) {
	t.Helper()
	out, err := keys(t, env, "", "new")
	if err != nil {
		t.Fatalf("keys new: %v", err)
	}
	created := strings.Fields(out)
	if len(created) != 2 || !strings.HasPrefix(created[0], "0x") || created[1] != backend {
		t.Fatalf("keys new printed %q", out)
	}

	out, err = keys(t, env, "0x"+testKey+"\n", "import")
	if err != nil {
		t.Fatalf("keys import: %v", err)
	}
	if want := testKeyAddress(t) + " " + backend + "\n"; out != want {
		t.Errorf("keys import printed %q, want %q", out, want)
	}
	if _, err := keys(t, env, testKey, "import"); err == nil {
		t.Error("importing the same key twice succeeded")
	}

	out, err = keys(t, env, "", "list")
	if err != nil {
		t.Fatalf("keys list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(out, created[0]+" "+backend+"\n") || !strings.Contains(out, testKeyAddress(t)+" "+backend+"\n") {
		t.Errorf("keys list printed %q", out)
	}

	out, err = keys(t, env, "", "list", "--json")
	if err != nil {
		t.Fatalf("keys list --json: %v", err)
	}
	var listed []struct{ Address, Backend string }
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed) != 2 {
		t.Fatalf("keys list --json printed %q (%v)", out, err)
	}
	for _, k := range listed {
		if k.Backend != backend || (k.Address != created[0] && k.Address != testKeyAddress(t)) {
			t.Errorf("keys list --json: %+v", k)
		}
	}
}

func TestKeysCommandKeystore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := filepath.Join(dir, "passphrase")
	if err := os.WriteFile(pf, []byte("dev passphrase\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"TXFENCE_SIGNER_KEY_BACKEND":              "keystore",
		"TXFENCE_SIGNER_KEYSTORE_DIR":             filepath.Join(dir, "keys"),
		"TXFENCE_SIGNER_KEYSTORE_PASSPHRASE_FILE": pf,
	}
	checkKeysCommand(t, env, "keystore")

	// The backend signerd-dev serves from, given the same settings, holds
	// the same keys.
	b, err := devsignerd.Keystore.Open(context.Background(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	list, err := b.List(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v, %v", list, err)
	}
	for _, info := range list {
		if k, err := b.Key(context.Background(), info.Address); err != nil || k.Address() != info.Address {
			t.Errorf("key %s: %v", info.Address.Hex(), err)
		}
	}
}

func TestKeysCommandVault(t *testing.T) {
	t.Parallel()
	dev := vaulttest.Server(t)
	dev.CreateTransitKey(t, "txfence-signer")
	env := map[string]string{
		"TXFENCE_SIGNER_KEY_BACKEND":       "vault",
		"TXFENCE_SIGNER_VAULT_ADDR":        dev.Addr,
		"TXFENCE_SIGNER_VAULT_KV_MOUNT":    vaulttest.KVMount,
		"TXFENCE_SIGNER_VAULT_KV_PREFIX":   "txfence/keys-command",
		"TXFENCE_SIGNER_VAULT_TRANSIT_KEY": "txfence-signer",
		// The dev server listens on loopback over plain HTTP.
		"TXFENCE_SIGNER_VAULT_ALLOW_PLAINTEXT_HTTP": "true",
	}
	var cfg keyConfig
	cfg.Vault.KVPrefix = env["TXFENCE_SIGNER_VAULT_KV_PREFIX"]
	env["TXFENCE_SIGNER_VAULT_TOKEN"] = dev.ScopedToken(t, vault.ManagePolicy(cfg.Vault))
	checkKeysCommand(t, env, "vault-transit")
}

func TestKeysCommandRefusesBadUse(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"TXFENCE_SIGNER_KEY_BACKEND":         "keystore",
		"TXFENCE_SIGNER_KEYSTORE_DIR":        t.TempDir(),
		"TXFENCE_SIGNER_KEYSTORE_PASSPHRASE": "x",
	}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, env, "usage"},
		{[]string{"delete"}, env, "unknown keys command"},
		{[]string{"import", testKey}, env, "never from an argument"},
		{[]string{"list", "--yaml"}, env, "unexpected arguments"},
		{[]string{"new", "extra"}, env, "unexpected arguments"},
		{[]string{"list"}, map[string]string{}, "no key backend configured"},
		// The development keystore is chosen by name only, never because
		// its directory is set.
		{[]string{"list"}, map[string]string{"TXFENCE_SIGNER_KEYSTORE_DIR": t.TempDir(), "TXFENCE_SIGNER_KEYSTORE_PASSPHRASE": "x"}, "no key backend configured"},
		{[]string{"list"}, map[string]string{"TXFENCE_SIGNER_KEY_BACKEND": "hsm"}, "want vault or keystore"},
		{[]string{"list"}, map[string]string{"TXFENCE_SIGNER_KEY_BACKEND": "keystore"}, "needs KEYSTORE_DIR"},
		{[]string{"list"}, map[string]string{"TXFENCE_SIGNER_KEY_BACKEND": "vault"}, "needs VAULT_ADDR"},
	} {
		_, err := keys(t, tc.env, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("keys %v: %v, want an error with %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), testKey) {
			t.Errorf("keys %v echoed the key argument", tc.args)
		}
	}
	if _, err := keys(t, env, strings.Repeat("a", 10000), "import"); err == nil {
		t.Error("import of an oversized input succeeded")
	}
}
