// Package ethtx builds, signs and decodes the two Ethereum transaction
// types signerd signs: legacy with EIP-155 replay protection, and EIP-1559
// dynamic-fee without an access list. Nothing more.
//
// It exists so that signerd, which holds keys, need not link go-ethereum's
// core/types: those types bring the KZG and blob crypto of every
// transaction type (about 30 packages) into a binary that signs two. It
// uses go-ethereum's rlp, crypto and common only, and its tests hold every
// byte it produces to core/types'.
package ethtx

import (
	"bytes"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
)

// Type is a transaction's EIP-2718 type. Legacy transactions have no type
// byte; they are 0 here, as in go-ethereum.
type Type byte

// The types ethtx handles; any other is an error.
const (
	Legacy     Type = 0x00
	DynamicFee Type = 0x02
)

// Tx is an unsigned transaction.
type Tx struct {
	Type Type
	// ChainID is signed into both types: EIP-155 puts it in a legacy
	// transaction's signing hash and v. It must be positive.
	ChainID uint64
	Nonce   uint64
	// GasPrice is a legacy transaction's fee; MaxPriorityFeePerGas and
	// MaxFeePerGas are an EIP-1559 transaction's. The other type's stay nil.
	GasPrice             *big.Int
	MaxPriorityFeePerGas *big.Int
	MaxFeePerGas         *big.Int
	Gas                  uint64
	// To is nil for a contract creation.
	To    *common.Address
	Value *big.Int
	Data  []byte
}

// SigningHash is the hash a sender signs: keccak256 of the transaction's
// fields with the chain id and two zeros in place of the signature
// (EIP-155), or of the type byte and the fields before the signature
// (EIP-2718, EIP-1559).
func (tx Tx) SigningHash() (common.Hash, error) {
	if err := tx.check(); err != nil {
		return common.Hash{}, err
	}
	var payload []byte
	var err error
	if tx.Type == Legacy {
		payload, err = tx.encode(tx.ChainID, uint64(0), uint64(0))
	} else {
		payload, err = tx.encode()
	}
	if err != nil {
		return common.Hash{}, err
	}
	return crypto.Keccak256Hash(payload), nil
}

// EncodeUnsigned encodes the transaction with a zero signature, which is
// what core/types' MarshalBinary gives for an unsigned transaction: the
// signer's request digests hash it, and were recorded so before ethtx.
func (tx Tx) EncodeUnsigned() ([]byte, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	return tx.encode(uint64(0), uint64(0), uint64(0))
}

// Sign signs the transaction with priv.
//
// go-ethereum's secp256k1 signing uses RFC 6979 deterministic nonces: the
// same transaction signed twice by the same key gives the same signature,
// and no weak random source can leak the key.
func (tx Tx) Sign(priv *ecdsa.PrivateKey) (*Signed, error) {
	tx = tx.clone() // what is hashed is what is encoded, whatever the caller does meanwhile
	hash, err := tx.SigningHash()
	if err != nil {
		return nil, err
	}
	sig, err := crypto.Sign(hash[:], priv)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	return newSigned(tx, [crypto.SignatureLength]byte(sig))
}

// Signed is a signed transaction, encoded, with its sender recovered from
// its signature. It cannot be changed: its accessors return copies.
type Signed struct {
	tx   Tx
	sig  [crypto.SignatureLength]byte // r || s || y parity, as crypto.Sign gives it
	raw  []byte
	from common.Address
}

// newSigned encodes tx with sig and recovers the sender from the
// signature, refusing one that go-ethereum would refuse: r or s out of
// range, s in the upper half (a malleated copy), or no key recovered.
func newSigned(tx Tx, sig [crypto.SignatureLength]byte) (*Signed, error) {
	tx = tx.clone()
	raw, err := encodeSigned(tx, sig)
	if err != nil {
		return nil, err
	}
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64])
	if !crypto.ValidateSignatureValues(sig[64], r, s, true) {
		return nil, errors.New("invalid signature values")
	}
	hash, err := tx.SigningHash()
	if err != nil {
		return nil, err
	}
	pub, err := crypto.SigToPub(hash[:], sig[:])
	if err != nil {
		return nil, fmt.Errorf("recover sender: %w", err)
	}
	return &Signed{tx: tx, sig: sig, raw: raw, from: crypto.PubkeyToAddress(*pub)}, nil
}

