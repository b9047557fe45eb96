package postgres_test

import (
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// broadcastTx takes one transaction of alice to BROADCASTED under f.
func broadcastTx(t *testing.T, s *postgres.Store, f txmanager.Fence, requestID string) uuid.UUID {
	t.Helper()
	ids := simulatedTxs(t, s, f, requestID, 1)
	next, err := s.NextNonce(ctx(t), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allocate(ctx(t), f, ids, feesFor(ids), next); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Signed(ctx(t), f, []txmanager.Attempt{attemptFor(ids[0])}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Broadcasted(ctx(t), f, []txmanager.Sent{{TxID: ids[0], Route: txmanager.RoutePublic}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

func bumpPlan() txmanager.Plan {
	return txmanager.Plan{Kind: txmanager.AttemptFeeBump, GasLimit: 21000,
		Fees: txmanager.Fees{MaxFeePerGas: big.NewInt(3e9), MaxPriorityFeePerGas: big.NewInt(2e9)}}
}

// TestOnePlanAtATimeUnderTheFence: concurrent planners of one
// transaction's next attempt get one plan (the others ErrPlanned); a
// stale owner plans, stores and drops nothing; the stored attempt becomes
// current with its event and the plan is gone.
func TestOnePlanAtATimeUnderTheFence(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 16)
	old := lease(t, s, "node-a")
	id := broadcastTx(t, s, old, "bumped")

	var wg sync.WaitGroup
	plans := make(chan txmanager.Plan, 8)
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			p, err := s.PlanAttempt(ctx(t), old, id, bumpPlan())
			if err != nil {
				errs <- err
				return
			}
			plans <- p
		})
	}
	wg.Wait()
	close(plans)
	close(errs)
	if len(plans) != 1 {
		t.Fatalf("%d plans, want 1", len(plans))
	}
	for err := range errs {
		if !errors.Is(err, txmanager.ErrPlanned) {
			t.Errorf("a concurrent planner: %v, want ErrPlanned", err)
		}
	}
	plan := <-plans
	if plan.Attempt != 2 {
		t.Fatalf("planned attempt %d, want 2", plan.Attempt)
	}

	// Another node takes the signer over: the old owner's writes fence off.
	if err := s.Release(ctx(t), old.Node, []txmanager.SignerKey{old.Key}); err != nil {
		t.Fatal(err)
	}
	now := lease(t, s, "node-b")
	hash := crypto.Keccak256Hash([]byte("attempt 2"))
	if err := s.StoreAttempt(ctx(t), old, id, plan, []byte("raw 2"), hash); !errors.Is(err, txmanager.ErrFenced) {
		t.Fatalf("stale store: %v, want fenced", err)
	}
	if err := s.DropPlan(ctx(t), old, id, plan, "why"); !errors.Is(err, txmanager.ErrFenced) {
		t.Fatalf("stale drop: %v, want fenced", err)
	}
	if _, err := s.PlanAttempt(ctx(t), old, id, bumpPlan()); err == nil {
		t.Fatal("a stale owner planned")
	}

	// The new owner finishes the plan it finds.
	if err := s.StoreAttempt(ctx(t), now, id, plan, []byte("raw 2"), hash); err != nil {
		t.Fatal(err)
	}
	tx, err := s.Get(ctx(t), id)
	if err != nil || tx.Hash == nil || *tx.Hash != hash || tx.SubState != txmanager.SubReplaced {
		t.Fatalf("after the store: %v %s %v", tx.Hash, tx.SubState, err)
	}
	if n := count(t, pool, `SELECT count(*) FROM attempt_plan WHERE tx_id = $1`, id); n != 0 {
		t.Errorf("%d plans left", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM event WHERE tx_id = $1 AND type = 'tx.attempt' AND payload->>'kind' = 'fee_bump'
		AND payload->>'replaces' = $2`, id, crypto.Keccak256Hash(id[:]).Hex()); n != 1 {
		t.Errorf("%d fee_bump events replacing attempt 1, want 1", n)
	}
	// The same plan again stores nothing twice.
	if err := s.StoreAttempt(ctx(t), now, id, plan, []byte("raw 2"), hash); !errors.Is(err, txmanager.ErrNotFollowed) {
		t.Errorf("storing the plan again: %v, want ErrNotFollowed", err)
	}

	// Attempt 1 is mined after all: the transaction's hash is the mined
	// attempt's, not the current one's.
	first := crypto.Keccak256Hash(id[:])
	if err := s.Mined(ctx(t), now, id, txmanager.Receipt{Attempt: 1, Hash: first, BlockNumber: 10, BlockHash: crypto.Keccak256Hash([]byte("b")),
		Status: 1, GasUsed: 21000, EffectiveGasPrice: big.NewInt(1)}, 1); err != nil {
		t.Fatal(err)
	}
	if tx, err := s.Get(ctx(t), id); err != nil || *tx.Hash != first {
		t.Errorf("the hash of a transaction whose first attempt is mined: %v %v", tx.Hash, err)
	}
}

// TestADroppedPlanRefusesItsAction: a plan carrying an operator action,
// dropped (signerd refused it), refuses the action with the reason.
func TestADroppedPlanRefusesItsAction(t *testing.T) {
	t.Parallel()
	s, _ := store(t, 4)
	f := lease(t, s, "node-a")
	id := broadcastTx(t, s, f, "refused")
	a, err := s.RequestAction(ctx(t), id, txmanager.ActionBump, "alice@ops")
	if err != nil {
		t.Fatal(err)
	}
	p := bumpPlan()
	p.ActionID = &a.ID
	if p, err = s.PlanAttempt(ctx(t), f, id, p); err != nil {
		t.Fatal(err)
	}
	if err := s.DropPlan(ctx(t), f, id, p, "signerd did not sign the fee_bump"); err != nil {
		t.Fatal(err)
	}
	acts, err := s.Actions(ctx(t), id)
	if err != nil || len(acts) != 1 || acts[0].Outcome != txmanager.ActionRefused || acts[0].Detail != "signerd did not sign the fee_bump" || acts[0].DoneAt == nil {
		t.Fatalf("actions %+v %v", acts, err)
	}
	if pending, err := s.PendingActions(ctx(t), f.Key); err != nil || len(pending) != 0 {
		t.Errorf("pending %+v %v", pending, err)
	}
}
