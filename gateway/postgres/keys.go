package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/errs"
)

// Store is gatewayd's database.
type Store struct{ pool *pgxpool.Pool }

// New is a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Scope is what an API key may do.
type Scope string

// The scopes.
const (
	ScopeTxWrite    Scope = "tx:write"
	ScopeTxRead     Scope = "tx:read"
	ScopeApprovals  Scope = "approvals"
	ScopeWebhooks   Scope = "webhooks"
	ScopeAdmin      Scope = "admin"
	ScopeLedgerRead Scope = "ledger:read"
)

// Scopes lists every scope.
var Scopes = []Scope{ScopeTxWrite, ScopeTxRead, ScopeApprovals, ScopeWebhooks, ScopeAdmin, ScopeLedgerRead}

// SignerRef names one signer on one chain.
type SignerRef struct {
	ChainID uint64
	Address common.Address
}

func (s SignerRef) String() string {
	return fmt.Sprintf("%d:%s", s.ChainID, strings.ToLower(s.Address.Hex()))
}

// ParseSignerRef reads a signer written "chain_id:0xaddress".
func ParseSignerRef(s string) (SignerRef, error) {
	chain, addr, ok := strings.Cut(s, ":")
	id, err := strconv.ParseUint(chain, 10, 63)
	if !ok || err != nil || id == 0 || !strings.HasPrefix(addr, "0x") || !common.IsHexAddress(addr) {
		return SignerRef{}, errs.Errorf(errs.Invalid, "%q is not a signer written chain_id:0xaddress", s)
	}
	return SignerRef{ChainID: id, Address: common.HexToAddress(addr)}, nil
}

// Tenant is a customer of the deployment: it owns signers and keys.
type Tenant struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
}

// CreateTenant makes a tenant; a name in use is errs.Conflict.
func (s *Store) CreateTenant(ctx context.Context, name string) (Tenant, error) {
	t := Tenant{ID: uuid.New(), Name: name}
	err := s.pool.QueryRow(ctx, `INSERT INTO tenant (tenant_id, name) VALUES ($1, $2) RETURNING created_at`, t.ID, name).Scan(&t.CreatedAt)
	if isUniqueViolation(err) {
		return t, errs.Errorf(errs.Conflict, "a tenant named %q exists", name)
	}
	if err != nil {
		return t, fmt.Errorf("create tenant %q: %w", name, err)
	}
	return t, nil
}

// AssignSigner gives a signer to a tenant. A signer another tenant owns is
// errs.Conflict; assigning it to its owner again changes nothing.
func (s *Store) AssignSigner(ctx context.Context, tenant uuid.UUID, signer SignerRef) error {
	var owner uuid.UUID
	err := s.pool.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO tenant_signer (chain_id, signer, tenant_id) VALUES ($1, $2, $3)
			ON CONFLICT (chain_id, signer) DO NOTHING RETURNING tenant_id
		)
		SELECT tenant_id FROM ins UNION ALL SELECT tenant_id FROM tenant_signer WHERE chain_id = $1 AND signer = $2
		LIMIT 1`, int64(signer.ChainID), signer.Address.Bytes(), tenant).Scan(&owner)
	if err != nil {
		return fmt.Errorf("assign signer %s: %w", signer, err)
	}
	if owner != tenant {
		return errs.Errorf(errs.Conflict, "signer %s belongs to another tenant", signer)
	}
	return nil
}

// GetTenant reads a tenant.
func (s *Store) GetTenant(ctx context.Context, id uuid.UUID) (Tenant, error) {
	t := Tenant{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT name, created_at FROM tenant WHERE tenant_id = $1`, id).Scan(&t.Name, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no tenant %s", id)
	}
	return t, err
}

// TenantByName reads a tenant by its name.
func (s *Store) TenantByName(ctx context.Context, name string) (Tenant, error) {
	t := Tenant{Name: name}
	err := s.pool.QueryRow(ctx, `SELECT tenant_id, created_at FROM tenant WHERE name = $1`, name).Scan(&t.ID, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no tenant named %q", name)
	}
	return t, err
}

