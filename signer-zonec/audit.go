package signer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
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
