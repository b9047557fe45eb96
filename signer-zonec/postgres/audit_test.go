package postgres_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/pg"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// logWithRecords makes a store whose audit log holds n records, appended in
// batches of three as signerd appends them. They are replays, which carry
// a transaction hash but no signature row of their own, so the chain is
// all there is to check.
func logWithRecords(t *testing.T, n int) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	pool, err := pg.Open(ctx, pgtest.URL(t), pg.PoolOptions{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	store := postgres.New(pool)
	for i := 0; i < n; i += 3 {
		var entries []signer.AuditEntry
		for j := i; j < min(i+3, n); j++ {
			h := common.BigToHash(common.Big1)
			entries = append(entries, signer.AuditEntry{
				At: time.Now(), Caller: "txmanager", TxID: fmt.Sprintf("tx-%d", j), ChainID: 31337,
				From: common.HexToAddress("0x0a11ce"), Nonce: uint64(j), Outcome: signer.OutcomeReplayed,
				RuleID: "allow-dev", PolicyVersion: "1", TxHash: &h,
			})
		}
		err := store.InTx(ctx, func(tx signer.StoreTx) error {
			_, err := tx.Append(ctx, entries)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return store, pool
}

// replaceInBody is SQL rewriting text inside a record's JSON body.
func replaceInBody(old, new string) string {
	return fmt.Sprintf(`convert_to(replace(convert_from(body, 'UTF8'), '%s', '%s'), 'UTF8')`, old, new)
}

// asAttacker runs SQL with the append-only triggers switched off, as
// someone holding the database's superuser, or the tables' owner, would.
func asAttacker(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	ctx := context.Background()
	tables := []string{"audit_log", "audit_head", "signature"}
	for _, table := range tables {
		if _, err := pool.Exec(ctx, `ALTER TABLE `+table+` DISABLE TRIGGER USER`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	for _, table := range tables {
		if _, err := pool.Exec(ctx, `ALTER TABLE `+table+` ENABLE TRIGGER USER`); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuditVerifyPassesAnIntactLog(t *testing.T) {
	t.Parallel()
	store, _ := logWithRecords(t, 10)
	n, err := store.VerifyAudit(context.Background())
	if err != nil || n != 10 {
		t.Fatalf("verified %d records: %v", n, err)
	}
	var out bytes.Buffer
	if n, err := store.ExportAudit(context.Background(), 0, &out); err != nil || n != 10 {
		t.Fatalf("exported %d: %v", n, err)
	}
	// The export alone is enough to re-verify the chain.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	v := signer.NewVerifier()
	for _, line := range lines[:len(lines)-1] {
		var rec postgres.ExportedRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		var e signer.AuditEntry
		_ = json.Unmarshal(rec.Entry, &e)
		if err := v.Check(signer.AuditRecord{Entry: e, Body: rec.Entry, Hash: common.HexToHash(rec.Hash)}); err != nil {
			t.Fatalf("re-verifying the export: %v", err)
		}
	}
}

func TestAuditLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	_, pool := logWithRecords(t, 3)
	for _, stmt := range []string{
		`UPDATE audit_log SET outcome = 'denied' WHERE seq = 1`,
		`UPDATE audit_log SET tx_id = 'x' WHERE seq = 1`,
		`DELETE FROM audit_log WHERE seq = 3`,
		`TRUNCATE audit_log`,
	} {
		_, err := pool.Exec(context.Background(), stmt)
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v; want it refused", stmt, err)
		}
	}
}

// TestAuditVerifyNamesTheFirstBadRecord tampers with the log in every way
// an attacker with the database could, and checks verify names the first
// record that is wrong.
func TestAuditVerifyNamesTheFirstBadRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		tamper  string
		wantSeq uint64
		reason  string
	}{
		{"edit the body", `UPDATE audit_log SET body = ` + replaceInBody("allow-dev", "allow-all") + ` WHERE seq = 4`, 4, "edited"},
		{"edit a column", `UPDATE audit_log SET tx_id = 'tx-other' WHERE seq = 5`, 5, "stored columns differ"},
		{"edit a record's time", `UPDATE audit_log SET at = at - interval '1 hour' WHERE seq = 5`, 5, "stored columns differ"},
		{"edit a record's previous-hash column", `UPDATE audit_log SET prev_hash = sha256(prev_hash) WHERE seq = 5`, 5, "stored columns differ"},
		{"delete a record", `DELETE FROM audit_log WHERE seq = 3`, 3, "missing"},
		{"reorder two records", `UPDATE audit_log SET seq = seq + 1000 WHERE seq IN (6, 7);
			UPDATE audit_log SET seq = CASE seq WHEN 1006 THEN 7 ELSE 6 END WHERE seq > 1000`, 6, "reordered"},
		{"truncate the tail", `DELETE FROM audit_log WHERE seq >= 8`, 8, "truncated"},
		// A forged record that chains perfectly onto the last one: only
		// the head, which appends move in the same transaction, shows it.
		{"append a well-chained record outside signerd", `INSERT INTO audit_log (seq, at, tx_id, chain_id, signer, nonce, outcome, tx_hash, body, prev_hash, hash)
			SELECT 11, at, tx_id, chain_id, signer, nonce, outcome, tx_hash, b, hash, sha256(hash || b) FROM (
				SELECT *, convert_to(replace(replace(convert_from(body, 'UTF8'), '"seq":10', '"seq":11'),
					encode(prev_hash, 'hex'), encode(hash, 'hex')), 'UTF8') AS b
				FROM audit_log WHERE seq = 10) r`, 11, "beyond the recorded head"},
		{"replace the body and its hash", `UPDATE audit_log SET body = ` + replaceInBody(`"tx-1"`, `"tx-X"`) + `,
			tx_id = 'tx-X', hash = sha256(prev_hash || ` + replaceInBody(`"tx-1"`, `"tx-X"`) + `) WHERE seq = 2`, 3, "does not follow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, pool := logWithRecords(t, 10)
			asAttacker(t, pool, tt.tamper)
			_, err := store.VerifyAudit(context.Background())
			var bad *signer.ChainError
			if !errors.As(err, &bad) {
				t.Fatalf("verify after %q: %v; want a chain error", tt.name, err)
			}
			if bad.Seq != tt.wantSeq || !strings.Contains(bad.Reason, tt.reason) {
				t.Errorf("verify named record %d (%s); want %d (%s)", bad.Seq, bad.Reason, tt.wantSeq, tt.reason)
			}
		})
	}
}

// TestAuditVerifyCrossChecksSignatures: every row of the double-sign record
// must name a signed audit record of the same signature, and every signed
// record must have its row. The owner, with the triggers off, deletes or
// edits one or the other, and verify names the signature.
func TestAuditVerifyCrossChecksSignatures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tamper    string
		wantNonce uint64
		reason    string
	}{
		// Deleting the record of a signature is how a second intent gets
		// signed at a used nonce.
		{"delete a signature row", `DELETE FROM signature WHERE nonce = 2`, 2, "no signature row"},
		{"edit a signature's tx id", `UPDATE signature SET tx_id = 'tx-other' WHERE nonce = 1`, 1, "tx_id"},
		{"edit a signature's nonce", `UPDATE signature SET nonce = 9 WHERE nonce = 3`, 9, "nonce"},
		{"lower a signature's value", `UPDATE signature SET value = 1 WHERE nonce = 0`, 0, "value"},
		{"lower a signature's fee cap", `UPDATE signature SET fee_cap = 1 WHERE nonce = 1`, 1, "fee_cap"},
		{"edit a signature's request digest", `UPDATE signature SET digest = sha256(digest) WHERE nonce = 2`, 2, "request digest"},
		{"swap a signature's raw transaction", `UPDATE signature SET raw_tx = (SELECT raw_tx FROM signature WHERE nonce = 3) WHERE nonce = 2`, 2, "raw transaction"},
		{"point a signature at another record", `UPDATE signature SET audit_seq = 1 WHERE nonce = 3`, 3, "audit record 1"},
		{"point a signature at no record", `UPDATE signature SET audit_seq = 99 WHERE nonce = 3`, 3, "audit record 99 is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := signertest.MigratedDatabase(t)
			store := postgres.New(db.ServePool(t))
			signTransfers(t, store, 4)
			if n, err := store.VerifyAudit(context.Background()); err != nil || n != 4 {
				t.Fatalf("before tampering: %d records, %v", n, err)
			}
			asAttacker(t, db.OwnerPool(t), tt.tamper)
			_, err := store.VerifyAudit(context.Background())
			var bad *signer.SignatureError
			if !errors.As(err, &bad) {
				t.Fatalf("verify after %q: %v; want a signature error", tt.name, err)
			}
			if bad.Nonce != tt.wantNonce || !strings.Contains(bad.Error(), tt.reason) {
				t.Errorf("verify named %v; want nonce %d (%s)", bad, tt.wantNonce, tt.reason)
			}
		})
	}
}

