package ethtx

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rlp"
)

// legacyRLP is a signed legacy transaction's RLP list. The rlp package
// refuses non-canonical integers and lengths, short addresses, missing or
// extra fields, and trailing bytes.
type legacyRLP struct {
	Nonce    uint64
	GasPrice *big.Int
	Gas      uint64
	To       *common.Address `rlp:"nil"`
	Value    *big.Int
	Data     []byte
	V, R, S  *big.Int
}

// dynamicFeeRLP is a signed EIP-1559 transaction's RLP list, after the
// type byte.
type dynamicFeeRLP struct {
	ChainID              uint64
	Nonce                uint64
	MaxPriorityFeePerGas *big.Int
	MaxFeePerGas         *big.Int
	Gas                  uint64
	To                   *common.Address `rlp:"nil"`
	Value                *big.Int
	Data                 []byte
	AccessList           rlp.RawValue
	V, R, S              *big.Int
}

// Decode decodes a signed raw transaction of the two types signerd signs
// and recovers its sender. It refuses every other type, a legacy
// transaction without EIP-155 replay protection, a non-empty access list,
// chain ids that do not fit 64 bits, amounts above 256 bits, signatures
// go-ethereum refuses, and any encoding that is not exactly the one
// ethtx writes for the transaction: what it accepts re-encodes to the
// bytes given, so its hash is theirs.
func Decode(raw []byte) (*Signed, error) {
	var tx Tx
	var sig [crypto.SignatureLength]byte
	var err error
	switch {
	case len(raw) == 0:
		return nil, errors.New("empty transaction")
	case raw[0] >= 0xc0: // an RLP list: a legacy transaction
		tx, sig, err = decodeLegacy(raw)
	case raw[0] == byte(DynamicFee):
		tx, sig, err = decodeDynamicFee(raw[1:])
	case raw[0] <= 0x7f:
		return nil, fmt.Errorf("transaction type %#02x is not handled (legacy or EIP-1559 only)", raw[0])
	default:
		return nil, errors.New("not a transaction: neither an RLP list nor a typed envelope")
	}
	if err != nil {
		return nil, err
	}
	s, err := newSigned(tx, sig)
	if err != nil {
		return nil, err
	}
	// The rlp package's canonical checks should make this hold already;
	// comparing makes it hold by construction.
	if !bytes.Equal(s.raw, raw) {
		return nil, errors.New("transaction is not in its canonical encoding")
	}
	return s, nil
}

var (
	big35 = big.NewInt(35)
	// eip155MinV is v for chain id 1: below it are unprotected signatures
	// (27, 28, valid on every chain) and chain id 0 (35, 36).
	eip155MinV = big.NewInt(37)
)

func decodeLegacy(raw []byte) (Tx, [crypto.SignatureLength]byte, error) {
	var f legacyRLP
	if err := rlp.DecodeBytes(raw, &f); err != nil {
		return Tx{}, [crypto.SignatureLength]byte{}, fmt.Errorf("decode legacy transaction: %w", err)
	}
	if f.V.Cmp(eip155MinV) < 0 {
		return Tx{}, [crypto.SignatureLength]byte{}, fmt.Errorf("legacy transaction without EIP-155 replay protection for a chain (v=%s)", f.V)
	}
	// v = chain id * 2 + 35 + y parity.
	x := new(big.Int).Sub(f.V, big35)
	parity := byte(x.Bit(0))
	chainID := x.Rsh(x, 1)
	if !chainID.IsUint64() {
		return Tx{}, [crypto.SignatureLength]byte{}, fmt.Errorf("chain id %s exceeds 64 bits", chainID)
	}
	sig, err := signature(parity, f.R, f.S)
	tx := Tx{Type: Legacy, ChainID: chainID.Uint64(), Nonce: f.Nonce, GasPrice: f.GasPrice, Gas: f.Gas, To: f.To, Value: f.Value, Data: f.Data}
	return tx, sig, err
}

func decodeDynamicFee(body []byte) (Tx, [crypto.SignatureLength]byte, error) {
	var f dynamicFeeRLP
	if err := rlp.DecodeBytes(body, &f); err != nil {
		return Tx{}, [crypto.SignatureLength]byte{}, fmt.Errorf("decode EIP-1559 transaction: %w", err)
	}
	if !bytes.Equal(f.AccessList, emptyAccessList) {
		return Tx{}, [crypto.SignatureLength]byte{}, errors.New("EIP-1559 transaction with an access list, which signerd never signs")
	}
	if !f.V.IsUint64() || f.V.Uint64() > 1 {
		return Tx{}, [crypto.SignatureLength]byte{}, fmt.Errorf("EIP-1559 y parity %s (0 or 1)", f.V)
	}
	sig, err := signature(byte(f.V.Uint64()), f.R, f.S)
	tx := Tx{Type: DynamicFee, ChainID: f.ChainID, Nonce: f.Nonce, MaxPriorityFeePerGas: f.MaxPriorityFeePerGas,
		MaxFeePerGas: f.MaxFeePerGas, Gas: f.Gas, To: f.To, Value: f.Value, Data: f.Data}
	return tx, sig, err
}

// signature is r || s || y parity, as crypto.Sign writes it. Range checks
// are newSigned's; this only refuses what does not fit.
func signature(parity byte, r, s *big.Int) ([crypto.SignatureLength]byte, error) {
	var sig [crypto.SignatureLength]byte
	if r.BitLen() > 256 || s.BitLen() > 256 {
		return sig, errors.New("signature value exceeds 256 bits")
	}
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:64])
	sig[64] = parity
	return sig, nil
}
