package txmanager

import (
	"errors"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// Receipt is the part of a mined attempt's receipt txmanager keeps.
type Receipt struct {
	Attempt           int
	Hash              common.Hash
	BlockNumber       uint64
	BlockHash         common.Hash
	Status            uint8 // 1 success, 0 reverted
	GasUsed           uint64
	EffectiveGasPrice *big.Int
}

// Tracked is a transaction the chain follower watches: signed or broadcast
// and not yet final, or final at a block recent enough for a reorg to
// re-open it.
type Tracked struct {
	TxID  uuid.UUID
	Key   SignerKey
	State State
	Stuck bool // sub-state stuck
	Route Route
	Nonce uint64
	// Attempts are the hashes of every signed attempt, by attempt number;
	// whichever is mined decides.
	Attempts map[common.Hash]int
	// Current is the attempt last sent; SentAt when it was last sent,
	// FirstSentAt when the transaction was first sent (database clock):
	// the earliest first send of its attempts, which resends never move
	// (the stuck clock runs from it).
	Current             int
	SentAt, FirstSentAt time.Time
	// CurrentKind and Fees are the current attempt's kind and fees
	// (what a fee bump starts from); GasLimit is the transaction's.
	CurrentKind string
	Fees        Fees
	GasLimit    uint64
	// CurrentRoute is the route the current attempt went out on (the
	// transaction's when none is recorded); Drops how many times the nodes
	// dropped it (FollowStore.Dropped).
	CurrentRoute Route
	Drops        int
	// WaitingSince is the block from which the current attempt's
	// bump_after_blocks counts (FollowStore.SetWaitingSince), nil until
	// the follower first saw it waiting.
	WaitingSince *uint64
	// Plan is the attempt planned and not yet stored, nil when none is.
	Plan *Plan
	// Mined is the receipt as stored, nil while none is.
	Mined         *Receipt
	Confirmations uint64
}

// Drop is what recording a dropped attempt (FollowStore.Dropped) did.
type Drop struct {
	// Drops counts the times the attempt was dropped, this one included.
	Drops int
	// Refused: the attempt reached the chain's max_drops, and the
	// transaction is stuck with Reason (now, or since an earlier drop).
	Refused bool
	Reason  string
}

// ErrNotFollowed: the transaction is no longer as the follower saw it (an
// operator or another writer changed it); the follower reloads.
var ErrNotFollowed = errors.New("the transaction changed under the follower")
