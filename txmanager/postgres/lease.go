package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/lease.sql.
var (
	qHeartbeat      = query("Heartbeat")
	qLiveNodes      = query("LiveNodes")
	qDeregister     = query("Deregister")
	qAcquireLease   = query("AcquireLease")
	qRenewLeases    = query("RenewLeases")
	qReleaseLeases  = query("ReleaseLeases")
	qVacantLeases   = query("VacantLeases")
	qNextLeaseLapse = query("NextLeaseLapse")
	qLeases         = query("Leases")
	qHoldsLease     = fenced("HoldsLease")
	qNextNonce      = fenced("NextNonce")
)

// Ownership: the node registry, signer leases with fencing tokens and the
// nonce cursor. Every time comparison here is made by the database clock
// (now()), never by a node's, so that nodes whose clocks disagree still
// agree on who holds a lease.
//
// Locking. A fenced statement (see fenced: txfence_holds_lease, migration
// 0010) takes FOR KEY SHARE on the lease row it checks, and keeps it until
// its transaction ends. Acquire takes the row FOR UPDATE (see AcquireLease
// in queries/lease.sql), which conflicts with that lock, so a change of
// owner waits for every fenced transaction in flight, and a
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
	_, err := s.pool.Exec(ctx, qHeartbeat.SQL, node, ttl.Microseconds())
	if err != nil {
		return fmt.Errorf("heartbeat of node %s: %w", node, err)
	}
	return nil
}

// LiveNodes lists the nodes whose heartbeat has not expired, sorted.
func (s *Store) LiveNodes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, qLiveNodes.SQL)
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
	if _, err := s.pool.Exec(ctx, qDeregister.SQL, node); err != nil {
		return fmt.Errorf("deregister node %s: %w", node, err)
	}
	return nil
}

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
	err = s.pool.QueryRow(ctx, qAcquireLease.SQL, chainID, key.Signer.Bytes(), node, ttl.Microseconds()).Scan(&token)
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
	rows, err := s.pool.Query(ctx, qRenewLeases.SQL, node, ttl.Microseconds())
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
	_, err = s.pool.Exec(ctx, qReleaseLeases.SQL, node, chainIDs, signers)
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
	rows, err := s.pool.Query(ctx, qVacantLeases.SQL, chainIDs, signers)
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
	err = s.pool.QueryRow(ctx, qNextLeaseLapse.SQL, chainIDs, signers).Scan(&micros)
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
	rows, err := s.pool.Query(ctx, qLeases.SQL)
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

// NextNonce settles a signer's nonce cursor when its owner takes the lease:
// the next nonce is the highest of the stored cursor, the highest nonce
// assigned to any of the signer's transactions plus one, and chainPending
// (the chain's pending nonce, when the key may be used outside txfence;
// nil otherwise). It stores and returns it in one fenced statement, and
// returns a *txmanager.FencedError (errors.Is ErrFenced), having changed
// nothing, when f is no longer the current unexpired lease.
func (s *Store) NextNonce(ctx context.Context, f txmanager.Fence, chainPending *uint64) (uint64, error) {
	if _, err := leaseChainID(f.Key); err != nil {
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
	var next int64
	err := qNextNonce.queryRow(ctx, s.pool, f, pending).Scan(&next)
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
