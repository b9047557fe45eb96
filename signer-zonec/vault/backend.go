package vault

import (
	"context"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/hashicorp/vault/api"

	signer "github.com/txfence/txfence/signer-zonec"
)

// Backend keeps signerd's keys in Vault (see the package comment). It is
// safe for concurrent use.
//
// Fail closed, at two levels. Vault as a whole: Key serves a key, cached
// or not, only when Vault has answered within HealthInterval as unsealed
// with signerd's token valid (a token self-lookup, or a key's own read);
// otherwise it asks Vault first and fails, with ErrSealed, ErrUnreachable
// or ErrDenied, when Vault does not vouch, and drops every cached key.
// Each key: a cached key is served only within KeyRecheckInterval of
// Vault last showing its secret, the very version it was unwrapped from;
// after that Key reads the secret again, and when it is gone (deleted,
// destroyed), has changed, or cannot be read, drops the key. A dropped
// key is destroyed at once, so a caller still holding it cannot sign with
// it; it is read and unwrapped afresh once Vault vouches for it again.
type Backend struct {
	cfg    Config
	client *api.Client
	log    *slog.Logger
	now    func() time.Time

	checkMu sync.Mutex // one check against Vault at a time; the others wait for its verdict

	mu      sync.Mutex
	vouched time.Time // when Vault last answered unsealed with a valid token
	cache   map[common.Address]*cachedKey
	closed  bool

	stopRenew context.CancelFunc
	renewDone chan struct{}
}

// cachedKey is a key unwrapped from one version of its secret.
type cachedKey struct {
	key     *signer.Key
	version secretVersion
	checked time.Time // when Vault last showed that version as the current one
}

// secretVersion names one version of a KV v2 secret. Version numbers
// start again at 1 when a secret is deleted with its metadata and written
// anew, so the version's creation time is part of the name.
type secretVersion struct {
	number  int
	created time.Time
}

func (v secretVersion) same(o secretVersion) bool {
	return v.number == o.number && v.created.Equal(o.created)
}

var _ signer.KeyBackend = (*Backend)(nil)

// Open connects to Vault with cfg, logs in (cert auth) or checks the token
// (token auth), and starts keeping the token alive when it is renewable.
// It fails when Vault is sealed, unreachable or refuses the credentials.
// Close it.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Backend, error) {
	if cfg.Addr == "" {
		return nil, errors.New("vault key backend: no VAULT_ADDR")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client, err := New(cfg)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg: cfg, client: client, log: log.With("component", "vault", "vault_addr", cfg.Addr),
		now: time.Now, cache: map[common.Address]*cachedKey{}, renewDone: make(chan struct{}),
	}
	var secret *api.Secret
	if cfg.Auth == AuthCert {
		secret, err = b.login(ctx)
	} else {
		secret, err = b.tokenSecret(ctx)
	}
	if err != nil {
		return nil, err
	}
	b.markVouched()
	renewCtx, cancel := context.WithCancel(context.Background())
	b.stopRenew = cancel
	go b.keepTokenAlive(renewCtx, secret)
	return b, nil
}

// Name is "vault-transit" or "vault-kv".
func (b *Backend) Name() string { return "vault-" + b.cfg.Mode }

// Client is the Vault client, for signerd's readiness check (Check).
func (b *Backend) Client() *api.Client { return b.client }

// secretPath is where addr's key lives under the KV mount.
func (b *Backend) secretPath(addr common.Address) string {
	return b.cfg.KVPrefix + "/" + strings.ToLower(addr.Hex())
}

