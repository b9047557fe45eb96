package follow_test

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/txfence/txfence/shared/rpcpool"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/chain"
	"github.com/txfence/txfence/txmanager/follow"
	"github.com/txfence/txfence/txmanager/remote"
)

// signingRig is a rig whose follower makes replacements: a real signerd
// (the development policy, which allows cancels) signs them and anvil's
// fee market prices them. signer holds the signer's settings.
type signingRig struct {
	*rig
	signer  *remote.Signer
	signerd *signertest.Server
}

func newSigningRig(t *testing.T, chainCfg txmanager.Chain, settings txmanager.SignerConfig) *signingRig {
	t.Helper()
	if chainCfg.DropChecks == nil {
		// anvil drops a pooled transaction once a block's base fee passes
		// its fee cap (geth keeps it until the fee falls): with drop checks
		// on, the underpriced transfers these tests wait with would be
		// found dropped and resent (drops_test.go has that), which is not
		// what they are about.
		off := false
		chainCfg.DropChecks = &off
	}
	r := newRigWith(t, chainCfg)
	pki := servicetest.PKI(t)
	srv := signertest.StartServer(t, signertest.ServerOptions{PKI: pki})
	client, err := remote.NewSigner(srv.URL, servicetest.Client(t, pki, "txmanager", "signer"))
	if err != nil {
		t.Fatal(err)
	}
	settings.Address = r.fence.Key.Signer
	if settings.BumpAfterBlocks == 0 {
		settings.BumpAfterBlocks = 2
	}
	if settings.BumpMarketPercent == 0 {
		settings.BumpMarketPercent = txmanager.DefaultBumpMarketPercent
	}
	r.cfg.Chain.Signers = []txmanager.SignerConfig{settings}
	r.cfg.Chain.RPC = rpcpool.URLs(r.node.URL())
	reader, err := chain.Dial(context.Background(), r.cfg.Chain, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	r.cfg.Signer, r.cfg.Reader = client, reader
	r.fl = follow.New(r.cfg)
	return &signingRig{rig: r, signer: client, signerd: srv}
}

var gwei = big.NewInt(1_000_000_000)

func gweis(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), gwei) }

