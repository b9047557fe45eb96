package follow

// Decisions of the follower that hang on what the store answers at an
// awkward moment (a race with another writer, the feed a step behind),
// tested against a fake of its FollowStore: a real database would need the
// race to be staged, and could not tell which reads a step made.

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/remote"
)

// fakeStore answers the few FollowStore calls a test sets up and records
// every call; any other call panics on the nil embedded interface, so a
// test also proves what the follower did not do.
type fakeStore struct {
	txmanager.FollowStore

	calls []string

	txs      map[uuid.UUID]txmanager.Tx
	actions  []txmanager.Action
	finished []finished
	planErr  error

	head     uint64
	tracking []txmanager.Tracked
	// since answers TrackingSince, one answer per call.
	since []sinceAnswer
}

type finished struct {
	ID      uuid.UUID
	Outcome string
	Detail  string
}

type sinceAnswer struct {
	rows    []txmanager.Tracked
	changed []uuid.UUID
	upTo    uint64
}

func (s *fakeStore) Get(_ context.Context, id uuid.UUID) (txmanager.Tx, error) {
	s.calls = append(s.calls, "Get")
	tx, ok := s.txs[id]
	if !ok {
		return txmanager.Tx{}, fmt.Errorf("no transaction %s", id)
	}
	return tx, nil
}

func (s *fakeStore) PendingActions(context.Context, txmanager.SignerKey) ([]txmanager.Action, error) {
	s.calls = append(s.calls, "PendingActions")
	return s.actions, nil
}

func (s *fakeStore) FinishAction(_ context.Context, _ txmanager.Fence, id uuid.UUID, outcome, detail string, _ *int) error {
	s.calls = append(s.calls, "FinishAction")
	s.finished = append(s.finished, finished{id, outcome, detail})
	return nil
}

func (s *fakeStore) PlanAttempt(_ context.Context, _ txmanager.Fence, id uuid.UUID, _ txmanager.Plan) (txmanager.Plan, error) {
	s.calls = append(s.calls, "PlanAttempt")
	return txmanager.Plan{}, fmt.Errorf("plan an attempt of %s: %w", id, s.planErr)
}

func (s *fakeStore) FeedHead(context.Context) (uint64, error) {
	s.calls = append(s.calls, "FeedHead")
	return s.head, nil
}

func (s *fakeStore) Tracking(context.Context, txmanager.SignerKey, uint64) ([]txmanager.Tracked, error) {
	s.calls = append(s.calls, "Tracking")
	return s.tracking, nil
}

func (s *fakeStore) TrackingSince(_ context.Context, _ txmanager.SignerKey, _, after uint64) ([]txmanager.Tracked, []uuid.UUID, uint64, error) {
	s.calls = append(s.calls, fmt.Sprintf("TrackingSince(%d)", after))
	if len(s.since) == 0 {
		return nil, nil, after, nil
	}
	a := s.since[0]
	s.since = s.since[1:]
	return a.rows, a.changed, a.upTo, nil
}

var fakeKey = txmanager.SignerKey{ChainID: 31337, Signer: common.HexToAddress("0x00000000000000000000000000000000000000a1")}

func broadcast(nonce uint64) txmanager.Tracked {
	return txmanager.Tracked{TxID: uuid.New(), Key: fakeKey, State: txmanager.StateBroadcasted, Route: txmanager.RoutePublic, Nonce: nonce,
		Current: 1, CurrentKind: txmanager.AttemptInitial, GasLimit: 21_000,
		Fees: txmanager.Fees{MaxFeePerGas: big.NewInt(20_000_000_000), MaxPriorityFeePerGas: big.NewInt(1_000_000_000)}}
}

