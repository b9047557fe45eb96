// Package booking turns what the chain settled into journals: the booking
// rules of the README's table. It is pure: the caller reads the receipt
// and the transaction from its own chain endpoint, pinned by block hash,
// and says which addresses are wallets; booking only does arithmetic.
package booking

import (
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/ledger"
)

// TransferTopic is the first topic of an ERC-20 Transfer(address,address,uint256) log.
var TransferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

// Wallets says which addresses of a chain are wallets the ledger books in a
// block: its own, opened before that block. Before its opening, whatever a
// wallet did is in its opening balance, so it is booked as any other
// address would be.
type Wallets interface {
	BooksAt(chainID uint64, addr common.Address, block uint64) bool
}

// Settled is a transaction of ours as the chain settled it.
type Settled struct {
	ChainID uint64
	// From is the sender; To the recipient, nil for a contract creation.
	From  common.Address
	To    *common.Address
	Value *big.Int
	// Receipt is the transaction's receipt in the block it names.
	Receipt *types.Receipt
	// L1Fee is the data fee an OP-stack chain's receipt adds (its l1Fee
	// field); nil on other chains.
	L1Fee *big.Int
}

// Fee is what the sender paid for gas: gasUsed × effectiveGasPrice, plus
// blobGasUsed × blobGasPrice for a blob transaction, plus the L1 data fee
// of an OP-stack chain.
func (s *Settled) Fee() *big.Int {
	r := s.Receipt
	fee := new(big.Int).SetUint64(r.GasUsed)
	if r.EffectiveGasPrice != nil {
		fee.Mul(fee, r.EffectiveGasPrice)
	} else {
		fee.SetInt64(0)
	}
	if r.BlobGasUsed > 0 && r.BlobGasPrice != nil {
		fee.Add(fee, new(big.Int).Mul(new(big.Int).SetUint64(r.BlobGasUsed), r.BlobGasPrice))
	}
	if s.L1Fee != nil {
		fee.Add(fee, s.L1Fee)
	}
	return fee
}

// Journal books a settled transaction: CONFIRMED (status 1) books the
// value leg, the fee leg and every ERC-20 Transfer log touching a wallet;
// REVERTED (status 0) the fee leg only. Only legs that move a wallet are
// booked: a fee paid by a sender that is not (yet) a booked wallet is no
// expense of ours. It returns nil when nothing moved a wallet.
func Journal(s *Settled, wallets Wallets) *ledger.Journal {
	b, kind, status := build(s, wallets)
	return b.journal(s, kind, status)
}

// build collects the legs Journal books for s, and its kind and status.
func build(s *Settled, wallets Wallets) (b *builder, kind ledger.JournalKind, status string) {
	r := s.Receipt
	b = &builder{chainID: s.ChainID, block: r.BlockNumber.Uint64(), wallets: wallets}
	kind, status = ledger.Confirmed, "success"
	if r.Status != types.ReceiptStatusSuccessful {
		kind, status = ledger.Reverted, "reverted"
	}
	// The fee leg: the sender's gas, to its fee expense.
	b.move(ledger.Native, b.party(ledger.Native, s.From), b.account(ledger.FeeExpense, ledger.Native, s.From), s.Fee())
	if kind == ledger.Confirmed {
		// The value leg: to a wallet of ours, or to the counterparty (the
		// contract created, for a creation).
		b.move(ledger.Native, b.party(ledger.Native, s.From), b.party(ledger.Native, s.Recipient()), s.Value)
		for _, l := range r.Logs {
			b.transferLog(l)
		}
	}
	return b, kind, status
}

