package follow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/mev-router/mevroutertest"
	"github.com/txfence/txfence/mev-router/relay"
	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/testinfra/wait"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/follow"
	"github.com/txfence/txfence/txmanager/postgres"
	"github.com/txfence/txfence/txmanager/postgres/postgrestest"
	"github.com/txfence/txfence/txmanager/remote"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// rig is a follower over anvil (mining only when told), a real store and
// mevrouterd's API for its resends, with one signer's lease held.
type rig struct {
	node  *anvil.Node
	store *postgres.Store
	pool  *pgxpool.Pool
	fence txmanager.Fence
	fl    *follow.Follower
	cfg   follow.Config
	// calls counts the follower's calls by method, as its RPC's Counted
	// is told (a batch counts each call in it); log has its HTTP requests
	// to anvil (a batch is one).
	calls map[string]int
	log   *rpcLog
}

// rpcLog is a JSON-RPC endpoint in front of a node: it records each HTTP
// request it passes on (a batch is one request) with the methods in it.
// While forget is set it plays a lagging node: it answers a batch of
// eth_getTransactionByHash itself, not knowing any.
type rpcLog struct {
	url      string
	forget   atomic.Bool
	mu       sync.Mutex
	requests [][]string
}

func newRPCLog(t testing.TB, target string) *rpcLog {
	t.Helper()
	l := &rpcLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		type call struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		var calls []call
		batch := bytes.HasPrefix(bytes.TrimSpace(body), []byte("["))
		if batch {
			_ = json.Unmarshal(body, &calls)
		} else {
			calls = append(calls, call{})
			_ = json.Unmarshal(body, &calls[0])
		}
		methods := make([]string, len(calls))
		for i, c := range calls {
			methods[i] = c.Method
		}
		l.mu.Lock()
		l.requests = append(l.requests, methods)
		l.mu.Unlock()
		if batch && l.forget.Load() && !slices.ContainsFunc(methods, func(m string) bool { return m != "eth_getTransactionByHash" }) {
			answers := make([]string, len(calls))
			for i, c := range calls {
				answers[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":null}`, c.ID)
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, "[%s]", strings.Join(answers, ","))
			return
		}
		chaintest.Forward(req.Context(), w, target, body)
	}))
	t.Cleanup(srv.Close)
	l.url = srv.URL
	return l
}

// take returns the requests recorded since the last take.
func (l *rpcLog) take() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.requests
	l.requests = nil
	return out
}

// asked counts the calls of method recorded since the last take, and the
// requests that held them.
func (l *rpcLog) asked(method string) (calls, requests int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.requests {
		n := 0
		for _, m := range r {
			if m == method {
				n++
			}
		}
		calls += n
		if n > 0 {
			requests++
		}
	}
	return calls, requests
}

func newRig(t testing.TB, confirmations uint64) *rig {
	t.Helper()
	return newRigWith(t, txmanager.Chain{Confirmations: confirmations})
}

