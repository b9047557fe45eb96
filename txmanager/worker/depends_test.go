package worker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/txfence/txfence/shared/dependson"
	"github.com/txfence/txfence/txmanager"
)

// parentStore answers the worker's reads of parents from a map, counting
// the statements, and records what the worker writes about the children;
// any other call panics on the nil embedded interface.
type parentStore struct {
	txmanager.WorkStore

	states map[uuid.UUID]txmanager.State
	reads  int
	writes []string // "fail <id> <reason>" or "wait <id>"
}

func (s *parentStore) ParentStates(_ context.Context, ids []uuid.UUID) (map[uuid.UUID]txmanager.State, error) {
	s.reads++
	out := map[uuid.UUID]txmanager.State{}
	for _, id := range ids {
		if st, ok := s.states[id]; ok {
			out[id] = st
		}
	}
	return out, nil
}

func (s *parentStore) Fail(_ context.Context, _ txmanager.Fence, id uuid.UUID, why txmanager.StateChanged) (txmanager.Tx, error) {
	s.writes = append(s.writes, "fail "+id.String()+" "+why.Reason)
	return txmanager.Tx{}, nil
}

func (s *parentStore) SetSubState(_ context.Context, _ txmanager.Fence, id uuid.UUID, state txmanager.State, sub txmanager.SubState, reason string) (txmanager.Tx, error) {
	s.writes = append(s.writes, "wait "+id.String())
	return txmanager.Tx{}, nil
}

// TestAChildGoesOnOnlyWhenEveryParentIsConfirmed: the worker reads the
// parents of its whole queue in one statement, whatever their number and
// chains; a child all of whose parents are CONFIRMED goes on; one with a
// parent on its way waits (written once, not again on every pass); one
// with a parent FAILED, CANCELLED or REVERTED fails naming it, even while
// another parent is on its way.
func TestAChildGoesOnOnlyWhenEveryParentIsConfirmed(t *testing.T) {
	t.Parallel()
	p := make([]uuid.UUID, 6)
	for i := range p {
		p[i] = uuid.New()
	}
	store := &parentStore{states: map[uuid.UUID]txmanager.State{
		p[0]: txmanager.StateConfirmed, p[1]: txmanager.StateConfirmed, p[2]: txmanager.StateBroadcasted,
		p[3]: txmanager.StateReverted, p[4]: txmanager.StateInit, p[5]: txmanager.StateCancelled,
	}}
	child := func(sub txmanager.SubState, parents ...uuid.UUID) txmanager.Tx {
		return txmanager.Tx{ID: uuid.New(), Intent: txmanager.Intent{DependsOn: parents}, State: txmanager.StateInit, SubState: sub}
	}
	queue := []txmanager.Tx{
		child(""),             // no parent
		child("", p[0], p[1]), // all confirmed
		child("", p[0], p[2]), // one on its way
		child(txmanager.SubWaitingDependency, p[2], p[4]), // waiting already
		child("", p[2], p[3], p[0]),                       // one reverted, one on its way
		child(txmanager.SubWaitingDependency, p[5]),       // was waiting; its parent was cancelled
	}
	key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress("0x00000000000000000000000000000000000000a1")}
	log := slog.New(slog.DiscardHandler)
	w := &worker{Deps: Deps{Store: store, Log: log}, fence: txmanager.Fence{Node: "node-1", Key: key, Token: 1}, log: log}

	states, err := w.parentStates(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	if store.reads != 1 {
		t.Errorf("%d reads of the parents for one queue, want 1", store.reads)
	}
	var ready []bool
	for i := range queue {
		ok, err := w.dependencyMet(t.Context(), &queue[i], states)
		if err != nil {
			t.Fatal(err)
		}
		ready = append(ready, ok)
	}
	if diff := cmp.Diff([]bool{true, true, false, false, false, false}, ready); diff != "" {
		t.Errorf("which children go on (-want +got):\n%s", diff)
	}
	want := []string{
		"wait " + queue[2].ID.String(),
		"fail " + queue[4].ID.String() + " dependency_failed: " + p[3].String() + " REVERTED",
		"fail " + queue[5].ID.String() + " dependency_failed: " + p[5].String() + " CANCELLED",
	}
	if diff := cmp.Diff(want, store.writes); diff != "" {
		t.Errorf("what the worker wrote (-want +got):\n%s", diff)
	}

	// A queue without parents reads nothing.
	store.reads = 0
	if states, err := w.parentStates(t.Context(), []txmanager.Tx{child(""), child("")}); err != nil || states != nil || store.reads != 0 {
		t.Errorf("a queue without parents: %v %v, %d reads", states, err, store.reads)
	}
	// The most parents a transaction may have are read as well.
	many := make(dependson.List, dependson.Max)
	for i := range many {
		many[i] = uuid.New()
		store.states[many[i]] = txmanager.StateConfirmed
	}
	wide := child("", many...)
	states, err = w.parentStates(t.Context(), []txmanager.Tx{wide})
	if ok, err2 := w.dependencyMet(t.Context(), &wide, states); err != nil || err2 != nil || !ok || store.reads != 1 {
		t.Errorf("%d confirmed parents: ready %v (%v %v), %d reads", len(many), ok, err, err2, store.reads)
	}
}
