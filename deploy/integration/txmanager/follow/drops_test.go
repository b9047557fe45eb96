package follow_test

import (
	"context"
	"log/slog"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/logtest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/follow"
)

// Silent drops: a node answers a send with the hash and forgets the
// transaction afterwards. anvil_dropTransaction makes anvil forget a
// pooled transaction at a chosen moment; anvil (1.7.1) also drops on its
// own what it took and cannot put in a block, such as a transaction whose
// gas limit is below the intrinsic gas of its data: it answers the send
// with the hash, pools it, and leaves it out of the next block and out of
// its pool.

// drop makes anvil forget hash, failing t unless it was pooled.
func (r *rig) drop(t testing.TB, hash common.Hash) {
	t.Helper()
	if dropped, err := r.node.DropTransaction(context.Background(), hash); err != nil || !dropped {
		t.Fatalf("drop %s: %v %v", hash, dropped, err)
	}
}

// pooled tells whether anvil's pool holds hash.
func (r *rig) pooled(t testing.TB, hash common.Hash) bool {
	t.Helper()
	pool, err := r.node.TxPoolContent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return pool.Contains(hash)
}

// attemptEvents are id's tx.attempt events of kind kind (every kind:
// ""), oldest first.
func (r *rig) attemptEvents(t testing.TB, id any, kind string) []txmanager.AttemptSent {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT payload FROM event WHERE tx_id = $1 AND type = 'tx.attempt'
		AND ($2 = '' OR payload->>'kind' = $2) ORDER BY id`, id, kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []txmanager.AttemptSent
	for rows.Next() {
		var a txmanager.AttemptSent
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// TestASilentDropIsFoundInBlocks: anvil forgets a transaction it answered
// with a hash (anvil_dropTransaction). One block later the follower's
// lookup finds it unknown, which is no verdict yet; at the second it is
// dropped: a tx.attempt event of kind dropped and a resend at once (not
// after the resubmit interval, an hour here), and it is mined and CONFIRMED.
func TestASilentDropIsFoundInBlocks(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	r.step(t)
	id, tx := r.broadcast(t, "dropped", r.transfer(t))
	r.drop(t, tx.Hash())
	r.mineAndStep(t, 1)
	if got := r.events(t, id); len(got) != 0 {
		t.Fatalf("after one block where no node knew it: events %q, want none (one unknown answer is no drop)", got)
	}
	r.mineAndStep(t, 1)
	if got := strings.Join(r.events(t, id), " "); got != "attempt:dropped attempt:resend" {
		t.Fatalf("after two blocks where no node knew it: events %q, want the drop and a resend", got)
	}
	if !r.pooled(t, tx.Hash()) {
		t.Fatal("resent, yet not in anvil's pool")
	}
	r.mineAndStep(t, 2)
	r.requireEnd(t, id, txmanager.StateConfirmed, "attempt:dropped attempt:resend confirmation:1 state:CONFIRMED")
	dropped := r.attemptEvents(t, id, txmanager.AttemptDropped)
	if len(dropped) != 1 || dropped[0].Attempt != 1 || dropped[0].Hash != tx.Hash() || dropped[0].Drops != 1 || dropped[0].Nonce != tx.Nonce() ||
		dropped[0].SentAt.IsZero() || dropped[0].Route != txmanager.RoutePublic {
		t.Errorf("the dropped event: %+v, want attempt 1, %s, its first drop", dropped, tx.Hash())
	}
	var drops int
	if err := r.pool.QueryRow(context.Background(), `SELECT drops FROM attempt WHERE tx_id = $1 AND attempt = 1`, id).Scan(&drops); err != nil || drops != 1 {
		t.Errorf("attempt 1 counts %d drops (%v), want 1", drops, err)
	}
}

// TestDroppedAgainAndAgainIsLeftToAnOperator: an attempt the nodes drop
// after every send is resent max_drops - 1 times (3 drops by default),
// then the transaction is left stuck with reason dropped_by_node, an
// alert and the metrics, and no more resends; it stays BROADCASTED and
// tracked, so that the chain's word still wins: sent by hand and mined,
// it ends CONFIRMED. Both ways a node drops: anvil's own (a gas limit
// below its data's intrinsic gas, which anvil takes and never mines), and
// anvil_dropTransaction after every send.
func TestDroppedAgainAndAgainIsLeftToAnOperator(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// invalid: anvil drops it on its own, and it can never be mined;
		// otherwise it is dropped by hand before every block.
		invalid bool
	}{
		{name: "anvil drops it on its own", invalid: true},
		{name: "dropped after every send"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t, 2)
			var logs logtest.Buffer
			metrics, err := follow.NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			r.cfg.Log = slog.New(slog.NewJSONHandler(&logs, nil))
			r.cfg.Dropped, r.cfg.DropRefusals = metrics.Dropped, metrics.DropRefusals
			r.fl = follow.New(r.cfg)
			r.step(t)
			build := r.transfer(t)
			if tc.invalid {
				build = func(nonce uint64) *types.Transaction {
					// 21,000 gas for 100 bytes of calldata: below the
					// intrinsic gas, which anvil checks only when it mines.
					to := common.HexToAddress("0xb0b")
					return chaintest.SignCall(t, r.node, r.node.Accounts()[0].Key, chaintest.Call{To: &to, Gas: params.TxGas, Data: make([]byte, 100)}, nonce)
				}
			}
			id, tx := r.broadcast(t, "dropped", build)
			for blocks := 0; ; blocks++ {
				if _, sub := r.state(t, id); sub == txmanager.SubStuck {
					break
				}
				if blocks == 20 {
					t.Fatalf("not stuck after %d blocks; events %q", blocks, r.events(t, id))
				}
				if !tc.invalid && r.pooled(t, tx.Hash()) {
					r.drop(t, tx.Hash())
				}
				r.mineAndStep(t, 1)
			}
			const refused = "attempt:dropped attempt:resend attempt:dropped attempt:resend attempt:dropped state:BROADCASTED"
			if got := strings.Join(r.events(t, id), " "); got != refused {
				t.Fatalf("events %q, want %q", got, refused)
			}
			stuck, err := r.store.Get(ctx, id)
			if err != nil || stuck.State != txmanager.StateBroadcasted || stuck.SubState != txmanager.SubStuck ||
				!strings.HasPrefix(stuck.Reason, txmanager.ReasonDroppedByNode+": ") {
				t.Fatalf("refused: %s/%s %q %v, want BROADCASTED/stuck with reason %s", stuck.State, stuck.SubState, stuck.Reason, err, txmanager.ReasonDroppedByNode)
			}
			if d := r.attemptEvents(t, id, txmanager.AttemptDropped); len(d) != 3 || d[2].Drops != 3 {
				t.Errorf("dropped events %+v, want 3, the last counting 3 drops", d)
			}
			alerts := logs.Records(t, func(l map[string]any) bool {
				reason, _ := l["reason"].(string)
				return l["alert"] == true && l["tx_id"] == id.String() && strings.HasPrefix(reason, txmanager.ReasonDroppedByNode)
			})
			if len(alerts) != 1 {
				t.Errorf("%d alert log lines naming %s and %s, want 1", len(alerts), id, txmanager.ReasonDroppedByNode)
			}
			labels := []string{strconv.FormatUint(r.fence.Key.ChainID, 10), r.fence.Key.Signer.Hex()}
			if d, n := testutil.ToFloat64(metrics.Dropped.WithLabelValues(labels...)), testutil.ToFloat64(metrics.DropRefusals.WithLabelValues(labels...)); d != 3 || n != 1 {
				t.Errorf("metrics: %v dropped, %v refusals, want 3 and 1", d, n)
			}
			// Left to an operator: no more resends, still tracked.
			r.mineAndStep(t, 3)
			if got := strings.Join(r.events(t, id), " "); got != refused {
				t.Fatalf("after the refusal: events %q, want nothing more", got)
			}
			following, err := r.store.Tracking(ctx, r.fence.Key, 0)
			if err != nil || !slices.ContainsFunc(following, func(tr txmanager.Tracked) bool { return tr.TxID == id }) {
				t.Fatalf("no longer tracked (%v)", err)
			}
			if tc.invalid {
				return // never mined: it waits for an operator
			}
			// The chain's word wins: sent by hand, it is mined and ends.
			if err := r.node.Client().SendTransaction(ctx, tx); err != nil {
				t.Fatal(err)
			}
			r.mineAndStep(t, 2)
			r.requireEnd(t, id, txmanager.StateConfirmed, refused+" confirmation:1 state:CONFIRMED")
		})
	}
}

// TestAnEndpointThatDoesNotKnowIsNoDrop: "not found" from one endpoint is
// never a drop on its own. The follower reads through the chain's pool
// (the first endpoint: the second, an anvil that mines nothing, lags) and
// asks each endpoint (here also a second anvil) only for the hashes the
// first answer did not know; a transaction known to either, or unknown at
// one block at a time, is never dropped. The transaction waits past a
// nonce gap: pooled and never mined, it is looked up at every block of its
// window.
func TestAnEndpointThatDoesNotKnowIsNoDrop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// before runs before block n (from 0) is mined, with the
		// transaction and the other endpoint's node.
		before func(t *testing.T, r *rig, n int, tx *types.Transaction, other *anvil.Node)
		// otherAsked: the other endpoint is asked about it.
		otherAsked bool
	}{
		{name: "the first endpoint knows it, the other does not"},
		{name: "only the other endpoint knows it", otherAsked: true, before: func(t *testing.T, r *rig, n int, tx *types.Transaction, other *anvil.Node) {
			if n == 0 {
				r.log.forget.Store(true)
				if err := other.Client().SendTransaction(context.Background(), tx); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "the first endpoint lags at one block in two", otherAsked: true, before: func(t *testing.T, r *rig, n int, _ *types.Transaction, _ *anvil.Node) {
			r.log.forget.Store(n%2 == 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, 2)
			other := chaintest.Anvil(t, anvil.Options{NoMining: true})
			otherLog := newRPCLog(t, other.URL())
			// The other anvil mines nothing and serves another history under
			// the same chain id: more than max_lag blocks behind, it takes
			// only the lookups pinned to it, never the follower's reads.
			if err := r.node.Mine(context.Background(), txmanager.DefaultRPCMaxLag+2); err != nil {
				t.Fatal(err)
			}
			r.readThrough(t, r.log.url, otherLog.url)
			r.step(t)
			id, tx := r.broadcast(t, "waits", func(nonce uint64) *types.Transaction {
				return chaintest.SignTransfer(t, r.node, r.node.Accounts()[0].Key, common.HexToAddress("0xb0b"), big.NewInt(1), nonce+5)
			})
			for n := range txmanager.DefaultDropCheckBlocks + 2 {
				if tc.before != nil {
					tc.before(t, r, n, tx, other)
				}
				r.mineAndStep(t, 1)
			}
			if st, _ := r.state(t, id); st != txmanager.StateBroadcasted {
				t.Fatalf("%s: mined after all", st)
			}
			if got := r.events(t, id); len(got) != 0 {
				t.Errorf("events %q, want none: no drop", got)
			}
			if first := r.calls["eth_getTransactionByHash"]; first < txmanager.DefaultDropCheckBlocks {
				t.Errorf("the first endpoint was asked %d times, want at each of the %d blocks after the send", first, txmanager.DefaultDropCheckBlocks)
			}
			asked, _ := otherLog.asked("eth_getTransactionByHash")
			if tc.otherAsked != (asked > 0) {
				t.Errorf("the other endpoint was asked %d times; want asked: %v", asked, tc.otherAsked)
			}
		})
	}
}
