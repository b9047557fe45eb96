package signer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
)

// Outcome is what signerd did with one request, as the audit log records it.
type Outcome string

// The outcomes. Every request that reaches policy leaves exactly one.
const (
	OutcomeSigned        Outcome = "signed"         // a new signature was given
	OutcomeReplayed      Outcome = "replayed"       // the identical request again: the stored signature was returned
	OutcomeDenied        Outcome = "denied"         // policy said no
	OutcomeNeedsApproval Outcome = "needs_approval" // policy wants more approvals
	OutcomeRefused       Outcome = "refused"        // double-sign protection said no
)

// AuditEntry is one decision of signerd, in the order it is hashed. Field
// order and names are part of the hash: never reorder or rename them; add a
// new field only with a new Version.
type AuditEntry struct {
	Version       int            `json:"v"`
	Seq           uint64         `json:"seq"`
	At            time.Time      `json:"at"`
	Caller        string         `json:"caller"`
	TxID          string         `json:"tx_id"`
	ChainID       uint64         `json:"chain_id"`
	From          common.Address `json:"from"`
	Nonce         uint64         `json:"nonce"`
	RequestDigest common.Hash    `json:"request_digest"`
	Outcome       Outcome        `json:"outcome"`
	Reuse         string         `json:"reuse,omitempty"`
	RuleID        string         `json:"rule_id"`
	Reasons       []string       `json:"reasons,omitempty"`
	Approvals     []string       `json:"approvals,omitempty"`
	PolicyVersion string         `json:"policy_version"`
	PolicyHash    common.Hash    `json:"policy_hash"`
	TxHash        *common.Hash   `json:"tx_hash,omitempty"`
	PrevHash      common.Hash    `json:"prev_hash"`
}

// AuditVersion is the current AuditEntry encoding.
const AuditVersion = 1

// AuditRecord is an entry as stored: its canonical encoding and the hash
// that chains it to the previous record.
type AuditRecord struct {
	Entry AuditEntry
	// Body is the exact bytes that were hashed; verification reads the
	// entry back from it, so an edit of either shows.
	Body []byte
	Hash common.Hash
}

// Seal fixes e's sequence number and previous hash, and returns the record
// with its canonical body and hash: sha256(prev_hash || body).
func Seal(e AuditEntry, seq uint64, prev common.Hash) (AuditRecord, error) {
	e.Version, e.Seq, e.PrevHash = AuditVersion, seq, prev
	e.At = e.At.UTC().Truncate(time.Microsecond) // what the database keeps
	body, err := json.Marshal(e)
	if err != nil {
		return AuditRecord{}, fmt.Errorf("encode audit entry: %w", err)
	}
	return AuditRecord{Entry: e, Body: body, Hash: chainHash(prev, body)}, nil
}

func chainHash(prev common.Hash, body []byte) common.Hash {
	h := sha256.New()
	h.Write(prev[:])
	h.Write(body)
	return common.BytesToHash(h.Sum(nil))
}

// GenesisHash is the previous hash of the first record.
var GenesisHash = common.Hash{}

// AuditHead is the last record's sequence number and hash, which the store
// keeps beside the log so that a truncated tail shows.
type AuditHead struct {
	Seq  uint64
	Hash common.Hash
}

// ChainError names the first record that breaks the chain.
type ChainError struct {
	Seq    uint64 // the record's sequence number (or the missing one)
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit record %d: %s", e.Seq, e.Reason)
}

// Verifier checks records in order, as a stream, so an export of any size
// is verified in constant memory.
type Verifier struct {
	next uint64
	prev common.Hash
}

// NewVerifier starts at the beginning of the log.
func NewVerifier() *Verifier { return &Verifier{next: 1, prev: GenesisHash} }

