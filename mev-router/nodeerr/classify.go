package nodeerr

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/ethereum/go-ethereum/rpc"
)

// Classify returns the category of an error from eth_sendRawTransaction (or
// a relay's equivalent), and "" for nil. In order:
//   - Errors that mean no request reached a node, or no answer about the
//     transaction came back (deadlines, cancellation, any net.Error, which
//     covers every failure of net/http's client, refused or reset
//     connections, EOF, a closed client, an answer that is not JSON or
//     not of the expected shape, a null result, a call missing from a
//     batch's answer), and errors that say of themselves that they are
//     Temporary, are Transient: the node gave no verdict.
//   - A non-2xx HTTP status (rpc.HTTPError): 5xx, 429 and 408 are
//     Transient; 401, 403, 404, 405, 407 and 421 say that the endpoint is
//     wrong for us (credentials, URL), not the transaction, and 413 that
//     the request is larger than the endpoint (a proxy) takes: Transient
//     too, so the transaction is not lost to an endpoint's configuration;
//     any other status is classified by the message in its body.
//   - A JSON-RPC error (rpc.Error) with code 3 is ExecutionReverted
//     (its message quotes the contract, so it is not read); any other is
//     classified by its message, then its data; an unknown message with
//     code 429, -32005 (limit exceeded, used by providers for rate
//     limits), -32603 (internal error), or one of JSON-RPC's codes for a
//     request it could not take as such (-32700 parse error, -32600
//     invalid request, -32601 method not found: about the request, never
//     the transaction in it) is Transient, any other is Rejected.
//   - Anything else is classified by its message.
func Classify(err error) Category {
	if err == nil {
		return ""
	}
	if noVerdict(err) {
		return Transient
	}

	if httpErr, ok := asHTTPError(err); ok {
		return classifyHTTP(httpErr)
	}
	// Other clients' errors that carry the HTTP status of the answer (the
	// relay client's) are read by the same rule as rpc.HTTPError's.
	if status, ok := statusOf(err); ok && endpointTrouble(status) {
		return Transient
	}

	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) {
		return classifyRPC(rpcErr.ErrorCode(), rpcErr.Error(), errorData(err))
	}
	return ClassifyMessage(err.Error())
}

// noVerdict reports whether err says that the request got no answer from
// a node, or an answer that could not be read.
func noVerdict(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded),
		// The caller gave up: whether the node got the transaction is
		// unknown, which a resend (answered "already known") settles.
		errors.Is(err, context.Canceled),
		errors.Is(err, os.ErrDeadlineExceeded),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, rpc.ErrClientQuit),
		// A call answered with a null result, or left out of a batch's
		// answer: nothing was said about the transaction.
		errors.Is(err, rpc.ErrNoResult),
		errors.Is(err, rpc.ErrMissingBatchResponse):
		return true
	}
	// net.Error covers dial, DNS and TLS failures as well as timeouts:
	// net/http wraps every client failure in *url.Error, a net.Error.
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	// A 2xx answer that is not JSON comes from a proxy or a broken node,
	// not from a node that read the transaction. Nor does JSON of the wrong
	// shape: go-ethereum's client returns a *json.UnmarshalTypeError for a
	// batch answered with one error object instead of an array.
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return true
	}
	// The idiom of errors that know they are retryable, e.g. the relay
	// client's (5xx, 429 and 408 from a relay).
	var temp interface{ Temporary() bool }
	return errors.As(err, &temp) && temp.Temporary()
}

// endpointTrouble reports whether an HTTP status speaks of the endpoint
// (overloaded, failing, or refusing us: credentials, URL, a body larger
// than it takes), not of the transaction: no node gave a verdict on it.
func endpointTrouble(status int) bool {
	switch {
	case status >= 500,
		status == http.StatusRequestEntityTooLarge,
		status == http.StatusTooManyRequests,
		status == http.StatusRequestTimeout,
		status == http.StatusUnauthorized,
		status == http.StatusForbidden,
		status == http.StatusNotFound,
		status == http.StatusMethodNotAllowed,
		status == http.StatusProxyAuthRequired,
		status == http.StatusMisdirectedRequest:
		return true
	}
	return false
}

