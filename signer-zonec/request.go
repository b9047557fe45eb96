// Package signer is Zone C's domain: typed signing requests, the intent
// they express, keys held only inside signerd, policy decisions, and the
// rules that decide whether a second signature at a used nonce is allowed.
// It imports no adapter: no database driver, no HTTP, no Vault client.
//
// signerd signs typed transaction requests only, never a bare hash: it
// re-derives the signing hash itself from the fields it checked, so that
// what policy approved is exactly what is signed.
package signer

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/txfence/txfence/signer-zonec/ethtx"
)

// TxType is the transaction envelope type signerd signs.
type TxType string

// The transaction types signerd signs. Blob and set-code transactions are
// refused: nothing in txfence sends them yet, and refusing what is not
// understood is the point of Zone C.
const (
	Legacy     TxType = "legacy"
	DynamicFee TxType = "eip1559"
)

// maxUint256 bounds every amount: values outside uint256 are not amounts.
var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// Request is one typed signing request, as txmanager sends it.
type Request struct {
	// TxID is txmanager's id of the transaction; it ties approvals and
	// audit records to the intent.
	TxID    string
	ChainID uint64
	From    common.Address
	Nonce   uint64
	Type    TxType
	// To is nil for a contract creation.
	To    *common.Address
	Value *big.Int
	Data  []byte
	Gas   uint64
	// GasPrice is set for Legacy; MaxFeePerGas and MaxPriorityFeePerGas
	// for DynamicFee.
	GasPrice             *big.Int
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
	// Approvals are approvers' signatures over the approval message of
	// this intent; policy decides how many are needed.
	Approvals []Approval
}

// Validate checks the request's shape: what any request must satisfy
// before policy looks at it. It never consults policy.
func (r *Request) Validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if r.TxID == "" {
		add("tx_id is required")
	}
	if r.ChainID == 0 {
		add("chain_id must be positive")
	}
	if r.From == (common.Address{}) {
		add("from is required")
	}
	if r.Value == nil {
		add("value is required")
	}
	if r.Gas == 0 {
		add("gas must be positive")
	}
	checkAmount := func(name string, v *big.Int) {
		if v != nil && (v.Sign() < 0 || v.Cmp(maxUint256) > 0) {
			add("%s is not a uint256", name)
		}
	}
	checkAmount("value", r.Value)
	checkAmount("gas_price", r.GasPrice)
	checkAmount("max_fee_per_gas", r.MaxFeePerGas)
	checkAmount("max_priority_fee_per_gas", r.MaxPriorityFeePerGas)
	switch r.Type {
	case Legacy:
		if r.GasPrice == nil {
			add("gas_price is required for a legacy transaction")
		}
		if r.MaxFeePerGas != nil || r.MaxPriorityFeePerGas != nil {
			add("a legacy transaction has no max_fee_per_gas or max_priority_fee_per_gas")
		}
	case DynamicFee:
		if r.MaxFeePerGas == nil || r.MaxPriorityFeePerGas == nil {
			add("max_fee_per_gas and max_priority_fee_per_gas are required for an eip1559 transaction")
		} else if r.MaxPriorityFeePerGas.Cmp(r.MaxFeePerGas) > 0 {
			add("max_priority_fee_per_gas exceeds max_fee_per_gas")
		}
		if r.GasPrice != nil {
			add("an eip1559 transaction has no gas_price")
		}
	default:
		add("type %q is not signed here (legacy or eip1559)", r.Type)
	}
	if r.To == nil && len(r.Data) == 0 {
		add("a contract creation needs data")
	}
	for i, a := range r.Approvals {
		if a.Expiry.Nanosecond() != 0 {
			add("approval %d: expiry must be a whole second (the approver's signature covers seconds)", i)
		}
		// A missing ceiling is policy's to report (the approval does not
		// count); one out of range is no amount at all.
		if a.MaxFeePerGas != nil && !isUint256(a.MaxFeePerGas) {
			add("approval %d: max_fee_per_gas is not a uint256", i)
		}
	}
	return errors.Join(problems...)
}

