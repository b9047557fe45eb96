// Package nodeerr sorts what Ethereum nodes answer to eth_sendRawTransaction
// into a few stable categories, so that txmanager acts on a category and
// never on one client's wording. geth, erigon, nethermind, besu, reth, anvil
// and hardhat each word the same refusal differently (and some changed their
// wording between releases); the patterns that absorb this live in
// classify.go, each with the clients it was taken from.
//
// A category says what the refusal means for the transaction, and the
// methods Accepted, Retryable and Fatal say what to do about it. Four
// categories are none of the three, because txmanager must look before it
// acts: NonceTooLow (was one of our attempts mined?), ReplacementUnderpriced
// (an attempt of ours is pooled), InsufficientFunds (hold until funded) and
// ExecutionReverted (the node may have mined it: the chain decides).
// Neither is the empty category that Classify gives a nil error.
//
// A category is a verdict on one transaction, so only a node's answer
// about that transaction may carry one other than Transient: an answer to
// a whole JSON-RPC batch (one error object, an HTTP error, an element
// missing from the answer) is Transient for each transaction in it, and
// the sender resends them (see mevrouter's public route).
package nodeerr

// Category is the class of a node's answer to eth_sendRawTransaction. Its
// values are stable: they are metric labels and an OpenAPI enum.
type Category string

// The categories, in the order of the OpenAPI enum.
const (
	// AlreadyKnown: the node already has this very transaction. It counts as
	// accepted: a resend after a timeout gets this answer.
	AlreadyKnown Category = "already_known"
	// NonceTooLow: the sender's nonce has moved past this one. Either an
	// attempt of ours was mined or someone else used the nonce; only
	// receipts and the mined nonce tell which.
	NonceTooLow Category = "nonce_too_low"
	// NonceTooHigh: a nonce gap; the node lacks a lower nonce of the sender
	// or keeps no future transactions.
	NonceTooHigh Category = "nonce_too_high"
	// ReplacementUnderpriced: the pool holds another transaction with this
	// sender and nonce (an attempt of ours), and this one does not pay
	// enough more to replace it.
	ReplacementUnderpriced Category = "replacement_underpriced"
	// Underpriced: below the pool's minimum tip or gas price, or too cheap to
	// displace anything from a full pool.
	Underpriced Category = "underpriced"
	// InsufficientFunds: the balance does not cover gas * fee cap + value.
	InsufficientFunds Category = "insufficient_funds"
	// IntrinsicGasTooLow: the gas limit does not cover the intrinsic gas
	// (or the EIP-7623 floor data gas).
	IntrinsicGasTooLow Category = "intrinsic_gas_too_low"
	// GasLimitExceeded: the gas limit is above a cap: the block gas
	// limit, the protocol's per-transaction cap (EIP-7825: 2^24 from
	// Osaka), or a node's own configured maximum for one transaction
	// (nethermind's and reth's pool settings), however the client words it.
	GasLimitExceeded Category = "gas_limit_exceeded"
	// FeeCapTooLow: the max fee per gas (or legacy gas price) is below the
	// base fee of the next block.
	FeeCapTooLow Category = "fee_cap_too_low"
	// TxFeeCapExceeded: gas * fee cap is above the node's configured limit
	// for one transaction (geth's --rpc.txfeecap, default 1 ether), e.g.
	// "tx fee (1.20 ether) exceeds the configured cap (1.00 ether)".
	TxFeeCapExceeded Category = "tx_fee_cap_exceeded"
	// TxpoolFull: the pool has no room, in total or for this sender.
	TxpoolFull Category = "txpool_full"
	// InvalidSenderOrSignature: the signature does not recover to an
	// acceptable sender: bad values, another chain id, no replay
	// protection where the node requires it, or a sender with code.
	InvalidSenderOrSignature Category = "invalid_sender_or_signature"
	// TxTypeNotSupported: the node does not take transactions of this
	// EIP-2718 type: a fork that introduces it is not active on the node
	// (an EIP-7702 transaction before Prague), its pool keeps no such
	// transactions (blob transactions on a node without a blob pool), or
	// the type byte is unknown to it.
	TxTypeNotSupported Category = "tx_type_not_supported"
	// Oversized: the transaction is larger than the node takes (geth's
	// pool: 128 KiB, blobs aside; nethermind's MaxTxSize).
	Oversized Category = "oversized"
	// Malformed: the node could not decode the raw transaction (bad RLP,
	// a typed transaction too short, trailing bytes, nothing at all).
	// mevrouterd decodes every transaction before sending it, so a node
	// that cannot is usually one that does not know the encoding.
	Malformed Category = "malformed"
	// ExecutionReverted: the node ran the transaction and says it reverted.
	// A node that mines on arrival may already have mined it: Hardhat's
	// network, automining, mines a reverting transaction and then answers
	// eth_sendRawTransaction with the revert (anvil accepts it and reports
	// nothing). A node or RPC that simulates before it pools may refuse a
	// reverting transaction with the same words instead. Only the chain
	// tells which.
	ExecutionReverted Category = "execution_reverted"
	// Rejected: any other refusal of the transaction.
	Rejected Category = "rejected"
	// Transient: no verdict on the transaction: timeouts, unreachable or
	// failing nodes, HTTP 5xx and 429, rate limits, a node still syncing.
	// RateLimited tells a rate limit from the rest.
	Transient Category = "transient"
)

