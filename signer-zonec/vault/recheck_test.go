package vault_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/shared/config"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/vault"
	"github.com/txfence/txfence/testinfra/vaulttest"
)

// secretPath is the API path (data or metadata, or destroy) of addr's
// secret under cfg.
func secretPath(cfg vault.Config, kind string, addr common.Address) string {
	return vaulttest.KVMount + "/" + kind + "/" + cfg.KVPrefix + "/" + strings.ToLower(addr.Hex())
}

// storedData is what Vault holds for addr: the fields of its secret's
// current version.
func storedData(t *testing.T, dev *vaulttest.Dev, cfg vault.Config, addr common.Address) map[string]any {
	t.Helper()
	var secret struct {
		Data struct {
			Data map[string]any `json:"data"`
		} `json:"data"`
	}
	if err := dev.Do(ctx(t), dev.RootToken, "GET", secretPath(cfg, "data", addr), nil, &secret); err != nil {
		t.Fatal(err)
	}
	return secret.Data.Data
}

func mustKey(t *testing.T, b *vault.Backend, addr common.Address) *signer.Key {
	t.Helper()
	k, err := b.Key(ctx(t), addr)
	if err != nil {
		t.Fatalf("key %s: %v", addr.Hex(), err)
	}
	return k
}

// TestDeletedKeyStopsSigning is the custodian's finding: a key deleted in
// Vault was served from signerd's cache ten minutes later, because only
// Vault's health and signerd's token were checked. Now the cached key is
// re-read within KeyRecheckInterval, found gone, dropped and destroyed,
// while the other key keeps working. Vault as a whole vouches throughout:
// only the key's own check can notice.
func TestDeletedKeyStopsSigning(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeTransit)
	cfg.Token = config.Secret(dev.RootToken)
	cfg.HealthInterval = time.Minute
	cfg.KeyRecheckInterval = 10 * time.Second
	b := open(t, cfg)
	clock := newClock(b)
	deleted, err := b.Create(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := b.Import(ctx(t), []byte(knownKey))
	if err != nil {
		t.Fatal(err)
	}
	deletedKey, keptKey := mustKey(t, b, deleted.Address), mustKey(t, b, kept.Address)

	if err := dev.Do(ctx(t), dev.RootToken, "DELETE", secretPath(cfg, "data", deleted.Address), nil, nil); err != nil {
		t.Fatal(err)
	}
	// The one window the re-check allows: within the interval of its last
	// check the key is served from memory.
	clock.advance(cfg.KeyRecheckInterval - time.Millisecond)
	if k, err := b.Key(ctx(t), deleted.Address); err != nil || k != deletedKey {
		t.Fatalf("cached key within the re-check interval: %v", err)
	}
	clock.advance(time.Millisecond)
	if _, err := b.Key(ctx(t), deleted.Address); !errors.Is(err, signer.ErrUnknownKey) {
		t.Fatalf("deleted key after the re-check interval: %v, want ErrUnknownKey", err)
	}
	if !deletedKey.Destroyed() {
		t.Error("the deleted key, dropped from the cache, was not destroyed: a caller holding it could still sign")
	}
	if k := mustKey(t, b, kept.Address); k != keptKey || k.Destroyed() {
		t.Error("the key that was not deleted was dropped with the deleted one")
	}

	clock.advance(10 * time.Minute)
	if _, err := b.Key(ctx(t), deleted.Address); !errors.Is(err, signer.ErrUnknownKey) {
		t.Errorf("deleted key ten minutes later: %v, want ErrUnknownKey", err)
	}
	if k := mustKey(t, b, kept.Address); k != keptKey || k.Destroyed() {
		t.Error("the key that was not deleted stopped working")
	}
}

