package signer

import (
	"context"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
)

// Store is signerd's durable record: what it signed and its audit log.
// Everything a signing decision writes is written in one transaction,
// which commits before any signature leaves signerd.
type Store interface {
	// InTx runs fn in one transaction and commits it; fn may run more
	// than once when the database asks for a retry, so it must have no
	// effect outside the transaction.
	InTx(ctx context.Context, fn func(StoreTx) error) error
	// Audit reads up to limit records after seq, in order.
	Audit(ctx context.Context, after uint64, limit int) ([]AuditRecord, error)
	// AuditHead is the last record's seq and hash.
	AuditHead(ctx context.Context) (AuditHead, error)
}

// SignerKey names one signer on one chain.
type SignerKey struct {
	ChainID uint64
	From    common.Address
}

// StoreTx is the store inside one transaction.
type StoreTx interface {
	// LockSigners serializes this transaction with every other one that
	// signs for the same signers, on any replica, until it ends. Callers
	// pass the keys sorted (SortSigners) so that no two transactions wait
	// on each other.
	LockSigners(ctx context.Context, keys []SignerKey) error
	// Signed lists the signatures given at a nonce, oldest first.
	Signed(ctx context.Context, chainID uint64, from common.Address, nonce uint64) ([]Signed, error)
	// Spent sums the value of the originals (attempt 1 at each nonce)
	// signed for the signer since the given time.
	Spent(ctx context.Context, chainID uint64, from common.Address, since time.Time) (*big.Int, error)
	// Append seals entries onto the audit chain in order and returns the
	// records with their sequence numbers.
	Append(ctx context.Context, entries []AuditEntry) ([]AuditRecord, error)
	// Record stores a signature given under the audit record at auditSeq.
	Record(ctx context.Context, s Signed, kind Reuse, at time.Time, auditSeq uint64) error
}