// TenantSigners lists the signers tenant owns, by chain and address.
func (s *Store) TenantSigners(ctx context.Context, tenant uuid.UUID) ([]SignerRef, error) {
	rows, err := s.pool.Query(ctx, `SELECT chain_id, signer FROM tenant_signer WHERE tenant_id = $1 ORDER BY chain_id, signer`, tenant)
	if err != nil {
		return nil, fmt.Errorf("signers of tenant %s: %w", tenant, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (SignerRef, error) {
		var chain int64
		var addr []byte
		err := r.Scan(&chain, &addr)
		return SignerRef{ChainID: uint64(chain), Address: common.BytesToAddress(addr)}, err
	})
}

// OwnsSigner reports whether tenant owns signer.
func (s *Store) OwnsSigner(ctx context.Context, tenant uuid.UUID, signer SignerRef) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tenant_signer WHERE chain_id = $1 AND signer = $2 AND tenant_id = $3)`,
		int64(signer.ChainID), signer.Address.Bytes(), tenant).Scan(&ok)
	return ok, err
}

// requireOwned fails with errs.Invalid, naming them, unless tenant owns
// every one of signers (one query, whatever their number).
func (s *Store) requireOwned(ctx context.Context, tenant uuid.UUID, signers []SignerRef) error {
	if len(signers) == 0 {
		return nil
	}
	chains, addrs := make([]int64, len(signers)), make([][]byte, len(signers))
	for i, sg := range signers {
		chains[i], addrs[i] = int64(sg.ChainID), sg.Address.Bytes()
	}
	rows, err := s.pool.Query(ctx, `SELECT c, a FROM unnest($2::bigint[], $3::bytea[]) AS r (c, a)
		WHERE NOT EXISTS (SELECT 1 FROM tenant_signer t WHERE t.chain_id = r.c AND t.signer = r.a AND t.tenant_id = $1)`, tenant, chains, addrs)
	if err != nil {
		return fmt.Errorf("signers of tenant %s: %w", tenant, err)
	}
	var foreign []string
	var chain int64
	var addr []byte
	if _, err := pgx.ForEachRow(rows, []any{&chain, &addr}, func() error {
		foreign = append(foreign, SignerRef{ChainID: uint64(chain), Address: common.BytesToAddress(addr)}.String())
		return nil
	}); err != nil {
		return fmt.Errorf("signers of tenant %s: %w", tenant, err)
	}
	if len(foreign) > 0 {
		return errs.Errorf(errs.Invalid, "signers: %s not the tenant's", strings.Join(foreign, ", "))
	}
	return nil
}

// NewKey is what a key is made with.
type NewKey struct {
	Tenant uuid.UUID
	Name   string
	Scopes []Scope
	// Signers limits the key to some of its tenant's signers; empty: all.
	Signers   []SignerRef
	ExpiresAt *time.Time
}

// Key is a stored API key, without its secret.
type Key struct {
	ID        uuid.UUID
	Tenant    uuid.UUID
	Name      string
	Scopes    []Scope
	Signers   []SignerRef
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
	// LastUsedAt is when the key last authenticated, to LastUsedEvery.
	LastUsedAt *time.Time
}

// Has reports whether the key carries scope.
func (k *Key) Has(scope Scope) bool { return slices.Contains(k.Scopes, scope) }

// MayUse reports whether the key may act for signer (its tenant must own
// the signer as well: see OwnsSigner).
func (k *Key) MayUse(signer SignerRef) bool {
	return len(k.Signers) == 0 || slices.Contains(k.Signers, signer)
}

// Restricted reports whether the key is limited to some of its tenant's
// signers.
func (k *Key) Restricted() bool { return len(k.Signers) > 0 }

// CoversSigners reports whether a signer filter is within the key's
// reach: every signer of it is one the key may use. An empty filter means
// every signer of the tenant, now and later, which only an unrestricted
// key covers.
func (k *Key) CoversSigners(filter []SignerRef) bool {
	if !k.Restricted() {
		return true
	}
	if len(filter) == 0 {
		return false
	}
	for _, s := range filter {
		if !k.MayUse(s) {
			return false
		}
	}
	return true
}

// Covers reports whether the key may grant, see and revoke other: other
// has no scope the key lacks and no signer beyond the key's reach. A key
// limited to signer A cannot mint an unrestricted key, nor see or revoke
// the tenant's wider keys.
func (k *Key) Covers(other Key) bool {
	for _, sc := range other.Scopes {
		if !k.Has(sc) {
			return false
		}
	}
	return k.CoversSigners(other.Signers)
}

// keyPrefix starts every API key, so that a leaked one is recognisable
// (secret scanners) and a wrong string is refused before any lookup.
const keyPrefix = "txf_"

// CreateKey makes an API key and returns it with its token, the only time
// the token exists outside the caller: only its secret's hash is stored.
// The key's signers must belong to its tenant.
func (s *Store) CreateKey(ctx context.Context, nk NewKey) (Key, string, error) {
	var problems []string
	if nk.Name == "" || len(nk.Name) > 100 {
		problems = append(problems, "name: 1 to 100 characters")
	}
	if len(nk.Scopes) == 0 {
		problems = append(problems, "scopes: at least one")
	}
	for _, sc := range nk.Scopes {
		if !slices.Contains(Scopes, sc) {
			problems = append(problems, fmt.Sprintf("scopes: %q is not a scope", sc))
		}
	}
	if nk.ExpiresAt != nil && !nk.ExpiresAt.After(time.Now()) {
		problems = append(problems, "expires_at: in the past")
	}
	if len(problems) > 0 {
		return Key{}, "", errs.E(errs.Invalid, strings.Join(problems, "; "))
	}
	if err := s.requireOwned(ctx, nk.Tenant, nk.Signers); err != nil {
		return Key{}, "", err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return Key{}, "", err
	}
	k := Key{ID: uuid.New(), Tenant: nk.Tenant, Name: nk.Name, Scopes: nk.Scopes, Signers: nk.Signers, ExpiresAt: nk.ExpiresAt}
	hash := sha256.Sum256(secret)
	err := s.pool.QueryRow(ctx, `INSERT INTO api_key (key_id, tenant_id, name, secret_hash, scopes, signers, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at`,
		k.ID, k.Tenant, k.Name, hash[:], scopeStrings(k.Scopes), signerStrings(k.Signers), k.ExpiresAt).Scan(&k.CreatedAt)
	if err != nil {
		return Key{}, "", fmt.Errorf("create key %q: %w", nk.Name, err)
	}
	token := keyPrefix + base64.RawURLEncoding.EncodeToString(k.ID[:]) + "_" + base64.RawURLEncoding.EncodeToString(secret)
	return k, token, nil
}

// ErrBadKey: the token is not a live key (malformed, unknown, wrong
// secret, revoked or expired). Callers answer 401 without saying which.
var ErrBadKey = errs.E(errs.Unauthorized, "the API key is not valid")

// LastUsedEvery is how often at most a key's last_used_at is written: a
// flood of requests with one key writes once a minute.
const LastUsedEvery = time.Minute

// Authenticate returns the live key a token names. Every failure is
// ErrBadKey; the secret is compared in constant time. It reads, verifies,
// and only then writes last_used_at, at most once per LastUsedEvery: a
// token with a known key id and a wrong secret, however many, writes
// nothing.
func (s *Store) Authenticate(ctx context.Context, token string) (Key, error) {
	id, secret, ok := parseToken(token)
	if !ok {
		return Key{}, ErrBadKey
	}
	var stored []byte
	k, err := scanKey(s.pool.QueryRow(ctx, `
		SELECT secret_hash, `+keyColumns+` FROM api_key
		WHERE key_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, id), &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrBadKey
	}
	if err != nil {
		return Key{}, fmt.Errorf("authenticate: %w", err)
	}
	hash := sha256.Sum256(secret)
	if subtle.ConstantTimeCompare(hash[:], stored) != 1 {
		return Key{}, ErrBadKey
	}
	if k.LastUsedAt == nil || time.Since(*k.LastUsedAt) >= LastUsedEvery {
		// The condition again in SQL: nodes racing write once.
		if _, err := s.pool.Exec(ctx, `UPDATE api_key SET last_used_at = now()
			WHERE key_id = $1 AND (last_used_at IS NULL OR last_used_at <= now() - $2::interval)`, id, LastUsedEvery); err != nil {
			return Key{}, fmt.Errorf("authenticate: record the key's use: %w", err)
		}
	}
	return k, nil
}

