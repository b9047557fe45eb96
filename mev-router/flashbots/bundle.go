package flashbots

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// BundleVersion is the mev_sendBundle schema version this package speaks.
const BundleVersion = "v0.1"

// MevBundle is the parameter object of mev_sendBundle: an ordered list of
// transactions to be included together, or not at all, in one block of an
// inclusion window.
type MevBundle struct {
	Version   string       `json:"version"` // "" is sent as BundleVersion
	Inclusion Inclusion    `json:"inclusion"`
	Body      []BundleItem `json:"body"`
	Validity  *Validity    `json:"validity,omitempty"`
	Privacy   *Privacy     `json:"privacy,omitempty"`
}

// Inclusion is a bundle's window of blocks, both ends included.
type Inclusion struct {
	Block    uint64 // the first block the bundle may be in
	MaxBlock uint64 // the last; 0 means Block alone
}

// Last is the last block of the window.
func (i Inclusion) Last() uint64 { return max(i.Block, i.MaxBlock) }

type inclusionJSON struct {
	Block    *hexutil.Uint64 `json:"block"`
	MaxBlock *hexutil.Uint64 `json:"maxBlock,omitempty"`
}

// MarshalJSON writes hex quantities, as the protocol wants.
func (i Inclusion) MarshalJSON() ([]byte, error) {
	j := inclusionJSON{Block: (*hexutil.Uint64)(&i.Block)}
	if i.MaxBlock != 0 {
		j.MaxBlock = (*hexutil.Uint64)(&i.MaxBlock)
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads hex quantities; block is required.
func (i *Inclusion) UnmarshalJSON(b []byte) error {
	var j inclusionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("inclusion: %w", err)
	}
	if j.Block == nil {
		return errors.New("inclusion: block is required")
	}
	*i = Inclusion{Block: uint64(*j.Block)}
	if j.MaxBlock != nil {
		i.MaxBlock = uint64(*j.MaxBlock)
	}
	return nil
}

// BundleItem is one element of a bundle body: either a signed transaction
// of ours (Tx, with CanRevert) or the hash of someone else's pending
// transaction that the bundle backruns (Hash). Nested bundles, which the
// protocol also allows, are not supported: txfence never sends them.
type BundleItem struct {
	Tx        []byte      // binary encoding of a signed transaction
	CanRevert bool        // Tx may revert without failing the bundle
	Hash      common.Hash // set instead of Tx
}

type bundleItemJSON struct {
	Tx        *hexutil.Bytes  `json:"tx,omitempty"`
	CanRevert *bool           `json:"canRevert,omitempty"`
	Hash      *common.Hash    `json:"hash,omitempty"`
	Bundle    json.RawMessage `json:"bundle,omitempty"`
}

func (it BundleItem) check() error {
	if (len(it.Tx) > 0) == (it.Hash != common.Hash{}) {
		return errors.New("bundle item: want exactly one of tx and hash")
	}
	if len(it.Tx) == 0 && it.CanRevert {
		return errors.New("bundle item: canRevert applies to a tx, not a hash")
	}
	return nil
}

// MarshalJSON writes {"tx","canRevert"} or {"hash"}. canRevert is always
// written with a tx: the protocol's examples do, and it says the default.
func (it BundleItem) MarshalJSON() ([]byte, error) {
	if err := it.check(); err != nil {
		return nil, err
	}
	if len(it.Tx) > 0 {
		tx := hexutil.Bytes(it.Tx)
		return json.Marshal(bundleItemJSON{Tx: &tx, CanRevert: &it.CanRevert})
	}
	return json.Marshal(bundleItemJSON{Hash: &it.Hash})
}

// UnmarshalJSON reads an item and refuses ambiguous or nested ones.
func (it *BundleItem) UnmarshalJSON(b []byte) error {
	var j bundleItemJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("bundle item: %w", err)
	}
	if len(j.Bundle) > 0 && !bytes.Equal(j.Bundle, []byte("null")) {
		return errors.New("bundle item: nested bundles are not supported")
	}
	*it = BundleItem{}
	if j.Tx != nil {
		it.Tx = *j.Tx
	}
	if j.Hash != nil {
		it.Hash = *j.Hash
	}
	if j.CanRevert != nil {
		it.CanRevert = *j.CanRevert
	}
	return it.check()
}

// Validity holds a bundle's refund terms (MEV-Share), checked by the
// builder after execution.
type Validity struct {
	Refund       []Refund       `json:"refund,omitempty"`
	RefundConfig []RefundConfig `json:"refundConfig,omitempty"`
}

// Refund asks for Percent of the bundle's value to be refunded to the
// sender of body item BodyIdx.
type Refund struct {
	BodyIdx int `json:"bodyIdx"`
	Percent int `json:"percent"`
}