var all = []Category{
	AlreadyKnown,
	NonceTooLow,
	NonceTooHigh,
	ReplacementUnderpriced,
	Underpriced,
	InsufficientFunds,
	IntrinsicGasTooLow,
	GasLimitExceeded,
	FeeCapTooLow,
	TxFeeCapExceeded,
	TxpoolFull,
	InvalidSenderOrSignature,
	TxTypeNotSupported,
	Oversized,
	Malformed,
	ExecutionReverted,
	Rejected,
	Transient,
}

// Categories returns every category, in the order of the OpenAPI enum, for
// pre-registering metric label values. The slice is the caller's.
func Categories() []Category {
	return append([]Category(nil), all...)
}

// Accepted reports whether the node has the transaction, which is true of
// AlreadyKnown only. (A nil error is accepted too, but has no category.)
func (c Category) Accepted() bool {
	return c == AlreadyKnown
}

// Retryable reports whether sending later, unchanged or re-priced by the
// fee policy, can succeed, so that the right reaction is a retry with
// backoff rather than giving up:
//   - Transient: the node gave no verdict at all.
//   - TxpoolFull: the pool drains as blocks are mined.
//   - Underpriced: pool minimums and pool contents change, and the fee
//     bump raises the price; the transaction itself is sound.
//   - FeeCapTooLow: the base fee moves every block, and the fee bump
//     raises the cap.
//   - NonceTooHigh: the gap is below our own nonce, so it is ours to fill
//     (re-broadcast the lower attempts to this node); failing the
//     transaction would strand every later nonce of the signer.
func (c Category) Retryable() bool {
	switch c {
	case Transient, TxpoolFull, Underpriced, FeeCapTooLow, NonceTooHigh:
		return true
	}
	return false
}

// Fatal reports whether the transaction as signed can never be accepted,
// so that resending it is pointless. A refusal reaches txmanager only when
// no endpoint or relay accepted the transaction, so "never" means by any
// node we send to; what changes the answer is a new transaction or a new
// node, an operator's decision, not a retry:
//   - IntrinsicGasTooLow, GasLimitExceeded: its gas limit is wrong for
//     every block, or above the cap of every node we reach (the gas limit
//     is signed: another one is another transaction).
//   - InvalidSenderOrSignature: no node of this chain will take it.
//   - TxFeeCapExceeded: the node refuses its total fee; a cheaper
//     transaction is a new decision for the fee policy, not a retry.
//   - TxTypeNotSupported: the type is part of what was signed; the nodes
//     take it once they run the fork that brings it, which is an
//     upgrade to wait for, not a retry.
//   - Oversized: its size is what was signed; the node's limit does not
//     move between resends.
//   - Malformed: the same bytes decode the same way on every resend.
//   - Rejected: the node refused it for a reason this package does not
//     know, and only a known reason can make resending worthwhile.
//
// ExecutionReverted is not fatal, though resending is pointless too: the
// node may have mined the transaction, and a revert on chain is an outcome
// (REVERTED), not a refusal. Nor is it retryable: a resend can only get
// "already known" or "nonce too low" from such a node. txmanager leaves the
// transaction for the chain to decide (see its worker).
func (c Category) Fatal() bool {
	switch c {
	case IntrinsicGasTooLow, GasLimitExceeded, InvalidSenderOrSignature, TxFeeCapExceeded,
		TxTypeNotSupported, Oversized, Malformed, Rejected:
		return true
	}
	return false
}