// Reverse is the reversal of journal id, j: its legs negated, so that a
// block that left the chain leaves the books as if it had never been.
func Reverse(id int64, j *ledger.Journal) *ledger.Journal {
	legs := make([]ledger.Leg, len(j.Legs))
	for i, l := range j.Legs {
		legs[i] = ledger.Leg{Account: l.Account, Amount: new(big.Int).Neg(l.Amount)}
	}
	return &ledger.Journal{Kind: ledger.Reversal, Key: ledger.ReversalKey(id), ChainID: j.ChainID, TxHash: j.TxHash,
		Block: j.Block, Status: j.Status, Reverses: id, Legs: legs}
}

// Recipient is where the value went: the recipient, or the contract a
// creation made.
func (s *Settled) Recipient() common.Address {
	if s.To != nil {
		return *s.To
	}
	return s.Receipt.ContractAddress
}

// Parties are the addresses a settled transaction's journal may move: its
// sender, its recipient, and both ends of its token transfers. The caller
// makes sure it knows which of them are wallets before booking.
func (s *Settled) Parties() []common.Address {
	out := []common.Address{s.From, s.Recipient()}
	for _, l := range s.Receipt.Logs {
		if from, to, _, ok := transferOf(l); ok {
			out = append(out, from, to)
		}
	}
	return out
}

// builder collects a journal's legs.
type builder struct {
	chainID uint64
	block   uint64
	wallets Wallets
	legs    []ledger.Leg
}

func (b *builder) account(kind ledger.AccountKind, asset string, addr common.Address) ledger.AccountKey {
	return ledger.AccountKey{ChainID: b.chainID, Asset: asset, Kind: kind, Address: addr}
}

// party is addr's account for asset: its wallet when it is one of ours,
// else its counterparty account.
func (b *builder) party(asset string, addr common.Address) ledger.AccountKey {
	if b.wallets.BooksAt(b.chainID, addr, b.block) {
		return b.account(ledger.Wallet, asset, addr)
	}
	return b.account(ledger.Counterparty, asset, addr)
}

// journal is the journal of s's settlement with the legs collected; nil
// when there are none.
func (b *builder) journal(s *Settled, kind ledger.JournalKind, status string) *ledger.Journal {
	if len(b.legs) == 0 {
		return nil
	}
	r := s.Receipt
	hash, block := r.TxHash, ledger.Block{Number: r.BlockNumber.Uint64(), Hash: r.BlockHash}
	return &ledger.Journal{Kind: kind, Key: ledger.TxKey(s.ChainID, hash, block.Hash), ChainID: s.ChainID,
		TxHash: &hash, Block: &block, Status: status, Legs: slices.Clone(b.legs)}
}

// move books amount of asset from one account to another; nothing for a
// zero amount, between an account and itself, or when neither is a wallet.
func (b *builder) move(asset string, from, to ledger.AccountKey, amount *big.Int) {
	if amount == nil || amount.Sign() == 0 || from == to || (from.Kind != ledger.Wallet && to.Kind != ledger.Wallet) {
		return
	}
	from.Asset, to.Asset = asset, asset
	b.legs = append(b.legs, ledger.Leg{Account: from, Amount: new(big.Int).Neg(amount)}, ledger.Leg{Account: to, Amount: new(big.Int).Set(amount)})
}

// transferLog books an ERC-20 Transfer log that touches a wallet. Logs of
// any other shape (ERC-721's Transfer has a fourth topic and no data) are
// not token amounts and are left out.
func (b *builder) transferLog(l *types.Log) {
	from, to, amount, ok := transferOf(l)
	if !ok {
		return
	}
	asset := strings.ToLower(l.Address.Hex())
	b.move(asset, b.party(asset, from), b.party(asset, to), amount)
}

// transferOf reads an ERC-20 Transfer log.
func transferOf(l *types.Log) (from, to common.Address, amount *big.Int, ok bool) {
	if len(l.Topics) != 3 || l.Topics[0] != TransferTopic || len(l.Data) != 32 {
		return from, to, nil, false
	}
	return common.BytesToAddress(l.Topics[1][12:]), common.BytesToAddress(l.Topics[2][12:]), new(big.Int).SetBytes(l.Data), true
}