// RateLimited reports whether err is an endpoint asking for fewer
// requests: an HTTP 429 (rpc.HTTPError, or another client's error carrying
// that status), a JSON-RPC error whose message speaks of a rate limit
// ("too many requests", "rate limit", providers' quota wordings), or
// whose code is 429 or -32005 (EIP-1474's "limit exceeded", which
// providers use for rate limits) while its message is none this package
// knows. Classify reads each of these as Transient, as it should: no
// verdict on the transaction. RateLimited tells a sender what to do with
// the endpoint: keep it out for a while (its Retry-After, or a back-off)
// rather than count a failure. A verdict is never a rate limit whatever
// its code: besu answers -32005 for a gas limit above the block's, and
// for a batch above its limit, which are no rate limits.
func RateLimited(err error) bool {
	if Classify(err) != Transient {
		return false
	}
	if status, ok := statusOf(err); ok && status == http.StatusTooManyRequests {
		return true
	}
	if code, msg, ok := codeAndMessage(err); ok && rateLimitCode(code) && ClassifyMessage(msg) == Rejected {
		return true
	}
	return rateLimitWords.MatchString(normalize(err.Error()))
}

// rateLimitCode reports whether a JSON-RPC error code is one that
// providers use for a rate limit.
func rateLimitCode(code int) bool {
	return code == http.StatusTooManyRequests || code == -32005
}

// asHTTPError finds go-ethereum's error for a non-2xx answer in err, as a
// value or a pointer.
func asHTTPError(err error) (rpc.HTTPError, bool) {
	var httpErr rpc.HTTPError
	var httpErrPtr *rpc.HTTPError
	switch {
	case errors.As(err, &httpErr):
		return httpErr, true
	case errors.As(err, &httpErrPtr) && httpErrPtr != nil:
		return *httpErrPtr, true
	}
	return rpc.HTTPError{}, false
}

// statusOf is the HTTP status of the answer err reports, if it carries
// one: go-ethereum's rpc.HTTPError, or another client's error with a
// StatusCode method (the relay client's).
func statusOf(err error) (int, bool) {
	if httpErr, ok := asHTTPError(err); ok {
		return httpErr.StatusCode, true
	}
	var withStatus interface{ StatusCode() int }
	if errors.As(err, &withStatus) {
		return withStatus.StatusCode(), true
	}
	return 0, false
}

// codeAndMessage is the JSON-RPC error in err: an rpc.Error, or the error
// object in the body of a non-2xx answer.
func codeAndMessage(err error) (code int, msg string, ok bool) {
	var rpcErr rpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr.ErrorCode(), rpcErr.Error(), true
	}
	if httpErr, isHTTP := asHTTPError(err); isHTTP {
		if e := bodyError(httpErr.Body); e != nil {
			return e.Code, e.Message, true
		}
	}
	return 0, "", false
}

