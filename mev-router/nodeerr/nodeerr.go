// Package nodeerr sorts what Ethereum nodes answer to eth_sendRawTransaction
// into a few stable categories, so that txmanager acts on a category and
// never on one client's wording. geth, erigon, nethermind, besu, reth, anvil
// and hardhat each word the same refusal differently (and some changed their
// wording between releases); the patterns that absorb this live in
// classify.go, each with the clients it was taken from.
//
// A category says what the refusal means for the transaction, and the
// methods Accepted, Retryable and Fatal say what to do about it. Three
// categories are none of the three, because txmanager must look before it
// acts: NonceTooLow (was one of our attempts mined?), ReplacementUnderpriced
// (an attempt of ours is pooled) and InsufficientFunds (hold until funded).
// Neither is the empty category that Classify gives a nil error.
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
	// GasLimitExceeded: the gas limit is above the block gas limit or the
	// per-transaction cap (EIP-7825).
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
	// Rejected: any other refusal of the transaction.
	Rejected Category = "rejected"
	// Transient: no verdict on the transaction: timeouts, unreachable or
	// failing nodes, HTTP 5xx and 429, rate limits, a node still syncing.
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
// so that resending it is pointless:
//   - IntrinsicGasTooLow, GasLimitExceeded: its gas limit is wrong for
//     every block.
//   - InvalidSenderOrSignature: no node of this chain will take it.
//   - TxFeeCapExceeded: the node refuses its total fee; a cheaper
//     transaction is a new decision for the fee policy, not a retry.
//   - Rejected: the node refused it for a reason this package does not
//     know, and only a known reason can make resending worthwhile.
func (c Category) Fatal() bool {
	switch c {
	case IntrinsicGasTooLow, GasLimitExceeded, InvalidSenderOrSignature, TxFeeCapExceeded, Rejected:
		return true
	}
	return false
}