// encodeSigned is the raw transaction eth_sendRawTransaction takes: the
// RLP list of the fields and v, r, s, behind the type byte for EIP-1559.
func encodeSigned(tx Tx, sig [crypto.SignatureLength]byte) ([]byte, error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	if sig[64] > 1 {
		return nil, fmt.Errorf("signature recovery id %d (0 or 1)", sig[64])
	}
	v := new(big.Int).SetUint64(uint64(sig[64]))
	if tx.Type == Legacy {
		// EIP-155: v = chain id * 2 + 35 + y parity, which needs more than
		// 64 bits for the largest chain ids.
		v.Add(v, big.NewInt(35))
		v.Add(v, new(big.Int).Lsh(new(big.Int).SetUint64(tx.ChainID), 1))
	}
	return tx.encode(v, new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:64]))
}

// Tx is the transaction that was signed.
func (s *Signed) Tx() Tx { return s.tx.clone() }

// Raw is the signed transaction as eth_sendRawTransaction takes it.
func (s *Signed) Raw() []byte { return bytes.Clone(s.raw) }

// Hash is the transaction hash: keccak256 of the raw transaction.
func (s *Signed) Hash() common.Hash { return crypto.Keccak256Hash(s.raw) }

// Sender is the address recovered from the signature.
func (s *Signed) Sender() common.Address { return s.from }

// emptyAccessList is the only access list ethtx writes or reads.
var emptyAccessList = rlp.RawValue{0xc0}

// encode is the RLP list of the transaction's fields followed by tail, behind
// the type byte for EIP-1559. The caller has checked the transaction.
func (tx Tx) encode(tail ...any) ([]byte, error) {
	// A nil To encodes as the empty string, which means contract creation.
	var fields []any
	if tx.Type == Legacy {
		fields = []any{tx.Nonce, tx.GasPrice, tx.Gas, tx.To, tx.Value, tx.Data}
	} else {
		fields = []any{tx.ChainID, tx.Nonce, tx.MaxPriorityFeePerGas, tx.MaxFeePerGas, tx.Gas, tx.To, tx.Value, tx.Data, emptyAccessList}
	}
	list, err := rlp.EncodeToBytes(append(fields, tail...))
	if err != nil {
		return nil, err
	}
	if tx.Type == Legacy {
		return list, nil
	}
	return append([]byte{byte(tx.Type)}, list...), nil
}

// check refuses what is no transaction of ethtx's types. RLP would write a
// missing amount as zero and one above 256 bits as it is, so those are
// refused here, not left to the chain.
func (tx Tx) check() error {
	if tx.ChainID == 0 {
		return errors.New("chain id must be positive")
	}
	var problems []error
	amount := func(name string, v *big.Int) {
		switch {
		case v == nil:
			problems = append(problems, fmt.Errorf("%s is missing", name))
		case v.Sign() < 0:
			problems = append(problems, fmt.Errorf("%s is negative", name))
		case v.BitLen() > 256:
			problems = append(problems, fmt.Errorf("%s exceeds 256 bits", name))
		}
	}
	absent := func(name string, v *big.Int) {
		if v != nil {
			problems = append(problems, fmt.Errorf("a type %d transaction has no %s", tx.Type, name))
		}
	}
	switch tx.Type {
	case Legacy:
		amount("gas price", tx.GasPrice)
		absent("max priority fee", tx.MaxPriorityFeePerGas)
		absent("max fee", tx.MaxFeePerGas)
	case DynamicFee:
		amount("max priority fee", tx.MaxPriorityFeePerGas)
		amount("max fee", tx.MaxFeePerGas)
		absent("gas price", tx.GasPrice)
	default:
		return fmt.Errorf("transaction type %d is not handled (legacy or EIP-1559 only)", tx.Type)
	}
	amount("value", tx.Value)
	return errors.Join(problems...)
}

// clone copies everything tx points to, so that no caller shares a Signed's
// fields.
func (tx Tx) clone() Tx {
	c := tx
	for _, p := range []**big.Int{&c.GasPrice, &c.MaxPriorityFeePerGas, &c.MaxFeePerGas, &c.Value} {
		if *p != nil {
			*p = new(big.Int).Set(*p)
		}
	}
	if tx.To != nil {
		to := *tx.To
		c.To = &to
	}
	c.Data = bytes.Clone(tx.Data)
	return c
}
