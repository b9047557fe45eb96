package signer

import (
	"bytes"
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/signer-zonec/ethtx"
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
	// FullRequestDigest (version 2) is FullRequestDigest of the request:
	// RequestDigest leaves its approvals out.
	FullRequestDigest *common.Hash `json:"full_request_digest,omitempty"`
	Outcome           Outcome      `json:"outcome"`
	Reuse             string       `json:"reuse,omitempty"`
	RuleID            string       `json:"rule_id"`
	Reasons           []string     `json:"reasons,omitempty"`
	Approvals         []string     `json:"approvals,omitempty"`
	PolicyVersion     string       `json:"policy_version"`
	PolicyHash        common.Hash  `json:"policy_hash"`
	TxHash            *common.Hash `json:"tx_hash,omitempty"`
	PrevHash          common.Hash  `json:"prev_hash"`
}

// AuditVersion is the current AuditEntry encoding. Version 2 adds
// full_request_digest; an entry sealed without it is a version 1 entry,
// as every entry was before.
const AuditVersion = 2

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
	if e.FullRequestDigest == nil {
		e.Version = 1
	}
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
	// anchors are the checkpoints the log is held to, by seq.
	anchors        map[uint64][]Checkpoint
	anchored       int
	anchorProblems []error
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
	case e.Version != 1 && e.Version != 2:
		return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("version %d is not an audit entry version", e.Version)}
	case (e.Version == 2) != (e.FullRequestDigest != nil):
		return &ChainError{Seq: e.Seq, Reason: fmt.Sprintf("a version %d entry must have full_request_digest exactly when its version is 2", e.Version)}
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
	v.checkAnchors(e.Seq, stored.Hash)
	v.next, v.prev = e.Seq+1, stored.Hash
	return nil
}

// Finish checks that the log ends where the head says (a log that stops
// early was truncated) and, when the verifier is anchored, that the log
// matches and reaches every checkpoint: the owner of the database can cut
// the log back and rewind the head together, which only a checkpoint kept
// outside the database shows.
func (v *Verifier) Finish(head AuditHead) error {
	return errors.Join(v.finishHead(head), v.finishAnchors())
}