// List describes the keys under the KV prefix, from their secret names,
// without reading or unwrapping any.
func (b *Backend) List(ctx context.Context) ([]signer.KeyInfo, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	s, err := b.client.Logical().ListWithContext(ctx, b.cfg.KVMount+"/metadata/"+b.cfg.KVPrefix)
	if err != nil {
		return nil, b.classify("list keys", err)
	}
	var out []signer.KeyInfo
	if s == nil || s.Data == nil {
		return out, nil // nothing stored yet
	}
	names, _ := s.Data["keys"].([]any)
	for _, n := range names {
		name, _ := n.(string)
		if strings.HasSuffix(name, "/") || !common.IsHexAddress(name) || !strings.HasPrefix(name, "0x") {
			continue // not one of ours
		}
		out = append(out, signer.KeyInfo{Address: common.HexToAddress(name), Backend: b.Name()})
	}
	return out, nil
}

// Key returns the key for addr, unwrapped inside signerd; see Backend on
// when it refuses. An address with no key is signer.ErrUnknownKey.
func (b *Backend) Key(ctx context.Context, addr common.Address) (*signer.Key, error) {
	if err := b.usable(); err != nil {
		return nil, err
	}
	if err := b.vouch(ctx); err != nil {
		return nil, err
	}
	if k := b.recentlyChecked(addr); k != nil {
		return k, nil
	}
	k, err := b.fetch(ctx, addr)
	if err != nil {
		// Whatever Vault holds for addr now (nothing, something else, or
		// no answer), it no longer vouches for the cached key.
		b.drop(addr, err)
		if errors.Is(err, ErrSealed) || errors.Is(err, ErrUnreachable) || errors.Is(err, ErrDenied) {
			b.distrust()
		}
		return nil, err
	}
	return k, nil
}

// recentlyChecked returns addr's cached key when Vault showed its secret
// unchanged within KeyRecheckInterval, nil otherwise.
func (b *Backend) recentlyChecked(addr common.Address) *signer.Key {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.cache[addr]
	if c == nil || b.now().Sub(c.checked) >= b.cfg.KeyRecheckInterval {
		return nil
	}
	return c.key
}

// fetch reads addr's secret and returns the cached key when the secret is
// still the version it was unwrapped from, or unwraps the secret read and
// caches that key instead of the old one, which it destroys.
func (b *Backend) fetch(ctx context.Context, addr common.Address) (*signer.Key, error) {
	op := "read key " + addr.Hex()
	s, err := b.client.KVv2(b.cfg.KVMount).Get(ctx, b.secretPath(addr))
	if errors.Is(err, api.ErrSecretNotFound) || (err == nil && s.Data == nil) { // never stored, deleted or destroyed
		return nil, signer.UnknownKey(addr)
	}
	if err != nil {
		return nil, b.classify(op, err)
	}
	if s.VersionMetadata == nil || s.VersionMetadata.Version == 0 {
		return nil, fmt.Errorf("%s: vault returned the secret without its version; refusing it", op)
	}
	version := secretVersion{number: s.VersionMetadata.Version, created: s.VersionMetadata.CreatedTime}
	now := b.now()
	b.mu.Lock()
	if c := b.cache[addr]; c != nil && c.version.same(version) {
		c.checked, b.vouched = now, now
		b.mu.Unlock()
		return c.key, nil
	}
	b.mu.Unlock()
	k, err := b.unwrapSecret(ctx, op, addr, s.Data)
	if err != nil {
		return nil, err
	}
	return b.keep(addr, k, version, now)
}

// keep caches k, unwrapped from version of addr's secret at now, and
// returns the key to serve.
func (b *Backend) keep(addr common.Address, k *signer.Key, version secretVersion, now time.Time) (*signer.Key, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		k.Destroy()
		return nil, errors.New("vault key backend is closed")
	}
	old := b.cache[addr]
	if old != nil && old.version.same(version) { // a concurrent Key got there first
		b.mu.Unlock()
		k.Destroy()
		return old.key, nil
	}
	b.cache[addr] = &cachedKey{key: k, version: version, checked: now}
	b.vouched = now // the read and unwrap just succeeded
	b.mu.Unlock()
	if old != nil {
		// Vault now holds another version of the secret: the key from the
		// old one is no longer vouched for, even if it is the same key.
		old.key.Destroy()
		b.log.Warn("key changed in vault: the cached key was destroyed and the stored one unwrapped afresh", "address", addr.Hex(), "version", version.number)
	}
	return k, nil
}

