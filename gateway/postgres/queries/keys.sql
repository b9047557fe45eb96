-- Tenants, the signers each owns, and their API keys (keys.go). A
-- statement that returns keys ends its row with the columns scanKey reads,
-- in its order, as Keys does; TestQueries holds every copy of that list to
-- Keys'.

-- name: CreateTenant
-- Makes a tenant; a name in use is a unique violation.
INSERT INTO tenant (tenant_id, name) VALUES ($1, $2) RETURNING created_at;

-- name: AssignSigner
-- Gives signer ($1, $2) to tenant $3 unless it has an owner, and returns
-- its owner either way: the caller tells a signer another tenant owns
-- from one it assigned, or assigned before.
WITH ins AS (
	INSERT INTO tenant_signer (chain_id, signer, tenant_id) VALUES ($1, $2, $3)
	ON CONFLICT (chain_id, signer) DO NOTHING RETURNING tenant_id
)
SELECT tenant_id FROM ins UNION ALL SELECT tenant_id FROM tenant_signer WHERE chain_id = $1 AND signer = $2
LIMIT 1;

-- name: GetTenant
-- One tenant, by id.
SELECT name, created_at FROM tenant WHERE tenant_id = $1;

-- name: TenantByName
-- One tenant, by name.
SELECT tenant_id, created_at FROM tenant WHERE name = $1;

-- name: TenantSigners
-- The signers tenant $1 owns, by chain and address.
SELECT chain_id, signer FROM tenant_signer WHERE tenant_id = $1 ORDER BY chain_id, signer;

-- name: ForeignSigners
-- Those of the signers ($2, $3 in parallel) that tenant $1 does not own:
-- one query, whatever their number.
SELECT c, a FROM unnest($2::bigint[], $3::bytea[]) AS r (c, a)
WHERE NOT EXISTS (SELECT 1 FROM tenant_signer t WHERE t.chain_id = r.c AND t.signer = r.a AND t.tenant_id = $1);

-- name: CreateKey
-- Stores a new API key: only the hash of its secret ($4).
INSERT INTO api_key (key_id, tenant_id, name, secret_hash, scopes, signers, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING created_at;

-- name: AuthenticateKey
-- The secret's hash and the key of id $1, if it is live (not revoked, not
-- expired by the database clock): Authenticate's one query, a primary key
-- probe.
SELECT secret_hash, key_id, tenant_id, name, scopes, signers, expires_at, revoked_at, created_at, last_used_at
FROM api_key
WHERE key_id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now());

-- name: RecordKeyUse
-- Records that key $1 was used, unless it was within $2: the condition
-- Authenticate checked, again, so that nodes racing write once.
UPDATE api_key SET last_used_at = now()
WHERE key_id = $1 AND (last_used_at IS NULL OR last_used_at <= now() - $2::interval);

-- name: LockKey
-- Tenant $2's key $1, locked until the transaction ends: a revocation
-- checks what the caller may reach before it writes.
SELECT key_id, tenant_id, name, scopes, signers, expires_at, revoked_at, created_at, last_used_at
FROM api_key WHERE key_id = $1 AND tenant_id = $2 FOR UPDATE;

-- name: RevokeKey
-- Revokes key $1; revoking it again keeps the first time.
UPDATE api_key SET revoked_at = coalesce(revoked_at, now())
WHERE key_id = $1
RETURNING key_id, tenant_id, name, scopes, signers, expires_at, revoked_at, created_at, last_used_at;

-- name: Keys
-- Tenant $1's keys, oldest first.
SELECT key_id, tenant_id, name, scopes, signers, expires_at, revoked_at, created_at, last_used_at
FROM api_key WHERE tenant_id = $1 ORDER BY created_at, key_id;