// TokenKeyID is the key id a well-formed token names, whether or not its
// secret is right: what failed attempts are counted by.
func TokenKeyID(token string) (uuid.UUID, bool) {
	id, _, ok := parseToken(token)
	return id, ok
}

// parseToken splits "txf_<key id>_<secret>", both base64url (whose
// alphabet has "_" too: the key id's 22 characters are counted, not cut
// at a separator).
func parseToken(token string) (uuid.UUID, []byte, bool) {
	const idLen = 22 // 16 bytes, unpadded base64
	rest, ok := strings.CutPrefix(token, keyPrefix)
	if !ok || len(rest) < idLen+1 || rest[idLen] != '_' {
		return uuid.UUID{}, nil, false
	}
	idPart, secretPart := rest[:idLen], rest[idLen+1:]
	raw, err := base64.RawURLEncoding.DecodeString(idPart)
	if err != nil || len(raw) != 16 {
		return uuid.UUID{}, nil, false
	}
	secret, err := base64.RawURLEncoding.DecodeString(secretPart)
	if err != nil || len(secret) != 32 {
		return uuid.UUID{}, nil, false
	}
	return uuid.UUID(raw), secret, true
}

// RevokeKey revokes one of tenant's keys at once, if reach allows it;
// revoking it again keeps the first time. A key of another tenant, or one
// reach refuses, is errs.NotFound.
func (s *Store) RevokeKey(ctx context.Context, tenant, id uuid.UUID, reach func(Key) bool) (Key, error) {
	var k Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_key WHERE key_id = $1 AND tenant_id = $2 FOR UPDATE`, id, tenant))
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !reach(k) {
			return errs.Errorf(errs.NotFound, "no key %s", id)
		}
		if err != nil {
			return err
		}
		k, err = scanKey(tx.QueryRow(ctx, `UPDATE api_key SET revoked_at = coalesce(revoked_at, now())
			WHERE key_id = $1 RETURNING `+keyColumns, id))
		return err
	})
	return k, err
}

// Keys lists tenant's keys, oldest first.
func (s *Store) Keys(ctx context.Context, tenant uuid.UUID) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_key WHERE tenant_id = $1 ORDER BY created_at, key_id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) { return scanKey(r) })
}

const keyColumns = `key_id, tenant_id, name, scopes, signers, expires_at, revoked_at, created_at, last_used_at`

// scanKey reads keyColumns, after the lead destinations.
func scanKey(row pgx.Row, lead ...any) (Key, error) {
	var k Key
	var scopes, signers []string
	if err := row.Scan(append(lead, &k.ID, &k.Tenant, &k.Name, &scopes, &signers, &k.ExpiresAt, &k.RevokedAt, &k.CreatedAt, &k.LastUsedAt)...); err != nil {
		return k, err
	}
	for _, sc := range scopes {
		k.Scopes = append(k.Scopes, Scope(sc))
	}
	for _, sg := range signers {
		ref, err := ParseSignerRef(sg)
		if err != nil {
			return k, fmt.Errorf("key %s: stored signer: %w", k.ID, err)
		}
		k.Signers = append(k.Signers, ref)
	}
	return k, nil
}

func scopeStrings(scopes []Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}

func signerStrings(signers []SignerRef) []string {
	if len(signers) == 0 {
		return nil
	}
	out := make([]string, len(signers))
	for i, s := range signers {
		out[i] = s.String()
	}
	return out
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