// sendSigned does what the worker does for a transfer priced at fees:
// allocates the next nonce, has signerd sign it, stores it, sends it to
// anvil and records the broadcast.
func (r *signingRig) sendSigned(t *testing.T, requestID string, fees txmanager.Fees) (uuid.UUID, common.Hash) {
	t.Helper()
	ctx := context.Background()
	id := r.intent(t, requestID, 21_000)
	next, err := r.store.NextNonce(ctx, r.fence, nil)
	if err != nil {
		t.Fatal(err)
	}
	allocated, err := r.store.Allocate(ctx, r.fence, []uuid.UUID{id}, []txmanager.Fees{fees}, next)
	if err != nil || len(allocated) != 1 {
		t.Fatalf("allocate: %v %v", allocated, err)
	}
	signed, err := r.signer.SignBatch(ctx, []remote.ToSign{{Tx: &allocated[0], Nonce: allocated[0].Nonce, GasLimit: 21_000, Fees: fees}})
	if err != nil || len(signed) != 1 || signed[0].Outcome != remote.OutcomeSigned {
		t.Fatalf("sign: %+v %v", signed, err)
	}
	if _, err := r.store.Signed(ctx, r.fence, []txmanager.Attempt{{TxID: id, Raw: signed[0].RawTx, Hash: signed[0].Hash,
		MaxFeePerGas: fees.MaxFeePerGas, MaxPriorityFeePerGas: fees.MaxPriorityFeePerGas}}); err != nil {
		t.Fatal(err)
	}
	var tx types.Transaction
	if err := tx.UnmarshalBinary(signed[0].RawTx); err != nil {
		t.Fatal(err)
	}
	if err := r.node.Client().SendTransaction(ctx, &tx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Broadcasted(ctx, r.fence, []txmanager.Sent{{TxID: id, Route: txmanager.RoutePublic}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return id, tx.Hash()
}

// underpriced are fees a 100 gwei base fee leaves out of every block.
var underpriced = txmanager.Fees{MaxFeePerGas: gweis(3), MaxPriorityFeePerGas: gweis(1)}

// mineExpensive mines n blocks at a base fee of 100 gwei, a step after each.
func (r *signingRig) mineExpensive(t *testing.T, n int) {
	t.Helper()
	for range n {
		if err := r.node.SetNextBlockBaseFee(context.Background(), gweis(100)); err != nil {
			t.Fatal(err)
		}
		r.mineAndStep(t, 1)
	}
}

// attempt is a stored attempt as the tests compare them.
type attempt struct {
	n      int
	kind   string
	hash   common.Hash
	maxFee *big.Int
	mined  bool
}

func (r *signingRig) attempts(t *testing.T, id uuid.UUID) []attempt {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT attempt, kind, hash, coalesce(max_fee_per_gas, gas_price)::text, block_hash IS NOT NULL
		FROM attempt WHERE tx_id = $1 ORDER BY attempt`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []attempt
	for rows.Next() {
		var a attempt
		var hash []byte
		var fee string
		if err := rows.Scan(&a.n, &a.kind, &hash, &fee, &a.mined); err != nil {
			t.Fatal(err)
		}
		a.hash = common.BytesToHash(hash)
		a.maxFee, _ = new(big.Int).SetString(fee, 10)
		out = append(out, a)
	}
	return out
}

// attemptEvents are id's tx.attempt events after the first send.
func (r *signingRig) attemptEvents(t *testing.T, id uuid.UUID) []txmanager.AttemptSent {
	t.Helper()
	return slices.DeleteFunc(r.sent(t, id), func(a txmanager.AttemptSent) bool { return a.Kind == txmanager.AttemptInitial })
}

// TestUnderpricedIsBumpedUntilMined: a transfer signed at 3 gwei waits
// under a 100 gwei base fee. With fee bumps on, after bump_after_blocks
// the follower has signerd sign a replacement at the market (both caps up
// at least 10%), stores it before sending it, and the replacement is
// mined and CONFIRMED; both attempts are kept, the mined one decides.
func TestUnderpricedIsBumpedUntilMined(t *testing.T) {
	t.Parallel()
	r := newSigningRig(t, txmanager.Chain{Confirmations: 2}, txmanager.SignerConfig{FeeBumps: true, BumpAfterBlocks: 2})
	r.step(t)
	id, first := r.sendSigned(t, "underpriced", underpriced)
	r.mineExpensive(t, 6)
	r.mineAndStep(t, 2)
	if st, _ := r.state(t, id); st != txmanager.StateConfirmed {
		t.Fatalf("%s after 8 blocks; attempts %+v", st, r.attempts(t, id))
	}
	as := r.attempts(t, id)
	if len(as) < 2 || as[0].hash != first || as[0].mined || !as[len(as)-1].mined || as[len(as)-1].kind != txmanager.AttemptFeeBump {
		t.Fatalf("attempts %+v: want the first unmined and the last, a fee bump, mined", as)
	}
	for i := 1; i < len(as); i++ {
		if as[i].maxFee.Cmp(chain.RaisedByBumpPercent(as[i-1].maxFee)) < 0 {
			t.Errorf("attempt %d's max fee %s is not 10%% above %s", as[i].n, as[i].maxFee, as[i-1].maxFee)
		}
	}
	if as[1].maxFee.Cmp(gweis(100)) <= 0 {
		t.Errorf("the bump's max fee %s did not go to the market (base fee 100 gwei)", as[1].maxFee)
	}
	evs := r.attemptEvents(t, id)
	if len(evs) != len(as)-1 || evs[0].Kind != txmanager.AttemptFeeBump || evs[0].Replaces == nil || *evs[0].Replaces != first || evs[0].Attempt != 2 {
		t.Errorf("attempt events %+v", evs)
	}
	tx, err := r.store.Get(context.Background(), id)
	if err != nil || tx.Hash == nil || *tx.Hash != as[len(as)-1].hash {
		t.Errorf("the transaction's hash %v, want the mined attempt's %s (%v)", tx.Hash, as[len(as)-1].hash, err)
	}
}

// TestUnderpricedWithoutBumpsGoesStuck: the same transfer with fee bumps
// off is never replaced; past the stuck timeout it is stuck with the
// reason, one event and the metric, and still tracked.
func TestUnderpricedWithoutBumpsGoesStuck(t *testing.T) {
	t.Parallel()
	r := newSigningRig(t, txmanager.Chain{Confirmations: 2, StuckTimeout: txmanager.Duration{Duration: 300 * time.Millisecond}}, txmanager.SignerConfig{})
	r.step(t)
	id, _ := r.sendSigned(t, "underpriced", underpriced)
	r.waitStuck(t, id, func() { r.mineExpensive(t, 1) })
	r.mineExpensive(t, 4)
	if as := r.attempts(t, id); len(as) != 1 {
		t.Errorf("attempts %+v: bumps are off", as)
	}
	tx, err := r.store.Get(context.Background(), id)
	if err != nil || tx.State != txmanager.StateBroadcasted || tx.SubState != txmanager.SubStuck || !strings.Contains(tx.Reason, "not mined") {
		t.Errorf("%s/%s %q %v", tx.State, tx.SubState, tx.Reason, err)
	}
}

// TestOperatorActions drives the three operator actions through the
// store's requests, as the internal API records them, and the follower
// that owns the signer.
func TestOperatorActions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("cancel is mined instead: CANCELLED", func(t *testing.T) {
		t.Parallel()
		r := newSigningRig(t, txmanager.Chain{Confirmations: 2}, txmanager.SignerConfig{Cancels: true})
		r.step(t)
		id, first := r.sendSigned(t, "to-cancel", underpriced)
		r.mineExpensive(t, 1)
		a, err := r.store.RequestAction(ctx, id, txmanager.ActionCancel, "alice@ops")
		if err != nil {
			t.Fatal(err)
		}
		r.step(t)
		as := r.attempts(t, id)
		if len(as) != 2 || as[1].kind != txmanager.AttemptCancel {
			t.Fatalf("attempts %+v: want a cancel", as)
		}
		r.mineExpensive(t, 2)
		tx, err := r.store.Get(ctx, id)
		if err != nil || tx.State != txmanager.StateCancelled || tx.Reason != txmanager.ReasonCancelMined {
			t.Fatalf("%s %q %v", tx.State, tx.Reason, err)
		}
		// On chain: the nonce went to a 0-value transfer to the signer.
		mined, _, err := r.node.Client().TransactionByHash(ctx, as[1].hash)
		if err != nil || mined.To() == nil || *mined.To() != r.fence.Key.Signer || mined.Value().Sign() != 0 {
			t.Errorf("the cancel on chain: %v %v", mined, err)
		}
		if _, err := r.node.Client().TransactionReceipt(ctx, first); err == nil {
			t.Error("the original is mined too")
		}
		acts, err := r.store.Actions(ctx, id)
		if err != nil || len(acts) != 1 || acts[0].ID != a.ID || acts[0].Outcome != txmanager.ActionDone || acts[0].Attempt == nil || *acts[0].Attempt != 2 {
			t.Errorf("actions %+v %v", acts, err)
		}
	})

	t.Run("cancel refused when the signer's cancels are off", func(t *testing.T) {
		t.Parallel()
		r := newSigningRig(t, txmanager.Chain{Confirmations: 2}, txmanager.SignerConfig{})
		r.step(t)
		id, _ := r.sendSigned(t, "keep", underpriced)
		if _, err := r.store.RequestAction(ctx, id, txmanager.ActionCancel, "alice@ops"); err != nil {
			t.Fatal(err)
		}
		r.step(t)
		acts, err := r.store.Actions(ctx, id)
		if err != nil || len(acts) != 1 || acts[0].Outcome != txmanager.ActionRefused || !strings.Contains(acts[0].Detail, "cancels are off") {
			t.Errorf("actions %+v %v", acts, err)
		}
		if as := r.attempts(t, id); len(as) != 1 {
			t.Errorf("attempts %+v", as)
		}
	})

	t.Run("bump by hand with automatic bumps off", func(t *testing.T) {
		t.Parallel()
		r := newSigningRig(t, txmanager.Chain{Confirmations: 1}, txmanager.SignerConfig{})
		r.step(t)
		id, _ := r.sendSigned(t, "bump-me", underpriced)
		r.mineExpensive(t, 1)
		if _, err := r.store.RequestAction(ctx, id, txmanager.ActionBump, "bob@ops"); err != nil {
			t.Fatal(err)
		}
		r.step(t)
		r.mineExpensive(t, 2)
		if st, _ := r.state(t, id); st != txmanager.StateConfirmed {
			t.Fatalf("%s; attempts %+v", st, r.attempts(t, id))
		}
		if as := r.attempts(t, id); len(as) != 2 || !as[1].mined || as[1].kind != txmanager.AttemptFeeBump {
			t.Errorf("attempts %+v", as)
		}
	})

	t.Run("bump refused by the signer's cap", func(t *testing.T) {
		t.Parallel()
		r := newSigningRig(t, txmanager.Chain{Confirmations: 1}, txmanager.SignerConfig{MaxFeePerGas: &txmanager.Wei{Int: *gweis(3)}})
		r.step(t)
		id, _ := r.sendSigned(t, "capped", underpriced)
		if _, err := r.store.RequestAction(ctx, id, txmanager.ActionBump, "bob@ops"); err != nil {
			t.Fatal(err)
		}
		r.step(t)
		acts, err := r.store.Actions(ctx, id)
		if err != nil || len(acts) != 1 || acts[0].Outcome != txmanager.ActionRefused || !strings.Contains(acts[0].Detail, "configured cap") {
			t.Errorf("actions %+v %v", acts, err)
		}
	})

	t.Run("resend puts a dropped transaction back", func(t *testing.T) {
		t.Parallel()
		r := newSigningRig(t, txmanager.Chain{Confirmations: 1}, txmanager.SignerConfig{})
		r.step(t)
		id, hash := r.sendSigned(t, "dropped", txmanager.Fees{MaxFeePerGas: gweis(50), MaxPriorityFeePerGas: gweis(1)})
		if ok, err := r.node.DropTransaction(ctx, hash); err != nil || !ok {
			t.Fatalf("drop: %v %v", ok, err)
		}
		if _, err := r.store.RequestAction(ctx, id, txmanager.ActionResend, "carol@ops"); err != nil {
			t.Fatal(err)
		}
		r.mineAndStep(t, 1) // the resend happens in this step, after the block
		r.mineAndStep(t, 1)
		if st, _ := r.state(t, id); st != txmanager.StateConfirmed {
			t.Fatalf("%s after the resend", st)
		}
		acts, err := r.store.Actions(ctx, id)
		if err != nil || len(acts) != 1 || acts[0].Outcome != txmanager.ActionDone || acts[0].Attempt == nil || *acts[0].Attempt != 1 {
			t.Errorf("actions %+v %v", acts, err)
		}
	})
}

// TestAnActionWaitsUntilTheFollowerSeesItsTransaction: the follower's view
// follows the numbered feed, which txmanagerd's sequencer numbers apart
// (later still when writers keep the event barrier busy). An operator's
// bump of a transaction broadcast just before, whose events are not
// numbered yet, is not refused as "not followed": it waits, and is carried
// out at the first step that sees the transaction.
func TestAnActionWaitsUntilTheFollowerSeesItsTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSigningRig(t, txmanager.Chain{Confirmations: 1}, txmanager.SignerConfig{})
	r.step(t)
	id, _ := r.sendSigned(t, "not-in-the-feed-yet", underpriced)
	a, err := r.store.RequestAction(ctx, id, txmanager.ActionBump, "bob@ops")
	if err != nil {
		t.Fatal(err)
	}
	// A step before the sequencer numbered the broadcast (r.step numbers
	// first; this does not, and nothing else numbers this test's feed).
	if err := r.fl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := r.store.ActionByID(ctx, a.ID); err != nil || got.Outcome != "" {
		t.Fatalf("the action before the follower saw its transaction: %+v %v, want it waiting", got, err)
	}
	r.step(t)
	got, err := r.store.ActionByID(ctx, a.ID)
	if err != nil || got.Outcome != txmanager.ActionDone || got.Attempt == nil || *got.Attempt != 2 {
		t.Fatalf("the action once the follower saw its transaction: %+v %v, want done with attempt 2", got, err)
	}
	if as := r.attempts(t, id); len(as) != 2 || as[1].kind != txmanager.AttemptFeeBump {
		t.Errorf("attempts %+v, want the bump", as)
	}
}

// crashed is what the fault-injection hook panics with.
type crashed struct{ step follow.Step }

// TestACrashInTheMiddleOfABump stops the follower (a panic from its
// fault-injection hook, as a kill -9 would stop it) after each durable
// step of a fee bump, then starts a new follower, under the same node
// after a restart or under another node that took the signer over. The
// bump is finished once: one attempt 2, the very transaction signerd
// signed (a re-sign is answered by replaying it), mined, CONFIRMED.
func TestACrashInTheMiddleOfABump(t *testing.T) {
	t.Parallel()
	for _, step := range follow.Steps {
		for _, takeover := range []bool{false, true} {
			name := fmt.Sprintf("%s/restart", step)
			if takeover {
				name = fmt.Sprintf("%s/takeover", step)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				r := newSigningRig(t, txmanager.Chain{Confirmations: 2}, txmanager.SignerConfig{FeeBumps: true, BumpAfterBlocks: 1})
				crashing := r.cfg
				crashing.AfterStep = func(s follow.Step) {
					if s == step {
						panic(crashed{s})
					}
				}
				r.fl = follow.New(crashing)
				r.step(t)
				id, _ := r.sendSigned(t, "bumped", underpriced)
				r.mineExpensive(t, 1) // the attempt is seen waiting
				if err := r.node.SetNextBlockBaseFee(ctx, gweis(100)); err != nil {
					t.Fatal(err)
				}
				if err := r.node.Mine(ctx, 1); err != nil {
					t.Fatal(err)
				}
				func() {
					defer func() {
						if c, ok := recover().(crashed); !ok || c.step != step {
							t.Fatalf("the follower did not stop at %s: %v", step, c)
						}
					}()
					r.step(t)
				}()
				if takeover {
					r.takeOver(t, "node-b") // the crashed node's lease lapsed
				}
				r.fl = follow.New(r.cfg) // the new process
				r.mineExpensive(t, 3)
				if st, _ := r.state(t, id); st != txmanager.StateConfirmed {
					t.Fatalf("%s; attempts %+v", st, r.attempts(t, id))
				}
				as := r.attempts(t, id)
				if len(as) != 2 || as[1].kind != txmanager.AttemptFeeBump || !as[1].mined {
					t.Fatalf("attempts %+v: want one fee bump, mined", as)
				}
				// signerd signed attempt 2 once: every other answer for
				// it was a replay of the same signature.
				var sigs int
				if err := r.signerd.Pool.QueryRow(ctx, `SELECT count(DISTINCT tx_hash) FROM signature WHERE tx_id = $1`, id.String()).Scan(&sigs); err != nil || sigs != 2 {
					t.Errorf("signerd holds %d signatures for the transaction (%v), want 2 (original and bump)", sigs, err)
				}
				// One fee bump event; the new owner sends a replacement
				// stored just before the crash again (a resend of attempt
				// 2), since the crash may have come before its send.
				evs := r.attemptEvents(t, id)
				if len(evs) == 0 || evs[0].Attempt != 2 || evs[0].Kind != txmanager.AttemptFeeBump {
					t.Fatalf("attempt events %+v: want the fee bump first", evs)
				}
				for _, e := range evs[1:] {
					if e.Kind != txmanager.AttemptResend || e.Attempt != 2 || e.Hash != as[1].hash {
						t.Errorf("attempt events %+v: want only resends of attempt 2 after the bump", evs)
					}
				}
				var plans int
				if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM attempt_plan`).Scan(&plans); err != nil || plans != 0 {
					t.Errorf("%d plans left (%v)", plans, err)
				}
			})
		}
	}
}