// drop removes addr's key from the cache and destroys it.
func (b *Backend) drop(addr common.Address, cause error) {
	b.mu.Lock()
	c := b.cache[addr]
	delete(b.cache, addr)
	b.mu.Unlock()
	if c == nil {
		return
	}
	c.key.Destroy()
	b.log.Warn("vault no longer vouches for a cached key: it was dropped and destroyed, and nothing signs with it until vault vouches for it again", "address", addr.Hex(), "err", cause)
}

// Close stops token renewal, destroys every key the backend unwrapped
// (those handed out included: callers must not use them afterwards) and
// revokes a token it logged in for. Closing twice is harmless.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	cached := b.cache
	b.cache = map[common.Address]*cachedKey{}
	b.mu.Unlock()
	for _, c := range cached {
		c.key.Destroy()
	}
	b.stopRenew()
	<-b.renewDone
	if b.cfg.Auth == AuthCert {
		// The token is signerd's own; an operator's token is not.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := b.client.Auth().Token().RevokeSelfWithContext(ctx, ""); err != nil {
			b.log.Warn("revoke vault token at close", "err", b.classify("revoke token", err))
		}
	}
	return nil
}

// Ready is signerd's readiness check: Vault answers, is initialized and
// unsealed, and still accepts signerd's token. A revoked or expired token
// fails it, as it would fail the next key read.
func (b *Backend) Ready(ctx context.Context) error {
	if err := Check(b.client)(ctx); err != nil {
		return err
	}
	if _, err := b.client.Auth().Token().LookupSelfWithContext(ctx); err != nil {
		return b.classify("vault no longer accepts signerd's token", err)
	}
	return nil
}

func (b *Backend) usable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("vault key backend is closed")
	}
	return nil
}

// vouch returns nil when Vault answered as unsealed with a valid token
// within HealthInterval, asking it when not.
func (b *Backend) vouch(ctx context.Context) error {
	if b.fresh() {
		return nil
	}
	b.checkMu.Lock()
	defer b.checkMu.Unlock()
	if b.fresh() { // checked while this call waited
		return nil
	}
	// A token self-lookup proves all three at once: a sealed Vault answers
	// 503, an invalid token 403, and no answer is no answer. Vault's
	// default policy grants it.
	if _, err := b.client.Auth().Token().LookupSelfWithContext(ctx); err != nil {
		b.distrust()
		return b.classify("vault key backend cannot vouch for its keys", err)
	}
	b.markVouched()
	return nil
}

func (b *Backend) fresh() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.vouched.IsZero() && b.now().Sub(b.vouched) < b.cfg.HealthInterval
}

func (b *Backend) markVouched() {
	b.mu.Lock()
	b.vouched = b.now()
	b.mu.Unlock()
}

// distrust forgets the last good check and drops and destroys every cached
// key: the next Key asks Vault and, once it answers, reads and unwraps the
// key afresh. A caller signing with a dropped key right now finishes
// first (Destroy waits for it); one that fetched it earlier gets an error.
func (b *Backend) distrust() {
	b.mu.Lock()
	b.vouched = time.Time{}
	cached := b.cache
	b.cache = map[common.Address]*cachedKey{}
	b.mu.Unlock()
	for _, c := range cached {
		c.key.Destroy()
	}
	if len(cached) > 0 {
		b.log.Warn("vault cannot vouch for signerd's keys: every cached key was dropped and destroyed", "keys", len(cached))
	}
}

// The fields of a key's KV secret.
const (
	fieldAddress    = "address"
	fieldMode       = "mode"
	fieldCiphertext = "ciphertext"
	fieldTransitKey = "transit_key"
	fieldPrivateKey = "private_key"
)

