package nodeerr_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/txfence/txfence/mev-router/nodeerr"
)

// The messages below are the clients' own, taken from their sources (cited
// per client) with the format verbs filled in. Where a client changed its
// wording, both forms are here.

type example struct {
	msg  string
	want nodeerr.Category
}

func checkMessages(t *testing.T, examples []example) {
	t.Helper()
	want := make(map[string]nodeerr.Category, len(examples))
	got := make(map[string]nodeerr.Category, len(examples))
	for _, e := range examples {
		want[e.msg] = e.want
		got[e.msg] = nodeerr.ClassifyMessage(e.msg)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClassifyMessage (-want +got):\n%s", diff)
	}
}

// go-ethereum v1.17.10: core/txpool/errors.go, core/txpool/validation.go,
// core/txpool/legacypool/legacypool.go, core/error.go,
// core/state_transition.go, core/types/transaction.go,
// core/types/transaction_signing.go, internal/ethapi/api.go.
var gethExamples = []example{
	{"already known", nodeerr.AlreadyKnown},
	{"nonce too low: next nonce 5, tx nonce 3", nodeerr.NonceTooLow},
	{"nonce too low: address 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266, tx: 3 state: 5", nodeerr.NonceTooLow},
	{"nonce too high: tx nonce 9, gapped nonce 6", nodeerr.NonceTooHigh},
	{"gapped-nonce tx from delegated accounts", nodeerr.NonceTooHigh},
	{"replacement transaction underpriced", nodeerr.ReplacementUnderpriced},
	{"transaction underpriced", nodeerr.Underpriced},
	{"transaction gas price below minimum: gas tip cap 1, minimum needed 1000000", nodeerr.Underpriced},
	{"insufficient funds for gas * price + value: balance 0, tx cost 21000000000000, overshot 21000000000000", nodeerr.InsufficientFunds},
	{"insufficient funds for gas * price + value: address 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 have 0 want 21000000000000", nodeerr.InsufficientFunds},
	{"insufficient funds for transfer", nodeerr.InsufficientFunds},
	{"intrinsic gas too low: gas 20000, minimum needed 21000", nodeerr.IntrinsicGasTooLow},
	{"insufficient gas for floor data gas cost: gas 21000, minimum needed 25000", nodeerr.IntrinsicGasTooLow},
	{"exceeds block gas limit", nodeerr.GasLimitExceeded},
	{"transaction gas limit too high (cap: 16777216, tx: 30000000)", nodeerr.GasLimitExceeded},
	{"gas limit reached", nodeerr.GasLimitExceeded},
	{"max fee per gas less than block base fee: address 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266, maxFeePerGas: 1000000000, baseFee: 7000000000", nodeerr.FeeCapTooLow},
	{"tx fee (1.20 ether) exceeds the configured cap (1.00 ether)", nodeerr.TxFeeCapExceeded},
	{"txpool is full", nodeerr.TxpoolFull},
	{"out of capacity", nodeerr.TxpoolFull},
	{"account limit exceeded: pooled 16 txs", nodeerr.TxpoolFull},
	{"in-flight transaction limit reached for delegated accounts", nodeerr.TxpoolFull},
	{"future transaction tries to replace pending", nodeerr.TxpoolFull},
	{"invalid sender: invalid chain id for signer", nodeerr.InvalidSenderOrSignature},
	{"invalid sender: invalid transaction v, r, s values", nodeerr.InvalidSenderOrSignature},
	{"only replay-protected (EIP-155) transactions allowed over RPC", nodeerr.InvalidSenderOrSignature},
	{"sender not an eoa: address 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266, len(code): 23", nodeerr.InvalidSenderOrSignature},
	{"max priority fee per gas higher than max fee per gas", nodeerr.Rejected},
	{"max fee per gas higher than 2^256-1", nodeerr.Rejected},
	{"oversized data: transaction size 200000, limit 131072", nodeerr.Oversized},
	{"transaction type not supported: tx type 3 not supported by this pool", nodeerr.TxTypeNotSupported},
	{"transaction type not supported: type 4 rejected, pool not yet in Prague", nodeerr.TxTypeNotSupported},
	{"transaction type not supported", nodeerr.TxTypeNotSupported}, // an unknown type byte, as decoding says
	{"typed transaction too short", nodeerr.Malformed},
	{"rlp: expected input list for types.LegacyTx", nodeerr.Malformed},
	{"rlp: value size exceeds available input length", nodeerr.Malformed},
	{"rlp: too few elements for types.DynamicFeeTx", nodeerr.Malformed},
	{"rlp: input contains more than one value", nodeerr.Malformed},
	{"transaction chain id or signature value exceeds 256 bits", nodeerr.Malformed},
	{"transaction gas limit too high (cap: 33554432, tx: 40000000)", nodeerr.GasLimitExceeded}, // Amsterdam's cap
	{"negative value", nodeerr.Rejected},
	{"nonce has max value: address 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266, nonce: 18446744073709551615", nodeerr.Rejected},
	{"address already reserved", nodeerr.Rejected},
}

