package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
)

// Ownership: the node registry, signer leases with fencing tokens and the
// nonce cursor. Every time comparison here is made by the database clock
// (now()), never by a node's, so that nodes whose clocks disagree still
// agree on who holds a lease.
//
// Locking. A fenced statement (FenceSQL) takes FOR KEY SHARE on the lease
// row it checks, and keeps it until its transaction ends. Acquire takes
// the row FOR UPDATE (see acquireSQL), which conflicts with that lock, so
// a change of owner waits for every fenced transaction in flight, and a
// fenced statement that waits on a change of owner sees the new row and
// matches nothing. A stale owner's write therefore either committed before
// the takeover or touches no row; it can never land after it. Renewals and
// releases take the weaker FOR NO KEY UPDATE, which does not conflict with
// FOR KEY SHARE: fenced writes never hold a renewal up.
//
// This is also why now() being the transaction's start is safe: a fenced
// transaction that outlives its lease still sees the lease as unexpired in
// its later statements, but nobody can take the lease over before it ends.

// Heartbeat registers node as live until ttl from now by the database
// clock. A node that comes back after its row expired starts anew.
func (s *Store) Heartbeat(ctx context.Context, node string, ttl time.Duration) error {
	if node == "" || ttl <= 0 {
		return errs.E(errs.Invalid, "heartbeat: empty node id or non-positive ttl")
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO node (node_id, expires_at) VALUES ($1, now() + $2::bigint * interval '1 microsecond')
		ON CONFLICT (node_id) DO UPDATE SET
			started_at   = CASE WHEN node.expires_at > now() THEN node.started_at ELSE now() END,
			heartbeat_at = now(),
			expires_at   = EXCLUDED.expires_at`,
		node, ttl.Microseconds())
	if err != nil {
		return fmt.Errorf("heartbeat of node %s: %w", node, err)
	}
	return nil
}

// LiveNodes lists the nodes whose heartbeat has not expired, sorted.
func (s *Store) LiveNodes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT node_id FROM node WHERE expires_at > now() ORDER BY node_id`)
	if err != nil {
		return nil, fmt.Errorf("list live nodes: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list live nodes: %w", err)
	}
	return nodes, nil
}

