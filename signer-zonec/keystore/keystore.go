// Package keystore keeps signerd's keys in a local directory of encrypted
// key files, in go-ethereum's keystore format (Web3 Secret Storage v3:
// scrypt and AES-128-CTR), for development and tests. The files are those
// geth and clef write, so keys move between them and signerd.
//
// It is not for production: the passphrase sits in signerd's memory (or
// environment) for as long as it runs and the files sit on its disk. Use
// Vault (package vault) there.
//
// Only go-ethereum's encrypt and decrypt functions are used, not its
// KeyStore type, which watches the directory and caches accounts in
// goroutines of its own; and its data-level ones (EncryptDataV3,
// DecryptDataV3) where it can, so that the plaintext key bytes are in
// buffers this package clears.
package keystore

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	ethkeystore "github.com/ethereum/go-ethereum/accounts/keystore"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/config"
	signer "github.com/txfence/txfence/signer-zonec"
)

// Scrypt costs. Standard is go-ethereum's default for new keys (about a
// second and 256 MiB per encryption or decryption); Light is for tests
// only and cannot be set from the environment.
const (
	StandardScryptN = ethkeystore.StandardScryptN
	StandardScryptP = ethkeystore.StandardScryptP
	LightScryptN    = ethkeystore.LightScryptN
	LightScryptP    = ethkeystore.LightScryptP
)

// ErrKeyExists is returned when creating or importing a key whose
// address already has a file: keys are never overwritten.
var ErrKeyExists = errors.New("key already in the keystore")

// Config is the keystore, from TXFENCE_SIGNER_KEYSTORE_* variables.
type Config struct {
	// Dir holds the key files; it is created (mode 0700) when missing.
	Dir string `env:"DIR"`
	// PassphraseFile names a file whose content (without a trailing
	// newline) is the passphrase of every key; Passphrase gives it
	// directly. Exactly one is needed.
	PassphraseFile string        `env:"PASSPHRASE_FILE"`
	Passphrase     config.Secret `env:"PASSPHRASE"`
	// ScryptN and ScryptP are the scrypt cost of keys this backend
	// writes; zero takes the standard cost. Deliberately not bound to a
	// variable: only tests lower them.
	ScryptN, ScryptP int
}

// Validate refuses two passphrase sources.
func (c Config) Validate() error {
	if c.PassphraseFile != "" && c.Passphrase != "" {
		return errors.New("KEYSTORE_PASSPHRASE_FILE and KEYSTORE_PASSPHRASE exclude each other")
	}
	return nil
}

// passphrase reads the passphrase from where the config says.
func (c Config) passphrase() (string, error) {
	var p string
	switch {
	case c.PassphraseFile != "" && c.Passphrase != "":
		return "", c.Validate()
	case c.PassphraseFile != "":
		b, err := os.ReadFile(c.PassphraseFile)
		if err != nil {
			return "", fmt.Errorf("keystore passphrase: %w", err)
		}
		p = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		clear(b)
	case c.Passphrase != "":
		p = c.Passphrase.Reveal()
	default:
		return "", errors.New("keystore: set KEYSTORE_PASSPHRASE_FILE (or KEYSTORE_PASSPHRASE)")
	}
	if p == "" {
		return "", errors.New("keystore: the passphrase is empty")
	}
	return p, nil
}

// Backend is a keystore directory opened with its passphrase. It is safe
// for concurrent use.
type Backend struct {
	dir              string
	pass             string
	scryptN, scryptP int

	mu     sync.Mutex // also serializes decryption: each costs a scrypt
	cache  map[common.Address]*signer.Key
	closed bool
}

var _ signer.KeyBackend = (*Backend)(nil)

// Open opens the keystore cfg describes, creating its directory when
// missing. It decrypts nothing yet.
func Open(cfg Config) (*Backend, error) {
	if cfg.Dir == "" {
		return nil, errors.New("keystore: set KEYSTORE_DIR")
	}
	pass, err := cfg.passphrase()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	b := &Backend{dir: cfg.Dir, pass: pass, scryptN: cfg.ScryptN, scryptP: cfg.ScryptP, cache: map[common.Address]*signer.Key{}}
	if b.scryptN == 0 || b.scryptP == 0 {
		b.scryptN, b.scryptP = StandardScryptN, StandardScryptP
	}
	return b, nil
}

