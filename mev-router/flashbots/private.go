package flashbots

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
)

// Hint names a piece of a transaction that MEV-Share may show searchers so
// they can backrun it (and pay a refund). No hints means nothing is shared.
type Hint string

// The hints Flashbots documents for eth_sendPrivateTransaction and
// mev_sendBundle, all accepted by the MEV-Share reference node.
const (
	HintCalldata         Hint = "calldata"
	HintContractAddress  Hint = "contract_address"
	HintFunctionSelector Hint = "function_selector"
	HintLogs             Hint = "logs"
	HintHash             Hint = "hash"
	HintTxHash           Hint = "tx_hash"
)

// Privacy says what MEV-Share may reveal and which builders may receive
// the order flow.
type Privacy struct {
	Hints []Hint `json:"hints,omitempty"`
	// Builders are builder names as the relay knows them ("flashbots",
	// "default", ...); empty means the relay's default set.
	Builders []string `json:"builders,omitempty"`
}

// Preferences are the optional preferences of a private transaction.
type Preferences struct {
	// Fast shares the transaction with all registered builders. It is
	// always sent: Flashbots documents it as deprecated but required.
	Fast    bool     `json:"fast"`
	Privacy *Privacy `json:"privacy,omitempty"`
}

// PrivateTxParams is the parameter object of eth_sendPrivateTransaction.
type PrivateTxParams struct {
	Tx hexutil.Bytes `json:"tx"`
	// MaxBlockNumber is the last block the transaction may be included
	// in; 0 (omitted) lets the relay choose (Flashbots: 25 blocks).
	MaxBlockNumber hexutil.Uint64 `json:"maxBlockNumber,omitempty"`
	Preferences    *Preferences   `json:"preferences,omitempty"`
}

// CancelPrivateTxParams is the parameter object of
// eth_cancelPrivateTransaction.
type CancelPrivateTxParams struct {
	TxHash common.Hash `json:"txHash"`
}

// SendPrivateTransaction hands a signed transaction (raw, its binary
// encoding as for eth_sendRawTransaction) to the relay, which keeps it out
// of the public mempool and offers it to builders until maxBlock (0: the
// relay's default). It returns the transaction hash. raw is decoded first:
// a relay must not be the one to tell us we sent garbage.
func (c *Client) SendPrivateTransaction(ctx context.Context, raw []byte, maxBlock uint64, prefs *Preferences) (common.Hash, error) {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return common.Hash{}, fmt.Errorf("send private transaction: not a signed transaction: %w", err)
	}
	var result json.RawMessage
	params := PrivateTxParams{Tx: raw, MaxBlockNumber: hexutil.Uint64(maxBlock), Preferences: prefs}
	if err := c.call(ctx, "eth_sendPrivateTransaction", params, &result); err != nil {
		return common.Hash{}, err
	}
	return c.checkHash("eth_sendPrivateTransaction", tx.Hash(), result)
}

// CancelPrivateTransaction asks the relay to stop offering a private
// transaction to builders. It reports whether the relay cancelled it:
// false when it was unknown, already included, or sent under another
// AuthKey. A cancelled transaction may still have reached a builder.
func (c *Client) CancelPrivateTransaction(ctx context.Context, hash common.Hash) (bool, error) {
	var cancelled bool
	if err := c.call(ctx, "eth_cancelPrivateTransaction", CancelPrivateTxParams{TxHash: hash}, &cancelled); err != nil {
		return false, err
	}
	return cancelled, nil
}

// checkHash compares the relay's answer with the hash computed here. Some
// builders acknowledge with something other than the hash (Titan documents
// {"result":200}); the local hash then stands. A different hash is a
// fault: the relay is tracking some other transaction.
func (c *Client) checkHash(method string, want common.Hash, result json.RawMessage) (common.Hash, error) {
	var text string
	if json.Unmarshal(result, &text) != nil {
		return want, nil
	}
	var got common.Hash
	if err := got.UnmarshalText([]byte(text)); err != nil {
		return common.Hash{}, malformed(c.URL, method, 200, fmt.Sprintf("result %q is not a transaction hash", clip(text)))
	}
	if got != want {
		return common.Hash{}, malformed(c.URL, method, 200, fmt.Sprintf("relay answered hash %s for transaction %s", got.Hex(), want.Hex()))
	}
	return got, nil
}