// Transaction is the unsigned transaction the request describes. A type
// signerd does not sign stays one ethtx refuses, so nothing is ever signed
// as a type the request did not name.
func (r *Request) Transaction() ethtx.Tx {
	tx := ethtx.Tx{ChainID: r.ChainID, Nonce: r.Nonce, Gas: r.Gas, To: r.To, Value: r.Value, Data: r.Data}
	switch r.Type {
	case Legacy:
		tx.Type, tx.GasPrice = ethtx.Legacy, r.GasPrice
	case DynamicFee:
		tx.Type, tx.MaxPriorityFeePerGas, tx.MaxFeePerGas = ethtx.DynamicFee, r.MaxPriorityFeePerGas, r.MaxFeePerGas
	default:
		tx.Type = unhandledType
	}
	return tx
}

// unhandledType is no transaction type ethtx handles.
const unhandledType ethtx.Type = 0xff

// SigningHash is the hash signerd signs, derived here from the checked
// fields and never taken from the caller: EIP-155 replay protection for
// legacy transactions, EIP-1559 for dynamic-fee ones.
func (r *Request) SigningHash() (common.Hash, error) {
	return r.Transaction().SigningHash()
}

// FeeCap is the most the transaction can pay per gas: the gas price of a
// legacy transaction, max_fee_per_gas of an eip1559 one.
func (r *Request) FeeCap() *big.Int {
	if r.Type == Legacy {
		return r.GasPrice
	}
	return r.MaxFeePerGas
}

// MaxFee is the most the transaction can cost in fees: gas × fee cap.
func (r *Request) MaxFee() *big.Int {
	return new(big.Int).Mul(new(big.Int).SetUint64(r.Gas), r.FeeCap())
}

// TipCap is the most a validator can receive per gas: the gas price of a
// legacy transaction, max_priority_fee_per_gas of an eip1559 one.
func (r *Request) TipCap() *big.Int {
	if r.Type == Legacy {
		return r.GasPrice
	}
	return r.MaxPriorityFeePerGas
}

// Selector is the first four bytes of the call data, or nil for a plain
// transfer or a call with less data.
func (r *Request) Selector() []byte {
	if len(r.Data) < 4 {
		return nil
	}
	return r.Data[:4]
}

// Intent is what a transaction does, regardless of when and for how much
// gas: chain, sender, type, destination, value and data. Fee-bump
// replacements share their original's intent; approvals are given to an
// intent.
type Intent [32]byte

// Hex is the intent in 0x-prefixed hex.
func (i Intent) Hex() string { return common.Hash(i).Hex() }

// Intent hashes the fields that make up what the request does, in a fixed
// binary encoding (lengths before variable fields, so no two intents
// encode alike).
func (r *Request) Intent() Intent {
	h := sha256.New()
	h.Write([]byte("txfence/intent/v1\x00"))
	var u [8]byte
	binary.BigEndian.PutUint64(u[:], r.ChainID)
	h.Write(u[:])
	h.Write(r.From.Bytes())
	h.Write([]byte{byte(len(r.Type))})
	h.Write([]byte(r.Type))
	if r.To == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		h.Write(r.To.Bytes())
	}
	h.Write(common.LeftPadBytes(r.Value.Bytes(), 32))
	binary.BigEndian.PutUint64(u[:], uint64(len(r.Data)))
	h.Write(u[:])
	h.Write(r.Data)
	var out Intent
	copy(out[:], h.Sum(nil))
	return out
}

// IsCancel reports whether the request is a cancel: a 0-value transfer to
// the sender itself with no data, which replaces whatever holds its nonce.
func (r *Request) IsCancel() bool {
	return r.To != nil && *r.To == r.From && r.Value != nil && r.Value.Sign() == 0 && len(r.Data) == 0
}

// Digest identifies the request exactly, every field included: the same
// digest twice is the same request, answered with the same signature.
//
// It hashes the unsigned transaction as core/types encoded it before ethtx,
// so digests stored then still match. Every caller validates the request
// first, which leaves the encoding nothing to refuse.
func (r *Request) Digest() common.Hash {
	b, _ := r.Transaction().EncodeUnsigned()
	return crypto.Keccak256Hash([]byte(r.TxID), []byte{0}, new(big.Int).SetUint64(r.ChainID).Bytes(), []byte{0}, r.From.Bytes(), b)
}