// Check verifies the next record: its position, its body against its
// hash and the previous record's hash, and that the stored fields agree
// with the body.
func (v *Verifier) Check(stored AuditRecord) error {
	var e AuditEntry
	dec := json.NewDecoder(bytes.NewReader(stored.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return &ChainError{Seq: v.next, Reason: "body is not a valid audit entry: " + err.Error()}
	}
	switch {
	case stored.Entry.Seq != v.next && e.Seq == v.next:
		return &ChainError{Seq: v.next, Reason: fmt.Sprintf("stored at position %d", stored.Entry.Seq)}
	case e.Seq != v.next:
		return &ChainError{Seq: v.next, Reason: fmt.Sprintf("missing: the next record found is %d (deleted or reordered)", e.Seq)}
	case e.PrevHash != v.prev:
		return &ChainError{Seq: e.Seq, Reason: "does not follow the previous record (reordered, or an earlier record was replaced)"}
	case chainHash(v.prev, stored.Body) != stored.Hash:
		return &ChainError{Seq: e.Seq, Reason: "hash does not match its content (edited)"}
	}
	canon, err := json.Marshal(e)
	if err != nil || !bytes.Equal(canon, stored.Body) {
		return &ChainError{Seq: e.Seq, Reason: "body is not in canonical form (edited)"}
	}
	if !sameColumns(stored.Entry, e) {
		return &ChainError{Seq: e.Seq, Reason: "stored columns differ from the hashed body (edited)"}
	}
	v.next, v.prev = e.Seq+1, stored.Hash
	return nil
}

// Finish checks that the log ends where the head says: a log that stops
// early was truncated.
func (v *Verifier) Finish(head AuditHead) error {
	last := v.next - 1
	switch {
	case last < head.Seq:
		return &ChainError{Seq: last + 1, Reason: fmt.Sprintf("missing: the log ends at %d but %d records were written (truncated)", last, head.Seq)}
	case last > head.Seq:
		return &ChainError{Seq: head.Seq + 1, Reason: "beyond the recorded head (appended outside signerd)"}
	case v.prev != head.Hash:
		return &ChainError{Seq: last, Reason: "last hash differs from the recorded head"}
	}
	return nil
}

// Records returns how many records passed.
func (v *Verifier) Records() uint64 { return v.next - 1 }

// sameColumns compares the columns the store keeps beside the body (to
// find records by time, tx or signer) with the body itself.
func sameColumns(stored, body AuditEntry) bool {
	sameHash := (stored.TxHash == nil) == (body.TxHash == nil) && (stored.TxHash == nil || *stored.TxHash == *body.TxHash)
	return stored.At.Equal(body.At) && stored.PrevHash == body.PrevHash && stored.TxID == body.TxID &&
		stored.ChainID == body.ChainID && stored.From == body.From && stored.Nonce == body.Nonce &&
		stored.Outcome == body.Outcome && sameHash
}

// RecordedSignature is one row of the double-sign record as audit
// verification reads it: the signature, its attempt at its nonce, and the
// audit record it names.
type RecordedSignature struct {
	Signed
	Attempt  int
	AuditSeq uint64
}

// SignatureError names a signature whose double-sign record and audit log
// disagree: a row the log does not account for, or a signed record
// without its row. Either lets a second intent be signed at a used nonce
// or a rolling window forget what it spent.
type SignatureError struct {
	ChainID uint64
	From    common.Address
	Nonce   uint64
	// Attempt is the row's attempt at its nonce; 0 when the row is missing.
	Attempt  int
	TxID     string
	AuditSeq uint64
	Reason   string
}

func (e *SignatureError) Error() string {
	if e.Attempt == 0 {
		return fmt.Sprintf("signature of audit record %d (tx %s, chain %d, signer %s, nonce %d): %s",
			e.AuditSeq, e.TxID, e.ChainID, e.From.Hex(), e.Nonce, e.Reason)
	}
	return fmt.Sprintf("signature at chain %d, signer %s, nonce %d, attempt %d (tx %s, audit record %d): %s",
		e.ChainID, e.From.Hex(), e.Nonce, e.Attempt, e.TxID, e.AuditSeq, e.Reason)
}

// MissingSignature is the error for a signed audit record without its
// double-sign record.
func MissingSignature(rec AuditEntry) *SignatureError {
	return &SignatureError{ChainID: rec.ChainID, From: rec.From, Nonce: rec.Nonce, TxID: rec.TxID, AuditSeq: rec.Seq,
		Reason: "no signature row in the double-sign record names it (deleted or edited)"}
}

// CheckRecordedSignature compares a row of the double-sign record with the
// audit record it names (nil when there is none) and with its own signed
// transaction: the record must be the signed decision of the same chain,
// signer, nonce, tx id, transaction and request, and the amounts the
// windows sum must be those of the transaction that was signed.
func CheckRecordedSignature(s RecordedSignature, rec *AuditEntry) error {
	bad := func(format string, args ...any) error {
		return &SignatureError{ChainID: s.ChainID, From: s.From, Nonce: s.Nonce, Attempt: s.Attempt, TxID: s.TxID,
			AuditSeq: s.AuditSeq, Reason: fmt.Sprintf(format, args...)}
	}
	if rec == nil {
		return bad("its audit record %d is missing", s.AuditSeq)
	}
	if rec.Outcome != OutcomeSigned {
		return bad("its audit record %d is %s, not %s", s.AuditSeq, rec.Outcome, OutcomeSigned)
	}
	var differ []string
	for _, f := range []struct {
		name string
		same bool
	}{
		{"chain_id", s.ChainID == rec.ChainID},
		{"signer", s.From == rec.From},
		{"nonce", s.Nonce == rec.Nonce},
		{"tx_id", s.TxID == rec.TxID},
		{"tx_hash", rec.TxHash != nil && s.TxHash == *rec.TxHash},
		{"request digest", s.Digest == rec.RequestDigest},
	} {
		if !f.same {
			differ = append(differ, f.name)
		}
	}
	if len(differ) > 0 {
		return bad("%s its audit record %d", differing(differ), s.AuditSeq)
	}

	var tx types.Transaction
	if err := tx.UnmarshalBinary(s.RawTx); err != nil {
		return bad("raw transaction does not decode: %v", err)
	}
	if tx.Hash() != s.TxHash {
		return bad("raw transaction hashes to %s, not the recorded tx_hash (replaced)", tx.Hash().Hex())
	}
	differ = differ[:0]
	for _, f := range []struct {
		name string
		same bool
	}{
		{"chain_id", tx.ChainId().IsUint64() && tx.ChainId().Uint64() == s.ChainID},
		{"nonce", tx.Nonce() == s.Nonce},
		{"value", s.Value != nil && tx.Value().Cmp(s.Value) == 0},
		{"gas", tx.Gas() == s.Gas},
		{"fee_cap", s.FeeCap != nil && tx.GasFeeCap().Cmp(s.FeeCap) == 0},
		{"tip_cap", s.TipCap != nil && tx.GasTipCap().Cmp(s.TipCap) == 0},
	} {
		if !f.same {
			differ = append(differ, f.name)
		}
	}
	if len(differ) > 0 {
		return bad("%s the signed raw transaction (edited)", differing(differ))
	}
	return nil
}

// differing says which fields differ, in a sentence.
func differing(fields []string) string {
	if len(fields) == 1 {
		return fields[0] + " differs from"
	}
	return strings.Join(fields, ", ") + " differ from"
}