// Deregister removes node from the registry: the others stop counting it
// at once instead of when its heartbeat expires.
func (s *Store) Deregister(ctx context.Context, node string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM node WHERE node_id = $1`, node); err != nil {
		return fmt.Errorf("deregister node %s: %w", node, err)
	}
	return nil
}

// acquireSQL takes a lease that is free (no row, no owner) or expired, or
// renews one the node holds, in one statement. A new owner, or the same
// owner after its lease lapsed, gets the next fencing token; a renewal
// keeps its token.
//
// The NOT EXISTS pre-check answers "held by another node" from the
// snapshot without touching the row: ON CONFLICT DO UPDATE locks the
// conflicting row even when its WHERE then refuses, and a node that asks
// for a lease held elsewhere every few seconds should not queue behind
// the owner's writes. The WHERE of DO UPDATE re-checks on the latest row
// version under the lock, so the pre-check only saves work.
//
// SET chain_id = EXCLUDED.chain_id changes nothing but makes the conflict
// lock FOR UPDATE rather than FOR NO KEY UPDATE (PostgreSQL picks the mode
// from the columns named in SET, and chain_id is a key column): the
// takeover then waits for the fenced transactions in flight, which hold
// FOR KEY SHARE. TestTakeoverWaitsForFencedTransactionInFlight guards it.
const acquireSQL = `
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
	RETURNING l.fencing_token`

// Acquire takes key's lease for node until ttl from now, or renews it when
// node already holds it. ok is false, with no error, when another node
// holds it unexpired. The token is the fence every write of node on key
// must carry; it is 1 for a signer's first lease and grows by one with
// every change of owner and every lapse. Unlike RenewAll, Acquire waits
// for the signer's fenced transactions in flight, even node's own.
func (s *Store) Acquire(ctx context.Context, node string, key txmanager.SignerKey, ttl time.Duration) (token int64, ok bool, err error) {
	if node == "" || ttl <= 0 {
		return 0, false, errs.E(errs.Invalid, "acquire: empty node id or non-positive ttl")
	}
	chainID, err := leaseChainID(key)
	if err != nil {
		return 0, false, err
	}
	err = s.pool.QueryRow(ctx, acquireSQL, chainID, key.Signer.Bytes(), node, ttl.Microseconds()).Scan(&token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("acquire lease %s for node %s: %w", key, node, err)
	}
	return token, true, nil
}

// RenewAll extends every unexpired lease node holds to ttl from now, in one
// statement whatever their number, and returns them with their tokens. A
// lease that already expired is not renewed even when nobody took it: it
// may have been, and its holder must acquire it again for a new token.
func (s *Store) RenewAll(ctx context.Context, node string, ttl time.Duration) (map[txmanager.SignerKey]int64, error) {
	if ttl <= 0 {
		return nil, errs.E(errs.Invalid, "renew: non-positive ttl")
	}
	rows, err := s.pool.Query(ctx, `
		UPDATE signer_lease SET expires_at = now() + $2::bigint * interval '1 microsecond'
		WHERE owner_node = $1 AND expires_at > now()
		RETURNING chain_id, signer, fencing_token`,
		node, ttl.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("renew leases of node %s: %w", node, err)
	}
	defer rows.Close()
	held := make(map[txmanager.SignerKey]int64)
	for rows.Next() {
		var (
			chainID, token int64
			signer         []byte
		)
		if err := rows.Scan(&chainID, &signer, &token); err != nil {
			return nil, fmt.Errorf("renew leases of node %s: %w", node, err)
		}
		held[txmanager.SignerKey{ChainID: uint64(chainID), Signer: common.BytesToAddress(signer)}] = token
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renew leases of node %s: %w", node, err)
	}
	return held, nil
}

// Release gives up node's leases on keys at once (a graceful handoff or a
// shutdown), so another node can acquire them without waiting for expiry.
// Keys node does not hold are left alone. The token stays: the next owner
// gets the one after it.
func (s *Store) Release(ctx context.Context, node string, keys []txmanager.SignerKey) error {
	if len(keys) == 0 {
		return nil
	}
	chainIDs, signers, err := leaseKeyArrays(keys)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `
		UPDATE signer_lease SET owner_node = NULL, expires_at = '-infinity'
		WHERE owner_node = $1
		  AND (chain_id, signer) IN (SELECT * FROM unnest($2::bigint[], $3::bytea[]))`,
		node, chainIDs, signers)
	if err != nil {
		return fmt.Errorf("release %d leases of node %s: %w", len(keys), node, err)
	}
	return nil
}

// Vacant returns those of keys that nobody holds by the database clock: no
// lease row, no owner, or an expired lease. The lease manager takes such
// orphans over when their preferred node leaves them alone.
func (s *Store) Vacant(ctx context.Context, keys []txmanager.SignerKey) ([]txmanager.SignerKey, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	chainIDs, signers, err := leaseKeyArrays(keys)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `
		SELECT k.chain_id, k.signer
		FROM unnest($1::bigint[], $2::bytea[]) AS k (chain_id, signer)
		WHERE NOT EXISTS (
			SELECT 1 FROM signer_lease l
			WHERE l.chain_id = k.chain_id AND l.signer = k.signer
			  AND l.owner_node IS NOT NULL AND l.expires_at > now())`,
		chainIDs, signers)
	if err != nil {
		return nil, fmt.Errorf("find vacant leases: %w", err)
	}
	vacant, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (txmanager.SignerKey, error) {
		var (
			chainID int64
			signer  []byte
		)
		err := row.Scan(&chainID, &signer)
		return txmanager.SignerKey{ChainID: uint64(chainID), Signer: common.BytesToAddress(signer)}, err
	})
	if err != nil {
		return nil, fmt.Errorf("find vacant leases: %w", err)
	}
	return vacant, nil
}

// NextLapse is how long until the first of keys' held leases can be taken
// over: both the lease and its owner's heartbeat have run out by the
// database clock. ok is false when none of keys is held.
func (s *Store) NextLapse(ctx context.Context, keys []txmanager.SignerKey) (wait time.Duration, ok bool, err error) {
	if len(keys) == 0 {
		return 0, false, nil
	}
	chainIDs, signers, err := leaseKeyArrays(keys)
	if err != nil {
		return 0, false, err
	}
	var micros *int64
	err = s.pool.QueryRow(ctx, `
		SELECT (extract(epoch FROM min(greatest(l.expires_at, coalesce(n.expires_at, l.expires_at)) - now())) * 1e6)::bigint
		FROM unnest($1::bigint[], $2::bytea[]) AS k (chain_id, signer)
		JOIN signer_lease l ON l.chain_id = k.chain_id AND l.signer = k.signer
		LEFT JOIN node n ON n.node_id = l.owner_node
		WHERE l.owner_node IS NOT NULL AND l.expires_at > now()`, chainIDs, signers).Scan(&micros)
	if err != nil {
		return 0, false, fmt.Errorf("next lease lapse: %w", err)
	}
	if micros == nil {
		return 0, false, nil
	}
	return max(time.Duration(*micros)*time.Microsecond, 0), true, nil
}

// Leases lists every lease row, by chain and signer.
func (s *Store) Leases(ctx context.Context) ([]txmanager.Lease, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT chain_id, signer, coalesce(owner_node, ''), fencing_token,
			CASE WHEN isfinite(expires_at) THEN expires_at END, acquired_at,
			owner_node IS NOT NULL AND expires_at > now()
		FROM signer_lease
		ORDER BY chain_id, signer`)
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	leases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (txmanager.Lease, error) {
		var (
			l                     txmanager.Lease
			chainID               int64
			signer                []byte
			expiresAt, acquiredAt *time.Time
		)
		if err := row.Scan(&chainID, &signer, &l.Owner, &l.Token, &expiresAt, &acquiredAt, &l.Held); err != nil {
			return l, err
		}
		l.Key = txmanager.SignerKey{ChainID: uint64(chainID), Signer: common.BytesToAddress(signer)}
		if expiresAt != nil {
			l.ExpiresAt = *expiresAt
		}
		if acquiredAt != nil {
			l.AcquiredAt = *acquiredAt
		}
		return l, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	return leases, nil
}

