package txmanager

import (
	"context"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
)

// The stores txmanager's parts work through, each as small as what its
// user calls, so that a worker, a follower or a handler can be tested
// against a fake of its own store; postgres.Store implements them all.
//
// A write that takes a Fence is fenced: once f is no longer its signer's
// current unexpired lease it changes nothing and returns an error that
// errors.Is ErrFenced, and the caller stops all work on the signer. A
// state change refused because the transaction is no longer in a state it
// may leave that way is a *StateError. Every state change writes its
// event in the same transaction.

// WorkStore is what a signer's worker reads and writes while its node
// holds the signer's lease: the pipeline from INIT to BROADCASTED, the
// wait for approvals, the nonces signerd refused to sign, the look at the
// chain a new owner takes after a restore, and the operator actions on
// transactions not broadcast yet.
type WorkStore interface {
	// Get reads one transaction.
	Get(ctx context.Context, id uuid.UUID) (Tx, error)
	// Open lists key's transactions in states, in acceptance order, at
	// most limit: the worker's queue.
	Open(ctx context.Context, key SignerKey, states []State, limit int) ([]Tx, error)
	// OpenAfter is Open from the transaction after the one after
	// (uuid.Nil: from the first): a page of the queue.
	OpenAfter(ctx context.Context, key SignerKey, states []State, after uuid.UUID, limit int) ([]Tx, error)
	// ParentStates reads the states of ids in one statement (the parents of
	// the transactions the worker takes on); an id with no transaction is
	// absent.
	ParentStates(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]State, error)
	// CountOpen counts key's transactions in states.
	CountOpen(ctx context.Context, key SignerKey, states []State) (int, error)
	// PendingCost is the most key's open transactions may still take
	// from its balance, those below minedNonce being paid for already;
	// one not yet signed is priced at its own fee cap, else at feeCap.
	PendingCost(ctx context.Context, key SignerKey, minedNonce uint64, feeCap *big.Int) (*big.Int, error)
	// RawAttempts are the raw signed current attempts of ids, by
	// transaction; one without an attempt is absent.
	RawAttempts(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]byte, error)

	// NextNonce settles the signer's nonce cursor when f's lease is
	// taken: the highest of the stored cursor, the highest nonce assigned
	// plus one, and chainPending when it is not nil.
	NextNonce(ctx context.Context, f Fence, chainPending *uint64) (uint64, error)
	// Simulated moves INIT → SIMULATED with the gas limit fixed.
	Simulated(ctx context.Context, f Fence, id uuid.UUID, gasLimit uint64) (Tx, error)
	// PendingApproval moves INIT → PENDING_APPROVAL with the gas limit
	// fixed, waiting until expires.
	PendingApproval(ctx context.Context, f Fence, id uuid.UUID, gasLimit uint64, expires time.Time, why StateChanged) (Tx, error)
	// Fail ends a transaction that holds no nonce as FAILED for why.
	Fail(ctx context.Context, f Fence, id uuid.UUID, why StateChanged) (Tx, error)
	// SetSubState changes a transaction's sub-state within state; no
	// change writes nothing.
	SetSubState(ctx context.Context, f Fence, id uuid.UUID, state State, sub SubState, reason string) (Tx, error)
	// Allocate gives consecutive nonces from first to those of ids still
	// SIMULATED, each with its signing fees (fees[i] for ids[i]), and
	// returns them ALLOCATED in nonce order, all in one transaction.
	Allocate(ctx context.Context, f Fence, ids []uuid.UUID, fees []Fees, first uint64) ([]Tx, error)
	// Signed stores a batch's first signed attempts, ALLOCATED → SIGNED,
	// before anything is broadcast.
	Signed(ctx context.Context, f Fence, attempts []Attempt) ([]Tx, error)
	// Broadcasted records accepted broadcasts, SIGNED → BROADCASTED; one
	// the follower found mined first keeps its state and is not returned.
	Broadcasted(ctx context.Context, f Fence, sent []Sent, at time.Time) ([]Tx, error)

	// AwaitingApproval lists key's transactions waiting for approvals,
	// oldest first, at most limit.
	AwaitingApproval(ctx context.Context, key SignerKey, limit int) ([]Awaiting, error)
	// Approvals are the stored approvals of ids, by transaction.
	Approvals(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]Approval, error)
	// Approved ends a wait the policy now allows: PENDING_APPROVAL →
	// SIMULATED.
	Approved(ctx context.Context, f Fence, id uuid.UUID, approvers []string) (Tx, error)

	// ReleaseNonces gives back the nonces of the allocated transactions
	// signerd refused, in one transaction, or changes nothing and returns
	// ErrLaterNonceSigned when a later nonce is held by a transaction not
	// in rs (a nonce is never released under a later one).
	ReleaseNonces(ctx context.Context, f Fence, rs []NonceRelease) ([]Tx, error)
	// FillGap fails an ALLOCATED transaction for reason and gives its
	// nonce to a new 0-value transfer to the signer itself, ALLOCATED with
	// fees (request id GapFillRequestID).
	FillGap(ctx context.Context, f Fence, id uuid.UUID, reason string, fees Fees) (failed, filler Tx, err error)

	// NonceCursor is key's stored next nonce; ok is false when none was
	// ever allocated.
	NonceCursor(ctx context.Context, key SignerKey) (next uint64, ok bool, err error)
	// NoncesHeld are the nonces in [from, to) a transaction of key holds.
	NoncesHeld(ctx context.Context, key SignerKey, from, to uint64) (map[uint64]bool, error)
	// AdoptFound records an intent found mined at a nonce the database
	// never assigned as BROADCASTED with the attempt the chain holds.
	AdoptFound(ctx context.Context, f Fence, found Found) (Tx, error)

	// WorkerActions lists the operator actions the worker carries out for
	// key, oldest first: those on ALLOCATED and SIGNED transactions, and
	// every abandon.
	WorkerActions(ctx context.Context, key SignerKey) ([]Action, error)
	// CurrentAttempt is a signed transaction's current attempt: its
	// number and fees.
	CurrentAttempt(ctx context.Context, id uuid.UUID) (int, Fees, error)
	// PlanActionFees fixes the fees of the attempt action id has signerd
	// sign unless some are fixed already, and returns those that stand
	// (ErrActionDone when the action was finished meanwhile).
	PlanActionFees(ctx context.Context, f Fence, id uuid.UUID, fees Fees) (Fees, error)
	// RefixSigningFees sets the fees an ALLOCATED transaction signerd has
	// not signed is to be signed with.
	RefixSigningFees(ctx context.Context, f Fence, id uuid.UUID, fees Fees) (Tx, error)
	// StoreActionAttempt stores the attempt a produced as its
	// transaction's current one, SIGNED, and marks a done, before
	// anything is sent.
	StoreActionAttempt(ctx context.Context, f Fence, a Action, at ActionAttempt) (Tx, error)
	// Abandon carries out an abandon: the transaction FAILS (abandoned)
	// and its nonce goes to a new 0-value transfer to the signer itself,
	// ALLOCATED with fees.
	Abandon(ctx context.Context, f Fence, a Action, fees Fees) (failed, filler Tx, err error)
	// FinishAction records an action's outcome: ActionDone with the
	// attempt it sent, or ActionRefused with detail saying why.
	FinishAction(ctx context.Context, f Fence, id uuid.UUID, outcome, detail string, attempt *int) error
}