// RefundConfig sends Percent of this bundle's refund to Address.
type RefundConfig struct {
	Address common.Address `json:"address"`
	Percent int            `json:"percent"`
}

// Check refuses a bundle no relay would take, before it is signed and sent.
func (b *MevBundle) Check() error {
	if b.Version != "" && b.Version != BundleVersion {
		return fmt.Errorf("bundle version %q: only %s is supported", b.Version, BundleVersion)
	}
	if b.Inclusion.Block == 0 {
		return errors.New("bundle: inclusion.block is required")
	}
	if b.Inclusion.MaxBlock != 0 && b.Inclusion.MaxBlock < b.Inclusion.Block {
		return fmt.Errorf("bundle: inclusion.maxBlock %d is before inclusion.block %d", b.Inclusion.MaxBlock, b.Inclusion.Block)
	}
	if len(b.Body) == 0 {
		return errors.New("bundle: empty body")
	}
	for i, it := range b.Body {
		if err := it.check(); err != nil {
			return fmt.Errorf("body[%d]: %w", i, err)
		}
		if it.Hash != (common.Hash{}) && i != 0 {
			return fmt.Errorf("body[%d]: a hash (the backrun target) may only come first", i)
		}
	}
	if backrun := b.Body[0].Hash != (common.Hash{}); backrun {
		if len(b.Body) == 1 {
			return errors.New("bundle: a backrun target hash needs at least one transaction after it")
		}
		if b.Privacy != nil && len(b.Privacy.Hints) > 0 {
			return errors.New("bundle: a backrun bundle (hash first) may not share hints")
		}
	}
	if v := b.Validity; v != nil {
		for _, r := range v.Refund {
			if r.BodyIdx < 0 || r.BodyIdx >= len(b.Body) || r.Percent < 0 || r.Percent > 100 {
				return fmt.Errorf("bundle: refund {bodyIdx %d, percent %d} out of range", r.BodyIdx, r.Percent)
			}
		}
		for _, r := range v.RefundConfig {
			if r.Percent < 0 || r.Percent > 100 {
				return fmt.Errorf("bundle: refundConfig percent %d out of range", r.Percent)
			}
		}
	}
	return nil
}

// Hash is the bundle hash MEV-Share answers with: the hash of the only
// body item, else keccak256 of the body items' hashes (a tx item's hash is
// its transaction hash) in order.
func (b *MevBundle) Hash() (common.Hash, error) {
	hashes := make([]common.Hash, len(b.Body))
	for i, it := range b.Body {
		if len(it.Tx) == 0 {
			hashes[i] = it.Hash
			continue
		}
		var tx types.Transaction
		if err := tx.UnmarshalBinary(it.Tx); err != nil {
			return common.Hash{}, fmt.Errorf("body[%d]: not a signed transaction: %w", i, err)
		}
		hashes[i] = tx.Hash()
	}
	if len(hashes) == 1 {
		return hashes[0], nil
	}
	return hashOfHashes(hashes), nil
}

// SendBundle sends a bundle with mev_sendBundle and returns the bundle
// hash the relay answered. b is checked (Check) and its transactions
// decoded before anything is sent; b itself is not modified.
func (c *Client) SendBundle(ctx context.Context, b *MevBundle) (common.Hash, error) {
	if b == nil {
		return common.Hash{}, errors.New("send bundle: nil bundle")
	}
	if err := b.Check(); err != nil {
		return common.Hash{}, fmt.Errorf("send bundle: %w", err)
	}
	if _, err := b.Hash(); err != nil {
		return common.Hash{}, fmt.Errorf("send bundle: %w", err)
	}
	send := *b
	if send.Version == "" {
		send.Version = BundleVersion
	}
	var result json.RawMessage
	if err := c.call(ctx, "mev_sendBundle", &send, &result); err != nil {
		return common.Hash{}, err
	}
	return c.bundleHash("mev_sendBundle", result)
}

// EthBundle is the parameter object of eth_sendBundle, the classic bundle
// for exactly one block.
type EthBundle struct {
	Txs          [][]byte // binary encodings of signed transactions, in order
	BlockNumber  uint64   // the one block the bundle is for
	MinTimestamp uint64   // unix seconds; 0: no lower bound
	MaxTimestamp uint64   // unix seconds; 0: no upper bound
	// RevertingTxHashes may revert without failing the bundle.
	RevertingTxHashes []common.Hash
	// ReplacementUUID lets a later bundle with the same UUID replace this
	// one, and eth_cancelBundle cancel it.
	ReplacementUUID string
	// Builders names the builders to share the bundle with; empty means
	// the relay's own.
	Builders []string
}