func (v *Verifier) finishHead(head AuditHead) error {
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

	signed, err := ethtx.Decode(s.RawTx)
	if err != nil {
		return bad("raw transaction does not decode: %v", err)
	}
	if signed.Hash() != s.TxHash {
		return bad("raw transaction hashes to %s, not the recorded tx_hash (replaced)", signed.Hash().Hex())
	}
	tx := signed.Tx()
	feeCap, tipCap := tx.GasPrice, tx.GasPrice
	if tx.Type == ethtx.DynamicFee {
		feeCap, tipCap = tx.MaxFeePerGas, tx.MaxPriorityFeePerGas
	}
	differ = differ[:0]
	for _, f := range []struct {
		name string
		same bool
	}{
		{"chain_id", tx.ChainID == s.ChainID},
		// The signature itself: the row's signer is who signed it.
		{"signer", signed.Sender() == s.From},
		{"nonce", tx.Nonce == s.Nonce},
		{"value", s.Value != nil && tx.Value.Cmp(s.Value) == 0},
		{"gas", tx.Gas == s.Gas},
		{"fee_cap", s.FeeCap != nil && feeCap.Cmp(s.FeeCap) == 0},
		{"tip_cap", s.TipCap != nil && tipCap.Cmp(s.TipCap) == 0},
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

// Checkpoint anchors the audit log outside signerd's database: the head
// (sequence number and hash) at a time, signed with the zone's checkpoint
// key and kept where the database's owner cannot reach it. The hash
// chains every record up to Seq, so a log whose record Seq no longer
// hashes to it was rewritten, and a log that ends before Seq was cut
// back, whatever the database's own head says.
type Checkpoint struct {
	Seq       uint64      `json:"seq"`
	Hash      common.Hash `json:"hash"`
	At        time.Time   `json:"at"`
	KeyID     string      `json:"key_id"`
	Signature []byte      `json:"signature"` // Ed25519 over CheckpointMessage; base64 in JSON
	// Line is where verification read the checkpoint from (its line in
	// a file); it is not part of the checkpoint.
	Line int `json:"-"`
}

// checkpointDomain separates checkpoint signatures from any other use of
// an Ed25519 key.
const checkpointDomain = "txfence signer audit checkpoint v1"

// CheckpointMessage is what a checkpoint's signature covers, in a text
// form an auditor can rebuild with any tool: the domain, then seq, hash
// and time (Unix nanoseconds) on lines of their own.
func CheckpointMessage(seq uint64, hash common.Hash, at time.Time) []byte {
	return fmt.Appendf(nil, "%s\nseq %d\nhash %s\nat %d\n", checkpointDomain, seq, hash.Hex(), at.UnixNano())
}

// CheckpointKeyID names a checkpoint public key: the first 8 bytes of its
// SHA-256, in hex.
func CheckpointKeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// CheckpointKey is the zone's Ed25519 key for signing checkpoints. Its
// private half is unexported and never printed or logged.
type CheckpointKey struct {
	_    [0]func() // incomparable
	priv ed25519.PrivateKey
}

// NewCheckpointKey makes the key of an Ed25519 seed; the caller clears
// its copy of the seed.
func NewCheckpointKey(seed []byte) (*CheckpointKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("a checkpoint key seed is %d bytes, not %d", ed25519.SeedSize, len(seed))
	}
	return &CheckpointKey{priv: ed25519.NewKeyFromSeed(seed)}, nil
}

// Public is the key an auditor verifies checkpoints with.
func (k *CheckpointKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// Sign makes the checkpoint of head at a time.
//
// As an oracle: it signs only the domain-separated checkpoint message, so
// its signatures vouch for nothing but a head at a time. It signs the head
// it is given, which signerd reads from its database: a checkpoint says
// what the log was when signerd looked, and a database rewound between
// two checkpoints shows as the second one below, or off, the first.
func (k *CheckpointKey) Sign(head AuditHead, at time.Time) Checkpoint {
	at = at.UTC().Truncate(time.Microsecond)
	return Checkpoint{
		Seq: head.Seq, Hash: head.Hash, At: at, KeyID: CheckpointKeyID(k.Public()),
		Signature: ed25519.Sign(k.priv, CheckpointMessage(head.Seq, head.Hash, at)),
	}
}

// Destroy zeroes the private key.
func (k *CheckpointKey) Destroy() { clear(k.priv) }

// String names the key by its public id only.
func (k *CheckpointKey) String() string { return "checkpoint key " + CheckpointKeyID(k.Public()) }

// LogValue names the key by its public id only.
func (k *CheckpointKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// CheckpointError names a checkpoint that does not verify, or that the
// log does not reach or does not match.
type CheckpointError struct {
	Checkpoint Checkpoint
	Reason     string
}

func (e *CheckpointError) Error() string {
	where := ""
	if e.Checkpoint.Line > 0 {
		where = fmt.Sprintf(" on line %d", e.Checkpoint.Line)
	}
	return fmt.Sprintf("checkpoint%s (seq %d, hash %s, at %s): %s", where, e.Checkpoint.Seq, e.Checkpoint.Hash.Hex(),
		e.Checkpoint.At.Format(time.RFC3339Nano), e.Reason)
}

// CheckCheckpoints verifies each checkpoint's signature with any of keys
// (a rotated key's checkpoints stay good), then their order: signerd
// writes them as its head advances, so a checkpoint below the one before
// it, or at the same seq with another hash, means the log was rewound or
// rewritten between them. It returns the checkpoints whose signature
// verifies, to anchor a Verifier with, and a *CheckpointError for each
// problem.
func CheckCheckpoints(cps []Checkpoint, keys []ed25519.PublicKey) (good []Checkpoint, problems []error) {
	byID := make(map[string]ed25519.PublicKey, len(keys))
	for _, k := range keys {
		byID[CheckpointKeyID(k)] = k
	}
	for _, cp := range cps {
		key, known := byID[cp.KeyID]
		switch {
		case !known:
			problems = append(problems, &CheckpointError{cp, fmt.Sprintf("signed with key %s, which is not a checkpoint key given", cp.KeyID)})
			continue
		case !ed25519.Verify(key, CheckpointMessage(cp.Seq, cp.Hash, cp.At), cp.Signature):
			problems = append(problems, &CheckpointError{cp, "signature does not verify with checkpoint key " + cp.KeyID + " (forged or edited)"})
			continue
		}
		if n := len(good); n > 0 {
			prev := good[n-1]
			switch {
			case cp.Seq < prev.Seq:
				problems = append(problems, &CheckpointError{cp, fmt.Sprintf("below the checkpoint before it (line %d, seq %d): the log was rewound between them", prev.Line, prev.Seq)})
			case cp.Seq == prev.Seq && cp.Hash != prev.Hash:
				problems = append(problems, &CheckpointError{cp, fmt.Sprintf("same seq as the checkpoint before it (line %d) with another hash: the log was rewritten between them", prev.Line)})
			}
		}
		good = append(good, cp)
	}
	return good, problems
}

// Anchor has the verifier hold the log to checkpoints: each record a
// checkpoint names must hash to the checkpoint's hash, and the log must
// reach every checkpoint. Finish reports what does not.
func (v *Verifier) Anchor(cps []Checkpoint) {
	if v.anchors == nil {
		v.anchors = make(map[uint64][]Checkpoint)
	}
	for _, cp := range cps {
		v.anchors[cp.Seq] = append(v.anchors[cp.Seq], cp)
	}
}

// checkAnchors compares a record that passed with the checkpoints at its
// seq.
func (v *Verifier) checkAnchors(seq uint64, hash common.Hash) {
	for _, cp := range v.anchors[seq] {
		v.anchored++
		if cp.Hash != hash {
			v.anchorProblems = append(v.anchorProblems, &CheckpointError{cp, fmt.Sprintf(
				"record %d now hashes to %s: the log was rewritten at or before record %d since this checkpoint", seq, hash.Hex(), seq)})
		}
	}
}

// finishAnchors names the checkpoints beyond the end of the log, with the
// records that are gone.
func (v *Verifier) finishAnchors() error {
	last := v.next - 1
	var beyond []Checkpoint
	for seq, cps := range v.anchors {
		if seq > last {
			beyond = append(beyond, cps...)
		}
	}
	slices.SortFunc(beyond, func(a, b Checkpoint) int { return cmp.Compare(a.Line, b.Line) })
	problems := v.anchorProblems
	for _, cp := range beyond {
		problems = append(problems, &CheckpointError{cp, fmt.Sprintf(
			"the log ends at record %d: records %d to %d, which this checkpoint covers, are gone (truncated, and the head rewound)", last, last+1, cp.Seq)})
	}
	return errors.Join(problems...)
}

// Anchored returns how many checkpoints the log was held to and matched
// or not; those beyond the log are not counted.
func (v *Verifier) Anchored() int { return v.anchored }

// CheckpointKeyKind marks a checkpoint key file, so that no other key file
// (an approver's, say) is taken for one.
const CheckpointKeyKind = "txfence-signer-checkpoint-key"

// checkpointKeyFile is a checkpoint key file: JSON holding the base64
// seed, and the public key and its id for the operator to hand to the
// auditor.
type checkpointKeyFile struct {
	Kind      string `json:"kind"`
	KeyID     string `json:"key_id"`
	Seed      string `json:"seed"`
	PublicKey string `json:"public_key"`
}

// GenerateCheckpointKey makes a new checkpoint key and the contents of its
// key file. The caller writes them where only signerd reads them, and
// clears them.
func GenerateCheckpointKey() (*CheckpointKey, []byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate a checkpoint key: %w", err)
	}
	seed := priv.Seed()
	defer clear(seed)
	data, err := json.MarshalIndent(checkpointKeyFile{
		Kind: CheckpointKeyKind, KeyID: CheckpointKeyID(pub),
		Seed: base64.StdEncoding.EncodeToString(seed), PublicKey: EncodeCheckpointPublicKey(pub),
	}, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return &CheckpointKey{priv: priv}, append(data, '\n'), nil
}

// ParseCheckpointKey reads the contents of a checkpoint key file, strictly:
// the kind must be a checkpoint key's and the public key must be the
// seed's. Errors never quote the contents.
func ParseCheckpointKey(data []byte) (*CheckpointKey, error) {
	var f checkpointKeyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || dec.More() {
		return nil, errors.New("not a checkpoint key file (JSON with kind, key_id, seed and public_key)")
	}
	if f.Kind != CheckpointKeyKind {
		return nil, fmt.Errorf("a key file of kind %q, not a checkpoint key (%s)", f.Kind, CheckpointKeyKind)
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(f.Seed)
	defer clear(seed)
	if err != nil {
		return nil, errors.New("seed: not base64")
	}
	k, err := NewCheckpointKey(seed)
	if err != nil {
		return nil, err
	}
	if EncodeCheckpointPublicKey(k.Public()) != f.PublicKey || CheckpointKeyID(k.Public()) != f.KeyID {
		k.Destroy()
		return nil, errors.New("the public key or key id is not the seed's (the file was edited)")
	}
	return k, nil
}

// EncodeCheckpointPublicKey is a public key as operators and auditors
// pass it around: standard base64.
func EncodeCheckpointPublicKey(pub ed25519.PublicKey) string {
	return base64.StdEncoding.EncodeToString(pub)
}

// ParseCheckpointPublicKey reads a public key in that form.
func ParseCheckpointPublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("checkpoint public key %q: want %d bytes in base64", s, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ParseCheckpoint reads one checkpoint as signerd writes it (a JSON
// object), or a line of signerd's JSON log that carries one under
// "checkpoint", so that an auditor can verify straight from the log
// stream.
func ParseCheckpoint(line []byte) (Checkpoint, error) {
	var wrapped struct {
		Checkpoint *Checkpoint `json:"checkpoint"`
	}
	if err := json.Unmarshal(line, &wrapped); err == nil && wrapped.Checkpoint != nil {
		return checkedCheckpoint(*wrapped.Checkpoint)
	}
	var cp Checkpoint
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cp); err != nil {
		return Checkpoint{}, fmt.Errorf("not a checkpoint: %w", err)
	}
	return checkedCheckpoint(cp)
}

func checkedCheckpoint(cp Checkpoint) (Checkpoint, error) {
	if cp.KeyID == "" || len(cp.Signature) != ed25519.SignatureSize || cp.At.IsZero() {
		return Checkpoint{}, errors.New("not a checkpoint: seq, hash, at, key_id and a signature are required")
	}
	return cp, nil
}

// FullRequestDigest identifies everything a request carried, approvals
// (with their fee ceilings) included: Request.Digest covers the transaction, its tx id, chain and
// sender but not the approvals, so two requests that differ only in their
// approvals share it. With this digest in its audit record, a request
// (txmanager's copy, say) can be shown to be exactly the one signerd
// decided. Every variable field is length-prefixed, so no two requests
// encode alike.
func FullRequestDigest(r *Request) common.Hash {
	h := sha256.New()
	h.Write([]byte("txfence/request/v1\x00"))
	var u [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(u[:], uint64(len(b)))
		h.Write(u[:])
		h.Write(b)
	}
	field([]byte(r.TxID))
	binary.BigEndian.PutUint64(u[:], r.ChainID)
	h.Write(u[:])
	h.Write(r.From.Bytes())
	tx, _ := r.Transaction().EncodeUnsigned() // as Digest: nothing to refuse in a validated request
	field(tx)
	binary.BigEndian.PutUint64(u[:], uint64(len(r.Approvals)))
	h.Write(u[:])
	for _, a := range r.Approvals {
		field([]byte(a.Approver))
		binary.BigEndian.PutUint64(u[:], uint64(a.Expiry.Unix()))
		h.Write(u[:])
		binary.BigEndian.PutUint32(u[:4], uint32(a.Expiry.Nanosecond()))
		h.Write(u[:4])
		if a.MaxFeePerGas == nil {
			h.Write([]byte{0})
		} else {
			h.Write([]byte{1})
			h.Write(common.LeftPadBytes(a.MaxFeePerGas.Bytes(), 32))
		}
		field(a.Signature)
	}
	return common.BytesToHash(h.Sum(nil))
}
