package txmanager

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/shared/transitid"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/errs"
)

// Limits on what a create request may carry.
const (
	MaxRequestIDLen = 255
	MaxDataLen      = 128 << 10 // geth's pool refuses larger transactions
	MaxMetadataLen  = 16 << 10
)

var maxUint256 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))

// Intent is what a client asks for: the transaction to send, before it has
// a nonce, fees or a signature. It is immutable once accepted.
type Intent struct {
	ChainID   uint64
	From      common.Address
	RequestID string
	// To is nil for a contract creation, which then needs Data.
	To    *common.Address
	Value *big.Int
	Data  []byte
	// Gas is the gas limit to use; nil means estimate it.
	Gas *uint64
	// Fee caps; nil means the signer's configured caps.
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
	Route                Route
	// DependsOn are the transactions, on any chain, that must all be
	// CONFIRMED before this one is worked on (at most dependson.Max,
	// distinct); nil for none.
	DependsOn dependson.List
	// Metadata is the client's own JSON object, stored and returned as is.
	Metadata json.RawMessage
	// TransitNamespace is where the transit id Metadata names lives (the
	// gateway's tenant): the INIT event carries it, and the ledger pairs
	// a transfer's ends within it only. It is the caller's, not the
	// client's, and so not part of Hash; it is not stored either (only
	// the INIT event needs it).
	TransitNamespace string
}

// Validate checks the intent's shape, naming every problem.
func (in *Intent) Validate() error {
	var problems []error
	add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if in.ChainID == 0 {
		add("chain_id: must be set")
	}
	if in.From == (common.Address{}) {
		add("from: must be set")
	}
	if in.RequestID == "" || len(in.RequestID) > MaxRequestIDLen {
		add("request_id: 1 to %d characters", MaxRequestIDLen)
	}
	if in.Value == nil || in.Value.Sign() < 0 || in.Value.Cmp(maxUint256) > 0 {
		add("value: a uint256")
	}
	for name, v := range map[string]*big.Int{"max_fee_per_gas": in.MaxFeePerGas, "max_priority_fee_per_gas": in.MaxPriorityFeePerGas} {
		if v != nil && (v.Sign() < 0 || v.Cmp(maxUint256) > 0) {
			add("%s: a uint256", name)
		}
	}
	if in.MaxFeePerGas != nil && in.MaxPriorityFeePerGas != nil && in.MaxPriorityFeePerGas.Cmp(in.MaxFeePerGas) > 0 {
		add("max_priority_fee_per_gas: above max_fee_per_gas")
	}
	if in.Gas != nil && (*in.Gas == 0 || *in.Gas > 1<<40) {
		add("gas: a positive gas limit")
	}
	if len(in.Data) > MaxDataLen {
		add("data: at most %d bytes", MaxDataLen)
	}
	if in.To == nil && len(in.Data) == 0 {
		add("to: a contract creation (no to) needs data")
	}
	switch in.Route {
	case RoutePublic, RoutePrivate, RouteAuto:
	default:
		add("route: %q is not public, private or auto", in.Route)
	}
	if in.TransitNamespace != "" && !transitid.ValidNamespace(in.TransitNamespace) {
		add("transit_namespace: 1 to %d characters of [A-Za-z0-9._:-]", MaxTransitNamespaceLen)
	}
	for _, f := range in.DependsOn.Check(uuid.Nil) {
		problems = append(problems, errs.InvalidFields(fieldName(f.Pointer)+": "+f.Detail, f))
	}
	if len(in.Metadata) > 0 {
		if len(in.Metadata) > MaxMetadataLen {
			add("metadata: at most %d bytes", MaxMetadataLen)
		} else if !isJSONObject(in.Metadata) {
			add("metadata: must be a JSON object")
		}
	}
	return errors.Join(problems...)
}

// Invalid is the caller's error for a validation failure: errs.Invalid
// with every problem named in the detail (they quote nothing secret), and
// the fields of those that point at one (an *errs.Error with fields among
// the joined errors).
func Invalid(err error) error {
	e := errs.E(errs.Invalid, strings.ReplaceAll(err.Error(), "\n", "; "))
	problems := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		problems = j.Unwrap()
	}
	for _, p := range problems {
		var fe *errs.Error
		if errors.As(p, &fe) {
			e.Fields = append(e.Fields, fe.Fields...)
		}
	}
	return e
}