// FenceSQL is the predicate every fenced statement of this package puts in
// its WHERE clause: true only while f's node holds f's token on an
// unexpired lease by the database clock. Its parameters are numbered from
// argOffset+1 (argOffset is how many the statement already has); append
// args to the statement's own.
//
// The predicate calls txfence_holds_lease (migration 0010) as a
// sub-select, once per statement; it locks the lease row FOR KEY SHARE
// until the transaction ends, so a change of owner waits for the transaction, and the
// transaction never writes after a change of owner it did not see (see
// the Locking note above). Keep fenced transactions short: a takeover
// waits for them.
func FenceSQL(f txmanager.Fence, argOffset int) (sql string, args []any) {
	n := func(i int) string { return "$" + strconv.Itoa(argOffset+i) }
	sql = `(SELECT txfence_holds_lease(` + n(1) + `::bigint, ` + n(2) + `::bytea, ` + n(3) + `::text, ` + n(4) + `::bigint))`
	// A chain id beyond int64 matches no lease row (the schema keeps them
	// positive bigints), so -1 fences the write off instead of wrapping.
	chainID := int64(-1)
	if f.Key.ChainID <= math.MaxInt64 {
		chainID = int64(f.Key.ChainID)
	}
	return sql, []any{chainID, f.Key.Signer.Bytes(), f.Node, f.Token}
}

// nextNonceSQL computes next = max(cursor, highest assigned nonce + 1,
// chain pending nonce) and stores it, all under the fence. The cursor
// never moves back here, even when a concurrent statement raced it.
var nextNonceSQL = func() string {
	fence, _ := FenceSQL(txmanager.Fence{}, 3)
	return `
	INSERT INTO nonce_cursor AS c (chain_id, signer, next_nonce)
	SELECT $1::bigint, $2::bytea, GREATEST(
		(SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2),
		(SELECT max(nonce) + 1 FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce IS NOT NULL),
		$3::bigint,
		0)
	WHERE ` + fence + `
	ON CONFLICT (chain_id, signer) DO UPDATE SET next_nonce = GREATEST(c.next_nonce, EXCLUDED.next_nonce)
	RETURNING next_nonce`
}()

// NextNonce settles a signer's nonce cursor when its owner takes the lease:
// the next nonce is the highest of the stored cursor, the highest nonce
// assigned to any of the signer's transactions plus one, and chainPending
// (the chain's pending nonce, when the key may be used outside txfence;
// nil otherwise). It stores and returns it in one fenced statement, and
// returns a *txmanager.FencedError (errors.Is ErrFenced), having changed
// nothing, when f is no longer the current unexpired lease.
func (s *Store) NextNonce(ctx context.Context, f txmanager.Fence, chainPending *uint64) (uint64, error) {
	chainID, err := leaseChainID(f.Key)
	if err != nil {
		return 0, err
	}
	var pending *int64
	if chainPending != nil {
		if *chainPending > math.MaxInt64 {
			return 0, errs.Errorf(errs.Invalid, "next nonce of %s: chain pending nonce %d out of range", f.Key, *chainPending)
		}
		p := int64(*chainPending)
		pending = &p
	}
	_, fenceArgs := FenceSQL(f, 3)
	args := append([]any{chainID, f.Key.Signer.Bytes(), pending}, fenceArgs...)
	var next int64
	err = s.pool.QueryRow(ctx, nextNonceSQL, args...).Scan(&next)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, &txmanager.FencedError{Fence: f, Op: "next nonce"}
	case err != nil:
		return 0, fmt.Errorf("next nonce of %s: %w", f.Key, err)
	}
	return uint64(next), nil
}

// leaseChainID is key's chain id as the schema stores it.
func leaseChainID(key txmanager.SignerKey) (int64, error) {
	if key.ChainID == 0 || key.ChainID > math.MaxInt64 {
		return 0, errs.Errorf(errs.Invalid, "signer %s: chain id out of range", key)
	}
	return int64(key.ChainID), nil
}

// leaseKeyArrays splits keys into the parallel arrays unnest takes.
func leaseKeyArrays(keys []txmanager.SignerKey) ([]int64, [][]byte, error) {
	chainIDs, signers := make([]int64, len(keys)), make([][]byte, len(keys))
	for i, k := range keys {
		id, err := leaseChainID(k)
		if err != nil {
			return nil, nil, err
		}
		chainIDs[i], signers[i] = id, k.Signer.Bytes()
	}
	return chainIDs, signers, nil
}
