package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/shared/errs"
)

// The statements of queries/keys.sql.
var (
	qCreateTenant    = Queries.Use("CreateTenant")
	qAssignSigner    = Queries.Use("AssignSigner")
	qGetTenant       = Queries.Use("GetTenant")
	qTenantByName    = Queries.Use("TenantByName")
	qTenantSigners   = Queries.Use("TenantSigners")
	qForeignSigners  = Queries.Use("ForeignSigners")
	qCreateKey       = Queries.Use("CreateKey")
	qAuthenticateKey = Queries.Use("AuthenticateKey")
	qRecordKeyUse    = Queries.Use("RecordKeyUse")
	qLockKey         = Queries.Use("LockKey")
	qRevokeKey       = Queries.Use("RevokeKey")
	qKeys            = Queries.Use("Keys")
)

// Store is gatewayd's database.
type Store struct{ pool *pgxpool.Pool }

// New is a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// CreateTenant makes a tenant; a name in use is errs.Conflict.
func (s *Store) CreateTenant(ctx context.Context, name string) (gateway.Tenant, error) {
	t := gateway.Tenant{ID: uuid.New(), Name: name}
	err := s.pool.QueryRow(ctx, qCreateTenant.SQL, t.ID, name).Scan(&t.CreatedAt)
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
func (s *Store) AssignSigner(ctx context.Context, tenant uuid.UUID, signer gateway.SignerRef) error {
	var owner uuid.UUID
	err := s.pool.QueryRow(ctx, qAssignSigner.SQL, int64(signer.ChainID), signer.Address.Bytes(), tenant).Scan(&owner)
	if err != nil {
		return fmt.Errorf("assign signer %s: %w", signer, err)
	}
	if owner != tenant {
		return errs.Errorf(errs.Conflict, "signer %s belongs to another tenant", signer)
	}
	return nil
}

// GetTenant reads a tenant.
func (s *Store) GetTenant(ctx context.Context, id uuid.UUID) (gateway.Tenant, error) {
	t := gateway.Tenant{ID: id}
	err := s.pool.QueryRow(ctx, qGetTenant.SQL, id).Scan(&t.Name, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no tenant %s", id)
	}
	return t, err
}

// TenantByName reads a tenant by its name.
func (s *Store) TenantByName(ctx context.Context, name string) (gateway.Tenant, error) {
	t := gateway.Tenant{Name: name}
	err := s.pool.QueryRow(ctx, qTenantByName.SQL, name).Scan(&t.ID, &t.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, errs.Errorf(errs.NotFound, "no tenant named %q", name)
	}
	return t, err
}

// TenantSigners lists the signers tenant owns, by chain and address.
func (s *Store) TenantSigners(ctx context.Context, tenant uuid.UUID) ([]gateway.SignerRef, error) {
	rows, err := s.pool.Query(ctx, qTenantSigners.SQL, tenant)
	if err != nil {
		return nil, fmt.Errorf("signers of tenant %s: %w", tenant, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (gateway.SignerRef, error) {
		var chain int64
		var addr []byte
		err := r.Scan(&chain, &addr)
		return gateway.SignerRef{ChainID: uint64(chain), Address: common.BytesToAddress(addr)}, err
	})
}

// requireOwned fails with errs.Invalid, naming them, unless tenant owns
// every one of signers (one query, whatever their number).
func (s *Store) requireOwned(ctx context.Context, tenant uuid.UUID, signers []gateway.SignerRef) error {
	if len(signers) == 0 {
		return nil
	}
	chains, addrs := make([]int64, len(signers)), make([][]byte, len(signers))
	for i, sg := range signers {
		chains[i], addrs[i] = int64(sg.ChainID), sg.Address.Bytes()
	}
	rows, err := s.pool.Query(ctx, qForeignSigners.SQL, tenant, chains, addrs)
	if err != nil {
		return fmt.Errorf("signers of tenant %s: %w", tenant, err)
	}
	var foreign []string
	var chain int64
	var addr []byte
	if _, err := pgx.ForEachRow(rows, []any{&chain, &addr}, func() error {
		foreign = append(foreign, gateway.SignerRef{ChainID: uint64(chain), Address: common.BytesToAddress(addr)}.String())
		return nil
	}); err != nil {
		return fmt.Errorf("signers of tenant %s: %w", tenant, err)
	}
	if len(foreign) > 0 {
		return errs.Errorf(errs.Invalid, "signers: %s not the tenant's", strings.Join(foreign, ", "))
	}
	return nil
}

// CreateKey makes an API key and returns it with its token, the only time
// the token exists outside the caller: only its secret's hash is stored.
// The key's signers must belong to its tenant.
func (s *Store) CreateKey(ctx context.Context, nk gateway.NewKey) (gateway.Key, string, error) {
	if err := nk.Check(time.Now()); err != nil {
		return gateway.Key{}, "", err
	}
	if err := s.requireOwned(ctx, nk.Tenant, nk.Signers); err != nil {
		return gateway.Key{}, "", err
	}
	k := gateway.Key{ID: uuid.New(), Tenant: nk.Tenant, Name: nk.Name, Scopes: nk.Scopes, Signers: nk.Signers, ExpiresAt: nk.ExpiresAt}
	token, hash, err := gateway.NewToken(k.ID)
	if err != nil {
		return gateway.Key{}, "", err
	}
	err = s.pool.QueryRow(ctx, qCreateKey.SQL,
		k.ID, k.Tenant, k.Name, hash[:], scopeStrings(k.Scopes), gateway.SignerStrings(k.Signers), k.ExpiresAt).Scan(&k.CreatedAt)
	if err != nil {
		return gateway.Key{}, "", fmt.Errorf("create key %q: %w", nk.Name, err)
	}
	return k, token, nil
}

// Authenticate returns the live key a token names. Every failure is
// ErrBadKey; the secret is compared in constant time. It reads, verifies,
// and only then writes last_used_at, at most once per LastUsedEvery: a
// token with a known key id and a wrong secret, however many, writes
// nothing.
func (s *Store) Authenticate(ctx context.Context, token string) (gateway.Key, error) {
	id, secret, ok := gateway.ParseToken(token)
	if !ok {
		return gateway.Key{}, gateway.ErrBadKey
	}
	var stored []byte
	k, err := scanKey(s.pool.QueryRow(ctx, qAuthenticateKey.SQL, id), &stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return gateway.Key{}, gateway.ErrBadKey
	}
	if err != nil {
		return gateway.Key{}, fmt.Errorf("authenticate: %w", err)
	}
	if !gateway.SecretMatches(secret, stored) {
		return gateway.Key{}, gateway.ErrBadKey
	}
	if k.LastUsedAt == nil || time.Since(*k.LastUsedAt) >= gateway.LastUsedEvery {
		// The condition again in SQL: nodes racing write once.
		if _, err := s.pool.Exec(ctx, qRecordKeyUse.SQL, id, gateway.LastUsedEvery); err != nil {
			return gateway.Key{}, fmt.Errorf("authenticate: record the key's use: %w", err)
		}
	}
	return k, nil
}

// RevokeKey revokes one of tenant's keys at once, if reach allows it;
// revoking it again keeps the first time. A key of another tenant, or one
// reach refuses, is errs.NotFound.
func (s *Store) RevokeKey(ctx context.Context, tenant, id uuid.UUID, reach func(gateway.Key) bool) (gateway.Key, error) {
	var k gateway.Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, qLockKey.SQL, id, tenant))
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !reach(k) {
			return errs.Errorf(errs.NotFound, "no key %s", id)
		}
		if err != nil {
			return err
		}
		k, err = scanKey(tx.QueryRow(ctx, qRevokeKey.SQL, id))
		return err
	})
	return k, err
}

// Keys lists tenant's keys, oldest first.
func (s *Store) Keys(ctx context.Context, tenant uuid.UUID) ([]gateway.Key, error) {
	rows, err := s.pool.Query(ctx, qKeys.SQL, tenant)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (gateway.Key, error) { return scanKey(r) })
}

// scanKey reads a key's columns as queries/keys.sql lists them (key_id to
// last_used_at), after the lead destinations.
func scanKey(row pgx.Row, lead ...any) (gateway.Key, error) {
	var k gateway.Key
	var scopes, signers []string
	if err := row.Scan(append(lead, &k.ID, &k.Tenant, &k.Name, &scopes, &signers, &k.ExpiresAt, &k.RevokedAt, &k.CreatedAt, &k.LastUsedAt)...); err != nil {
		return k, err
	}
	for _, sc := range scopes {
		k.Scopes = append(k.Scopes, gateway.Scope(sc))
	}
	for _, sg := range signers {
		ref, err := gateway.ParseSignerRef(sg)
		if err != nil {
			return k, fmt.Errorf("key %s: stored signer: %w", k.ID, err)
		}
		k.Signers = append(k.Signers, ref)
	}
	return k, nil
}

func scopeStrings(scopes []gateway.Scope) []string {
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
