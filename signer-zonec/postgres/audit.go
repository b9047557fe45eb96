package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	signer "github.com/txfence/txfence/signer-zonec"
)

// auditPage is how many records verification and export read at a time.
const auditPage = 1000

// VerifyAudit walks the whole audit log in order and checks the hash chain
// and the head, all on one snapshot, so that a record beyond the head is
// one written outside signerd rather than an append racing the walk. It
// returns the number of records verified, and for a broken log a
// *signer.ChainError naming the first bad record.
func (s *Store) VerifyAudit(ctx context.Context) (uint64, error) {
	v := signer.NewVerifier()
	err := s.inSnapshot(ctx, func(q querier) error {
		head, err := readHead(ctx, q)
		if err != nil {
			return err
		}
		if err := walkAudit(ctx, q, 0, v.Check); err != nil {
			return err
		}
		return v.Finish(head)
	})
	return v.Records(), err
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
