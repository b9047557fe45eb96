package postgres_test

import (
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// awaitingApproval creates a transaction and parks it in PENDING_APPROVAL
// for an hour, as the owner's worker does after the policy's dry run.
func awaitingApproval(t *testing.T, s *postgres.Store, pool *pgxpool.Pool, requestID string) uuid.UUID {
	t.Helper()
	tx, _, err := s.Create(ctx(t), intent(requestID, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), `UPDATE tx SET state = 'PENDING_APPROVAL', gas_limit = 21000,
		approval_expires_at = now() + interval '1 hour' WHERE tx_id = $1`, tx.ID); err != nil {
		t.Fatal(err)
	}
	return tx.ID
}

// TestApprovalsKeepTheirFeeCeiling: an approval is stored and read back
// with the fee ceiling its signature covers; approving again replaces the
// ceiling with the signature; a rejection keeps none; the schema refuses an
// approval without one.
func TestApprovalsKeepTheirFeeCeiling(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	id := awaitingApproval(t, s, pool, "ceiling-1")
	expiry := time.Now().Add(time.Hour).Truncate(time.Second)
	approve := func(approver string, ceiling int64, sig byte) {
		t.Helper()
		if _, err := s.Approve(ctx(t), id, txmanager.Approval{Approver: approver, MaxFeePerGas: big.NewInt(ceiling), Expiry: expiry,
			Signature: []byte{sig}}, 2); err != nil {
			t.Fatal(err)
		}
	}
	stored := func() string {
		t.Helper()
		got, err := s.Approvals(ctx(t), []uuid.UUID{id})
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, a := range got[id] {
			out += fmt.Sprintf("%s<=%s:%x ", a.Approver, a.MaxFeePerGas, a.Signature)
		}
		return out
	}
	approve("alice", 30e9, 1)
	approve("bob", 45e9, 2)
	if got, want := stored(), "alice<=30000000000:01 bob<=45000000000:02 "; got != want {
		t.Errorf("stored approvals %q, want %q", got, want)
	}
	approve("alice", 60e9, 3)
	if got, want := stored(), "alice<=60000000000:03 bob<=45000000000:02 "; got != want {
		t.Errorf("approved again: %q, want %q", got, want)
	}
	if _, err := s.Reject(ctx(t), id, txmanager.Rejection{Approver: "bob", Expiry: expiry, Signature: []byte{4}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, pool, `SELECT count(*) FROM approval WHERE approver = 'bob' AND decision = 'reject' AND max_fee_per_gas IS NULL AND signature = '\x04'`); n != 1 {
		t.Errorf("bob's rejection kept a fee ceiling, or lost its signature")
	}
	other := awaitingApproval(t, s, pool, "ceiling-2")
	for name, sql := range map[string]string{
		"an approval without a ceiling":       `INSERT INTO approval (tx_id, approver, decision, expiry, signature) VALUES ($1, 'carol', 'approve', now() + interval '1 hour', '\x01')`,
		"an approval with a negative ceiling": `INSERT INTO approval (tx_id, approver, decision, expiry, signature, max_fee_per_gas) VALUES ($1, 'carol', 'approve', now() + interval '1 hour', '\x01', -1)`,
		"an approval with a ceiling beyond uint256": `INSERT INTO approval (tx_id, approver, decision, expiry, signature, max_fee_per_gas)
			VALUES ($1, 'carol', 'approve', now() + interval '1 hour', '\x01', 2::numeric ^ 256)`,
	} {
		if _, err := pool.Exec(ctx(t), sql, other); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestApprovalsAreCappedAtTheRulesApprovers: a transaction holds at most
// as many approvals as its rule has approvers (N): one more approver is a
// conflict and stores nothing, while an approver already counted may
// replace its approval even at the cap.
func TestApprovalsAreCappedAtTheRulesApprovers(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	id := awaitingApproval(t, s, pool, "capped-1")
	expiry := time.Now().Add(time.Hour).Truncate(time.Second)
	approve := func(approver string, sig byte) error {
		_, err := s.Approve(ctx(t), id, txmanager.Approval{Approver: approver, MaxFeePerGas: big.NewInt(1), Expiry: expiry, Signature: []byte{sig}}, 2)
		return err
	}
	for i, a := range []string{"alice", "bob"} {
		if err := approve(a, byte(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := approve("carol", 9); !errs.Is(err, errs.Conflict) {
		t.Errorf("a third approval of a rule of 2 approvers: %v, want a conflict", err)
	}
	if err := approve("alice", 7); err != nil {
		t.Errorf("alice again at the cap: %v", err)
	}
	if n := count(t, pool, `SELECT count(*) FROM approval WHERE tx_id = $1`, id); n != 2 {
		t.Errorf("%d approvals stored, want 2", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM approval WHERE tx_id = $1 AND approver = 'alice' AND signature = '\x07'`, id); n != 1 {
		t.Errorf("alice's second approval did not replace her first")
	}
}

// TestTheFeeCeilingMigrationDropsV1Approvals: approvals stored before the
// fee ceiling (txfence/approval/v1) cannot count any more, so the
// migration deletes them; rejections stay.
func TestTheFeeCeilingMigrationDropsV1Approvals(t *testing.T) {
	t.Parallel()
	pool, ceilingVersion := migratedBefore(t, "approval_fee_ceiling")
	s := postgres.New(pool)
	// The rows as the schema of then holds them: the store's statements
	// are today's.
	approved, rejected := oldRow(t, pool, "v1-approved", nil), oldRow(t, pool, "v1-rejected", nil)
	if _, err := pool.Exec(ctx(t), `UPDATE tx SET state = 'PENDING_APPROVAL', gas_limit = 21000,
		approval_expires_at = now() + interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx(t), `INSERT INTO approval (tx_id, approver, decision, expiry, signature)
		VALUES ($1, 'alice', 'approve', now() + interval '1 hour', '\x01'), ($2, 'bob', 'reject', NULL, NULL)`, approved, rejected); err != nil {
		t.Fatal(err)
	}

	applied, err := postgres.Migrations.Up(ctx(t), pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) == 0 || applied[0].Version != ceilingVersion {
		t.Fatalf("applied %v, want the fee ceiling migration first", applied)
	}
	got, err := s.Approvals(ctx(t), []uuid.UUID{approved, rejected})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("approvals without a fee ceiling survived the migration: %v", got)
	}
	if n := count(t, pool, `SELECT count(*) FROM approval WHERE tx_id = $1 AND decision = 'reject'`, rejected); n != 1 {
		t.Errorf("%d rejections after the migration, want 1", n)
	}
}
