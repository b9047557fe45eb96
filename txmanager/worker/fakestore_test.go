package worker

import (
	"context"
	"log/slog"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
)

// fakeStore answers the WorkStore calls of an operator action on a
// transaction that moved on meanwhile; any other call panics on the nil
// embedded interface, so the test also proves that nothing was signed,
// priced or stored.
type fakeStore struct {
	txmanager.WorkStore

	txs      map[uuid.UUID]txmanager.Tx
	actions  []txmanager.Action
	finished []finished
}

type finished struct {
	ID      uuid.UUID
	Outcome string
	Detail  string
}

func (s *fakeStore) WorkerActions(context.Context, txmanager.SignerKey) ([]txmanager.Action, error) {
	return s.actions, nil
}

func (s *fakeStore) Get(_ context.Context, id uuid.UUID) (txmanager.Tx, error) { return s.txs[id], nil }

func (s *fakeStore) FinishAction(_ context.Context, _ txmanager.Fence, id uuid.UUID, outcome, detail string, _ *int) error {
	s.finished = append(s.finished, finished{id, outcome, detail})
	return nil
}

// TestAnActionOnATransactionThatMovedOnIsLeftOrRefused: the worker lists
// the actions on ALLOCATED and SIGNED transactions, and by the time it
// reads one the transaction may have moved on (a broadcast in flight, a
// receipt). A broadcast one is the chain follower's to act on, except an
// abandon, which is refused: the transaction may be mined any moment. Any
// other state refuses the action. A database would need the broadcast
// staged between two reads of one round; a fake answers it.
func TestAnActionOnATransactionThatMovedOnIsLeftOrRefused(t *testing.T) {
	for _, tc := range []struct {
		action string
		state  txmanager.State
		want   string // why it was refused; "" when left alone
	}{
		{txmanager.ActionBump, txmanager.StateBroadcasted, ""},
		{txmanager.ActionCancel, txmanager.StateBroadcasted, ""},
		{txmanager.ActionResend, txmanager.StateBroadcasted, ""},
		{txmanager.ActionAbandon, txmanager.StateBroadcasted,
			"the transaction was broadcast before it could be abandoned: it may be mined at any moment; cancel it instead"},
		{txmanager.ActionResend, txmanager.StateConfirmed, "the transaction is CONFIRMED: nothing to resend"},
		{txmanager.ActionAbandon, txmanager.StateCancelled, "the transaction is CANCELLED: nothing to abandon"},
	} {
		t.Run(tc.action+" "+string(tc.state), func(t *testing.T) {
			key := txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress("0x00000000000000000000000000000000000000a1")}
			txID, actionID := uuid.New(), uuid.New()
			store := &fakeStore{
				txs:     map[uuid.UUID]txmanager.Tx{txID: {ID: txID, State: tc.state}},
				actions: []txmanager.Action{{ID: actionID, TxID: txID, Key: key, Action: tc.action, Operator: "alice@ops"}},
			}
			log := slog.New(slog.DiscardHandler)
			w := &worker{Deps: Deps{Store: store, Log: log}, fence: txmanager.Fence{Node: "node-1", Key: key, Token: 1}, log: log}
			if err := w.operatorActions(t.Context()); err != nil {
				t.Fatal(err)
			}
			var want []finished
			if tc.want != "" {
				want = []finished{{actionID, txmanager.ActionRefused, tc.want}}
			}
			if diff := cmp.Diff(want, store.finished); diff != "" {
				t.Errorf("finished actions (-want +got):\n%s", diff)
			}
		})
	}
}