// fieldName is a JSON pointer as the problems of Validate name a field:
// "depends_on/2" for "/depends_on/2".
func fieldName(pointer string) string { return strings.TrimPrefix(pointer, "/") }

// isJSONObject reports whether raw is one JSON object, without decoding
// it: Validate runs on every create, and the hash decodes it anyway.
func isJSONObject(raw []byte) bool {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(raw)
}

// canonicalMetadata is the metadata object with sorted keys and no
// insignificant space, so two spellings of one object hash alike.
func canonicalMetadata(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("{}"), nil
	}
	var obj map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errors.New("must be a JSON object")
	}
	return json.Marshal(obj)
}

// Hash is the SHA-256 of the intent's canonical encoding: the same
// request id with the same hash is the same request (answered with the
// existing transaction); with another hash it is a conflict.
func (in *Intent) Hash() [32]byte {
	h := sha256.New()
	h.Write([]byte("txfence/intent/v1\x00"))
	u64 := func(v uint64) { h.Write(binary.BigEndian.AppendUint64(nil, v)) }
	bytesField := func(b []byte) { u64(uint64(len(b))); h.Write(b) }
	optBig := func(v *big.Int) {
		if v == nil {
			h.Write([]byte{0})
			return
		}
		h.Write([]byte{1})
		bytesField(v.Bytes())
	}
	u64(in.ChainID)
	h.Write(in.From[:])
	bytesField([]byte(in.RequestID))
	if in.To == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		h.Write(in.To[:])
	}
	optBig(in.Value)
	bytesField(in.Data)
	if in.Gas == nil {
		h.Write([]byte{0})
	} else {
		h.Write([]byte{1})
		u64(*in.Gas)
	}
	optBig(in.MaxFeePerGas)
	optBig(in.MaxPriorityFeePerGas)
	bytesField([]byte(in.Route))
	// The parents as a set: their count, then each in ascending order, so
	// that one set given in two orders is one intent. A count of 0 or 1
	// writes what v1 wrote for no parent or its one parent (a flag byte,
	// then the id), so intents accepted before a transaction could have
	// several parents keep their hash.
	h.Write([]byte{byte(len(in.DependsOn))}) // Validate allows dependson.Max at most
	for _, id := range in.DependsOn.Sorted() {
		h.Write(id[:])
	}
	meta, err := canonicalMetadata(in.Metadata)
	if err != nil {
		meta = in.Metadata // Validate refuses it before any hash matters
	}
	bytesField(meta)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Tx is a managed transaction.
type Tx struct {
	ID uuid.UUID
	Intent
	State    State
	SubState SubState
	Reason   string
	GasLimit *uint64
	Nonce    *uint64
	// Hash is the current attempt's hash, once signed.
	Hash *common.Hash
	// SigningFees are the fees the first attempt is signed with, fixed
	// with the nonce; nil before ALLOCATED.
	SigningFees *Fees
	// ApprovalExpiresAt is when a PENDING_APPROVAL transaction stops
	// waiting; nil in every other state.
	ApprovalExpiresAt *time.Time
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Fees are a signed transaction's fee fields: the EIP-1559 caps, or a
// legacy gas price.
type Fees struct {
	MaxFeePerGas         *big.Int
	MaxPriorityFeePerGas *big.Int
	GasPrice             *big.Int
}

// Key is the transaction's signer.
func (t *Tx) Key() SignerKey { return SignerKey{ChainID: t.ChainID, Signer: t.From} }

// CreateResult is one create's outcome in a batch of creates.
type CreateResult struct {
	Tx      Tx
	Created bool
	Err     error
}

// TxFilter selects transactions to list; zero fields select everything.
type TxFilter struct {
	ChainID uint64
	Signer  *common.Address
	// Signers, when not nil, keeps only these signers' transactions (none
	// when empty): the gateway passes a tenant's signers.
	Signers       []SignerKey
	State         State
	SubState      SubState
	CreatedAfter  time.Time
	CreatedBefore time.Time
}