// TestABumpTheCapsForbidAlertsOnce: with fee bumps on and the signer's max
// fee already reached, no bump is made; the refusal is counted and alerted
// once for the attempt, however many blocks it goes on waiting.
func TestABumpTheCapsForbidAlertsOnce(t *testing.T) {
	t.Parallel()
	r := newSigningRig(t, txmanager.Chain{Confirmations: 1},
		txmanager.SignerConfig{FeeBumps: true, BumpAfterBlocks: 1, MaxFeePerGas: &txmanager.Wei{Int: *underpriced.MaxFeePerGas}})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"chain_id", "signer"})
	r.cfg.BumpsRefused = refused
	r.fl = follow.New(r.cfg)
	r.step(t)
	id, _ := r.sendSigned(t, "capped", underpriced)
	r.mineExpensive(t, 6)
	if as := r.attempts(t, id); len(as) != 1 {
		t.Errorf("attempts %+v: the cap forbids a bump", as)
	}
	counter := refused.WithLabelValues(fmt.Sprint(r.fence.Key.ChainID), r.fence.Key.Signer.Hex())
	if n := testutil.ToFloat64(counter); n != 1 {
		t.Errorf("%v refusals counted, want 1 (once per attempt)", n)
	}
}

// TestACancelIsBumpedAsACancel: a cancel that waits in turn is bumped by
// the automatic bumps as a cancel, never turned back into the original
// transfer, and ends the transaction CANCELLED.
func TestACancelIsBumpedAsACancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSigningRig(t, txmanager.Chain{Confirmations: 1}, txmanager.SignerConfig{FeeBumps: true, BumpAfterBlocks: 2, Cancels: true})
	r.step(t)
	id, _ := r.sendSigned(t, "cancel-me", underpriced)
	if _, err := r.store.RequestAction(ctx, id, txmanager.ActionCancel, "alice@ops"); err != nil {
		t.Fatal(err)
	}
	r.mineExpensive(t, 1) // the cancel is priced at this market...
	// ...and the base fee jumps tenfold: the cancel waits.
	for range 4 {
		if err := r.node.SetNextBlockBaseFee(ctx, gweis(1000)); err != nil {
			t.Fatal(err)
		}
		r.mineAndStep(t, 1)
	}
	tx, err := r.store.Get(ctx, id)
	if err != nil || tx.State != txmanager.StateCancelled {
		t.Fatalf("%s %v; attempts %+v", tx.State, err, r.attempts(t, id))
	}
	as := r.attempts(t, id)
	if len(as) < 3 {
		t.Fatalf("attempts %+v: want the cancel bumped", as)
	}
	for _, a := range as[1:] {
		if a.kind != txmanager.AttemptCancel {
			t.Errorf("attempt %d is a %s after a cancel: %+v", a.n, a.kind, as)
		}
	}
}