func TestGeth(t *testing.T) {
	t.Parallel()
	checkMessages(t, gethExamples)
}

// erigon: rpc/jsonrpc/send_transaction.go (the "%s: %s" of the import
// result's name and the discard reason, the chain id and fee cap checks),
// txnprovider/txpool/txpool_grpc_server.go (mapDiscardReasonToProto,
// ErrPoolDisabled), txnprovider/txpool/txpoolcfg/txpoolcfg.go
// (DiscardReason.String).
var erigonExamples = []example{
	{"ALREADY_EXISTS: already known", nodeerr.AlreadyKnown},
	{"INTERNAL_ERROR: existing txn with same hash", nodeerr.AlreadyKnown},
	{"INTERNAL_ERROR: existing tx with same hash", nodeerr.AlreadyKnown},
	{"FEE_TOO_LOW: replacement transaction underpriced", nodeerr.ReplacementUnderpriced},
	{"INTERNAL_ERROR: could not replace existing tx", nodeerr.ReplacementUnderpriced},
	{"FEE_TOO_LOW: underpriced", nodeerr.Underpriced},
	{"FEE_TOO_LOW: fee too low", nodeerr.Underpriced},
	{"INTERNAL_ERROR: nonce too low", nodeerr.NonceTooLow},
	{"INTERNAL_ERROR: insufficient funds", nodeerr.InsufficientFunds},
	{"INTERNAL_ERROR: IntrinsicGas", nodeerr.IntrinsicGasTooLow},
	{"INTERNAL_ERROR: gas limit is too high", nodeerr.GasLimitExceeded},
	{"INTERNAL_ERROR: pending sub-pool is full", nodeerr.TxpoolFull},
	{"INTERNAL_ERROR: baseFee sub-pool is full", nodeerr.TxpoolFull},
	{"INTERNAL_ERROR: queued sub-pool is full", nodeerr.TxpoolFull},
	{"INTERNAL_ERROR: blobs limit in txpool is full", nodeerr.TxpoolFull},
	{"INTERNAL_ERROR: spammer", nodeerr.TxpoolFull},
	{"INVALID: invalid sender", nodeerr.InvalidSenderOrSignature},
	{"invalid chain id, expected: 1 got: 5", nodeerr.InvalidSenderOrSignature},
	{"only replay-protected (EIP-155) transactions allowed over RPC", nodeerr.InvalidSenderOrSignature},
	{"tx fee (1.20 ether) exceeds the configured cap (1.00 ether)", nodeerr.TxFeeCapExceeded},
	{"TxPool Disabled", nodeerr.Transient},
	{"INVALID: negative value", nodeerr.Rejected},
	{"INVALID: oversized data", nodeerr.Oversized},
	{"INVALID: RLPTooLong", nodeerr.Oversized},
	{"INVALID: fork supporting this transaction type is not activated yet", nodeerr.TxTypeNotSupported},
	{"transaction type not supported", nodeerr.TxTypeNotSupported},
	{"short input: 1", nodeerr.Malformed},
	{"trailing bytes after rlp encoded transaction", nodeerr.Malformed},
	{"rlp: value size exceeds available input length", nodeerr.Malformed},
	{"INTERNAL_ERROR: GasUintOverflow", nodeerr.Rejected},
	{"INVALID: initcode too large", nodeerr.Rejected},
}