type ethBundleJSON struct {
	Txs               []hexutil.Bytes `json:"txs"`
	BlockNumber       *hexutil.Uint64 `json:"blockNumber"`
	MinTimestamp      uint64          `json:"minTimestamp,omitempty"`
	MaxTimestamp      uint64          `json:"maxTimestamp,omitempty"`
	RevertingTxHashes []common.Hash   `json:"revertingTxHashes,omitempty"`
	ReplacementUUID   string          `json:"replacementUuid,omitempty"`
	Builders          []string        `json:"builders,omitempty"`
}

// MarshalJSON writes the documented shape: hex transactions and block
// number, timestamps as JSON numbers.
func (b EthBundle) MarshalJSON() ([]byte, error) {
	j := ethBundleJSON{
		Txs:               make([]hexutil.Bytes, len(b.Txs)),
		BlockNumber:       (*hexutil.Uint64)(&b.BlockNumber),
		MinTimestamp:      b.MinTimestamp,
		MaxTimestamp:      b.MaxTimestamp,
		RevertingTxHashes: b.RevertingTxHashes,
		ReplacementUUID:   b.ReplacementUUID,
		Builders:          b.Builders,
	}
	for i, tx := range b.Txs {
		j.Txs[i] = tx
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the documented shape; txs and blockNumber are
// required.
func (b *EthBundle) UnmarshalJSON(data []byte) error {
	var j ethBundleJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("eth bundle: %w", err)
	}
	if j.BlockNumber == nil {
		return errors.New("eth bundle: blockNumber is required")
	}
	*b = EthBundle{
		Txs:               make([][]byte, len(j.Txs)),
		BlockNumber:       uint64(*j.BlockNumber),
		MinTimestamp:      j.MinTimestamp,
		MaxTimestamp:      j.MaxTimestamp,
		RevertingTxHashes: j.RevertingTxHashes,
		ReplacementUUID:   j.ReplacementUUID,
		Builders:          j.Builders,
	}
	for i, tx := range j.Txs {
		b.Txs[i] = tx
	}
	return nil
}

// Check refuses a bundle no relay would take.
func (b *EthBundle) Check() error {
	if len(b.Txs) == 0 {
		return errors.New("eth bundle: no transactions")
	}
	if b.BlockNumber == 0 {
		return errors.New("eth bundle: blockNumber is required")
	}
	if b.MaxTimestamp != 0 && b.MaxTimestamp < b.MinTimestamp {
		return fmt.Errorf("eth bundle: maxTimestamp %d is before minTimestamp %d", b.MaxTimestamp, b.MinTimestamp)
	}
	return nil
}

// Hash is keccak256 of the bundle's transaction hashes in order, the
// bundle hash relays answer eth_sendBundle with.
func (b *EthBundle) Hash() (common.Hash, error) {
	hashes := make([]common.Hash, len(b.Txs))
	for i, raw := range b.Txs {
		var tx types.Transaction
		if err := tx.UnmarshalBinary(raw); err != nil {
			return common.Hash{}, fmt.Errorf("txs[%d]: not a signed transaction: %w", i, err)
		}
		hashes[i] = tx.Hash()
	}
	return hashOfHashes(hashes), nil
}

// SendEthBundle sends a bundle with eth_sendBundle and returns the bundle
// hash the relay answered.
func (c *Client) SendEthBundle(ctx context.Context, b EthBundle) (common.Hash, error) {
	if err := b.Check(); err != nil {
		return common.Hash{}, fmt.Errorf("send eth bundle: %w", err)
	}
	if _, err := b.Hash(); err != nil {
		return common.Hash{}, fmt.Errorf("send eth bundle: %w", err)
	}
	var result json.RawMessage
	if err := c.call(ctx, "eth_sendBundle", b, &result); err != nil {
		return common.Hash{}, err
	}
	return c.bundleHash("eth_sendBundle", result)
}

// bundleHash reads {"bundleHash": "0x..."}, the documented answer, or a
// bare hash string, which some builders answer with.
func (c *Client) bundleHash(method string, result json.RawMessage) (common.Hash, error) {
	var obj struct {
		BundleHash *common.Hash `json:"bundleHash"`
	}
	if json.Unmarshal(result, &obj) == nil && obj.BundleHash != nil {
		return *obj.BundleHash, nil
	}
	var h common.Hash
	if json.Unmarshal(result, &h) == nil {
		return h, nil
	}
	return common.Hash{}, malformed(c.URL, method, 200, fmt.Sprintf("result %s has no bundle hash", clip(string(result))))
}

func hashOfHashes(hashes []common.Hash) common.Hash {
	buf := make([]byte, 0, len(hashes)*common.HashLength)
	for _, h := range hashes {
		buf = append(buf, h[:]...)
	}
	return crypto.Keccak256Hash(buf)
}