// sent are all of id's tx.attempt events, in order.
func (r *signingRig) sent(t *testing.T, id uuid.UUID) []txmanager.AttemptSent {
	t.Helper()
	return r.rig.attemptEvents(t, id, "")
}

// requireSent fails t unless id's tx.attempt events are want ("kind/attempt"
// each, in order), each naming the hash and nonce of the attempt the store
// holds.
func (r *signingRig) requireSent(t *testing.T, id uuid.UUID, want string) {
	t.Helper()
	tx, err := r.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	as := r.attempts(t, id)
	var got []string
	for _, e := range r.sent(t, id) {
		got = append(got, fmt.Sprintf("%s/%d", e.Kind, e.Attempt))
		if e.Attempt < 1 || e.Attempt > len(as) || as[e.Attempt-1].hash != e.Hash || tx.Nonce == nil || e.Nonce != *tx.Nonce || e.Route != txmanager.RoutePublic {
			t.Errorf("event %+v: not attempt %d as stored (%+v) at nonce %v", e, e.Attempt, as, tx.Nonce)
		}
	}
	if strings.Join(got, " ") != want {
		t.Errorf("tx.attempt events %q, want %q", strings.Join(got, " "), want)
	}
}

// TestEveryAttemptSentIsAnEvent: every attempt sent is one tx.attempt
// event, with its kind, in the order sent, naming the attempt as stored:
// the first broadcast (initial), an operator's resend, a fee bump, the
// resend after a reorg took the bump's block away, and a cancel.
func TestEveryAttemptSentIsAnEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSigningRig(t, txmanager.Chain{Confirmations: 2}, txmanager.SignerConfig{Cancels: true})
	r.step(t)
	bumped, _ := r.sendSigned(t, "bumped", underpriced)
	r.requireSent(t, bumped, "initial/1")
	for _, action := range []string{txmanager.ActionResend, txmanager.ActionBump} {
		if _, err := r.store.RequestAction(ctx, bumped, action, "carol@ops"); err != nil {
			t.Fatal(err)
		}
		r.step(t)
	}
	r.mineAndStep(t, 1)
	if as := r.attempts(t, bumped); len(as) != 2 || !as[1].mined {
		t.Fatalf("attempts %+v: want the bump mined", as)
	}
	if err := r.node.Reorg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.step(t)
	r.mineAndStep(t, 2)
	if st, _ := r.state(t, bumped); st != txmanager.StateConfirmed {
		t.Fatalf("%s after the reorg and two blocks", st)
	}
	r.requireSent(t, bumped, "initial/1 resend/1 fee_bump/2 resend/2")
	if got := strings.Join(r.events(t, bumped), " "); !strings.Contains(got, "reorged:BROADCASTED attempt:resend") {
		t.Errorf("events %q: want the resend right after the reorg", got)
	}

	cancelled, _ := r.sendSigned(t, "cancelled", underpriced)
	r.mineExpensive(t, 1)
	if _, err := r.store.RequestAction(ctx, cancelled, txmanager.ActionCancel, "alice@ops"); err != nil {
		t.Fatal(err)
	}
	r.step(t)
	r.mineExpensive(t, 2)
	if st, _ := r.state(t, cancelled); st != txmanager.StateCancelled {
		t.Fatalf("%s; attempts %+v", st, r.attempts(t, cancelled))
	}
	r.requireSent(t, cancelled, "initial/1 cancel/2")
}