func TestErigon(t *testing.T) {
	t.Parallel()
	checkMessages(t, erigonExamples)
}

// nethermind: src/Nethermind/Nethermind.TxPool/AcceptTxResult.cs (older
// releases: codes are the result names, e.g. "OldNonce"; current: the
// phrases of TxPoolErrorMessages.cs; ToString is "{Code}, {Message}"),
// the filters' WithMessage texts under Nethermind.TxPool/Filters,
// Nethermind.Core/Messages/TxErrorMessages.cs and its predecessor in
// Nethermind.Crypto, and EthRpcModule.SendTx, which answers
// acceptTxResult.ToString().
var nethermindExamples = []example{
	// Current wording.
	{"already known", nodeerr.AlreadyKnown},
	{"nonce too low", nodeerr.NonceTooLow},
	{"nonce too high", nodeerr.NonceTooHigh},
	{"nonce too far in future", nodeerr.NonceTooHigh},
	{"replacement transaction underpriced", nodeerr.ReplacementUnderpriced},
	{"transaction underpriced", nodeerr.Underpriced},
	{"insufficient funds for gas * price + value", nodeerr.InsufficientFunds},
	{"insufficient funds for transfer", nodeerr.InsufficientFunds},
	{"gas limit reached, Gas limit: 30000000, gas limit of rejected tx: 31000000", nodeerr.GasLimitExceeded},
	{"transaction invalid, intrinsic gas too low", nodeerr.IntrinsicGasTooLow},
	{"transaction invalid, gas below floor data cost", nodeerr.IntrinsicGasTooLow},
	{"failed to recover sender", nodeerr.InvalidSenderOrSignature},
	{"sender not an eoa", nodeerr.InvalidSenderOrSignature},
	{"node is syncing", nodeerr.Transient},
	{"transaction cost overflow", nodeerr.Rejected},
	{"unsupported transaction type", nodeerr.TxTypeNotSupported},
	{"transaction too large", nodeerr.Oversized},
	{"InvalidTxType: Transaction type in Osaka is not supported.", nodeerr.TxTypeNotSupported},
	// Older wording: result names, with the filters' messages.
	{"AlreadyKnown", nodeerr.AlreadyKnown},
	{"AlreadyKnown: transaction is already known.", nodeerr.AlreadyKnown},
	{"OldNonce, Current nonce: 5, nonce of rejected tx: 3", nodeerr.NonceTooLow},
	{"NonceGap, Future nonce. Expected nonce: 7", nodeerr.NonceTooHigh},
	{"NonceTooFarInFuture", nodeerr.NonceTooHigh},
	{"ReplacementNotAllowed", nodeerr.ReplacementUnderpriced},
	{"OwnNonceAlreadyUsed", nodeerr.ReplacementUnderpriced},
	{"FeeTooLow, FeePerGas needs to be higher than 2000000000 to be added to the TxPool. Affordable FeePerGas of rejected tx: 1000000000.", nodeerr.Underpriced},
	{"FeeTooLow, EffectivePriorityFeePerGas too low 1 < 1000000, BaseFee: 7", nodeerr.Underpriced},
	{"FeeTooLowToCompete", nodeerr.Underpriced},
	{"FeeTooLow, MaxFeePerGas too low. MaxFeePerGas: 1000000000, BaseFee: 7000000000, MaxPriorityFeePerGas:1000000000, Block number: 101", nodeerr.FeeCapTooLow},
	{"InsufficientFunds, Account balance: 0, cumulative cost: 21000000000000", nodeerr.InsufficientFunds},
	{"InsufficientFunds, Balance is zero, cannot pay gas", nodeerr.InsufficientFunds},
	{"GasLimitExceeded, Gas limit: 30000000, gas limit of rejected tx: 31000000", nodeerr.GasLimitExceeded},
	{"FailedToResolveSender", nodeerr.InvalidSenderOrSignature},
	{"SenderIsContract", nodeerr.InvalidSenderOrSignature},
	{"Invalid, IntrinsicGasTooLow: gas limit is below intrinsic gas.", nodeerr.IntrinsicGasTooLow},
	{"Invalid, InvalidTxSignature: signature is invalid.", nodeerr.InvalidSenderOrSignature},
	{"Invalid, InvalidTxChainId: expected 1, got 5.", nodeerr.InvalidSenderOrSignature},
	{"Int256Overflow", nodeerr.Rejected},
	{"Invalid", nodeerr.Rejected},
	{"NotSupportedTxType", nodeerr.TxTypeNotSupported},
	{"MaxTxSizeExceeded", nodeerr.Oversized},
	{"Invalid RLP.", nodeerr.Malformed},
	// TxErrorMessages (validation and transaction processing).
	{"NonceTooLow: nonce too low. Current nonce: 5, nonce of tx: 3.", nodeerr.NonceTooLow},
	{"NonceTooLow: nonce too high. Current nonce: 5, nonce of tx: 9.", nodeerr.NonceTooHigh}, // sic
	{"FutureNonce: nonce too high. Expected nonce: 5, nonce of tx: 9.", nodeerr.NonceTooHigh},
	{"GasPriceTooLow: max fee per gas less than block base fee.", nodeerr.FeeCapTooLow},
	{"InsufficientFundsForTxGas: sender has insufficient funds for transaction gas.", nodeerr.InsufficientFunds},
	{"BlockGasLimitExceeded: block gas limit exceeded.", nodeerr.GasLimitExceeded},
	{"TxGasLimitCapExceeded: Gas limit 30000000 exceeded cap of 16777216.", nodeerr.GasLimitExceeded},
	{"SenderIsContract: sender address has deployed code.", nodeerr.InvalidSenderOrSignature},
	{"InvalidMaxPriorityFeePerGas: Cannot be higher than maxFeePerGas.", nodeerr.Rejected},
}