// TestAnActionOnATransactionMissingFromTheViewWaitsUnlessItIsOver: the
// follower's view follows the numbered feed, so a transaction broadcast a
// moment ago may be missing from it while the store already holds it
// BROADCASTED. An operator's bump of it waits for a step that sees it;
// only one that is over is refused.
func TestAnActionOnATransactionMissingFromTheViewWaitsUnlessItIsOver(t *testing.T) {
	for _, tc := range []struct {
		state txmanager.State
		want  []finished
	}{
		{state: txmanager.StateBroadcasted},
		{state: txmanager.StateConfirmed, want: []finished{{Outcome: txmanager.ActionRefused, Detail: "the transaction is confirmed: nothing to bump"}}},
		{state: txmanager.StateFailed, want: []finished{{Outcome: txmanager.ActionRefused, Detail: "the transaction is failed: nothing to bump"}}},
	} {
		t.Run(string(tc.state), func(t *testing.T) {
			txID, actionID := uuid.New(), uuid.New()
			store := &fakeStore{
				txs:     map[uuid.UUID]txmanager.Tx{txID: {ID: txID, State: tc.state}},
				actions: []txmanager.Action{{ID: actionID, TxID: txID, Key: fakeKey, Action: txmanager.ActionBump, Operator: "alice@ops"}},
			}
			fl := New(Config{Chain: txmanager.Chain{ID: fakeKey.ChainID}, Store: store})
			f := txmanager.Fence{Node: "node-1", Key: fakeKey, Token: 1}
			if err := fl.operatorActions(t.Context(), f, txmanager.SignerConfig{Address: fakeKey.Signer}, nil, &pricer{fl: fl}); err != nil {
				t.Fatal(err)
			}
			for i := range tc.want {
				tc.want[i].ID = actionID
			}
			if diff := cmp.Diff(tc.want, store.finished); diff != "" {
				t.Errorf("finished actions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAPlanLostToAnotherWriterIsNotSigned: between the follower's read and
// its plan of an operator's bump, the transaction changed (it was mined,
// or another step planned first). The plan's write touches nothing, and
// then nothing is signed and the action is neither done nor refused: the
// next step, reading the transaction anew, decides.
func TestAPlanLostToAnotherWriterIsNotSigned(t *testing.T) {
	for _, lost := range []error{txmanager.ErrNotFollowed, txmanager.ErrPlanned} {
		t.Run(lost.Error(), func(t *testing.T) {
			tracked := broadcast(7)
			actionID := uuid.New()
			store := &fakeStore{
				txs:     map[uuid.UUID]txmanager.Tx{tracked.TxID: {ID: tracked.TxID, State: txmanager.StateBroadcasted}},
				actions: []txmanager.Action{{ID: actionID, TxID: tracked.TxID, Key: fakeKey, Action: txmanager.ActionBump, Operator: "alice@ops"}},
				planErr: lost,
			}
			// A signerd nobody listens at: were the follower to sign, the
			// step would fail.
			signer, err := remote.NewSigner("http://127.0.0.1:1", &http.Client{})
			if err != nil {
				t.Fatal(err)
			}
			fl := New(Config{Chain: txmanager.Chain{ID: fakeKey.ChainID}, Store: store, Signer: signer})
			market := chain.MarketAt(big.NewInt(10_000_000_000), big.NewInt(1_000_000_000))
			f := txmanager.Fence{Node: "node-1", Key: fakeKey, Token: 1}
			err = fl.operatorActions(t.Context(), f, txmanager.SignerConfig{Address: fakeKey.Signer}, []txmanager.Tracked{tracked}, &pricer{fl: fl, market: &market})
			if err != nil {
				t.Fatalf("a lost plan failed the step: %v", err)
			}
			if diff := cmp.Diff([]string{"PendingActions", "Get", "PlanAttempt"}, store.calls); diff != "" {
				t.Errorf("store calls (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTheViewReadsWholeOnlyUnderANewLease: a signer's tracked
// transactions are read whole once per lease; every later step reads only
// the transactions with events since the feed position it last read, so a
// step costs the database what changed, not what is tracked. A changed
// transaction the store no longer lists leaves the view, and a final one
// leaves it once its block is out of a reorg's reach.
func TestTheViewReadsWholeOnlyUnderANewLease(t *testing.T) {
	a, b := broadcast(1), broadcast(2)
	confirmed := b
	confirmed.State = txmanager.StateConfirmed
	confirmed.Mined = &txmanager.Receipt{Attempt: 1, BlockNumber: 99, Status: 1}
	gone := uuid.New() // another signer's, or one no longer watched
	store := &fakeStore{
		head:     10,
		tracking: []txmanager.Tracked{b, a},
		since: []sinceAnswer{
			{rows: []txmanager.Tracked{confirmed}, changed: []uuid.UUID{b.TxID, gone}, upTo: 12},
			{changed: []uuid.UUID{a.TxID}, upTo: 13},
		},
	}
	fl := New(Config{Chain: txmanager.Chain{ID: fakeKey.ChainID}, Store: store})
	f := txmanager.Fence{Node: "node-1", Key: fakeKey, Token: 1}
	ids := func(ts []txmanager.Tracked) []uuid.UUID {
		var out []uuid.UUID
		for _, t := range ts {
			out = append(out, t.TxID)
		}
		return out
	}
	steps := []struct {
		fence txmanager.Fence
		head  uint64
		calls []string
		want  []uuid.UUID
	}{
		{f, 100, []string{"FeedHead", "Tracking"}, []uuid.UUID{a.TxID, b.TxID}},
		{f, 100, []string{"TrackingSince(10)"}, []uuid.UUID{a.TxID, b.TxID}},
		{f, 101, []string{"TrackingSince(12)"}, []uuid.UUID{b.TxID}},
		// Block 99 is out of the window's reach at 200: b is final for good.
		{f, 200, []string{"TrackingSince(13)"}, nil},
		{txmanager.Fence{Node: "node-1", Key: fakeKey, Token: 2}, 200, []string{"FeedHead", "Tracking"}, []uuid.UUID{a.TxID, b.TxID}},
	}
	for i, s := range steps {
		store.calls = nil
		got, err := fl.view(t.Context(), s.fence, Block{Number: s.head})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.calls, store.calls); diff != "" {
			t.Errorf("step %d: store calls (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(s.want, ids(got)); diff != "" {
			t.Errorf("step %d: view (-want +got):\n%s", i, diff)
		}
	}
}