// FollowStore is what a chain's follower reads and writes for the signers
// its node holds: which transactions to look for in blocks, what it found
// there, and the replacement attempts and operator actions on broadcast
// transactions. A write on a transaction that changed since the follower
// read it changes nothing and returns an error that errors.Is
// ErrNotFollowed (a *StateError for a state change): the follower reloads.
type FollowStore interface {
	// Get reads one transaction.
	Get(ctx context.Context, id uuid.UUID) (Tx, error)
	// Tracking lists key's transactions to watch: every SIGNED and
	// BROADCASTED one, and those CONFIRMED or REVERTED in a block at or
	// above fromBlock.
	Tracking(ctx context.Context, key SignerKey, fromBlock uint64) ([]Tracked, error)
	// FeedHead is the highest sequence the event feed has given.
	FeedHead(ctx context.Context) (uint64, error)
	// TrackingSince reads the transactions with an event after the feed
	// sequence after, up to the feed's head upTo (changed, of any signer),
	// and those of them key's follower still watches (rows).
	TrackingSince(ctx context.Context, key SignerKey, fromBlock, after uint64) (rows []Tracked, changed []uuid.UUID, upTo uint64, err error)

	// Mined records an attempt's receipt in a canonical block (sub-state
	// included); a SIGNED transaction moves to BROADCASTED, the chain's
	// word beating the send's verdict.
	Mined(ctx context.Context, f Fence, id uuid.UUID, r Receipt, confirmations uint64) error
	// Confirmed records a mined transaction's new confirmation count.
	Confirmed(ctx context.Context, f Fence, id uuid.UUID, r Receipt, confirmations uint64) error
	// Final ends a mined transaction at the chain's depth: CONFIRMED,
	// REVERTED, or CANCELLED when the attempt mined is a cancel.
	Final(ctx context.Context, f Fence, id uuid.UUID, r Receipt) (Tx, error)
	// Reorged re-opens a transaction whose receipt's block left the
	// canonical chain: BROADCASTED again, tracked anew.
	Reorged(ctx context.Context, f Fence, id uuid.UUID, lost Receipt) error
	// ConsumedExternally fails a transaction whose nonce the chain
	// consumed with none of its attempts.
	ConsumedExternally(ctx context.Context, f Fence, id uuid.UUID) (Tx, error)
	// SetSubState changes a transaction's sub-state within state; no
	// change writes nothing.
	SetSubState(ctx context.Context, f Fence, id uuid.UUID, state State, sub SubState, reason string) (Tx, error)

	// Resend claims a resend of attempt, the current one, before it is
	// sent, and returns the raw transaction to send.
	Resend(ctx context.Context, f Fence, id uuid.UUID, attempt int) ([]byte, error)
	// Dropped counts a drop of the current attempt by the nodes; at
	// maxDrops the transaction is left stuck to an operator.
	Dropped(ctx context.Context, f Fence, id uuid.UUID, attempt, maxDrops int) (Drop, error)
	// SetWaitingSince stores the block from which each attempt's
	// bump_after_blocks counts; attempts no longer current and waiting
	// are left as they are.
	SetWaitingSince(ctx context.Context, f Fence, ws []Waiting) error
	// PlanAttempt fixes the next attempt of a BROADCASTED transaction not
	// mined and returns p with its number (ErrPlanned when one is planned
	// already).
	PlanAttempt(ctx context.Context, f Fence, id uuid.UUID, p Plan) (Plan, error)
	// StoreAttempt stores a plan's signed attempt as the current one,
	// claimed as sent now, and finishes the action behind it, before it
	// is sent.
	StoreAttempt(ctx context.Context, f Fence, id uuid.UUID, p Plan, raw []byte, hash common.Hash) error
	// DropPlan forgets a plan signerd would not sign (or that no longer
	// applies) and refuses the action behind it with why.
	DropPlan(ctx context.Context, f Fence, id uuid.UUID, p Plan, why string) error
	// Approvals are the stored approvals of ids, by transaction: a
	// replacement is signed under them too.
	Approvals(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID][]Approval, error)

	// PendingActions lists the operator actions the follower carries out
	// for key, oldest first: those on broadcast transactions, abandons
	// excepted.
	PendingActions(ctx context.Context, key SignerKey) ([]Action, error)
	// FinishAction records an action's outcome: ActionDone with the
	// attempt it sent, or ActionRefused with detail saying why.
	FinishAction(ctx context.Context, f Fence, id uuid.UUID, outcome, detail string, attempt *int) error
}