func TestNethermind(t *testing.T) {
	t.Parallel()
	checkMessages(t, nethermindExamples)
}

// besu: ethereum/api/src/main/java/org/hyperledger/besu/ethereum/api/
// jsonrpc/internal/response/RpcErrorType.java (the JSON-RPC messages),
// .../jsonrpc/JsonRpcErrorConverter.java (which reason gets which), and
// ethereum/core/.../transaction/TransactionInvalidReason.java (the enum
// names, which show up in logs and plugin answers).
var besuExamples = []example{
	{"Known transaction", nodeerr.AlreadyKnown},
	{"Replacement transaction underpriced", nodeerr.ReplacementUnderpriced},
	{"Nonce too low", nodeerr.NonceTooLow},
	{"Nonce too high", nodeerr.NonceTooHigh},
	{"Transaction nonce is too distant from current sender nonce", nodeerr.NonceTooHigh},
	{"An invalid transaction with a lower nonce exists", nodeerr.NonceTooHigh},
	{"Invalid signature", nodeerr.InvalidSenderOrSignature},
	{"Intrinsic gas exceeds gas limit", nodeerr.IntrinsicGasTooLow},
	{"Upfront cost exceeds account balance", nodeerr.InsufficientFunds},
	{"Transaction gas limit exceeds block gas limit", nodeerr.GasLimitExceeded},
	{"Transaction gas limit cap exceeded", nodeerr.GasLimitExceeded},
	{"Transaction gas limit of 31000000 exceeds block gas limit of 30000000", nodeerr.GasLimitExceeded}, // the pool's detail
	{"Gas price below configured minimum gas price", nodeerr.Underpriced},
	{"Gas price below current base fee", nodeerr.FeeCapTooLow},
	{"Wrong chainId", nodeerr.InvalidSenderOrSignature},
	{"ChainId not supported", nodeerr.InvalidSenderOrSignature},
	{"ChainId is required", nodeerr.InvalidSenderOrSignature},
	{"Transaction fee cap exceeded", nodeerr.TxFeeCapExceeded},
	{"Sender account not authorized to send transactions", nodeerr.InvalidSenderOrSignature},
	{"Initial sync is still in progress", nodeerr.Transient},
	{"Transaction pool not enabled. (Either txpool explicitly disabled, or node not yet in sync).", nodeerr.Transient},
	{"Timeout expired", nodeerr.Transient},
	{"Max priority fee per gas exceeds max fee per gas", nodeerr.Rejected},
	{"Plugin has marked the transaction as invalid", nodeerr.Rejected},
	{"Invalid params", nodeerr.Rejected},
	{"Invalid transaction type", nodeerr.TxTypeNotSupported},
	{"Invalid block param (block not found)", nodeerr.Malformed}, // sic: its answer to a raw transaction that is not RLP
	{"Execution reverted", nodeerr.ExecutionReverted},
	// TransactionInvalidReason names.
	{"NONCE_TOO_LOW", nodeerr.NonceTooLow},
	{"NONCE_TOO_HIGH", nodeerr.NonceTooHigh},
	{"NONCE_TOO_FAR_IN_FUTURE_FOR_SENDER", nodeerr.NonceTooHigh},
	{"TRANSACTION_ALREADY_KNOWN", nodeerr.AlreadyKnown},
	{"TRANSACTION_REPLACEMENT_UNDERPRICED", nodeerr.ReplacementUnderpriced},
	{"UPFRONT_COST_EXCEEDS_BALANCE", nodeerr.InsufficientFunds},
	{"INTRINSIC_GAS_EXCEEDS_GAS_LIMIT", nodeerr.IntrinsicGasTooLow},
	{"EXCEEDS_BLOCK_GAS_LIMIT", nodeerr.GasLimitExceeded},
	{"EXCEEDS_TRANSACTION_GAS_LIMIT", nodeerr.GasLimitExceeded},
	{"TX_FEECAP_EXCEEDED", nodeerr.TxFeeCapExceeded},
	{"GAS_PRICE_BELOW_CURRENT_BASE_FEE", nodeerr.FeeCapTooLow},
	{"GAS_PRICE_TOO_LOW", nodeerr.Underpriced},
	{"INVALID_SIGNATURE", nodeerr.InvalidSenderOrSignature},
	{"WRONG_CHAIN_ID", nodeerr.InvalidSenderOrSignature},
	{"REPLAY_PROTECTED_SIGNATURE_REQUIRED", nodeerr.InvalidSenderOrSignature},
	{"TX_SENDER_NOT_AUTHORIZED", nodeerr.InvalidSenderOrSignature},
	{"EXCEEDS_PER_TRANSACTION_GAS_LIMIT", nodeerr.GasLimitExceeded},
	{"EXCEEDS_MAX_TX_BYTES", nodeerr.Oversized},
	{"INVALID_TRANSACTION_FORMAT", nodeerr.Malformed},
	{"MAX_PRIORITY_FEE_PER_GAS_EXCEEDS_MAX_FEE_PER_GAS", nodeerr.Rejected},
}

