package worker_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/txmanager"
)

// child creates a 1-wei transfer of from's under requestID that depends
// on parents.
func (e *env) child(t testing.TB, from common.Address, requestID string, parents ...uuid.UUID) txmanager.Tx {
	t.Helper()
	to := common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	tx, _, err := e.store.Create(ctx(t), &txmanager.Intent{ChainID: e.chain.Node.ChainID(), From: from, RequestID: requestID,
		To: &to, Value: big.NewInt(1), Route: txmanager.RoutePublic, DependsOn: parents})
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

// settle does by hand what the chain follower does to a broadcast
// transaction whose receipt is deep enough: CONFIRMED with a receipt of
// status 1, REVERTED with 0.
func (e *env) settle(t testing.TB, id uuid.UUID, confirmed bool) {
	t.Helper()
	status, state := 1, txmanager.StateConfirmed
	if !confirmed {
		status, state = 0, txmanager.StateReverted
	}
	tag, err := e.pool.Exec(ctx(t), `
		WITH receipt AS (UPDATE attempt SET block_number = 1, block_hash = hash, receipt_status = $2 WHERE tx_id = $1 RETURNING tx_id)
		UPDATE tx SET state = $3, mined_attempt = 1, confirmations = 3 FROM receipt
		WHERE tx.tx_id = receipt.tx_id AND tx.state = 'BROADCASTED'`, id, status, string(state))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("settle %s as %s: %v, %d rows", id, state, err, tag.RowsAffected())
	}
}

// TestAChildWaitsForEveryParent: a child waits (INIT, waiting_dependency,
// no nonce) while any parent is on its way, also once some are
// CONFIRMED, and goes on when all are; a parent that FAILED, REVERTED or
// was CANCELLED, on this signer or another nobody works, fails the child
// naming that parent, even while its other parents are on their way.
func TestAChildWaitsForEveryParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1, p2 := e.create(t, "p1", big.NewInt(1)), e.create(t, "p2", big.NewInt(1))
	p3 := e.create(t, "p3", big.NewInt(1))
	denied := e.create(t, "denied-parent", ether(2000))          // over the development policy's 1000 ETH
	stranger := e.child(t, signertest.DevAddress(1), "stranger") // a signer no node works here
	waits := e.child(t, e.signer, "waits", p1.ID, p2.ID)
	foreign := e.child(t, e.signer, "foreign", p1.ID, stranger.ID)
	orphan := e.child(t, e.signer, "orphan", p2.ID, denied.ID)
	reverted := e.child(t, e.signer, "reverted", p3.ID, p2.ID)
	e.own(t, "node-a")

	for _, p := range []txmanager.Tx{p1, p2, p3} {
		e.waitState(t, p.ID, txmanager.StateBroadcasted)
	}
	if tx := e.waitState(t, orphan.ID, txmanager.StateFailed); tx.Reason != fmt.Sprintf("dependency_failed: %s FAILED", denied.ID) || tx.Nonce != nil {
		t.Errorf("the child of a denied parent: reason %q, nonce %v", tx.Reason, tx.Nonce)
	}
	for _, c := range []txmanager.Tx{waits, foreign, reverted} {
		eventually(t, "waiting: "+c.RequestID, func() bool { return e.get(t, c.ID).SubState == txmanager.SubWaitingDependency })
	}

	e.settle(t, p1.ID, true)
	e.settle(t, p3.ID, false)
	if tx := e.waitState(t, reverted.ID, txmanager.StateFailed); tx.Reason != fmt.Sprintf("dependency_failed: %s REVERTED", p3.ID) {
		t.Errorf("the child of a reverted parent: reason %q", tx.Reason)
	}
	// A transaction accepted now is taken on by a pass that read the
	// parents after p1 was CONFIRMED: once it is broadcast, waits was
	// looked at with one parent CONFIRMED and the other not.
	marker := e.create(t, "marker", big.NewInt(1))
	e.waitState(t, marker.ID, txmanager.StateBroadcasted)
	for _, c := range []txmanager.Tx{waits, foreign} {
		if tx := e.get(t, c.ID); tx.State != txmanager.StateInit || tx.SubState != txmanager.SubWaitingDependency || tx.Nonce != nil {
			t.Errorf("%s with a parent on its way: %s/%s, nonce %v", c.RequestID, tx.State, tx.SubState, tx.Nonce)
		}
	}

	e.settle(t, p2.ID, true)
	if tx := e.waitState(t, waits.ID, txmanager.StateBroadcasted); tx.Nonce == nil || *tx.Nonce != *e.get(t, marker.ID).Nonce+1 || tx.SubState != txmanager.SubNone {
		t.Errorf("the child after both parents: nonce %v, sub-state %q", tx.Nonce, tx.SubState)
	}
	if _, err := e.store.Cancel(ctx(t), stranger.ID); err != nil {
		t.Fatal(err)
	}
	if tx := e.waitState(t, foreign.ID, txmanager.StateFailed); tx.Reason != fmt.Sprintf("dependency_failed: %s CANCELLED", stranger.ID) || tx.Nonce != nil {
		t.Errorf("the child of a cancelled parent of another signer: reason %q, nonce %v", tx.Reason, tx.Nonce)
	}
}

