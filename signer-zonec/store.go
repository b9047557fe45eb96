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

// NonceKey names one nonce of one signer on one chain.
type NonceKey struct {
	ChainID uint64
	From    common.Address
	Nonce   uint64
}

// Signature is a new signature for Record: the double-sign record, how it
// relates to the signatures before it at its nonce (Fresh, Replacement or
// Cancel), and the audit record of the decision that gave it.
type Signature struct {
	Signed
	Reuse    Reuse
	AuditSeq uint64
}

// StoreTx is the store inside one transaction. Sign reads and writes a
// whole batch in a fixed number of calls, whatever its size, so each
// method takes the batch at once where it can: every call is a round trip
// to the database while the signers' locks are held.
type StoreTx interface {
	// Now is the database's clock at the start of the transaction: the
	// one clock every replica decides by, for approval expiry, rolling
	// windows and the time of every record. A replica whose own clock is
	// off cannot widen a window or revive an expired approval.
	Now(ctx context.Context) (time.Time, error)
	// LockSigners serializes this transaction with every other one that
	// signs for the same signers, on any replica, until it ends. Callers
	// pass the keys sorted (SortSigners) so that no two transactions wait
	// on each other.
	LockSigners(ctx context.Context, keys []SignerKey) error
	// Signed lists the signatures given at each of the nonces, oldest
	// first; a nonce without any has no entry. Keys may repeat.
	Signed(ctx context.Context, at []NonceKey) (map[NonceKey][]Signed, error)
	// FirstOfTx is the first signature given for each of the tx ids; a tx
	// id never signed has no entry. Ids may repeat.
	FirstOfTx(ctx context.Context, txIDs []string) (map[string]Signed, error)
	// NextNonces is each signer's next nonce: one above the highest nonce
	// it has a signature at, or the start an operator declared for it
	// (nonce_start), whichever is higher; 0 for a signer with neither.
	NextNonces(ctx context.Context, keys []SignerKey) (map[SignerKey]uint64, error)
	// Spent sums the value of the originals (attempt 1 at each nonce)
	// signed for the signer since the given time.
	Spent(ctx context.Context, chainID uint64, from common.Address, since time.Time) (*big.Int, error)
	// SpentToken sums the token units the originals signed for the signer
	// since the given time moved or granted of token.
	SpentToken(ctx context.Context, chainID uint64, from common.Address, token common.Address, since time.Time) (*big.Int, error)
	// Fees sums, over the signer's nonces other than except with a
	// signature since the given time, the costliest gas × fee cap signed
	// at each.
	Fees(ctx context.Context, chainID uint64, from common.Address, since time.Time, except uint64) (*big.Int, error)
	// Append seals entries onto the audit chain in order and returns the
	// records with their sequence numbers.
	Append(ctx context.Context, entries []AuditEntry) ([]AuditRecord, error)
	// Record stores new signatures, all given at the same time, in order:
	// a later one at the same nonce is the later attempt.
	Record(ctx context.Context, at time.Time, sigs []Signature) error
}