func TestBesu(t *testing.T) {
	t.Parallel()
	checkMessages(t, besuExamples)
}

// reth: crates/rpc/rpc-eth-types/src/error/mod.rs (RpcPoolError and
// RpcInvalidTransactionError, which mirror geth for eth_sendRawTransaction)
// and crates/transaction-pool/src/error.rs (PoolErrorKind and
// InvalidPoolTransactionError, as logged and as some embedders answer them).
var rethExamples = []example{
	{"already known", nodeerr.AlreadyKnown},
	{"invalid sender", nodeerr.InvalidSenderOrSignature},
	{"transaction underpriced", nodeerr.Underpriced},
	{"txpool is full", nodeerr.TxpoolFull},
	{"replacement transaction underpriced", nodeerr.ReplacementUnderpriced},
	{"exceeds block gas limit", nodeerr.GasLimitExceeded},
	{"exceeds max transaction gas limit", nodeerr.GasLimitExceeded},
	{"tx fee (2000000000000000000 wei) exceeds the configured cap (1000000000000000000 wei)", nodeerr.TxFeeCapExceeded},
	{"nonce too low: next nonce 5, tx nonce 3", nodeerr.NonceTooLow},
	{"nonce too high", nodeerr.NonceTooHigh},
	{"gapped-nonce tx from delegated accounts", nodeerr.NonceTooHigh},
	{"insufficient funds for gas * price + value: have 0 want 21000000000000", nodeerr.InsufficientFunds},
	{"insufficient funds for transfer", nodeerr.InsufficientFunds},
	{"intrinsic gas too low", nodeerr.IntrinsicGasTooLow},
	{"intrinsic gas too high", nodeerr.GasLimitExceeded},
	{"gas limit too high", nodeerr.GasLimitExceeded},
	{"max fee per gas less than block base fee", nodeerr.FeeCapTooLow},
	{"transaction priority fee below minimum required priority fee 1000000", nodeerr.Underpriced},
	{"invalid chain ID", nodeerr.InvalidSenderOrSignature},
	{"invalid transaction signature", nodeerr.InvalidSenderOrSignature},
	{"sender is not an EOA", nodeerr.InvalidSenderOrSignature},
	{"in-flight transaction limit reached for delegated accounts", nodeerr.TxpoolFull},
	{"address already reserved", nodeerr.Rejected},
	{"negative value", nodeerr.Rejected},
	{"nonce has max value", nodeerr.Rejected},
	{"max initcode size exceeded", nodeerr.Rejected},
	{"transaction type not supported", nodeerr.TxTypeNotSupported},
	{"EIP-7702 authorization list not supported", nodeerr.TxTypeNotSupported},
	{"transactions before Berlin should not have access list", nodeerr.TxTypeNotSupported},
	{"blob_versioned_hashes is not supported for blocks before the Cancun hardfork", nodeerr.TxTypeNotSupported},
	{"oversized data: transaction size 200000, limit 131072", nodeerr.Oversized},
	{"failed to decode signed transaction", nodeerr.Malformed},
	{"empty transaction data", nodeerr.Malformed},
	{"EOF crate should have `to` address", nodeerr.Rejected},
	// The pool's own errors, before the RPC layer rewords them.
	{"[0x1c9d2a1f6d3a3e5b9f1f6f0c6c2b0b1e7a4c8f9d2e3b4a5c6d7e8f9a0b1c2d3e]: already imported", nodeerr.AlreadyKnown},
	{"insufficient gas price to replace existing transaction", nodeerr.ReplacementUnderpriced},
	{"transaction feeCap 5 below chain minimum", nodeerr.Underpriced},
	{"rejected due to 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 being identified as a spammer", nodeerr.TxpoolFull},
	{"transaction discarded outright due to pool size constraints", nodeerr.TxpoolFull},
	{"transaction's gas limit 31000000 exceeds block's gas limit 30000000", nodeerr.GasLimitExceeded},
	{"transaction's gas limit 20000000 exceeds maximum per-transaction gas limit 16777216", nodeerr.GasLimitExceeded},
	{"input data too large", nodeerr.Oversized},
	// revm's InvalidTransaction, which reth's embedders and EDR pass on.
	{"transaction gas limit (20000000) is greater than the cap (16777216)", nodeerr.GasLimitExceeded},
	{"caller gas limit exceeds the block gas limit", nodeerr.GasLimitExceeded},
	{"Eip7702 is not supported", nodeerr.TxTypeNotSupported},
	{"transaction overdraws from account, balance: 0, cost: 21000000000000", nodeerr.InsufficientFunds},
}

