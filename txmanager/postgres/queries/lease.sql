-- Ownership (lease.go): the node registry, signer leases with fencing
-- tokens, the fence itself and the nonce cursor. Every time comparison is
-- made by the database clock (now()), never by a node's.
--
-- Fenced statements, here and in every file of this directory, take the
-- fence as their first four parameters, $1 chain id, $2 signer, $3 owner
-- node, $4 fencing token, and hold it in the one clause
-- (SELECT txfence_holds_lease($1, $2, $3, $4)) (migration 0010); their own
-- parameters start at $5. A fenced statement about one signer's rows uses
-- $1 and $2 for the rows' chain id and signer as well.

-- name: Heartbeat
-- Registers a node as live until $2 microseconds from now. A node that
-- comes back after its row expired starts anew (started_at).
INSERT INTO node (node_id, expires_at) VALUES ($1, now() + $2::bigint * interval '1 microsecond')
ON CONFLICT (node_id) DO UPDATE SET
	started_at   = CASE WHEN node.expires_at > now() THEN node.started_at ELSE now() END,
	heartbeat_at = now(),
	expires_at   = EXCLUDED.expires_at;

-- name: LiveNodes
-- Lists the nodes whose heartbeat has not expired, sorted.
SELECT node_id FROM node WHERE expires_at > now() ORDER BY node_id;

-- name: Deregister
-- Removes a node from the registry: the others stop counting it at once.
DELETE FROM node WHERE node_id = $1;

-- name: AcquireLease
-- Takes a lease that is free (no row, no owner) or expired, or renews one
-- the node holds, for $4 microseconds. A new owner, or the same owner
-- after its lease lapsed, gets the next fencing token; a renewal keeps
-- its token. No row returned: another node holds it.
--
-- The NOT EXISTS pre-check answers "held by another node" from the
-- snapshot without touching the row: ON CONFLICT DO UPDATE locks the
-- conflicting row even when its WHERE then refuses, and a node that asks
-- for a lease held elsewhere every few seconds should not queue behind
-- the owner's writes. The WHERE of DO UPDATE re-checks on the latest row
-- version under the lock, so the pre-check only saves work.
--
-- SET chain_id = EXCLUDED.chain_id changes nothing but makes the conflict
-- lock FOR UPDATE rather than FOR NO KEY UPDATE (PostgreSQL picks the mode
-- from the columns named in SET, and chain_id is a key column): the
-- takeover then waits for the fenced transactions in flight, which hold
-- FOR KEY SHARE. TestTakeoverWaitsForAFencedTransactionInFlight guards it.
INSERT INTO signer_lease AS l (chain_id, signer, owner_node, fencing_token, expires_at, acquired_at)
SELECT $1::bigint, $2::bytea, $3::text, 1, now() + $4::bigint * interval '1 microsecond', now()
WHERE NOT EXISTS (
	SELECT 1 FROM signer_lease
	WHERE chain_id = $1 AND signer = $2 AND owner_node <> $3 AND expires_at > now())
ON CONFLICT (chain_id, signer) DO UPDATE SET
	chain_id      = EXCLUDED.chain_id,
	owner_node    = EXCLUDED.owner_node,
	fencing_token = CASE WHEN l.owner_node = EXCLUDED.owner_node AND l.expires_at > now()
		THEN l.fencing_token ELSE l.fencing_token + 1 END,
	expires_at    = EXCLUDED.expires_at,
	acquired_at   = CASE WHEN l.owner_node = EXCLUDED.owner_node AND l.expires_at > now()
		THEN l.acquired_at ELSE now() END
WHERE l.owner_node IS NULL OR l.owner_node = EXCLUDED.owner_node OR l.expires_at <= now()
RETURNING l.fencing_token;

-- name: RenewLeases
-- Extends every unexpired lease of node $1 to $2 microseconds from now, in
-- one statement whatever their number. FOR NO KEY UPDATE (only expires_at
-- changes), which fenced transactions' FOR KEY SHARE does not wait for.
UPDATE signer_lease SET expires_at = now() + $2::bigint * interval '1 microsecond'
WHERE owner_node = $1 AND expires_at > now()
RETURNING chain_id, signer, fencing_token;

-- name: ReleaseLeases
-- Gives up node $1's leases on the keys ($2, $3 in parallel), keeping
-- their tokens: the next owner gets the one after.
UPDATE signer_lease SET owner_node = NULL, expires_at = '-infinity'
WHERE owner_node = $1
  AND (chain_id, signer) IN (SELECT * FROM unnest($2::bigint[], $3::bytea[]));

-- name: VacantLeases
-- Those of the keys ($1, $2 in parallel) that nobody holds: no lease row,
-- no owner, or an expired lease.
SELECT k.chain_id, k.signer
FROM unnest($1::bigint[], $2::bytea[]) AS k (chain_id, signer)
WHERE NOT EXISTS (
	SELECT 1 FROM signer_lease l
	WHERE l.chain_id = k.chain_id AND l.signer = k.signer
	  AND l.owner_node IS NOT NULL AND l.expires_at > now());

-- name: NextLeaseLapse
-- Microseconds until the first of the keys' held leases can be taken over:
-- both the lease and its owner's heartbeat have run out. NULL when none is
-- held.
SELECT (extract(epoch FROM min(greatest(l.expires_at, coalesce(n.expires_at, l.expires_at)) - now())) * 1e6)::bigint
FROM unnest($1::bigint[], $2::bytea[]) AS k (chain_id, signer)
JOIN signer_lease l ON l.chain_id = k.chain_id AND l.signer = k.signer
LEFT JOIN node n ON n.node_id = l.owner_node
WHERE l.owner_node IS NOT NULL AND l.expires_at > now();

-- name: Leases
-- Every lease row, by chain and signer, with whether it is held now.
SELECT chain_id, signer, coalesce(owner_node, ''), fencing_token,
	CASE WHEN isfinite(expires_at) THEN expires_at END, acquired_at,
	owner_node IS NOT NULL AND expires_at > now()
FROM signer_lease
ORDER BY chain_id, signer;

-- name: HoldsLease
-- Whether the fence holds, taking its lock as any fenced statement does:
-- tells a fenced write that touched nothing from one whose rows were not
-- in the state it expects.
SELECT (SELECT txfence_holds_lease($1, $2, $3, $4));

-- name: NextNonce
-- Settles the signer's nonce cursor when its owner takes the lease:
-- next = max(cursor, highest assigned nonce + 1, $5 the chain's pending
-- nonce when given, 0), stored under the fence. The cursor never moves
-- back here, even when a concurrent statement raced it.
INSERT INTO nonce_cursor AS c (chain_id, signer, next_nonce)
SELECT $1::bigint, $2::bytea, GREATEST(
	(SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2),
	(SELECT max(nonce) + 1 FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce IS NOT NULL),
	$5::bigint,
	0)
WHERE (SELECT txfence_holds_lease($1, $2, $3, $4))
ON CONFLICT (chain_id, signer) DO UPDATE SET next_nonce = GREATEST(c.next_nonce, EXCLUDED.next_nonce)
RETURNING next_nonce;
