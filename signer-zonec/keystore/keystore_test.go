package keystore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ethkeystore "github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/keystore"
)

// knownKey is a throwaway test key (it appears in web3 documentation): it
// must never hold value.
const knownKey = "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"

const pass = "correct horse battery staple"

func open(t *testing.T, dir string) *keystore.Backend {
	t.Helper()
	b, err := keystore.Open(keystore.Config{Dir: dir, Passphrase: pass, ScryptN: keystore.LightScryptN, ScryptP: keystore.LightScryptP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestCreateImportListKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "keys") // created by Open
	b := open(t, dir)
	if b.Name() != "keystore" {
		t.Errorf("name %q", b.Name())
	}
	created, err := b.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := []byte("0x" + knownKey + "\n")
	imported, err := b.Import(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in, make([]byte, len(in))) {
		t.Error("Import left the hex key in the caller's buffer")
	}
	priv, _ := crypto.HexToECDSA(knownKey)
	if want := crypto.PubkeyToAddress(priv.PublicKey); imported.Address != want {
		t.Errorf("imported %s, want %s", imported.Address.Hex(), want.Hex())
	}
	if _, err := b.Import(ctx, []byte(knownKey)); !errors.Is(err, keystore.ErrKeyExists) {
		t.Errorf("second import: %v, want ErrKeyExists", err)
	}

	list, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []signer.KeyInfo{created, imported}
	slices.SortFunc(want, func(x, y signer.KeyInfo) int {
		return strings.Compare(strings.ToLower(x.Address.Hex()), strings.ToLower(y.Address.Hex()))
	})
	if !slices.Equal(list, want) {
		t.Errorf("list = %v, want %v", list, want)
	}

	// Files: geth's names, private to the owner, no plain key inside.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("%d files, want 2", len(entries))
	}
	for _, e := range entries {
		fi, _ := e.Info()
		if !strings.HasPrefix(e.Name(), "UTC--") || fi.Mode().Perm() != 0o600 {
			t.Errorf("file %s mode %v", e.Name(), fi.Mode().Perm())
		}
		raw, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if strings.Contains(string(raw), knownKey) {
			t.Errorf("%s holds the plain key", e.Name())
		}
	}

	// A second backend (a restart) decrypts them.
	again := open(t, dir)
	for _, info := range want {
		k, err := again.Key(ctx, info.Address)
		if err != nil {
			t.Fatalf("key %s: %v", info.Address.Hex(), err)
		}
		if k.Address() != info.Address {
			t.Errorf("key for %s has address %s", info.Address.Hex(), k.Address().Hex())
		}
		if k2, _ := again.Key(ctx, info.Address); k2 != k {
			t.Error("a second Key decrypted again instead of using the cache")
		}
	}
	if _, err := again.Key(ctx, common.HexToAddress("0x00000000000000000000000000000000000000aa")); !errors.Is(err, signer.ErrUnknownKey) {
		t.Errorf("unknown address: %v, want ErrUnknownKey", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := again.Key(ctx, created.Address); err == nil {
		t.Error("Key after Close succeeded")
	}
}

// TestGethKeyFiles: signerd reads a key file go-ethereum's own KeyStore
// wrote, and go-ethereum decrypts a file signerd wrote: same format.
func TestGethKeyFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	acct, err := ethkeystore.StoreKey(dir, pass, ethkeystore.LightScryptN, ethkeystore.LightScryptP)
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, dir)
	k, err := b.Key(ctx, acct.Address)
	if err != nil || k.Address() != acct.Address {
		t.Fatalf("geth's key file: %v", err)
	}

	info, err := b.Import(ctx, []byte(knownKey))
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "UTC--*--"+strings.ToLower(info.Address.Hex()[2:])))
	if len(matches) != 1 {
		t.Fatalf("files for %s: %v", info.Address.Hex(), matches)
	}
	raw, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ethkeystore.DecryptKey(raw, pass)
	if err != nil {
		t.Fatalf("geth cannot decrypt signerd's file: %v", err)
	}
	if ek.Address != info.Address {
		t.Errorf("geth decrypted %s, want %s", ek.Address.Hex(), info.Address.Hex())
	}
}

func TestWrongPassphraseAndTamperedFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	info, err := open(t, dir).Import(ctx, []byte(knownKey))
	if err != nil {
		t.Fatal(err)
	}

	wrong, err := keystore.Open(keystore.Config{Dir: dir, Passphrase: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	defer wrong.Close()
	if _, err := wrong.Key(ctx, info.Address); err == nil || !strings.Contains(err.Error(), "wrong passphrase") {
		t.Errorf("wrong passphrase: %v", err)
	}

	// A file claiming another address is refused, not used for it.
	files, _ := filepath.Glob(filepath.Join(dir, "UTC--*"))
	raw, _ := os.ReadFile(files[0])
	other := common.HexToAddress("0x00000000000000000000000000000000000000bb")
	forged := strings.Replace(string(raw), strings.ToLower(info.Address.Hex()[2:]), strings.ToLower(other.Hex()[2:]), 1)
	if err := os.WriteFile(filepath.Join(dir, "forged"), []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	b := open(t, dir)
	if _, err := b.Key(ctx, other); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("file claiming another address: %v", err)
	}

	// Two files for one address are refused rather than guessed between.
	if err := os.WriteFile(filepath.Join(dir, "copy"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Key(ctx, info.Address); err == nil || !strings.Contains(err.Error(), "2 files") {
		t.Errorf("duplicate files: %v", err)
	}
	// Unrelated files are skipped.
	_ = os.WriteFile(filepath.Join(dir, "README"), []byte("not a key"), 0o600)
	if list, err := b.List(ctx); err != nil || len(list) != 2 {
		t.Errorf("list: %v, %v", list, err)
	}
}

func TestPassphraseSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pf := filepath.Join(dir, "pass")
	if err := os.WriteFile(pf, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := filepath.Join(dir, "keys")
	fromFile, err := keystore.Open(keystore.Config{Dir: keys, PassphraseFile: pf, ScryptN: keystore.LightScryptN, ScryptP: keystore.LightScryptP})
	if err != nil {
		t.Fatal(err)
	}
	defer fromFile.Close()
	info, err := fromFile.Create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The trailing newline is not part of the passphrase.
	if _, err := open(t, keys).Key(context.Background(), info.Address); err != nil {
		t.Errorf("passphrase from a file with a newline: %v", err)
	}
	for _, cfg := range []keystore.Config{
		{Dir: keys},
		{Dir: keys, Passphrase: "x", PassphraseFile: pf},
		{Passphrase: "x"},
		{Dir: keys, PassphraseFile: filepath.Join(dir, "missing")},
	} {
		if _, err := keystore.Open(cfg); err == nil {
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

func TestImportRejectsBadKeysWithoutQuotingThem(t *testing.T) {
	t.Parallel()
	b := open(t, t.TempDir())
	for _, in := range []string{"", "zz", strings.Repeat("g", 64), strings.Repeat("0", 64), knownKey + "00"} {
		_, err := b.Import(context.Background(), []byte(in))
		if err == nil {
			t.Errorf("%q imported", in)
		} else if in != "" && strings.Contains(err.Error(), in) {
			t.Errorf("error quotes its input: %v", err)
		}
	}
}

// TestCloseDestroysKeys: closing the keystore zeroes every key it
// decrypted, those it handed out included, so none of them signs again.
func TestCloseDestroysKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := open(t, t.TempDir())
	info, err := b.Import(ctx, []byte(knownKey))
	if err != nil {
		t.Fatal(err)
	}
	k, err := b.Key(ctx, info.Address)
	if err != nil {
		t.Fatal(err)
	}
	if k.Destroyed() {
		t.Fatal("a key just handed out is destroyed")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !k.Destroyed() {
		t.Error("Close left a key it handed out usable")
	}
	if _, err := b.Key(ctx, info.Address); err == nil {
		t.Error("Key after Close succeeded")
	}
}