func TestReth(t *testing.T) {
	t.Parallel()
	checkMessages(t, rethExamples)
}

// anvil (foundry v1.7.1, the pinned release): crates/anvil/src/eth/error.rs
// (InvalidTransactionError, PoolError and their JSON-RPC form in
// ToRpcResponseResult), crates/anvil/src/eth/backend/mem/mod.rs
// (validate_pool_transaction_for, which fills in the GasTooHigh details),
// and alloy's RecoveryError and InvalidSignatureS.
var anvilExamples = []example{
	{"transaction already imported", nodeerr.AlreadyKnown},
	{"replacement transaction underpriced", nodeerr.ReplacementUnderpriced},
	{"nonce too low", nodeerr.NonceTooLow},
	{"Nonce too high", nodeerr.NonceTooHigh},
	{"Insufficient funds for gas * price + value", nodeerr.InsufficientFunds},
	{"insufficient funds for transfer", nodeerr.InsufficientFunds},
	{"intrinsic gas too low", nodeerr.IntrinsicGasTooLow},
	{"intrinsic gas too high -- CallGasCostMoreThanGasLimit", nodeerr.IntrinsicGasTooLow},
	{"intrinsic gas too high -- GasFloorMoreThanGasLimit", nodeerr.IntrinsicGasTooLow},
	{"intrinsic gas too high -- tx.gas_limit > env.block.gas_limit", nodeerr.GasLimitExceeded},
	{"intrinsic gas too high -- tx.gas_limit > env.cfg.tx_gas_limit_cap", nodeerr.GasLimitExceeded},
	{"intrinsic gas too high -- CallerGasLimitMoreThanBlock", nodeerr.GasLimitExceeded},
	{"Transaction gas limit is greater than the block gas limit, gas_limit: 31000000, cap: 30000000", nodeerr.GasLimitExceeded},
	{"max fee per gas less than block base fee", nodeerr.FeeCapTooLow},
	{"invalid chain id for signer", nodeerr.InvalidSenderOrSignature},
	{"Incompatible EIP-155 transaction, signed for another chain", nodeerr.InvalidSenderOrSignature},
	{"Failed to recover the signer", nodeerr.InvalidSenderOrSignature},
	{"signature S value is greater than `secp256k1n / 2`", nodeerr.InvalidSenderOrSignature},
	{"sender not an eoa", nodeerr.InvalidSenderOrSignature},
	{"max priority fee per gas higher than max fee per gas", nodeerr.Rejected},
	{"Cyclic transaction detected", nodeerr.Rejected},
	{"Unknown transaction type not supported", nodeerr.TxTypeNotSupported},
	{"EIP-7702 fields received but is not supported by the current hardfork.\n\nYou can use it by running anvil with '--hardfork prague' or later.", nodeerr.TxTypeNotSupported},
	{"EIP-4844 fields received but is not supported by the current hardfork.\n\nYou can use it by running anvil with '--hardfork cancun' or later.", nodeerr.TxTypeNotSupported},
	{"EIP-1559 style fee params (maxFeePerGas or maxPriorityFeePerGas) received but they are not supported by the current hardfork.\n\nYou can use them by running anvil with '--hardfork london' or later.", nodeerr.TxTypeNotSupported},
	{"Access list received but is not supported by the current hardfork.\n\nYou can use it by running anvil with '--hardfork berlin' or later.", nodeerr.TxTypeNotSupported},
	{"op-stack deposit tx received but is not supported.\n\nYou can use it by running anvil with '--optimism'.", nodeerr.TxTypeNotSupported},
	{"EIP-7702 authorization lists are not supported before the Prague hardfork", nodeerr.TxTypeNotSupported},
	{"Eip4844 is not supported", nodeerr.TxTypeNotSupported}, // revm's own, passed through
	{"Failed to decode transaction", nodeerr.Malformed},
	{"Empty transaction data", nodeerr.Malformed},
	{"execution reverted: nope", nodeerr.ExecutionReverted},
	{"transaction gas limit (20000000) is greater than the cap (16777216)", nodeerr.GasLimitExceeded}, // revm's, passed through
	{"nonce has max value", nodeerr.Rejected},
	{"max initcode size exceeded", nodeerr.Rejected},
}