// APIStore is what txmanager's internal HTTP API reads and writes on any
// node, lease or not: accepting and reading transactions, cancels,
// approvals, operator requests and the event feed. Nothing here is
// fenced: the signer's owner carries out what it records.
type APIStore interface {
	// Create accepts an intent as INIT; the same (chain, from, request
	// id) again answers the transaction already accepted (created false),
	// or errs.Conflict when the intent differs.
	Create(ctx context.Context, in *Intent) (tx Tx, created bool, err error)
	// CreateMany creates each intent as Create would, answering in order.
	CreateMany(ctx context.Context, intents []*Intent) []CreateResult
	// Get reads one transaction.
	Get(ctx context.Context, id uuid.UUID) (Tx, error)
	// GetByRequest reads the transaction a signer's request id names.
	GetByRequest(ctx context.Context, key SignerKey, requestID string) (Tx, error)
	// List returns up to limit transactions matching f, newest first,
	// after cursor ("" for the first page), and the next page's cursor
	// ("" at the end).
	List(ctx context.Context, f TxFilter, cursor string, limit int) ([]Tx, string, error)
	// Cancel cancels a transaction that holds no nonce yet.
	Cancel(ctx context.Context, id uuid.UUID) (Tx, error)
	// Status reads a signer's status.
	Status(ctx context.Context, key SignerKey) (SignerStatus, error)

	// Approve stores an approval of a transaction waiting for approvals,
	// at most maxApprovals approvers per transaction.
	Approve(ctx context.Context, id uuid.UUID, a Approval, maxApprovals int) (Tx, error)
	// Reject records a rejection signerd counted and fails the
	// transaction (approval_rejected).
	Reject(ctx context.Context, id uuid.UUID, r Rejection) (Tx, error)

	// Request records an operator's request and whether it is new.
	Request(ctx context.Context, r ActionRequest) (a Action, fresh bool, err error)
	// ActionByID reads one action.
	ActionByID(ctx context.Context, id uuid.UUID) (Action, error)
	// Actions lists a transaction's actions, oldest first.
	Actions(ctx context.Context, id uuid.UUID) ([]Action, error)

	// Sequence numbers the events committed so far, in one bounded try
	// (0 does not mean that nothing is left).
	Sequence(ctx context.Context) (int, error)
	// SequenceAll numbers every event committed before it was called,
	// however many tries that takes.
	SequenceAll(ctx context.Context) (int, error)
	// EventsAfter reads up to limit events of the feed after seq, in
	// order.
	EventsAfter(ctx context.Context, after uint64, limit int) ([]Event, error)
	// HeadSeq is the highest sequence numbered so far.
	HeadSeq(ctx context.Context) (uint64, error)
	// TxEvents reads one transaction's numbered events: its timeline.
	TxEvents(ctx context.Context, id uuid.UUID) ([]Event, error)
}