// unwrapSecret unwraps the key in data, addr's secret. The key must be
// stored in the backend's mode (a plain key found by a transit-mode
// backend is refused: the operator chose wrapping) and must belong to addr
// (a secret copied to another address's path would otherwise sign as
// someone else).
func (b *Backend) unwrapSecret(ctx context.Context, op string, addr common.Address, data map[string]any) (*signer.Key, error) {
	mode, _ := data[fieldMode].(string)
	if mode != b.cfg.Mode {
		return nil, fmt.Errorf("%s: stored in mode %q, and this backend runs in mode %q; refusing it", op, mode, b.cfg.Mode)
	}
	var raw []byte
	var err error
	switch mode {
	case ModeTransit:
		raw, err = b.unwrap(ctx, op, data)
	case ModeKV:
		h, _ := data[fieldPrivateKey].(string)
		raw, err = decodeHex(h)
		if err != nil {
			err = fmt.Errorf("%s: the stored private key is not hex", op)
		}
	}
	if err != nil {
		return nil, err
	}
	k, err := keyFromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if k.Address() != addr {
		k.Destroy()
		return nil, fmt.Errorf("%s: the key stored at %s/%s belongs to %s; refusing it", op, b.cfg.KVMount, b.secretPath(addr), k.Address().Hex())
	}
	return k, nil
}

// unwrap decrypts a transit-wrapped key. Vault's answer arrives as a
// base64 string inside a decoded JSON map, which Go cannot zero: the
// buffers this package decodes it in are cleared (by keyFromBytes), the
// strings wait for the collector.
func (b *Backend) unwrap(ctx context.Context, op string, data map[string]any) ([]byte, error) {
	ct, _ := data[fieldCiphertext].(string)
	if ct == "" {
		return nil, fmt.Errorf("%s: the secret has no ciphertext", op)
	}
	want := b.cfg.TransitMount + "/" + b.cfg.TransitKey
	if tk, _ := data[fieldTransitKey].(string); tk != want {
		return nil, fmt.Errorf("%s: wrapped with transit key %q, and this backend is configured with %q", op, tk, want)
	}
	s, err := b.client.Logical().WriteWithContext(ctx, b.cfg.TransitMount+"/decrypt/"+b.cfg.TransitKey, map[string]any{fieldCiphertext: ct})
	if err != nil {
		return nil, b.classify(op+": transit decrypt", err)
	}
	if s == nil || s.Data == nil {
		return nil, fmt.Errorf("%s: transit decrypt returned nothing", op)
	}
	pt, _ := s.Data["plaintext"].(string)
	b64 := []byte(pt)
	defer clear(b64)
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(raw, b64)
	if err != nil {
		clear(raw)
		return nil, fmt.Errorf("%s: transit decrypt returned no base64 plaintext", op)
	}
	return raw[:n], nil
}

// decodeHex decodes a hex key into a buffer of its own, which the caller
// clears (keyFromBytes does), and clears its copy of the hex digits.
func decodeHex(h string) ([]byte, error) {
	digits := []byte(h)
	defer clear(digits)
	raw := make([]byte, hex.DecodedLen(len(digits)))
	n, err := hex.Decode(raw, digits)
	if err != nil {
		clear(raw)
		return nil, err
	}
	return raw[:n], nil
}

// keyFromBytes makes a Key of the 32-byte scalar in raw and clears raw,
// to its capacity, whether or not it holds a valid key.
func keyFromBytes(raw []byte) (*signer.Key, error) {
	defer clear(raw[:cap(raw)])
	priv, err := crypto.ToECDSA(raw)
	if err != nil {
		return nil, errors.New("the stored private key is not a secp256k1 key")
	}
	return signer.NewKey(priv)
}

// Create generates a secp256k1 key, stores it (wrapped in mode transit),
// and describes it. The key never leaves Vault and this function.
func (b *Backend) Create(ctx context.Context) (signer.KeyInfo, error) {
	priv, err := crypto.GenerateKey()
	if err != nil {
		return signer.KeyInfo{}, fmt.Errorf("generate key: %w", err)
	}
	return b.store(ctx, priv)
}