func TestAnvil(t *testing.T) {
	t.Parallel()
	checkMessages(t, anvilExamples)
}

// hardhat: packages/hardhat-core/src/internal/hardhat-network/provider/
// TxPool.ts, node.ts and modules/eth.ts (Hardhat 2 before EDR), and EDR,
// which runs Hardhat's network now: crates/edr_evm/src/mempool.rs
// (MemPoolAddTransactionError), crates/edr_provider/src/error.rs
// (ProviderError) and the transaction CreationError.
var hardhatExamples = []example{
	{"Known transaction: 0x1c9d2a1f6d3a3e5b9f1f6f0c6c2b0b1e7a4c8f9d2e3b4a5c6d7e8f9a0b1c2d3e", nodeerr.AlreadyKnown},
	{"Nonce too low. Expected nonce to be at least 5 but got 3.", nodeerr.NonceTooLow},
	{"Transaction nonce too low. Expected nonce to be at least 5 but got 3.", nodeerr.NonceTooLow},
	{"Nonce too low. Expected nonce to be 5 but got 3. Note that transactions can't be queued when automining.", nodeerr.NonceTooLow},
	{"Nonce too high. Expected nonce to be 5 but got 9. Note that transactions can't be queued when automining.", nodeerr.NonceTooHigh},
	{"Replacement transaction underpriced. A gasPrice/maxFeePerGas of at least 1100000000 is necessary to replace the existing transaction with nonce 3.", nodeerr.ReplacementUnderpriced},
	{"Replacement transaction underpriced. A gasPrice/maxPriorityFeePerGas of at least 1100000000 is necessary to replace the existing transaction with nonce 3.", nodeerr.ReplacementUnderpriced},
	{"sender doesn't have enough funds to send tx. The max upfront cost is: 21000000000000 and the sender's account only has: 0", nodeerr.InsufficientFunds},
	{"Sender doesn't have enough funds to send tx. The max upfront cost is: 21000000000000 and the sender's balance is: 0.", nodeerr.InsufficientFunds},
	{"Transaction requires at least 21000 gas but got 20000", nodeerr.IntrinsicGasTooLow},
	{"Transaction requires gas floor of 25000 but got limit of 21000", nodeerr.IntrinsicGasTooLow},
	{"Transaction gas limit is 31000000 and exceeds block gas limit of 30000000", nodeerr.GasLimitExceeded},
	{"Transaction maxFeePerGas (1000000000) is too low for the next block, which has a baseFeePerGas of 7000000000", nodeerr.FeeCapTooLow},
	{"Transaction gasPrice (1000000000) is too low for the next block, which has a baseFeePerGas of 7000000000", nodeerr.FeeCapTooLow},
	{"Transaction gas price is 1, which is below the minimum of 1000000000", nodeerr.Underpriced},
	{"Trying to send a raw transaction with an invalid chainId. The expected chainId is 31337", nodeerr.InvalidSenderOrSignature},
	{"Invalid chainId 1 provided, expected 31337 instead.", nodeerr.InvalidSenderOrSignature},
	{"Trying to send an incompatible EIP-155 transaction, signed for another chain.", nodeerr.InvalidSenderOrSignature},
	{"Invalid Signature", nodeerr.InvalidSenderOrSignature},
	{"contract creation without any data provided", nodeerr.Rejected},
	// A reverting transaction sent while automining is mined, and then
	// reported as an error (throwOnTransactionFailures, on by default).
	{"VM Exception while processing transaction: reverted with reason string 'nope'", nodeerr.ExecutionReverted},
	{"Error: VM Exception while processing transaction: reverted with panic code 0x11 (Arithmetic operation overflowed outside of an unchecked block)", nodeerr.ExecutionReverted},
	{"VM Exception while processing transaction: reverted with custom error 'Nope()'", nodeerr.ExecutionReverted},
	{"VM Exception while processing transaction: revert", nodeerr.ExecutionReverted},
	{"Transaction reverted without a reason string", nodeerr.ExecutionReverted},
	{"Transaction reverted: function selector was not recognized and there's no fallback function", nodeerr.ExecutionReverted},
	{"Transaction reverted and Hardhat couldn't infer the reason.", nodeerr.ExecutionReverted},
	// A revert reason is the contract's text: whatever it says, the
	// transaction reverted.
	{"VM Exception while processing transaction: reverted with reason string 'nonce too low'", nodeerr.ExecutionReverted},
	{"Invalid transaction", nodeerr.Malformed},
	{"TypedTransaction with ID 5 unknown", nodeerr.TxTypeNotSupported},
	// EDR enforces EIP-7825 since Osaka.
	{"Transaction gas limit is 30000000 and exceeds transaction gas cap of 16777216", nodeerr.GasLimitExceeded},
	{"Transaction maxFeePerBlobGas (1) is too low for the next block, which has a baseFeePerBlobGas of 2", nodeerr.Rejected},
}

func TestHardhat(t *testing.T) {
	t.Parallel()
	checkMessages(t, hardhatExamples)
}