// FeedWaiter tells long polls of the feed when its head moves.
type FeedWaiter interface {
	// Wait returns once the feed's head is above after, or with ctx's
	// error.
	Wait(ctx context.Context, after uint64) error
}

// LeaseStore is the database side of signer ownership (package lease).
// All its times are the database's.
type LeaseStore interface {
	// Heartbeat registers node as live until ttl from now.
	Heartbeat(ctx context.Context, node string, ttl time.Duration) error
	// LiveNodes lists the nodes whose heartbeat has not expired, sorted.
	LiveNodes(ctx context.Context) ([]string, error)
	// Deregister removes node from the registry.
	Deregister(ctx context.Context, node string) error
	// Acquire takes key's lease for node (free, released or expired), or
	// renews it when node holds it; ok is false when another node holds
	// it unexpired.
	Acquire(ctx context.Context, node string, key SignerKey, ttl time.Duration) (token int64, ok bool, err error)
	// RenewAll extends every unexpired lease of node, in one statement,
	// and returns them with their tokens.
	RenewAll(ctx context.Context, node string, ttl time.Duration) (map[SignerKey]int64, error)
	// Release gives up node's leases on keys.
	Release(ctx context.Context, node string, keys []SignerKey) error
	// Vacant returns those of keys that nobody holds.
	Vacant(ctx context.Context, keys []SignerKey) ([]SignerKey, error)
	// NextLapse is how long until the first held lease of keys has run
	// out together with its owner's heartbeat; ok is false when none is
	// held.
	NextLapse(ctx context.Context, keys []SignerKey) (wait time.Duration, ok bool, err error)
}
