package vaulttest_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/txfence/txfence/testinfra/vaulttest"
)

func TestServerTransitKVSealAndTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dev := vaulttest.Server(t)

	bin, err := vaulttest.Find()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "Vault v"+vaulttest.Version+" ") {
		t.Errorf("vault version: %q, %v", out, err)
	}

	dev.CreateTransitKey(t, "k")
	var enc struct {
		Data struct{ Ciphertext string }
	}
	if err := dev.Do(ctx, dev.RootToken, "POST", vaulttest.TransitMount+"/encrypt/k", map[string]any{"plaintext": "aGVsbG8="}, &enc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(enc.Data.Ciphertext, "vault:v1:") {
		t.Errorf("ciphertext %q", enc.Data.Ciphertext)
	}
	if err := dev.Do(ctx, dev.RootToken, "POST", vaulttest.KVMount+"/data/x", map[string]any{"data": map[string]any{"a": "b"}}, nil); err != nil {
		t.Errorf("kv v2 write: %v", err)
	}

	// A scoped token reads what its policy grants and nothing else.
	tok := dev.ScopedToken(t, `path "secret/data/x" { capabilities = ["read"] }`)
	if err := dev.Do(ctx, tok, "GET", vaulttest.KVMount+"/data/x", nil, nil); err != nil {
		t.Errorf("scoped read: %v", err)
	}
	var verr *vaulttest.Error
	if err := dev.Do(ctx, tok, "POST", vaulttest.KVMount+"/data/x", map[string]any{"data": map[string]any{}}, nil); !errors.As(err, &verr) || verr.Status != 403 {
		t.Errorf("scoped write: %v, want 403", err)
	}
	short := dev.CreateToken(t, vaulttest.TokenRequest{TTL: time.Minute})
	if ttl := dev.TokenTTL(t, short); ttl <= 0 || ttl > time.Minute {
		t.Errorf("token TTL %s", ttl)
	}

	dev.Seal(t)
	if err := dev.Do(ctx, dev.RootToken, "GET", vaulttest.KVMount+"/data/x", nil, nil); !errors.As(err, &verr) || verr.Status != 503 || !strings.Contains(err.Error(), "sealed") {
		t.Errorf("read while sealed: %v, want 503 sealed", err)
	}
	dev.Unseal(t)
	if err := dev.Do(ctx, dev.RootToken, "GET", vaulttest.KVMount+"/data/x", nil, nil); err != nil {
		t.Errorf("read after unseal: %v", err)
	}
}

func TestTLSServer(t *testing.T) {
	t.Parallel()
	dev := vaulttest.ServerWith(t, vaulttest.Options{TLS: true})
	if !strings.HasPrefix(dev.Addr, "https://") || dev.CACert == "" {
		t.Fatalf("addr %s, CA %q", dev.Addr, dev.CACert)
	}
	if err := dev.Do(context.Background(), dev.RootToken, "GET", "sys/mounts", nil, nil); err != nil {
		t.Error(err)
	}
}