// jsonError is a JSON-RPC error object.
type jsonError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// bodyError is the JSON-RPC error object of an answer's body, or nil.
func bodyError(body []byte) *jsonError {
	var answer struct {
		Error *jsonError `json:"error"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return nil
	}
	return answer.Error
}

func classifyHTTP(e rpc.HTTPError) Category {
	if endpointTrouble(e.StatusCode) {
		return Transient
	}
	// Some nodes and providers answer a JSON-RPC error with a 4xx status.
	if body := bodyError(e.Body); body != nil {
		var data any
		_ = json.Unmarshal(body.Data, &data)
		return classifyRPC(body.Code, body.Message, data)
	}
	if len(e.Body) > 0 {
		return ClassifyMessage(string(e.Body))
	}
	return ClassifyMessage(e.Status)
}

func classifyRPC(code int, msg string, data any) Category {
	if code == 3 {
		// geth's, reth's, anvil's and besu's code for a revert, whose
		// message ends with the contract's reason: whatever that says.
		return ExecutionReverted
	}
	if c := ClassifyMessage(msg); c != Rejected {
		return c
	}
	// A few nodes and middlewares put the reason in the error's data.
	if s, ok := data.(string); ok && s != "" {
		if c := ClassifyMessage(s); c != Rejected {
			return c
		}
	}
	switch {
	case rateLimitCode(code), code == -32603, code == -32700, code == -32600, code == -32601:
		return Transient
	}
	return Rejected
}

func errorData(err error) any {
	var dataErr rpc.DataError
	if errors.As(err, &dataErr) {
		return dataErr.ErrorData()
	}
	return nil
}

// ClassifyMessage classifies a node's error message by matching it, case
// insensitively and with underscores read as spaces (so that besu's enum
// names such as NONCE_TOO_LOW read like messages), against the known
// wordings. A message that matches none is Rejected.
func ClassifyMessage(msg string) Category {
	m := normalize(msg)
	for _, r := range rules {
		if r.re.MatchString(m) {
			return r.cat
		}
	}
	return Rejected
}

// normalize is msg as the rules read it: lowercase, "_" as " ".
func normalize(msg string) string {
	return strings.ReplaceAll(strings.ToLower(msg), "_", " ")
}

type rule struct {
	cat Category
	re  *regexp.Regexp
}

func match(cat Category, pattern string) rule {
	return rule{cat, regexp.MustCompile(pattern)}
}

// rateLimitWords are rate limits of nodes and providers in their words:
// "too many requests", Infura "project ID request rate exceeded", Alchemy
// "… exceeded its compute units per second capacity".
var rateLimitWords = regexp.MustCompile(`rate limit|ratelimit|rate exceeded|too many requests|compute units`)

// rules are tried in order and the first match wins. The order matters
// where one wording contains another: a revert first, because the rest of
// its message is the contract's own text ("reverted with reason string
// 'nonce too low'"), "replacement transaction underpriced" before
// "underpriced", the base fee messages before the generic fee ones,
// "intrinsic gas exceeds gas limit" before the gas limit ones, the
// signature messages before the decoding ones, and nethermind's
// "NonceTooLow: nonce too high" (sic) reads as too high. Patterns are
// matched against the lowercased message with "_" as " ". Each comment
// names the clients whose messages the pattern was taken from.
var rules = []rule{
	// geth-style "execution reverted[: reason]" (reth, anvil, and besu's
	// "Execution reverted"), which a node or RPC that simulates before it
	// pools may answer to a send.
	match(ExecutionReverted, `execution reverted`),
	// hardhat, automining, after mining the transaction: "VM Exception
	// while processing transaction: reverted with reason string '…'" (and
	// "… with panic code …", "… with custom error …", "…: revert"),
	// "Transaction reverted without a reason string", "Transaction
	// reverted: function selector was not recognized …", "Transaction
	// reverted and Hardhat couldn't infer the reason.".
	match(ExecutionReverted, `vm exception while processing transaction|\btransaction reverted\b`),

	// geth txpool.ErrAlreadyKnown; erigon "ALREADY_EXISTS: already known";
	// reth RpcPoolError::AlreadyKnown; nethermind TxPoolErrorMessages
	// (current) and "AlreadyKnown: transaction is already known."; besu
	// enum TRANSACTION_ALREADY_KNOWN.
	match(AlreadyKnown, `already known`),
	// nethermind AcceptTxResult.AlreadyKnown (older releases: "AlreadyKnown").
	match(AlreadyKnown, `alreadyknown`),
	// besu "Known transaction"; hardhat "Known transaction: 0x…". The word
	// boundary keeps "unknown transaction type" out.
	match(AlreadyKnown, `\bknown transaction\b`),
	// anvil "transaction already imported"; reth pool "already imported".
	match(AlreadyKnown, `already imported`),
	// erigon DiscardReason DuplicateHash "existing txn with same hash"
	// (older: "existing tx with same hash").
	match(AlreadyKnown, `existing txn? with same hash`),

	// geth and erigon "tx fee (1.20 ether) exceeds the configured cap (1.00
	// ether)"; reth "tx fee (… wei) exceeds the configured cap (… wei)".
	match(TxFeeCapExceeded, `exceeds the configured cap`),
	// besu "Transaction fee cap exceeded" and enum TX_FEECAP_EXCEEDED.
	match(TxFeeCapExceeded, `fee ?cap exceeded`),

	// geth, erigon, reth, anvil, nethermind (current) "replacement
	// transaction underpriced"; besu and hardhat "Replacement transaction
	// underpriced[. A gasPrice/maxFeePerGas of at least …]"; besu enum
	// TRANSACTION_REPLACEMENT_UNDERPRICED.
	match(ReplacementUnderpriced, `replacement (transaction )?underpriced`),
	// nethermind AcceptTxResult.ReplacementNotAllowed (older releases).
	match(ReplacementUnderpriced, `replacementnotallowed`),
	// nethermind AcceptTxResult.OwnNonceAlreadyUsed (older releases): a
	// local transaction with this nonce is pooled, i.e. an attempt of ours.
	match(ReplacementUnderpriced, `ownnoncealreadyused`),
	// erigon DiscardReason NotReplaced "could not replace existing tx".
	match(ReplacementUnderpriced, `could not replace existing tx`),
	// reth PoolErrorKind and anvil PoolError "insufficient gas price to
	// replace existing transaction" (before their RPC layer rewords it).
	match(ReplacementUnderpriced, `insufficient gas price to replace`),

	// geth, reth, anvil, besu, hardhat, nethermind (current) "nonce too
	// high"; hardhat "Nonce too high. Expected nonce to be …"; nethermind
	// "FutureNonce: nonce too high." and "NonceTooLow: nonce too high." (sic).
	match(NonceTooHigh, `nonce too high`),
	// geth, erigon, anvil, nethermind (current) "nonce too low"; reth "nonce
	// too low: next nonce …"; besu "Nonce too low" and enum NONCE_TOO_LOW;
	// hardhat "Nonce too low. Expected nonce to be [at least] …"; hardhat
	// (EDR) "Transaction nonce too low. Expected nonce …".
	match(NonceTooLow, `nonce too low`),
	// besu "Transaction nonce is too distant from current sender nonce".
	match(NonceTooHigh, `nonce is too distant`),
	// nethermind "nonce too far in future" (current) and
	// "NonceTooFarInFuture" (older); besu enum NONCE_TOO_FAR_IN_FUTURE_FOR_SENDER.
	match(NonceTooHigh, `nonce ?too ?far ?in ?future`),
	// nethermind AcceptTxResult.NonceGap (older releases).
	match(NonceTooHigh, `noncegap`),
	// geth and reth "gapped-nonce tx from delegated accounts".
	match(NonceTooHigh, `gapped-nonce`),
	// besu "An invalid transaction with a lower nonce exists": this one
	// waits on a lower nonce, as with a gap.
	match(NonceTooHigh, `lower nonce exists`),
	// nethermind AcceptTxResult.OldNonce (older releases), and the
	// "NonceTooLow: …" / "NonceTooHigh: …" prefixes of its validation
	// messages; after the spelled-out forms because of the "sic" above.
	match(NonceTooLow, `oldnonce`),
	match(NonceTooHigh, `noncetoohigh`),
	match(NonceTooLow, `noncetoolow`),

	// geth, reth, anvil "max fee per gas less than block base fee";
	// nethermind "GasPriceTooLow: max fee per gas less than block base fee.".
	match(FeeCapTooLow, `less than block base fee`),
	// besu "Gas price below current base fee" and its enum.
	match(FeeCapTooLow, `below current base fee`),
	// hardhat "Transaction maxFeePerGas (…) is too low for the next block,
	// which has a baseFeePerGas of …", and the same with "gasPrice".
	match(FeeCapTooLow, `too low for the next block, which has a basefeepergas`),
	// nethermind "FeeTooLow, MaxFeePerGas too low. MaxFeePerGas: …,
	// BaseFee: …"; before the generic FeeTooLow below.
	match(FeeCapTooLow, `maxfeepergas too low`),

	// geth txpool.ErrUnderpriced, reth, nethermind (current, for FeeTooLow
	// and FeeTooLowToCompete) "transaction underpriced"; erigon
	// "FEE_TOO_LOW: underpriced". After every "replacement" form.
	match(Underpriced, `underpriced`),
	// nethermind AcceptTxResult.FeeTooLow and FeeTooLowToCompete (older
	// releases); erigon DiscardReason FeeTooLow "fee too low".
	match(Underpriced, `fee ?too ?low`),
	// geth ErrTxGasPriceTooLow "transaction gas price below minimum: gas tip
	// cap …, minimum needed …".
	match(Underpriced, `gas price below minimum`),
	// besu "Gas price below configured minimum gas price"; besu enum
	// GAS_PRICE_TOO_LOW.
	match(Underpriced, `below configured minimum`),
	match(Underpriced, `gas price too low`),
	// reth "transaction priority fee below minimum required priority fee …".
	match(Underpriced, `priority fee below minimum`),
	// reth PoolErrorKind "transaction feeCap … below chain minimum".
	match(Underpriced, `below chain minimum`),
	// hardhat (EDR) "Transaction gas price is …, which is below the minimum of …".
	match(Underpriced, `which is below the minimum`),

	// geth ErrInsufficientFunds "insufficient funds for gas * price + value"
	// and ErrInsufficientFundsForTransfer; reth "… : have … want …"; anvil
	// "Insufficient funds for gas * price + value"; erigon "insufficient
	// funds"; nethermind (current) "insufficient funds for …".
	match(InsufficientFunds, `insufficient funds`),
	// nethermind AcceptTxResult.InsufficientFunds (older releases) and
	// "InsufficientFundsForTxValue/TxGas: …".
	match(InsufficientFunds, `insufficientfunds`),
	// besu "Upfront cost exceeds account balance", enum UPFRONT_COST_EXCEEDS_BALANCE.
	match(InsufficientFunds, `upfront cost exceeds`),
	// hardhat "sender doesn't have enough funds to send tx. The [max]
	// upfront cost is: …"; hardhat (EDR) "Sender doesn't have enough funds …".
	match(InsufficientFunds, `doesn't have enough funds`),
	// reth InvalidPoolTransactionError::Overdraft "transaction overdraws
	// from account".
	match(InsufficientFunds, `overdraws`),

	// geth, reth, anvil, nethermind (current) "intrinsic gas too low".
	match(IntrinsicGasTooLow, `intrinsic gas too low`),
	// besu "Intrinsic gas exceeds gas limit" and enum
	// INTRINSIC_GAS_EXCEEDS_GAS_LIMIT; before the gas limit patterns.
	match(IntrinsicGasTooLow, `intrinsic gas exceeds gas limit`),
	// erigon DiscardReason IntrinsicGas "IntrinsicGas"; nethermind
	// "IntrinsicGasTooLow: Gas limit is below intrinsic gas.".
	match(IntrinsicGasTooLow, `intrinsicgas`),
	// anvil "intrinsic gas too high -- CallGasCostMoreThanGasLimit" and
	// "… -- GasFloorMoreThanGasLimit": revm's names for a gas limit below
	// the intrinsic gas or the floor, under anvil's misleading prefix.
	match(IntrinsicGasTooLow, `callgascostmorethangaslimit|gasfloormorethangaslimit`),
	// geth ErrFloorDataGas "insufficient gas for floor data gas cost";
	// nethermind "gas below floor data cost"; hardhat (EDR) "Transaction
	// requires gas floor of … but got limit of …".
	match(IntrinsicGasTooLow, `floor data gas cost|below floor data cost|requires gas floor`),
	// hardhat "Transaction requires at least … gas but got …".
	match(IntrinsicGasTooLow, `requires at least \d+ gas`),

	// geth txpool.ErrGasLimit, reth, besu, besu enum "exceeds block gas
	// limit"; hardhat "Transaction gas limit is … and exceeds block gas
	// limit of …"; reth pool "transaction's gas limit … exceeds block's
	// gas limit …"; besu pool "Transaction gas limit of … exceeds block
	// gas limit of …"; revm "caller gas limit exceeds the block gas limit".
	match(GasLimitExceeded, `exceeds (the )?block('s)? gas limit`),
	// reth "exceeds max transaction gas limit" (the pool's own maximum)
	// and "… exceeds maximum per-transaction gas limit …" (EIP-7825); besu
	// enums EXCEEDS_TRANSACTION_GAS_LIMIT and
	// EXCEEDS_PER_TRANSACTION_GAS_LIMIT; hardhat (EDR) "Transaction gas
	// limit is … and exceeds transaction gas cap of …" (EIP-7825).
	match(GasLimitExceeded, `exceeds (the )?(max(imum)? )?(per[- ])?transaction gas (limit|cap)`),
	// revm "transaction gas limit (…) is greater than the cap (…)"
	// (EIP-7825), which embedders pass on.
	match(GasLimitExceeded, `gas limit (\(?\d+\)? )?is greater than the cap`),
	// geth ErrGasLimitTooHigh "transaction gas limit too high (cap: …, tx:
	// …)"; reth "gas limit too high"; erigon "gas limit is too high".
	match(GasLimitExceeded, `gas limit (is )?too high`),
	// besu "Transaction gas limit cap exceeded"; nethermind
	// "TxGasLimitCapExceeded: …" and "BlockGasLimitExceeded: …" and
	// AcceptTxResult.GasLimitExceeded (older releases).
	match(GasLimitExceeded, `gas ?limit ?(cap ?)?exceeded`),
	// nethermind (current) "gas limit reached, Gas limit: …, gas limit of
	// rejected tx: …"; geth ErrGasLimitReached.
	match(GasLimitExceeded, `gas limit reached`),
	// anvil "Transaction gas limit is greater than the block gas limit, …".
	match(GasLimitExceeded, `greater than the block gas limit`),
	// anvil "intrinsic gas too high -- tx.gas_limit > env.block.gas_limit"
	// (and "… > env.cfg.tx_gas_limit_cap", "… -- CallerGasLimitMoreThanBlock");
	// reth RpcInvalidTransactionError::GasTooHigh "intrinsic gas too high",
	// which both raise for a gas limit above the block's.
	match(GasLimitExceeded, `intrinsic gas too high`),

	// geth legacypool.ErrTxPoolOverflow and reth "txpool is full"; erigon
	// "blobs limit in txpool is full".
	match(TxpoolFull, `txpool is full`),
	// erigon "pending sub-pool is full", "baseFee sub-pool is full",
	// "queued sub-pool is full".
	match(TxpoolFull, `sub-pool is full`),
	// geth txpool.ErrAccountLimitExceeded "account limit exceeded: pooled …
	// txs"; erigon DiscardReason Spammer "spammer"; reth "rejected due to …
	// being identified as a spammer": no room for this sender until its
	// pooled transactions are mined.
	match(TxpoolFull, `account limit exceeded|spammer`),
	// geth and reth "in-flight transaction limit reached for delegated accounts".
	match(TxpoolFull, `in-flight transaction limit reached`),
	// geth txpool.ErrOutOfCapacity "out of capacity"; reth "transaction
	// discarded outright due to pool size constraints"; geth
	// ErrFutureReplacePending, raised only when the pool is full.
	match(TxpoolFull, `out of capacity|due to pool size|future transaction tries to replace pending`),

	// geth txpool.ErrInvalidSender "invalid sender: …"; erigon and reth
	// "invalid sender".
	match(InvalidSenderOrSignature, `invalid sender`),
	// geth types.ErrInvalidChainId and anvil "invalid chain id for signer";
	// erigon "invalid chain id, expected: … got: …"; reth "invalid chain
	// ID"; hardhat "Trying to send a raw transaction with an invalid
	// chainId. …" and (EDR) "Invalid chainId … provided, expected …".
	match(InvalidSenderOrSignature, `invalid chain ?id`),
	// besu "Wrong chainId" and enum WRONG_CHAIN_ID.
	match(InvalidSenderOrSignature, `wrong chain ?id`),
	// nethermind "InvalidTxChainId: Expected …, got …." and
	// "InvalidTxSignature: Signature is invalid.".
	match(InvalidSenderOrSignature, `invalidtxchainid|invalidtxsignature`),
	// besu "Invalid signature" and enum INVALID_SIGNATURE; reth "invalid
	// transaction signature"; hardhat "Invalid Signature".
	match(InvalidSenderOrSignature, `invalid (transaction )?signature`),
	// geth types.ErrInvalidSig "invalid transaction v, r, s values".
	match(InvalidSenderOrSignature, `invalid transaction v, r, s values`),
	// anvil "Incompatible EIP-155 transaction, signed for another chain";
	// hardhat "Trying to send an incompatible EIP-155 transaction, signed
	// for another chain.".
	match(InvalidSenderOrSignature, `incompatible eip-?155 transaction`),
	// geth and erigon "only replay-protected (EIP-155) transactions allowed
	// over RPC"; besu "ChainId is required" and "ChainId not supported",
	// and enums REPLAY_PROTECTED_SIGNATURE_REQUIRED and
	// REPLAY_PROTECTED_SIGNATURES_NOT_SUPPORTED.
	match(InvalidSenderOrSignature, `only replay-protected|chainid is required|chainid not supported|replay protected signature`),
	// nethermind "failed to recover sender" (current) and
	// AcceptTxResult.FailedToResolveSender (older); anvil (alloy) "Failed
	// to recover the signer" and "signature S value is greater than
	// `secp256k1n / 2`".
	match(InvalidSenderOrSignature, `failed to recover (the )?s(ender|igner)|failedtoresolvesender|signature s value`),
	// geth, nethermind (current), anvil "sender not an eoa"; reth "sender is
	// not an EOA"; nethermind "SenderIsContract: …" (EIP-3607).
	match(InvalidSenderOrSignature, `sender (is )?not an eoa|senderiscontract`),
	// besu "Sender account not authorized to send transactions" and enum
	// TX_SENDER_NOT_AUTHORIZED.
	match(InvalidSenderOrSignature, `sender (account )?not authorized`),

	// geth, erigon, reth "transaction type not supported" (geth's pool:
	// "…: tx type 3 not supported by this pool", "…: type 4 rejected,
	// pool not yet in Prague"); anvil "Unknown transaction type not
	// supported"; nethermind "unsupported transaction type" (current),
	// "NotSupportedTxType" (older) and "InvalidTxType: Transaction type in
	// … is not supported."; besu "Invalid transaction type"; erigon "fork
	// supporting this transaction type is not activated yet"; ethereumjs
	// (Hardhat before EDR) "TypedTransaction with ID … unknown".
	match(TxTypeNotSupported, `transaction type not supported|unsupported transaction type|notsupportedtxtype|invalidtxtype|invalid transaction type|transaction type is not activated|typedtransaction with id \d+ unknown`),
	// anvil "EIP-7702 fields received but is not supported by the current
	// hardfork." (and EIP-4844, EIP-1559 fee params, access lists), "op-stack
	// deposit tx received but is not supported.", "EIP-7702 authorization
	// lists are not supported before the Prague hardfork"; reth
	// "blob_versioned_hashes is not supported for blocks before the Cancun
	// hardfork", "EIP-7702 authorization list not supported", "transactions
	// before Berlin should not have access list"; revm "Eip7702 is not
	// supported", "authorization list not supported".
	match(TxTypeNotSupported, `not supported by the current hardfork|deposit tx received but is not supported|not supported (for blocks )?before the \w+ hardfork|authorization list not supported|access list not supported|should not have access list|eip\d+ is not supported`),

	// geth, reth, erigon "oversized data[: transaction size …, limit …]";
	// erigon "RLPTooLong"; nethermind "transaction too large" (current) and
	// "MaxTxSizeExceeded" (older); reth (older) "input data too large";
	// besu enum EXCEEDS_MAX_TX_BYTES; and other wordings of such a limit.
	match(Oversized, `oversized data|rlptoolong|transaction too large|maxtxsizeexceeded|input data too large|exceeds max tx bytes|(transaction|tx) size exceeds|max tx size`),

	// geth and erigon decoding: "rlp: …", "typed transaction too short",
	// "transaction chain id or signature value exceeds 256 bits"; erigon
	// "short input: …", "trailing bytes after rlp encoded transaction",
	// "not an RLP encoded transaction…"; anvil "Failed to decode
	// transaction", "Empty transaction data"; reth "failed to decode signed
	// transaction", "empty transaction data"; nethermind "Invalid RLP.";
	// besu "Invalid block param (block not found)" (sic: its answer to a raw
	// transaction that does not decode) and enum INVALID_TRANSACTION_FORMAT;
	// hardhat "Invalid transaction"; ethereumjs "Invalid serialized tx input".
	match(Malformed, `rlp:|typed transaction too short|signature value exceeds 256 bits|^short input|trailing bytes after rlp|not an rlp encoded transaction|failed to decode|empty transaction data|invalid rlp|invalid block param \(block not found\)|invalid transaction format|^invalid transaction\.?$|invalid serialized tx input`),

	// The node is up but cannot judge transactions yet: nethermind "node is
	// syncing"; besu "Initial sync is still in progress" and "Transaction
	// pool not enabled. (Either txpool explicitly disabled, or node not yet
	// in sync)."; erigon "TxPool Disabled".
	match(Transient, `node is syncing|sync is still in progress|transaction pool not enabled|txpool disabled`),
	// Rate limits of nodes and providers (RateLimited reads them too).
	{Transient, rateLimitWords},
	// A batch answered as a whole, which says nothing of any transaction
	// in it: geth "batch too large" and "response too large"; besu "Number
	// of requests exceeds max batch size".
	match(Transient, `batch too large|response too large|exceeds max batch size`),
	// Timeouts and overload, as proxies and nodes word them; besu "Timeout
	// expired".
	match(Transient, `timeout|timed out|service unavailable|temporarily unavailable|bad gateway|try again later`),
	// Transport failures that reached us only as text.
	match(Transient, `connection refused|connection reset|broken pipe|no such host|network is unreachable|server closed idle connection|\beof$`),
}