// Name is "keystore".
func (b *Backend) Name() string { return "keystore" }

// keyFile is one key file found in the directory.
type keyFile struct {
	path string
	addr common.Address
}

// files reads the address of every key file in the directory, from the
// file's own "address" field (Key checks it against the decrypted key).
// Files that are not key files (hidden, directories, other JSON) are
// skipped, as geth does.
func (b *Backend) files() ([]keyFile, error) {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	var out []keyFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(b.dir, name)
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("keystore: %w", err)
		}
		var head struct {
			Address string          `json:"address"`
			Crypto  json.RawMessage `json:"crypto"`
		}
		if json.Unmarshal(raw, &head) != nil || len(head.Crypto) == 0 || !common.IsHexAddress(head.Address) {
			continue
		}
		out = append(out, keyFile{path: p, addr: common.HexToAddress(head.Address)})
	}
	return out, nil
}

// List describes every key in the directory, once per address, without
// decrypting any.
func (b *Backend) List(ctx context.Context) ([]signer.KeyInfo, error) {
	files, err := b.files()
	if err != nil {
		return nil, err
	}
	var out []signer.KeyInfo
	seen := map[common.Address]bool{}
	for _, f := range files {
		if !seen[f.addr] {
			seen[f.addr] = true
			out = append(out, signer.KeyInfo{Address: f.addr, Backend: b.Name()})
		}
	}
	slices.SortFunc(out, func(x, y signer.KeyInfo) int { return bytes.Compare(x.Address[:], y.Address[:]) })
	return out, nil
}

// Key decrypts the key for addr (once; it is cached until Close). An
// address with no file is signer.ErrUnknownKey; two files for one address
// are refused rather than guessed between.
func (b *Backend) Key(ctx context.Context, addr common.Address) (*signer.Key, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("keystore is closed")
	}
	if k := b.cache[addr]; k != nil {
		return k, nil
	}
	files, err := b.files()
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, f := range files {
		if f.addr == addr {
			paths = append(paths, f.path)
		}
	}
	switch len(paths) {
	case 0:
		return nil, signer.UnknownKey(addr)
	case 1:
	default:
		return nil, fmt.Errorf("keystore: %d files hold %s (%s); keep one", len(paths), addr.Hex(), strings.Join(paths, ", "))
	}
	k, err := b.decrypt(paths[0], addr)
	if err != nil {
		return nil, err
	}
	b.cache[addr] = k
	return k, nil
}

func (b *Backend) decrypt(path string, addr common.Address) (*signer.Key, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("keystore: %w", err)
	}
	priv, err := decryptKeyFile(raw, b.pass)
	if errors.Is(err, ethkeystore.ErrDecrypt) {
		return nil, fmt.Errorf("keystore: cannot decrypt %s: wrong passphrase", path)
	}
	if err != nil {
		return nil, fmt.Errorf("keystore: decrypt %s: %w", path, err)
	}
	k, err := signer.NewKey(priv)
	if err != nil {
		return nil, fmt.Errorf("keystore: %s: %w", path, err)
	}
	if k.Address() != addr {
		k.Destroy()
		return nil, fmt.Errorf("keystore: %s says it holds %s but its key is %s; refusing it", path, addr.Hex(), k.Address().Hex())
	}
	return k, nil
}

// Close destroys every key the keystore decrypted (callers must not use
// them afterwards). Closing twice is harmless.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range b.cache {
		k.Destroy()
	}
	clear(b.cache)
	b.closed = true
	return nil
}

// Create generates a key, writes it encrypted, and describes it.
func (b *Backend) Create(ctx context.Context) (signer.KeyInfo, error) {
	priv, err := crypto.GenerateKey()
	if err != nil {
		return signer.KeyInfo{}, fmt.Errorf("generate key: %w", err)
	}
	return b.store(priv)
}

// Import writes the hex private key in hexKey (0x prefix and surrounding
// space allowed) encrypted and describes it. It clears hexKey. An address
// already in the keystore is ErrKeyExists.
func (b *Backend) Import(ctx context.Context, hexKey []byte) (signer.KeyInfo, error) {
	priv, err := signer.ParseHexKey(hexKey)
	if err != nil {
		return signer.KeyInfo{}, err
	}
	return b.store(priv)
}