// Import stores the hex private key in hexKey (0x prefix and surrounding
// space allowed) and describes it. It clears hexKey. An address already
// stored is ErrKeyExists: keys are never overwritten.
func (b *Backend) Import(ctx context.Context, hexKey []byte) (signer.KeyInfo, error) {
	priv, err := signer.ParseHexKey(hexKey)
	if err != nil {
		return signer.KeyInfo{}, err
	}
	return b.store(ctx, priv)
}

// store writes priv under its address, creating the secret only if none
// exists (check-and-set 0), and destroys priv.
func (b *Backend) store(ctx context.Context, priv *ecdsa.PrivateKey) (signer.KeyInfo, error) {
	if err := b.usable(); err != nil {
		return signer.KeyInfo{}, err
	}
	k, err := signer.NewKey(priv)
	if err != nil {
		return signer.KeyInfo{}, err
	}
	defer k.Destroy()
	addr := k.Address()
	op := "store key " + addr.Hex()
	where := b.cfg.KVMount + "/" + b.secretPath(addr)
	// Refuse an address already stored (deleted versions included) with
	// a clear error; a token that may only create would otherwise be
	// told "permission denied". The write below is check-and-set 0
	// anyway, so a concurrent store cannot overwrite either.
	switch _, err := b.client.KVv2(b.cfg.KVMount).GetMetadata(ctx, b.secretPath(addr)); {
	case err == nil:
		return signer.KeyInfo{}, fmt.Errorf("%s: %w at %s", op, ErrKeyExists, where)
	case errors.Is(err, api.ErrSecretNotFound):
	default:
		if err := b.classify(op, err); !errors.Is(err, ErrDenied) {
			return signer.KeyInfo{}, err // a policy without metadata read still gets to try the write
		}
	}
	raw := crypto.FromECDSA(priv)
	defer clear(raw)
	data := map[string]any{fieldAddress: strings.ToLower(addr.Hex()), fieldMode: b.cfg.Mode}
	switch b.cfg.Mode {
	case ModeTransit:
		// encoding/json writes a []byte as the base64 transit expects,
		// without a string copy of the key that could not be cleared.
		s, err := b.client.Logical().WriteWithContext(ctx, b.cfg.TransitMount+"/encrypt/"+b.cfg.TransitKey,
			map[string]any{"plaintext": raw})
		if err != nil {
			return signer.KeyInfo{}, b.classify(op+": transit encrypt", err)
		}
		var ct string
		if s != nil {
			ct, _ = s.Data[fieldCiphertext].(string)
		}
		if ct == "" {
			return signer.KeyInfo{}, fmt.Errorf("%s: transit encrypt returned no ciphertext", op)
		}
		data[fieldCiphertext] = ct
		data[fieldTransitKey] = b.cfg.TransitMount + "/" + b.cfg.TransitKey
	case ModeKV:
		// The hex key as a JSON string built in a buffer that is
		// cleared, rather than a Go string that cannot be.
		quoted := make([]byte, 2+hex.EncodedLen(len(raw)))
		defer clear(quoted)
		quoted[0], quoted[len(quoted)-1] = '"', '"'
		hex.Encode(quoted[1:len(quoted)-1], raw)
		data[fieldPrivateKey] = json.RawMessage(quoted)
	}
	if _, err := b.client.KVv2(b.cfg.KVMount).Put(ctx, b.secretPath(addr), data, api.WithCheckAndSet(0)); err != nil {
		err = b.classify(op, err)
		if errors.Is(err, ErrKeyExists) {
			return signer.KeyInfo{}, fmt.Errorf("%s: %w at %s", op, ErrKeyExists, where)
		}
		return signer.KeyInfo{}, err
	}
	b.log.Info("key stored", "address", addr.Hex(), "mode", b.cfg.Mode)
	return signer.KeyInfo{Address: addr, Backend: b.Name()}, nil
}