// TestNoChildIsSentBeforeAllItsParentsAreConfirmed: the workers of two
// signers race while parents of both are confirmed or reverted, one by
// one in a random order, as soon as each is broadcast; children of either
// signer depend on one to four parents of either. Throughout, no child
// leaves INIT unless every parent is CONFIRMED, and none fails unless a
// parent REVERTED (both only grow, so a check at any moment is a check of
// every moment before it). At the end every child with all parents
// CONFIRMED is broadcast, and every other has failed naming a reverted
// parent of its own.
func TestNoChildIsSentBeforeAllItsParentsAreConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{Signers: 2})
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	signers := []common.Address{signertest.DevAddress(0), signertest.DevAddress(1)}

	var parents []uuid.UUID
	confirm := map[uuid.UUID]bool{}
	for i := range 12 {
		p := e.child(t, signers[i%2], fmt.Sprintf("parent-%d", i))
		parents = append(parents, p.ID)
		confirm[p.ID] = rng.IntN(4) != 0
	}
	type childTx struct {
		id      uuid.UUID
		parents []uuid.UUID
	}
	var children []childTx
	for i := range 20 {
		ps := append([]uuid.UUID(nil), parents...)
		rng.Shuffle(len(ps), func(a, b int) { ps[a], ps[b] = ps[b], ps[a] })
		ps = ps[:1+rng.IntN(4)]
		children = append(children, childTx{e.child(t, signers[i%2], fmt.Sprintf("child-%d", i), ps...).ID, ps})
	}

	// The invariant, read in one statement (one snapshot) again and again
	// while the race runs.
	done := make(chan struct{})
	var checking sync.WaitGroup
	var violations []string
	check := func() {
		rows, err := e.pool.Query(context.Background(), `
			SELECT c.request_id, c.state, coalesce(c.reason, '') FROM tx c
			WHERE c.depends_on IS NOT NULL AND (
				(c.state NOT IN ('INIT', 'FAILED') AND EXISTS (SELECT 1 FROM tx p WHERE p.tx_id = ANY (c.depends_on) AND p.state <> 'CONFIRMED'))
				OR (c.state = 'FAILED' AND NOT EXISTS (SELECT 1 FROM tx p WHERE p.tx_id = ANY (c.depends_on) AND p.state = 'REVERTED')))`)
		if err != nil {
			violations = append(violations, err.Error())
			return
		}
		defer rows.Close()
		for rows.Next() {
			var id, state, reason string
			if err := rows.Scan(&id, &state, &reason); err != nil {
				violations = append(violations, err.Error())
				return
			}
			violations = append(violations, fmt.Sprintf("%s %s %s", id, state, reason))
		}
	}
	checking.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			check()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})

	e.ownKey(t, "node-a", txmanager.SignerKey{ChainID: e.chain.Node.ChainID(), Signer: signers[0]})
	e.ownKey(t, "node-b", txmanager.SignerKey{ChainID: e.chain.Node.ChainID(), Signer: signers[1]})
	order := append([]uuid.UUID(nil), parents...)
	rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
	for _, p := range order {
		e.waitState(t, p, txmanager.StateBroadcasted)
		e.settle(t, p, confirm[p])
	}

	for i, c := range children {
		want, reverted := txmanager.StateBroadcasted, map[string]bool{}
		for _, p := range c.parents {
			if !confirm[p] {
				want = txmanager.StateFailed
				reverted[fmt.Sprintf("dependency_failed: %s REVERTED", p)] = true
			}
		}
		var tx txmanager.Tx
		eventually(t, fmt.Sprintf("child-%d broadcast or failed", i), func() bool {
			tx = e.get(t, c.id)
			return tx.State == txmanager.StateBroadcasted || tx.State == txmanager.StateFailed
		})
		switch {
		case tx.State != want:
			t.Errorf("child-%d is %s (%s), want %s", i, tx.State, tx.Reason, want)
		case want == txmanager.StateFailed && (!reverted[tx.Reason] || tx.Nonce != nil):
			t.Errorf("child-%d failed with %q, nonce %v; want a reason among %v", i, tx.Reason, tx.Nonce, reverted)
		}
	}
	close(done)
	checking.Wait()
	check()
	if len(violations) > 0 {
		t.Errorf("children that went on before all their parents were CONFIRMED, or failed without a reverted parent: %v", violations)
	}
}

// TestWaitingChildrenDoNotHoldTheQueue: more children than one intake
// pass looks at wait for a parent of a signer no node works; a transfer
// accepted after them is still taken on and broadcast (intake pages
// through the INIT queue, from the first again after the last), and every
// child, on either page, fails once the parent is cancelled.
func TestWaitingChildrenDoNotHoldTheQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.child(t, signertest.DevAddress(1), "parent") // a signer no node works here
	var children []txmanager.Tx
	for i := range 70 {
		children = append(children, e.child(t, e.signer, fmt.Sprintf("child-%d", i), parent.ID))
	}
	later := e.create(t, "later", big.NewInt(1))
	e.own(t, "node-a")
	e.waitState(t, later.ID, txmanager.StateBroadcasted)
	for _, c := range children {
		if tx := e.get(t, c.ID); tx.State != txmanager.StateInit || tx.Nonce != nil {
			t.Fatalf("%s went on before its parent: %s", c.RequestID, tx.State)
		}
	}
	if _, err := e.store.Cancel(ctx(t), parent.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if tx := e.waitState(t, c.ID, txmanager.StateFailed); tx.Reason != fmt.Sprintf("dependency_failed: %s CANCELLED", parent.ID) {
			t.Errorf("%s: reason %q", c.RequestID, tx.Reason)
		}
	}
}
