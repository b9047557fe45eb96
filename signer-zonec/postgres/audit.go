package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	signer "github.com/txfence/txfence/signer-zonec"
)

// The statements of queries/audit.sql.
var (
	qSignaturesWithTheirRecords = Queries.Use("SignaturesWithTheirRecords")
	qSignedWithoutSignature     = Queries.Use("SignedWithoutSignature")
)

// auditPage is how many records verification and export read at a time.
const auditPage = 1000

// VerifyAudit walks the whole audit log in order and checks the hash chain
// and the head, holds the log to the checkpoints given (whose signatures
// the caller verified: signer.CheckCheckpoints), then cross-checks the
// double-sign record against the log, all on one snapshot, so that a
// record beyond the head is one written outside signerd rather than an
// append racing the walk. It returns the number of records verified, and
// for a broken log a *signer.ChainError naming the first bad record, a
// *signer.CheckpointError for each checkpoint the log does not reach or
// match, and a *signer.SignatureError for each signature that disagrees
// with the log (up to maxReported).
func (s *Store) VerifyAudit(ctx context.Context, checkpoints ...signer.Checkpoint) (uint64, error) {
	v := signer.NewVerifier()
	v.Anchor(checkpoints)
	err := s.inSnapshot(ctx, func(q querier) error {
		head, err := readHead(ctx, q)
		if err != nil {
			return err
		}
		if err := walkAudit(ctx, q, 0, v.Check); err != nil {
			return err
		}
		if err := v.Finish(head); err != nil {
			return err
		}
		return crossCheckSignatures(ctx, q)
	})
	return v.Records(), err
}

// maxReported bounds the problems one verification lists: a wiped table
// would otherwise be a million lines.
const maxReported = 100

// problems collects verification problems up to maxReported and counts
// the rest.
type problems struct {
	list []error
	more int
}

func (p *problems) add(err error) {
	if len(p.list) < maxReported {
		p.list = append(p.list, err)
		return
	}
	p.more++
}

func (p *problems) err() error {
	if p.more > 0 {
		p.list = append(p.list, fmt.Errorf("and %d more problems", p.more))
	}
	return errors.Join(p.list...)
}

// crossCheckSignatures runs after the chain verified, so every body it
// reads is the one that was hashed. Each row of the double-sign record
// must name the signed audit record of its own signature, and each signed
// record must have its row: the owner could otherwise delete a signature
// (and sign a second intent at its nonce) or lower what a window counts,
// leaving the chain intact.
func crossCheckSignatures(ctx context.Context, q querier) error {
	var found problems
	rows, err := q.Query(ctx, qSignaturesWithTheirRecords.SQL)
	if err != nil {
		return fmt.Errorf("read the double-sign record: %w", err)
	}
	var (
		row                           signer.RecordedSignature
		chainID, nonce, gas, auditSeq int64
		attempt                       int32
		from, digest, txHash, body    []byte
		value, feeCap, tipCap         pgtype.Numeric
	)
	_, err = pgx.ForEachRow(rows, []any{&chainID, &from, &nonce, &attempt, &row.TxID, &digest, &value, &feeCap, &tipCap, &gas,
		&txHash, &row.RawTx, &auditSeq, &body}, func() error {
		row.ChainID, row.From, row.Nonce, row.Attempt = uint64(chainID), common.BytesToAddress(from), uint64(nonce), int(attempt)
		row.Digest, row.TxHash, row.Gas, row.AuditSeq = common.BytesToHash(digest), common.BytesToHash(txHash), uint64(gas), uint64(auditSeq)
		var err error
		if row.Value, err = integer(value); err != nil {
			return err
		}
		if row.FeeCap, err = integer(feeCap); err != nil {
			return err
		}
		if row.TipCap, err = integer(tipCap); err != nil {
			return err
		}
		var rec *signer.AuditEntry
		if body != nil {
			rec = new(signer.AuditEntry)
			if err := json.Unmarshal(body, rec); err != nil {
				return fmt.Errorf("audit record %d: %w", auditSeq, err)
			}
		}
		if err := signer.CheckRecordedSignature(row, rec); err != nil {
			found.add(err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cross-check the double-sign record: %w", err)
	}

	rows, err = q.Query(ctx, qSignedWithoutSignature.SQL)
	if err != nil {
		return fmt.Errorf("find signed records without their signature: %w", err)
	}
	_, err = pgx.ForEachRow(rows, []any{&body}, func() error {
		var rec signer.AuditEntry
		if err := json.Unmarshal(body, &rec); err != nil {
			return err
		}
		found.add(signer.MissingSignature(rec))
		return nil
	})
	if err != nil {
		return fmt.Errorf("find signed records without their signature: %w", err)
	}
	return found.err()
}

// walkAudit calls fn with every record after seq, in order, a page at a
// time.
func walkAudit(ctx context.Context, q querier, after uint64, fn func(signer.AuditRecord) error) error {
	for {
		page, err := readAudit(ctx, q, after, auditPage)
		if err != nil {
			return err
		}
		for _, rec := range page {
			if err := fn(rec); err != nil {
				return err
			}
			after = rec.Entry.Seq
		}
		if len(page) < auditPage {
			return nil
		}
	}
}

// ExportedRecord is one line of an audit export: the hashed body as JSON,
// and the hash, so an auditor can re-verify the chain from the export alone.
type ExportedRecord struct {
	Seq   uint64          `json:"seq"`
	Entry json.RawMessage `json:"entry"`
	Hash  string          `json:"hash"`
}

// ExportAudit writes the records after seq as JSON lines to w, ending with
// a line holding the head; records and head come from one snapshot.
func (s *Store) ExportAudit(ctx context.Context, after uint64, w io.Writer) (uint64, error) {
	enc := json.NewEncoder(w)
	var n uint64
	err := s.inSnapshot(ctx, func(q querier) error {
		head, err := readHead(ctx, q)
		if err != nil {
			return err
		}
		err = walkAudit(ctx, q, after, func(rec signer.AuditRecord) error {
			if err := enc.Encode(ExportedRecord{Seq: rec.Entry.Seq, Entry: rec.Body, Hash: rec.Hash.Hex()}); err != nil {
				return fmt.Errorf("write export: %w", err)
			}
			n++
			return nil
		})
		if err != nil {
			return err
		}
		return enc.Encode(map[string]any{"head": map[string]any{"seq": head.Seq, "hash": head.Hash.Hex()}})
	})
	return n, err
}