// TestABumpCountsFromTheFirstSightingAcrossARestart: bump_after_blocks
// counts from the block at which the follower first saw the attempt
// waiting, whatever happens in between: a follower that restarts (a new
// process, with nothing in memory) after that sighting, while the chain
// moves on, bumps at that block + bump_after_blocks, not earlier and not
// later.
func TestABumpCountsFromTheFirstSightingAcrossARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const after = 4
	r := newSigningRig(t, txmanager.Chain{Confirmations: 2}, txmanager.SignerConfig{FeeBumps: true, BumpAfterBlocks: after})
	r.step(t)
	id, _ := r.sendSigned(t, "waits", underpriced)
	r.mineExpensive(t, 1) // first seen waiting here
	seen, err := r.node.BlockNumber(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.fl = follow.New(r.cfg) // the new process
	// The chain moves on while it starts.
	if err := r.node.SetNextBlockBaseFee(ctx, gweis(100)); err != nil {
		t.Fatal(err)
	}
	if err := r.node.Mine(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for head := seen + 2; head <= seen+after; head++ {
		r.mineExpensive(t, 1)
		as := r.attempts(t, id)
		switch {
		case head < seen+after && len(as) != 1:
			t.Fatalf("at block %d (first seen waiting at %d, bump after %d): attempts %+v, want no bump yet", head, seen, after, as)
		case head == seen+after && (len(as) != 2 || as[1].kind != txmanager.AttemptFeeBump):
			t.Fatalf("at block %d (first seen waiting at %d, bump after %d): attempts %+v, want the bump", head, seen, after, as)
		}
	}
}