// TestKeyRecheckFailsClosed: whatever happens to a cached key's secret in
// Vault (deleted, destroyed, removed with its history, replaced by another
// address's key, rewritten, or no longer readable by signerd), the cached
// key is destroyed at its next re-check and nothing signs with it until
// Vault vouches for the secret again. A rewrite that still holds the same
// key is vouched for by that very read, so the key is unwrapped afresh.
// The other key is untouched unless Vault denies signerd (which may be its
// token), when every cached key is dropped and unwrapped again.
func TestKeyRecheckFailsClosed(t *testing.T) {
	t.Parallel()
	dev := vaulttest.Server(t)
	dev.CreateTransitKey(t, transitKey)
	for i, tc := range []struct {
		name string
		// change alters addr's secret; other is a second key's address.
		change func(t *testing.T, cfg vault.Config, policy string, addr, other common.Address)
		// wantErr checks Key's error after the re-check; nil means the
		// key is served again, unwrapped afresh.
		wantErr       func(error) bool
		bystanderKept bool
	}{
		{
			name: "deleted",
			change: func(t *testing.T, cfg vault.Config, _ string, addr, _ common.Address) {
				must(t, dev.Do(ctx(t), dev.RootToken, "DELETE", secretPath(cfg, "data", addr), nil, nil))
			},
			wantErr:       isUnknownKey,
			bystanderKept: true,
		},
		{
			name: "destroyed",
			change: func(t *testing.T, cfg vault.Config, _ string, addr, _ common.Address) {
				must(t, dev.Do(ctx(t), dev.RootToken, "PUT", secretPath(cfg, "destroy", addr), map[string]any{"versions": []int{1}}, nil))
			},
			wantErr:       isUnknownKey,
			bystanderKept: true,
		},
		{
			name: "deleted with its history",
			change: func(t *testing.T, cfg vault.Config, _ string, addr, _ common.Address) {
				must(t, dev.Do(ctx(t), dev.RootToken, "DELETE", secretPath(cfg, "metadata", addr), nil, nil))
			},
			wantErr:       isUnknownKey,
			bystanderKept: true,
		},
		{
			name: "replaced by another address's key",
			change: func(t *testing.T, cfg vault.Config, _ string, addr, other common.Address) {
				data := storedData(t, dev, cfg, other)
				must(t, dev.Do(ctx(t), dev.RootToken, "POST", secretPath(cfg, "data", addr), map[string]any{"data": data}, nil))
			},
			wantErr:       func(err error) bool { return err != nil && strings.Contains(err.Error(), "belongs to") },
			bystanderKept: true,
		},
		{
			name: "rewritten with the same key",
			change: func(t *testing.T, cfg vault.Config, _ string, addr, _ common.Address) {
				data := storedData(t, dev, cfg, addr)
				must(t, dev.Do(ctx(t), dev.RootToken, "POST", secretPath(cfg, "data", addr), map[string]any{"data": data}, nil))
			},
			bystanderKept: true,
		},
		{
			// Version 1 again, so only the version's creation time tells
			// the two apart.
			name: "deleted with its history and stored again",
			change: func(t *testing.T, cfg vault.Config, _ string, addr, _ common.Address) {
				data := storedData(t, dev, cfg, addr)
				must(t, dev.Do(ctx(t), dev.RootToken, "DELETE", secretPath(cfg, "metadata", addr), nil, nil))
				must(t, dev.Do(ctx(t), dev.RootToken, "POST", secretPath(cfg, "data", addr), map[string]any{"data": data}, nil))
			},
			bystanderKept: true,
		},
		{
			name: "no longer readable by signerd",
			change: func(t *testing.T, cfg vault.Config, policy string, addr, _ common.Address) {
				dev.PutPolicy(t, policy, vault.ServePolicy(cfg)+vault.ManagePolicy(cfg)+
					fmt.Sprintf("path %q {\n  capabilities = [\"deny\"]\n}\n", secretPath(cfg, "data", addr)))
			},
			wantErr: func(err error) bool { return errors.Is(err, vault.ErrDenied) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := vault.Config{
				Addr: dev.Addr, AllowPlaintextHTTP: true, Mode: vault.ModeTransit,
				KVMount: vaulttest.KVMount, KVPrefix: fmt.Sprintf("txfence/recheck/%d", i),
				TransitMount: vaulttest.TransitMount, TransitKey: transitKey, Timeout: 5 * time.Second,
				HealthInterval: time.Minute, KeyRecheckInterval: 5 * time.Second,
			}
			policy := fmt.Sprintf("recheck-%d", i)
			dev.PutPolicy(t, policy, vault.ServePolicy(cfg)+vault.ManagePolicy(cfg))
			cfg.Token = config.Secret(dev.CreateToken(t, vaulttest.TokenRequest{Policies: []string{policy}}))
			b := open(t, cfg)
			clock := newClock(b)
			changed, err := b.Create(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			other, err := b.Create(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			before, otherKey := mustKey(t, b, changed.Address), mustKey(t, b, other.Address)

			tc.change(t, cfg, policy, changed.Address, other.Address)
			clock.advance(cfg.KeyRecheckInterval)
			k, err := b.Key(ctx(t), changed.Address)
			if !before.Destroyed() {
				t.Error("the cached key was not destroyed")
			}
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Errorf("key after the change: %v", err)
				}
				// Still refused on the next call: nothing was re-cached.
				if _, err := b.Key(ctx(t), changed.Address); !tc.wantErr(err) {
					t.Errorf("key on the next call: %v", err)
				}
			} else if err != nil || k == before || k.Destroyed() || k.Address() != changed.Address {
				t.Errorf("key after a rewrite holding the same key: %v; want it unwrapped afresh", err)
			}

			k = mustKey(t, b, other.Address)
			if k.Destroyed() {
				t.Error("the other key is served destroyed")
			}
			if tc.bystanderKept && (k != otherKey || otherKey.Destroyed()) {
				t.Error("the other key was dropped")
			}
		})
	}
}

func isUnknownKey(err error) bool { return errors.Is(err, signer.ErrUnknownKey) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRechecksUnderConcurrentUse has many callers use two keys while the
// clock steps past the re-check interval again and again: nothing in Vault
// changes, so every caller gets the one cached key of its address, never
// a refusal or a destroyed key. Run with -race.
func TestRechecksUnderConcurrentUse(t *testing.T) {
	t.Parallel()
	dev, cfg := setup(t, vault.ModeKV)
	cfg.Token = config.Secret(dev.RootToken)
	cfg.HealthInterval = time.Minute
	cfg.KeyRecheckInterval = time.Second
	b := open(t, cfg)
	clock := newClock(b)
	var addrs []common.Address
	first := map[common.Address]*signer.Key{}
	for range 2 {
		info, err := b.Create(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, info.Address)
		first[info.Address] = mustKey(t, b, info.Address)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				addr := addrs[(g+n)%len(addrs)]
				k, err := b.Key(ctx(t), addr)
				if err != nil || k != first[addr] || k.Destroyed() {
					t.Errorf("key %s under concurrent re-checks: %v", addr.Hex(), err)
					return
				}
			}
		})
	}
	for range 20 {
		clock.advance(cfg.KeyRecheckInterval)
		for _, addr := range addrs {
			mustKey(t, b, addr) // wait for at least one re-check per step
		}
	}
	close(stop)
	wg.Wait()
}