// newRigWith follows chain's settings (its id is anvil's). A resubmit
// interval or stuck timeout chain leaves unset is an hour, not the
// production default: the tests that do not set them count events block by
// block, and a resend or a stuck mark from a wall-clock timer, when a
// loaded machine stretches a test past 30 s, is not what they are about.
func newRigWith(t testing.TB, chain txmanager.Chain) *rig {
	t.Helper()
	if chain.ResubmitInterval.Duration == 0 {
		chain.ResubmitInterval.Duration = time.Hour
	}
	if chain.StuckTimeout.Duration == 0 {
		chain.StuckTimeout.Duration = time.Hour
	}
	ctx := context.Background()
	pool := pgtest.Migrated(t, postgres.Migrations)
	stack := mevroutertest.New(t, mevroutertest.Options{Kinds: []relay.Kind{relay.Protect}})
	pki := servicetest.PKI(t)
	router, err := remote.NewRouter(stack.Serve(t, pki, nil), servicetest.Client(t, pki, "txmanager", "mevrouter"))
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{node: stack.Node, store: postgres.New(pool), pool: pool, calls: map[string]int{}, log: newRPCLog(t, stack.Node.URL())}
	client, err := rpc.DialContext(ctx, r.log.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	chain.ID = r.node.ChainID()
	key := txmanager.SignerKey{ChainID: r.node.ChainID(), Signer: r.node.Accounts()[0].Address}
	token, ok, err := r.store.Acquire(ctx, "node-a", key, time.Hour)
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	r.fence = txmanager.Fence{Node: "node-a", Key: key, Token: token}
	r.cfg = follow.Config{
		Chain:  chain,
		RPC:    &follow.RPC{Client: client, Counted: func(m string) { r.calls[m]++ }},
		Store:  r.store,
		Router: router,
		Fences: func() []txmanager.Fence { return []txmanager.Fence{r.fence} },
	}
	r.fl = follow.New(r.cfg)
	return r
}

// readThrough makes the rig's follower read through a pool of urls (the
// chains file's rpc), its calls counted as before.
func (r *rig) readThrough(t testing.TB, urls ...string) {
	t.Helper()
	r.cfg.Chain.RPC = rpcpool.URLs(urls...)
	reader, err := chain.Dial(context.Background(), r.cfg.Chain, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	r.cfg.RPC = &follow.RPC{Client: reader.RPC(), Counted: r.cfg.RPC.Counted}
	r.fl = follow.New(r.cfg)
}

// broadcast leaves a signed transfer (or whatever build signs) as the
// worker does after a broadcast: BROADCASTED with its attempt, sent to
// anvil.
func (r *rig) broadcast(t testing.TB, requestID string, build func(nonce uint64) *types.Transaction) (uuid.UUID, *types.Transaction) {
	t.Helper()
	next, err := r.store.NextNonce(context.Background(), r.fence, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx := build(next)
	if err := r.node.Client().SendTransaction(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	return r.record(t, requestID, next, tx), tx
}

// waitStuck runs move until transaction id is stuck.
func (r *rig) waitStuck(t *testing.T, id uuid.UUID, move func()) {
	t.Helper()
	wait.ForDescribed(t, 30*time.Second, func() bool {
		move()
		_, sub := r.state(t, id)
		return sub == txmanager.SubStuck
	}, func() string {
		return fmt.Sprintf("%s to be stuck (%d events since the broadcast)", id, len(r.events(t, id)))
	})
}

// intent creates a transfer of 1 wei to 0xb0b from the rig's signer, on
// the public route, and has it simulated at gas: what the worker has
// done before it allocates a nonce.
func (r *rig) intent(t testing.TB, requestID string, gas uint64) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	to := common.HexToAddress("0xb0b")
	in, _, err := r.store.Create(ctx, &txmanager.Intent{ChainID: r.fence.Key.ChainID, From: r.fence.Key.Signer, RequestID: requestID,
		To: &to, Value: big.NewInt(1), Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Simulated(ctx, r.fence, in.ID, gas); err != nil {
		t.Fatal(err)
	}
	return in.ID
}

// record writes what the worker writes for a transaction it sent: the
// intent through ALLOCATED at nonce, the signed attempt, BROADCASTED.
func (r *rig) record(t testing.TB, requestID string, nonce uint64, tx *types.Transaction) uuid.UUID {
	t.Helper()
	id := r.recordSigned(t, requestID, nonce, tx)
	if _, err := r.store.Broadcasted(context.Background(), r.fence, []txmanager.Sent{{TxID: id, Route: txmanager.RoutePublic}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return id
}

// recordSigned writes what the worker writes before it sends a
// transaction: the intent through ALLOCATED at nonce, and the signed
// attempt (SIGNED).
func (r *rig) recordSigned(t testing.TB, requestID string, nonce uint64, tx *types.Transaction) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	id := r.intent(t, requestID, 100_000)
	if _, err := r.store.Allocate(ctx, r.fence, []uuid.UUID{id}, []txmanager.Fees{{MaxFeePerGas: big.NewInt(1)}}, nonce); err != nil {
		t.Fatal(err)
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Signed(ctx, r.fence, []txmanager.Attempt{{TxID: id, Raw: raw, Hash: tx.Hash(), MaxFeePerGas: tx.GasFeeCap(),
		MaxPriorityFeePerGas: tx.GasTipCap()}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// reverting signs, at a nonce, a contract creation whose init code
// reverts with Error("nope"): mined with receipt status 0.
func (r *rig) reverting(t testing.TB) func(nonce uint64) *types.Transaction {
	reverts := common.FromHex("7f08c379a0" + strings.Repeat("00", 28) + "600052" + "6020600452" + "6004602452" +
		"7f6e6f7065" + strings.Repeat("00", 28) + "604452" + "60646000fd")
	return func(nonce uint64) *types.Transaction {
		head, err := r.node.Client().HeaderByNumber(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		chainID := new(big.Int).SetUint64(r.node.ChainID())
		tx, err := types.SignNewTx(r.node.Accounts()[0].Key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
			ChainID: chainID, Nonce: nonce, GasTipCap: big.NewInt(1e9), GasFeeCap: new(big.Int).Add(big.NewInt(1e9), new(big.Int).Mul(head.BaseFee, big.NewInt(2))),
			Gas: 100_000, Data: reverts,
		})
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
}

func (r *rig) transfer(t testing.TB) func(nonce uint64) *types.Transaction {
	return func(nonce uint64) *types.Transaction {
		return chaintest.SignTransfer(t, r.node, r.node.Accounts()[0].Key, common.HexToAddress("0xb0b"), big.NewInt(1), nonce)
	}
}

// mineAndStep mines n blocks, one follower step after each.
func (r *rig) mineAndStep(t testing.TB, n int) {
	t.Helper()
	for range n {
		if err := r.node.Mine(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		r.step(t)
	}
}

// takeOver moves the signer's lease to node, as when the owner died and
// its lease lapsed: a higher fencing token, which the rig's follower then
// works under.
func (r *rig) takeOver(t testing.TB, node string) {
	t.Helper()
	ctx := context.Background()
	if err := r.store.Release(ctx, r.fence.Node, []txmanager.SignerKey{r.fence.Key}); err != nil {
		t.Fatal(err)
	}
	token, ok, err := r.store.Acquire(ctx, node, r.fence.Key, time.Hour)
	if err != nil || !ok || token <= r.fence.Token {
		t.Fatalf("takeover by %s: token %d (was %d) %v %v", node, token, r.fence.Token, ok, err)
	}
	r.fence = txmanager.Fence{Node: node, Key: r.fence.Key, Token: token}
}

func (r *rig) step(t testing.TB) {
	t.Helper()
	// What txmanagerd's sequencer does between steps: the follower reads
	// what changed from the numbered feed. Everything the test wrote must
	// be numbered before the step, whatever other writers hold the event
	// barrier (Sequence's 0 may only mean they were busy).
	if _, err := r.store.SequenceAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.fl.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) state(t testing.TB, id uuid.UUID) (txmanager.State, txmanager.SubState) {
	t.Helper()
	tx, err := r.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tx.State, tx.SubState
}

// events are id's events after its broadcast (the move to BROADCASTED
// and the first attempt's tx.attempt), as "type:detail".
func (r *rig) events(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT type, payload FROM event WHERE tx_id = $1 AND id > (
		SELECT max(id) FROM event WHERE tx_id = $1 AND (payload->>'to_state' = 'BROADCASTED' AND payload->>'from_state' = 'SIGNED'
			OR type = 'tx.attempt' AND payload->>'kind' = 'initial')) ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ string
		var raw []byte
		if err := rows.Scan(&typ, &raw); err != nil {
			t.Fatal(err)
		}
		var d struct {
			Confirmations uint64 `json:"confirmations"`
			NewFork       bool   `json:"new_fork"`
			From          string `json:"from_state"`
			To            string `json:"to_state"`
			Kind          string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		switch typ {
		case txmanager.EventConfirmation:
			s := "confirmation:" + string(rune('0'+d.Confirmations))
			if d.NewFork {
				s += ":new_fork"
			}
			out = append(out, s)
		case txmanager.EventReorged:
			out = append(out, "reorged:"+d.From)
		case txmanager.EventAttempt:
			out = append(out, "attempt:"+d.Kind)
		default:
			out = append(out, "state:"+d.To)
		}
	}
	return out
}

// TestConfirmedAtTheDepthWithOneEventPerConfirmation: a transfer is found
// in its block (included, 1 confirmation), counted up while its block
// stays canonical, and CONFIRMED at depth 3, with exactly one event for
// each step.
func TestConfirmedAtTheDepthWithOneEventPerConfirmation(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	r.step(t) // the window starts at the current head
	id, _ := r.broadcast(t, "pay", r.transfer(t))
	r.mineAndStep(t, 1)
	if st, sub := r.state(t, id); st != txmanager.StateBroadcasted || sub != txmanager.SubIncluded {
		t.Fatalf("after its block: %s/%s", st, sub)
	}
	r.mineAndStep(t, 2)
	r.step(t) // nothing new: no event
	r.requireEnd(t, id, txmanager.StateConfirmed, "confirmation:1 confirmation:2 state:CONFIRMED")
	r.requireFinalNamesItsBlock(t, id)
}

// requireFinalNamesItsBlock fails t unless id's last state change names
// the attempt mined and the block holding its receipt, as the chain has
// them: the ledger reads the receipt pinned to that block.
func (r *rig) requireFinalNamesItsBlock(t *testing.T, id uuid.UUID) {
	t.Helper()
	var d txmanager.StateChanged
	if err := r.pool.QueryRow(context.Background(), `SELECT payload FROM event WHERE tx_id = $1 AND type = $2 ORDER BY id DESC LIMIT 1`,
		id, txmanager.EventStateChanged).Scan(&d); err != nil {
		t.Fatal(err)
	}
	if d.Hash == nil || d.BlockHash == nil || d.BlockNumber == nil {
		t.Fatalf("the final event %+v names no block", d)
	}
	receipt, err := r.node.Client().TransactionReceipt(context.Background(), *d.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if receipt.BlockHash != *d.BlockHash || receipt.BlockNumber.Uint64() != *d.BlockNumber {
		t.Errorf("the final event names block %d %s, the chain %d %s", *d.BlockNumber, d.BlockHash, receipt.BlockNumber, receipt.BlockHash)
	}
}

// requireEnd fails t unless id is in state want with exactly these events
// (as events formats them) since its broadcast.
func (r *rig) requireEnd(t *testing.T, id uuid.UUID, want txmanager.State, events string) {
	t.Helper()
	if st, _ := r.state(t, id); st != want {
		t.Fatalf("%s, want %s; events %q", st, want, strings.Join(r.events(t, id), " "))
	}
	if got := strings.Join(r.events(t, id), " "); got != events {
		t.Errorf("events\n %q, want\n %q", got, events)
	}
}

// TestReorgsReopenAndReconfirm: anvil_reorg orphans the receipt's block,
// before CONFIRMED (depth 1 and 2) and after it (depth 3 to 5, at and
// beyond the 3 confirmations): the transaction is re-opened with tx.reorged, sent
// again (a tx.attempt of kind resend), found in a new block with new_fork,
// and ends CONFIRMED.
func TestReorgsReopenAndReconfirm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		minedBefore   int // blocks mined (with a step each) before the reorg
		reorgDepth    int
		wasConfirmed  bool
		wantBefore    string
		wantAfterHead string
	}{
		{name: "depth 1 while included", minedBefore: 1, reorgDepth: 1, wantBefore: "confirmation:1"},
		{name: "depth 2 while included", minedBefore: 2, reorgDepth: 2, wantBefore: "confirmation:1 confirmation:2"},
		{name: "depth 3 just after CONFIRMED", minedBefore: 3, reorgDepth: 3, wasConfirmed: true,
			wantBefore: "confirmation:1 confirmation:2 state:CONFIRMED"},
		{name: "depth 4 after CONFIRMED", minedBefore: 4, reorgDepth: 4, wasConfirmed: true,
			wantBefore: "confirmation:1 confirmation:2 state:CONFIRMED"},
		{name: "depth 5 after CONFIRMED", minedBefore: 5, reorgDepth: 5, wasConfirmed: true,
			wantBefore: "confirmation:1 confirmation:2 state:CONFIRMED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, 3)
			r.step(t)
			id, tx := r.broadcast(t, "pay", r.transfer(t))
			r.mineAndStep(t, tc.minedBefore)
			if got := strings.Join(r.events(t, id), " "); got != tc.wantBefore {
				t.Fatalf("before the reorg: %q, want %q", got, tc.wantBefore)
			}
			if err := r.node.Reorg(context.Background(), tc.reorgDepth); err != nil {
				t.Fatal(err)
			}
			r.step(t)
			from := "BROADCASTED"
			if tc.wasConfirmed {
				from = "CONFIRMED"
			}
			if st, sub := r.state(t, id); st != txmanager.StateBroadcasted || sub != txmanager.SubNone {
				t.Fatalf("after the reorg: %s/%s", st, sub)
			}
			// Sent again (or still pooled): mined again and confirmed.
			r.mineAndStep(t, 3)
			r.requireEnd(t, id, txmanager.StateConfirmed, tc.wantBefore+" reorged:"+from+" attempt:resend confirmation:1:new_fork confirmation:2 state:CONFIRMED")
			if rc, err := r.node.Client().TransactionReceipt(context.Background(), tx.Hash()); err != nil || rc.Status != 1 {
				t.Errorf("the transaction on the new chain: %v %v", rc, err)
			}
		})
	}
}

// TestARevertedReceiptEndsREVERTED: a transaction mined with status 0
// (here a contract creation whose code reverts) ends REVERTED at the
// depth.
func TestARevertedReceiptEndsREVERTED(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	r.step(t)
	id, _ := r.broadcast(t, "reverts", r.reverting(t))
	r.mineAndStep(t, 2)
	r.requireEnd(t, id, txmanager.StateReverted, "confirmation:1 state:REVERTED")
	r.requireFinalNamesItsBlock(t, id)
}

// TestADroppedTransactionIsSentAgain: a node drops the transaction from
// its pool (anvil_dropTransaction); after the resubmit interval the
// follower sends the same signed transaction again, with a tx.attempt
// event (resend), and it is mined and confirmed.
func TestADroppedTransactionIsSentAgain(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, txmanager.Chain{Confirmations: 2, ResubmitInterval: txmanager.Duration{Duration: 100 * time.Millisecond}})
	r.step(t)
	id, tx := r.broadcast(t, "dropped", r.transfer(t))
	if dropped, err := r.node.DropTransaction(context.Background(), tx.Hash()); err != nil || !dropped {
		t.Fatalf("drop: %v %v", dropped, err)
	}
	wait.For(t, 30*time.Second, "the dropped transaction to be sent again", func() bool {
		r.step(t) // no block: resends only
		pool, err := r.node.TxPoolContent(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return pool.Contains(tx.Hash())
	})
	r.mineAndStep(t, 2)
	if st, _ := r.state(t, id); st != txmanager.StateConfirmed {
		t.Fatalf("after the resend: %s", st)
	}
	var kinds string
	if err := r.pool.QueryRow(context.Background(), `SELECT string_agg(payload->>'kind', ' ' ORDER BY id) FROM event WHERE tx_id = $1 AND type = 'tx.attempt'`,
		id).Scan(&kinds); err != nil || !strings.HasPrefix(kinds, "initial resend") || strings.Contains(kinds, "fee_bump") {
		t.Errorf("tx.attempt events: %q %v, want the first send, then resends", kinds, err)
	}
}

// TestStuckBehindAGap: a transaction the node holds back (its nonce is
// past a gap) is not mined past the stuck timeout: sub-state stuck with
// the reason, once, and still tracked.
func TestStuckBehindAGap(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, txmanager.Chain{Confirmations: 2, StuckTimeout: txmanager.Duration{Duration: 200 * time.Millisecond}})
	r.step(t)
	id, _ := r.broadcast(t, "gapped", func(nonce uint64) *types.Transaction {
		// The chain's next nonce is taken by nothing: this one waits.
		return chaintest.SignTransfer(t, r.node, r.node.Accounts()[0].Key, common.HexToAddress("0xb0b"), big.NewInt(1), nonce+5)
	})
	r.waitStuck(t, id, func() { r.mineAndStep(t, 1) })
	tx, err := r.store.Get(context.Background(), id)
	if err != nil || tx.State != txmanager.StateBroadcasted || !strings.Contains(tx.Reason, "not mined") {
		t.Errorf("stuck: %s %q %v", tx.State, tx.Reason, err)
	}
	r.mineAndStep(t, 2)
	var events int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM event WHERE tx_id = $1 AND payload->>'sub_state' = 'stuck'`, id).Scan(&events); err != nil || events != 1 {
		t.Errorf("%d stuck events (%v), want 1", events, err)
	}
}

// TestStuckClockRunsFromTheFirstSendAcrossResends: a transaction the node
// keeps pooled and never mines is resent every resubmit_interval, each
// resend moving its attempt's sent-at; it still becomes stuck
// stuck_timeout after its first send, which the attempt keeps
// (first_sent_at, the sent-at of the initial tx.attempt event).
func TestStuckClockRunsFromTheFirstSendAcrossResends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRigWith(t, txmanager.Chain{Confirmations: 2, ResubmitInterval: txmanager.Duration{Duration: 100 * time.Millisecond},
		StuckTimeout: txmanager.Duration{Duration: 2 * time.Second}})
	r.step(t)
	id, _ := r.broadcast(t, "resent", r.transfer(t)) // pooled; no block is mined
	r.waitStuck(t, id, func() { r.step(t) })         // no block: resends and the stuck clock only
	tx, err := r.store.Get(ctx, id)
	if err != nil || tx.State != txmanager.StateBroadcasted || !strings.Contains(tx.Reason, "after it was first sent") {
		t.Errorf("stuck: %s %q %v", tx.State, tx.Reason, err)
	}
	var resends int
	var first, initial time.Time
	if err := r.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM event WHERE tx_id = $1 AND type = 'tx.attempt' AND payload->>'kind' = 'resend'),
			(SELECT first_sent_at FROM attempt WHERE tx_id = $1 AND attempt = 1),
			(SELECT (payload->>'sent_at')::timestamptz FROM event WHERE tx_id = $1 AND type = 'tx.attempt' AND payload->>'kind' = 'initial')`,
		id).Scan(&resends, &first, &initial); err != nil {
		t.Fatal(err)
	}
	if resends < 2 {
		t.Errorf("%d resends before it was stuck, want several", resends)
	}
	if !first.Equal(initial) {
		t.Errorf("first_sent_at %s, want the initial send's %s", first, initial)
	}
}

// TestFoundWhenRecordedAfterItsBlock: the worker records BROADCASTED only
// after the route accepted the transaction, so its block may come (and be
// processed) first. The next block's step still finds it in the window's
// blocks, without another call for the old block's hashes.
func TestFoundWhenRecordedAfterItsBlock(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	r.step(t)
	tx := r.transfer(t)(0)
	if err := r.node.Client().SendTransaction(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	r.mineAndStep(t, 1) // its block, before the transaction is recorded
	id := r.record(t, "late", 0, tx)
	r.mineAndStep(t, 1)
	if st, sub := r.state(t, id); st != txmanager.StateBroadcasted || sub != txmanager.SubIncluded {
		t.Fatalf("recorded after its block, then one more block: %s/%s", st, sub)
	}
	if got := strings.Join(r.events(t, id), " "); got != "confirmation:2" {
		t.Errorf("events %q, want the receipt at 2 confirmations", got)
	}
}

// trackMany records n transactions the chain will never see as broadcast,
// with nonces from first on.
func (r *rig) trackMany(t testing.TB, n int, first uint64) {
	t.Helper()
	ctx := context.Background()
	ids := postgrestest.Simulated(t, r.store, r.fence, common.HexToAddress("0xb0b"), "tracked", n)
	for start := 0; start < len(ids); start += 256 {
		batch := ids[start:min(start+256, len(ids))]
		fees := make([]txmanager.Fees, len(batch))
		for i := range fees {
			fees[i] = txmanager.Fees{MaxFeePerGas: big.NewInt(1)}
		}
		if _, err := r.store.Allocate(ctx, r.fence, batch, fees, first+uint64(start)); err != nil {
			t.Fatal(err)
		}
		attempts := make([]txmanager.Attempt, len(batch))
		sent := make([]txmanager.Sent, len(batch))
		for i, id := range batch {
			attempts[i] = txmanager.Attempt{TxID: id, Raw: id[:], Hash: crypto.Keccak256Hash(id[:]), MaxFeePerGas: big.NewInt(1)}
			sent[i] = txmanager.Sent{TxID: id, Route: txmanager.RoutePublic}
		}
		if _, err := r.store.Signed(ctx, r.fence, attempts); err != nil {
			t.Fatal(err)
		}
		if _, err := r.store.Broadcasted(ctx, r.fence, sent, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRPCCallsPerBlockDoNotGrowWithTracked: with 10,000 broadcast
// transactions tracked, a new block costs, in HTTP requests to the node
// (a JSON-RPC batch is one), the head's block and the signer's mined nonce
// at the depth, plus one receipts call for a block that holds one of ours,
// plus one batched eth_getTransactionByHash of the sends of the last
// drop_check_blocks blocks (here one transaction a node keeps pending,
// sent every other block): at most 3 + 1, whatever the number tracked.
// The 10,000 were sent before the follower took the signer on: theirs is
// no recent send, and the lookup holds only the recent ones.
func TestRPCCallsPerBlockDoNotGrowWithTracked(t *testing.T) {
	t.Parallel()
	const tracked = 10_000
	// The cost of a block, not of timers: on a loaded machine the test
	// outlasted the default 30 s resubmit interval, and the follower
	// resent all 10,000 one by one (a 20-minute run).
	hour := txmanager.Duration{Duration: time.Hour}
	r := newRigWith(t, txmanager.Chain{Confirmations: 3, ResubmitInterval: hour, StuckTimeout: hour})
	ctx := context.Background()
	// 10,000 transactions the chain will never see, broadcast as far as
	// the store knows, after nonces 0..9 that are ours on the chain.
	r.trackMany(t, tracked, 10)
	r.step(t)
	blocks := 0
	// cost checks one block's requests: at most limit, one of them the
	// batched lookup of the recent sends.
	cost := func(what string, limit int) {
		t.Helper()
		requests := r.log.take()
		lookups, looked := 0, 0
		for _, methods := range requests {
			if slices.Contains(methods, "eth_getTransactionByHash") {
				lookups++
				looked += len(methods)
			}
		}
		if len(requests) > limit {
			t.Errorf("%s with %d tracked: %d requests %v, want at most %d", what, tracked, len(requests), requests, limit)
		}
		if lookups != 1 || looked > txmanager.DefaultDropCheckBlocks {
			t.Errorf("%s: %d lookup requests of %d transactions in all, want one batch of the recent sends (at most %d)", what, lookups, looked,
				txmanager.DefaultDropCheckBlocks)
		}
	}
	for n := range uint64(10) {
		tx := r.transfer(t)(n)
		if err := r.node.Client().SendTransaction(ctx, tx); err != nil {
			t.Fatal(err)
		}
		r.record(t, fmt.Sprintf("ours-%d", n), n, tx)
		// One the node keeps (its nonce is past a gap) and knows: looked up
		// at each of the next drop_check_blocks blocks, never dropped.
		pending := r.transfer(t)(20_000 + n)
		if err := r.node.Client().SendTransaction(ctx, pending); err != nil {
			t.Fatal(err)
		}
		r.record(t, fmt.Sprintf("pending-%d", n), 20_000+n, pending)
		r.log.take()
		r.mineAndStep(t, 1)
		blocks++
		cost(fmt.Sprintf("block %d (one of ours in it)", n), 3+1)
		r.mineAndStep(t, 1) // then an empty block
		blocks++
		cost("an empty block", 2+1)
	}
	var confirmed, dropped int
	if err := r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE request_id LIKE 'ours-%' AND state = 'CONFIRMED'),
		(SELECT count(*) FROM event WHERE type = 'tx.attempt' AND payload->>'kind' = 'dropped') FROM tx`).Scan(&confirmed, &dropped); err != nil ||
		confirmed < 8 || dropped != 0 {
		t.Errorf("%d of ours confirmed, %d dropped (%v), want at least 8 of 10 after %d blocks, none dropped", confirmed, dropped, err, blocks)
	}
}

// TestANonceConsumedOutsideFailsOnlyThatTransaction: the key sends
// another transaction at the nonce of one of ours; once that nonce is
// consumed at the confirmation depth with none of our attempts mined, ours
// is FAILED nonce_consumed_externally, and the signer's next transaction
// is mined and confirmed.
func TestANonceConsumedOutsideFailsOnlyThatTransaction(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	ctx := context.Background()
	r.step(t)
	key := r.node.Accounts()[0].Key
	ours := chaintest.SignTransfer(t, r.node, key, common.HexToAddress("0xb0b"), big.NewInt(1), 0)
	theirs := chaintest.SignTransfer(t, r.node, key, common.HexToAddress("0xdead"), big.NewInt(2), 0)
	if err := r.node.Client().SendTransaction(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	lost := r.record(t, "lost", 0, ours) // ours never reaches the chain: nonce 0 is theirs
	next := r.transfer(t)(1)
	if err := r.node.Client().SendTransaction(ctx, next); err != nil {
		t.Fatal(err)
	}
	goesOn := r.record(t, "next", 1, next)
	r.mineAndStep(t, 3)
	tx, err := r.store.Get(ctx, lost)
	if err != nil || tx.State != txmanager.StateFailed || tx.Reason != txmanager.ReasonNonceConsumedExternally {
		t.Fatalf("ours at the consumed nonce: %s %q %v", tx.State, tx.Reason, err)
	}
	if st, _ := r.state(t, goesOn); st != txmanager.StateConfirmed {
		t.Errorf("the next transaction: %s", st)
	}
}

// TestASignedTransactionRefusedAsNonceTooLowFails: the worker marks a
// SIGNED transaction stuck when the route answers "nonce too low" and none
// of its attempts is mined; the follower then fails it as consumed
// outside once the nonce is consumed at the depth.
func TestASignedTransactionRefusedAsNonceTooLowFails(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	ctx := context.Background()
	r.step(t)
	key := r.node.Accounts()[0].Key
	theirs := chaintest.SignTransfer(t, r.node, key, common.HexToAddress("0xdead"), big.NewInt(2), 0)
	if err := r.node.Client().SendTransaction(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	id := r.record(t, "refused", 0, chaintest.SignTransfer(t, r.node, key, common.HexToAddress("0xb0b"), big.NewInt(1), 0))
	// Back to SIGNED and stuck, as the worker leaves a refused broadcast.
	if _, err := r.pool.Exec(ctx, `UPDATE tx SET state = 'SIGNED', sub_state = 'stuck', reason = 'nonce_too_low: nonce too low' WHERE tx_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	r.mineAndStep(t, 3)
	tx, err := r.store.Get(ctx, id)
	if err != nil || tx.State != txmanager.StateFailed || tx.Reason != txmanager.ReasonNonceConsumedExternally {
		t.Errorf("a stuck SIGNED transaction at a consumed nonce: %s %q %v", tx.State, tx.Reason, err)
	}
}

// TestARestartInTheMiddleOfAReorg: the transaction is included (1
// confirmation) when a reorg orphans its block while no follower runs;
// a fresh follower (a restart, or another node taking over) asks for its
// receipt first, re-opens it, sends it again, and it ends CONFIRMED with
// exactly one attempt and no duplicate event.
func TestARestartInTheMiddleOfAReorg(t *testing.T) {
	t.Parallel()
	for _, takeover := range []bool{false, true} {
		name := "restart"
		if takeover {
			name = "takeover"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRig(t, 3)
			r.step(t)
			id, _ := r.broadcast(t, "pay", r.transfer(t))
			r.mineAndStep(t, 1)
			if err := r.node.Reorg(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if takeover {
				r.takeOver(t, "node-b")
			}
			r.fl = follow.New(r.cfg) // the new process: a window of its own, from the new head
			r.step(t)
			if got := strings.Join(r.events(t, id), " "); got != "confirmation:1 reorged:BROADCASTED attempt:resend" {
				t.Fatalf("after the new process's first step: events %q", got)
			}
			r.mineAndStep(t, 3)
			r.requireEnd(t, id, txmanager.StateConfirmed, "confirmation:1 reorged:BROADCASTED attempt:resend confirmation:1:new_fork confirmation:2 state:CONFIRMED")
			var attempts int
			if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM attempt WHERE tx_id = $1`, id).Scan(&attempts); err != nil || attempts != 1 {
				t.Errorf("%d attempts (%v), want 1", attempts, err)
			}
		})
	}
}

// TestFinalAtTheFinalizedBlock: on a chain configured with finality
// "finalized", a transaction stays included, however deep, until the
// node's finalized block (anvil: 64 blocks behind its head) covers its
// receipt.
func TestFinalAtTheFinalizedBlock(t *testing.T) {
	t.Parallel()
	r := newRigWith(t, txmanager.Chain{Confirmations: 3, Finality: txmanager.FinalityFinalized})
	r.step(t)
	id, _ := r.broadcast(t, "pay", r.transfer(t))
	r.mineAndStep(t, 10)
	if st, sub := r.state(t, id); st != txmanager.StateBroadcasted || sub != txmanager.SubIncluded {
		t.Fatalf("10 blocks deep, not finalized: %s/%s", st, sub)
	}
	deadline := 100
	for st, _ := r.state(t, id); st != txmanager.StateConfirmed; st, _ = r.state(t, id) {
		if deadline--; deadline == 0 {
			t.Fatal("not CONFIRMED within 110 blocks")
		}
		r.mineAndStep(t, 1)
	}
	head, err := r.node.BlockNumber(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mined int64
	if err := r.pool.QueryRow(context.Background(), `SELECT a.block_number FROM attempt a JOIN tx t ON t.tx_id = a.tx_id AND a.attempt = t.mined_attempt
		WHERE t.tx_id = $1`, id).Scan(&mined); err != nil {
		t.Fatal(err)
	}
	if depth := head - uint64(mined); depth < 64 {
		t.Errorf("CONFIRMED %d blocks deep, before anvil's finalized block (64 behind the head) could cover it", depth)
	}
}