// store writes priv to a new file named as geth names them
// (UTC--<time>--<address>), mode 0600, and destroys priv.
func (b *Backend) store(priv *ecdsa.PrivateKey) (signer.KeyInfo, error) {
	k, err := signer.NewKey(priv)
	if err != nil {
		return signer.KeyInfo{}, err
	}
	defer k.Destroy() // priv is k's now
	addr := k.Address()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return signer.KeyInfo{}, errors.New("keystore is closed")
	}
	files, err := b.files()
	if err != nil {
		return signer.KeyInfo{}, err
	}
	for _, f := range files {
		if f.addr == addr {
			return signer.KeyInfo{}, fmt.Errorf("keystore: %s: %w (%s)", addr.Hex(), ErrKeyExists, f.path)
		}
	}
	blob, err := encryptKeyFile(priv, addr, b.pass, b.scryptN, b.scryptP)
	if err != nil {
		return signer.KeyInfo{}, fmt.Errorf("keystore: encrypt: %w", err)
	}
	path := filepath.Join(b.dir, fileName(time.Now(), addr))
	if err := writeNew(path, blob); err != nil {
		return signer.KeyInfo{}, fmt.Errorf("keystore: %w", err)
	}
	return signer.KeyInfo{Address: addr, Backend: b.Name()}, nil
}

// fileName is geth's key file name: UTC--2006-01-02T15-04-05.000000000Z--<address hex>.
func fileName(t time.Time, addr common.Address) string {
	t = t.UTC()
	return fmt.Sprintf("UTC--%04d-%02d-%02dT%02d-%02d-%02d.%09dZ--%s",
		t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), hex.EncodeToString(addr[:]))
}

// writeNew writes a file that must not exist yet, durably.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrKeyExists)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// keyFileV3 is a key file in Web3 Secret Storage v3, as go-ethereum writes
// it (accounts/keystore: address without 0x, a random UUID, version 3).
type keyFileV3 struct {
	Address string                 `json:"address"`
	Crypto  ethkeystore.CryptoJSON `json:"crypto"`
	ID      string                 `json:"id"`
	Version int                    `json:"version"`
}

// decryptKeyFile decrypts a key file. Version 3 files, all that geth and
// clef have written for years, are decrypted here into a buffer that is
// cleared; older ones go through ethkeystore.DecryptKey, whose plaintext
// buffer is left to the collector.
func decryptKeyFile(keyJSON []byte, pass string) (*ecdsa.PrivateKey, error) {
	var head struct {
		Version any `json:"version"`
	}
	if err := json.Unmarshal(keyJSON, &head); err != nil {
		return nil, err
	}
	if v, ok := head.Version.(float64); !ok || v != 3 {
		ek, err := ethkeystore.DecryptKey(keyJSON, pass)
		if err != nil {
			return nil, err
		}
		return ek.PrivateKey, nil
	}
	var f keyFileV3
	if err := json.Unmarshal(keyJSON, &f); err != nil {
		return nil, err
	}
	if _, err := uuid.Parse(f.ID); err != nil {
		return nil, fmt.Errorf("key file id: %w", err)
	}
	plain, err := ethkeystore.DecryptDataV3(f.Crypto, pass)
	defer clear(plain)
	if err != nil {
		return nil, err
	}
	priv, err := crypto.ToECDSA(plain)
	if err != nil {
		return nil, fmt.Errorf("invalid key: %w", err)
	}
	return priv, nil
}

// encryptKeyFile is ethkeystore.EncryptKey with the plaintext key bytes in
// a buffer that is cleared.
func encryptKeyFile(priv *ecdsa.PrivateKey, addr common.Address, pass string, scryptN, scryptP int) ([]byte, error) {
	plain := crypto.FromECDSA(priv)
	defer clear(plain)
	auth := []byte(pass)
	defer clear(auth)
	cj, err := ethkeystore.EncryptDataV3(plain, auth, scryptN, scryptP)
	if err != nil {
		return nil, err
	}
	return json.Marshal(keyFileV3{Address: hex.EncodeToString(addr[:]), Crypto: cj, ID: uuid.New().String(), Version: 3})
}
