package signer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/signer-zonec/ethtx"
)

// Key is a private key held inside signerd. Its fields are unexported, it
// cannot be compared (so no code can probe it by equality), it prints and
// logs as its address only, and nothing outside this package can read the
// private scalar or sign with it: the only way to use a Key is signTx
// below, reached through the policy and double-sign checks of Service.
type Key struct {
	_ [0]func() // incomparable
	// mu lets Destroy wait for signatures in progress: a backend may drop
	// a key (Vault no longer vouches for it) while a request signs with it.
	mu   sync.RWMutex
	priv *ecdsa.PrivateKey
	addr common.Address
}

// NewKey takes ownership of priv: the caller must drop its reference. Key
// backends call it once per key they unwrap.
//
// The key's scalar is read through ecdsa.PrivateKey.D, deprecated since Go
// 1.26 in favour of PrivateKey.Bytes, which supports the NIST curves only:
// secp256k1 keys (go-ethereum's) have no other access, and Destroy must
// reach the scalar's memory to overwrite it.
func NewKey(priv *ecdsa.PrivateKey) (*Key, error) {
	//lint:ignore SA1019 secp256k1 keys have no other access to the scalar (see above)
	if priv == nil || priv.D == nil || priv.D.Sign() == 0 {
		return nil, errors.New("empty private key")
	}
	if priv.Curve != crypto.S256() {
		return nil, errors.New("not a secp256k1 key")
	}
	return &Key{priv: priv, addr: crypto.PubkeyToAddress(priv.PublicKey)}, nil
}

// ParseHexKey parses a hex secp256k1 private key (0x prefix and
// surrounding space allowed) and clears hexKey. Errors never quote the
// input. Both key backends import keys through it, so an operator's typed
// or pasted key is read, and wiped, the same way whichever holds it.
func ParseHexKey(hexKey []byte) (*ecdsa.PrivateKey, error) {
	defer clear(hexKey)
	// Trimmed in place: a string copy could not be cleared.
	h := bytes.TrimSpace(hexKey)
	h = bytes.TrimPrefix(bytes.TrimPrefix(h, []byte("0x")), []byte("0X"))
	if len(h) != 64 {
		return nil, fmt.Errorf("a private key is 64 hex digits; got %d characters", len(h))
	}
	raw := make([]byte, 32)
	defer clear(raw)
	if _, err := hex.Decode(raw, h); err != nil {
		return nil, errors.New("the private key is not hex")
	}
	priv, err := crypto.ToECDSA(raw)
	if err != nil {
		return nil, errors.New("not a valid secp256k1 private key")
	}
	return priv, nil
}

// Address is the key's Ethereum address.
func (k *Key) Address() common.Address { return k.addr }

// String shows the address only.
func (k *Key) String() string { return "key(" + k.addr.Hex() + ")" }

// LogValue shows the address only.
func (k *Key) LogValue() slog.Value { return slog.StringValue(k.addr.Hex()) }

// Destroy overwrites the private scalar as far as Go allows (big.Int words
// in place; copies the runtime made earlier cannot be reached) and makes the
// key unusable: a caller still holding it gets an error, never a
// signature. It waits for signatures in progress. Backends call it
// whenever a key leaves their cache, and at shutdown.
func (k *Key) Destroy() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.priv == nil {
		return
	}
	//lint:ignore SA1019 the scalar's own memory is what must be overwritten
	words := k.priv.D.Bits()
	clear(words)
	//lint:ignore SA1019 as above
	k.priv.D.SetInt64(0)
	k.priv = nil
}

// Destroyed reports whether Destroy has run, after which the key cannot
// sign.
func (k *Key) Destroyed() bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.priv == nil
}

// signTx signs tx with the key. Unexported: only Service signs, after
// policy and double-sign protection have passed.
func (k *Key) signTx(tx ethtx.Tx) (*ethtx.Signed, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.priv == nil {
		// Its backend dropped it (Vault no longer vouches for it, or
		// shutdown) after the caller fetched it.
		return nil, errs.Errorf(errs.Unavailable, "key backend unavailable: the key of %s was dropped; nothing was signed", k.addr.Hex())
	}
	// go-ethereum's secp256k1 signing, which ethtx uses, takes RFC 6979
	// deterministic nonces: the same transaction signed twice gives the
	// same signature.
	return tx.Sign(k.priv)
}

// KeyInfo describes a key without touching it.
type KeyInfo struct {
	Address common.Address
	Backend string // "vault-transit", "vault-kv", "keystore"
}

// KeyBackend holds signerd's keys. Implementations live in their own
// packages (vault, keystore) and are the only code that sees key material
// before it becomes a Key.
type KeyBackend interface {
	// Name identifies the backend in /v1/keys and the audit log.
	Name() string
	// List describes every key the backend holds, without unwrapping any.
	List(ctx context.Context) ([]KeyInfo, error)
	// Key returns the key for addr. It must fail, and never return a
	// cached key, while the backend cannot vouch for it (Vault sealed or
	// unreachable, token expired): signerd fails closed.
	Key(ctx context.Context, addr common.Address) (*Key, error)
	// Close destroys every key the backend handed out or cached.
	Close() error
}

// ErrUnknownKey is returned by KeyBackend.Key for an address the backend
// does not hold.
var ErrUnknownKey = errors.New("no such key")

// UnknownKey wraps ErrUnknownKey with the address.
func UnknownKey(addr common.Address) error {
	return fmt.Errorf("%w: %s", ErrUnknownKey, addr.Hex())
}