// TestAuditRecordsCarryTheFullRequestDigest: Request.Digest leaves the
// approvals out, so two requests that differ only in their approvals
// share it. FullRequestDigest covers them (approver, expiry, signature,
// order), and an entry that carries it is sealed as version 2, stored,
// and verified; a version 2 body without it, or a version 1 body with
// it, is named.
func TestAuditRecordsCarryTheFullRequestDigest(t *testing.T) {
	t.Parallel()
	to := common.HexToAddress("0xb0b")
	base := signer.Request{TxID: "tx-1", ChainID: 31337, From: common.HexToAddress("0xa11ce"), Nonce: 7, Type: signer.DynamicFee,
		To: &to, Value: big.NewInt(5), Gas: 21000, MaxFeePerGas: big.NewInt(30), MaxPriorityFeePerGas: big.NewInt(1)}
	expiry := time.Unix(1_900_000_000, 0).UTC()
	approval := func(who string, sig byte) signer.Approval {
		return signer.Approval{Approver: who, Expiry: expiry, Signature: bytes.Repeat([]byte{sig}, 64)}
	}
	variants := map[string][]signer.Approval{
		"no approvals":            nil,
		"one approval":            {approval("alice", 1)},
		"another signature":       {approval("alice", 2)},
		"another approver":        {approval("bob", 1)},
		"a later expiry":          {{Approver: "alice", Expiry: expiry.Add(time.Second), Signature: bytes.Repeat([]byte{1}, 64)}},
		"a fee ceiling":           {{Approver: "alice", Expiry: expiry, Signature: bytes.Repeat([]byte{1}, 64), MaxFeePerGas: big.NewInt(30)}},
		"another fee ceiling":     {{Approver: "alice", Expiry: expiry, Signature: bytes.Repeat([]byte{1}, 64), MaxFeePerGas: big.NewInt(31)}},
		"two approvals":           {approval("alice", 1), approval("bob", 2)},
		"the same two, reordered": {approval("bob", 2), approval("alice", 1)},
	}
	seen := map[common.Hash]string{}
	for name, approvals := range variants {
		r := base
		r.Approvals = approvals
		if r.Digest() != base.Digest() {
			t.Fatalf("%s: Request.Digest changed with the approvals; this test assumes it leaves them out", name)
		}
		d := signer.FullRequestDigest(&r)
		if other, dup := seen[d]; dup {
			t.Errorf("%s and %s have the same full digest", name, other)
		}
		seen[d] = name
	}
	r := base
	r.Approvals = variants["two approvals"]
	// An equal request built apart (its own approvals slice and values)
	// has the same digest: it depends on the content only.
	same := base
	for _, a := range variants["two approvals"] {
		if a.MaxFeePerGas != nil {
			a.MaxFeePerGas = new(big.Int).Set(a.MaxFeePerGas)
		}
		a.Signature = slices.Clone(a.Signature)
		same.Approvals = append(same.Approvals, a)
	}
	if signer.FullRequestDigest(&r) != signer.FullRequestDigest(&same) {
		t.Error("two equal requests have different full digests")
	}

	// Sealed, stored and verified.
	db := signertest.MigratedDatabase(t)
	store := postgres.New(db.ServePool(t))
	full := signer.FullRequestDigest(&r)
	entry := signer.AuditEntry{At: time.Now(), Caller: "txmanager", TxID: r.TxID, ChainID: r.ChainID, From: r.From, Nonce: r.Nonce,
		RequestDigest: r.Digest(), FullRequestDigest: &full, Outcome: signer.OutcomeDenied, RuleID: "test", PolicyVersion: "1"}
	var records []signer.AuditRecord
	err := store.InTx(context.Background(), func(tx signer.StoreTx) error {
		var err error
		records, err = tx.Append(context.Background(), []signer.AuditEntry{entry})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(records[0].Body, []byte(`"v":2`)) || !bytes.Contains(records[0].Body, []byte(`"full_request_digest":"`+full.Hex()+`"`)) {
		t.Errorf("sealed body %s; want version 2 with the full request digest", records[0].Body)
	}
	if n, err := store.VerifyAudit(context.Background()); err != nil || n != 1 {
		t.Errorf("verify: %d records, %v", n, err)
	}

	// The version says whether the digest is there.
	for _, tt := range []struct {
		name    string
		version int
		full    *common.Hash
	}{{"version 2 without it", 2, nil}, {"version 1 with it", 1, &full}} {
		e := records[0].Entry
		e.Version, e.FullRequestDigest, e.PrevHash = tt.version, tt.full, signer.GenesisHash
		body, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(append(signer.GenesisHash.Bytes(), body...))
		err = signer.NewVerifier().Check(signer.AuditRecord{Entry: e, Body: body, Hash: common.Hash(sum)})
		var bad *signer.ChainError
		if !errors.As(err, &bad) || !strings.Contains(bad.Reason, "full_request_digest") {
			t.Errorf("%s: %v; want the record named for its version", tt.name, err)
		}
	}
}
