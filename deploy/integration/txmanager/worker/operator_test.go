package worker_test

import (
	"fmt"
	"math/big"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"

	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/worker"
)

// Operator actions on transactions stuck before their broadcast: a SIGNED
// one every route refused, an ALLOCATED one signerd refused. Each test
// ends by checking the chain: one mined transaction per nonce, each an
// attempt of the transaction holding that nonce, and no gap.

// refuseNextBroadcast makes anvil refuse the next batch the worker signs
// for good: right after it is stored, and before it is sent, the block
// gas limit drops under a transfer's 21,000 gas, which anvil answers with
// "intrinsic gas too high -- tx.gas_limit > env.block.gas_limit"
// (gas_limit_exceeded: stuck until an operator acts). The test puts the
// limit back with restoreGasLimit.
type refuseNextBroadcast struct {
	armed atomic.Bool
}

func (e *env) refusingBroadcasts(t *testing.T) *refuseNextBroadcast {
	t.Helper()
	r := &refuseNextBroadcast{}
	e.deps.AfterStep = func(s worker.Step) {
		if s == worker.StepSigned && r.armed.CompareAndSwap(true, false) {
			if err := e.chain.Node.RPC().CallContext(ctx(t), nil, "anvil_setBlockGasLimit", hexutil.Uint64(20_000)); err != nil {
				t.Errorf("lower the block gas limit: %v", err)
			}
		}
	}
	return r
}

func (e *env) restoreGasLimit(t *testing.T) {
	t.Helper()
	if err := e.chain.Node.RPC().CallContext(ctx(t), nil, "anvil_setBlockGasLimit", hexutil.Uint64(30_000_000)); err != nil {
		t.Fatal(err)
	}
}

// stuckSigned creates a transfer whose broadcast every route refuses: it
// stays SIGNED, stuck, with the reason broadcast_refused.
func (e *env) stuckSigned(t *testing.T, r *refuseNextBroadcast, requestID string) txmanager.Tx {
	t.Helper()
	r.armed.Store(true)
	tx := e.create(t, requestID, big.NewInt(1))
	eventually(t, requestID+" stuck on a refused broadcast", func() bool {
		tx = e.get(t, tx.ID)
		return tx.State == txmanager.StateSigned && tx.SubState == txmanager.SubStuck
	})
	e.restoreGasLimit(t)
	if !strings.HasPrefix(tx.Reason, txmanager.ReasonBroadcastRefused+": gas_limit_exceeded") {
		t.Fatalf("%s stuck with reason %q", requestID, tx.Reason)
	}
	return tx
}

// act asks for an operator action and waits for its outcome.
func (e *env) act(t *testing.T, id uuid.UUID, action string) txmanager.Action {
	t.Helper()
	a, err := e.store.RequestAction(ctx(t), id, action, "alice@ops")
	if err != nil {
		t.Fatalf("%s %s: %v", action, id, err)
	}
	return e.waitAction(t, a.ID)
}

func (e *env) waitAction(t *testing.T, actionID uuid.UUID) txmanager.Action {
	t.Helper()
	var got txmanager.Action
	eventually(t, "action "+actionID.String()+" carried out", func() bool {
		a, err := e.store.ActionByID(ctx(t), actionID)
		if err != nil {
			t.Fatal(err)
		}
		got = a
		return got.Outcome != ""
	})
	return got
}

type attemptRow struct {
	attempt      int
	kind         string
	hash         common.Hash
	maxFee, tip  *big.Int
	gasLimit     *int64
	nonce        int64
	currentOfTx  bool
	txStateAfter string
}

func (e *env) attempts(t *testing.T, id uuid.UUID) []attemptRow {
	t.Helper()
	rows, err := e.pool.Query(ctx(t), `SELECT a.attempt, a.kind, a.hash, a.max_fee_per_gas::text, a.max_priority_fee_per_gas::text, a.gas_limit, a.nonce,
		a.attempt = t.current_attempt, t.state
		FROM attempt a JOIN tx t ON t.tx_id = a.tx_id WHERE a.tx_id = $1 ORDER BY a.attempt`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []attemptRow
	for rows.Next() {
		var a attemptRow
		var hash []byte
		var fee, tip string
		if err := rows.Scan(&a.attempt, &a.kind, &hash, &fee, &tip, &a.gasLimit, &a.nonce, &a.currentOfTx, &a.txStateAfter); err != nil {
			t.Fatal(err)
		}
		a.hash = common.BytesToHash(hash)
		a.maxFee, _ = new(big.Int).SetString(fee, 10)
		a.tip, _ = new(big.Int).SetString(tip, 10)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkChain mines what is pending and checks the signer's nonces on
// chain: the mined nonce is used (every nonce below it is one of ours),
// each nonce holds exactly one mined transaction, which is an attempt of
// the one transaction of the database holding that nonce, and want names
// that transaction by nonce.
func (e *env) checkChain(t *testing.T, want []uuid.UUID) {
	t.Helper()
	node := e.chain.Node
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	var mined uint64
	eventually(t, "every nonce mined", func() bool {
		n, err := node.Client().NonceAt(ctx(t), e.signer, nil)
		if err != nil {
			t.Fatal(err)
		}
		mined = n
		return n >= uint64(len(want))
	})
	if mined != uint64(len(want)) {
		t.Fatalf("mined nonce %d, want %d", mined, len(want))
	}
	head, err := node.BlockNumber(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	onChain := map[uint64][]common.Hash{}
	for n := uint64(1); n <= head; n++ {
		b, err := node.Client().BlockByNumber(ctx(t), new(big.Int).SetUint64(n))
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range b.Transactions() {
			from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
			if err != nil {
				t.Fatal(err)
			}
			if from == e.signer {
				onChain[tx.Nonce()] = append(onChain[tx.Nonce()], tx.Hash())
			}
		}
	}
	for nonce, id := range want {
		hashes := onChain[uint64(nonce)]
		if len(hashes) != 1 {
			t.Errorf("nonce %d: %d transactions on chain, want 1", nonce, len(hashes))
			continue
		}
		var holder uuid.UUID
		if err := e.pool.QueryRow(ctx(t), `SELECT tx_id FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce = $3`,
			int64(e.key().ChainID), e.signer.Bytes(), nonce).Scan(&holder); err != nil {
			t.Errorf("nonce %d: the transaction holding it: %v", nonce, err)
			continue
		}
		if holder != id {
			t.Errorf("nonce %d is held by %s, want %s", nonce, holder, id)
		}
		found := false
		for _, a := range e.attempts(t, holder) {
			found = found || a.hash == hashes[0]
		}
		if !found {
			t.Errorf("nonce %d: mined %s is no attempt of %s", nonce, hashes[0], holder)
		}
	}
	if len(onChain) != len(want) {
		t.Errorf("nonces on chain %d, want %d", len(onChain), len(want))
	}
}

// filler is the transaction that took the nonce of an abandoned one.
func (e *env) filler(t *testing.T, abandoned uuid.UUID) txmanager.Tx {
	t.Helper()
	f, err := e.store.GetByRequest(ctx(t), e.key(), txmanager.GapFillRequestID(abandoned))
	if err != nil {
		t.Fatalf("the filler of %s: %v", abandoned, err)
	}
	return f
}

// TestOperatorActionsOnARefusedBroadcast: transactions SIGNED and stuck
// because every route refused them (anvil's block gas limit under their
// gas, put back right after) are each acted on: a resend sends the stored
// attempt again; a bump has signerd sign a replacement with both fee caps
// up at least 10%; a cancel has it sign a 0-value transfer to the signer
// itself at the same nonce; an abandon fills the nonce with such a
// transfer, as a transaction of its own, and the original ends FAILED
// (abandoned). Later nonces go on; the chain ends with one transaction
// per nonce and no gap.
func TestOperatorActionsOnARefusedBroadcast(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{SignerSettings: `"cancels": true`})
	refuse := e.refusingBroadcasts(t)
	e.own(t, "node-a")

	resent := e.stuckSigned(t, refuse, "resent")
	behind := e.create(t, "behind", big.NewInt(1))
	e.waitState(t, behind.ID, txmanager.StateBroadcasted)
	a := e.act(t, resent.ID, txmanager.ActionResend)
	if a.Outcome != txmanager.ActionDone || a.Attempt == nil || *a.Attempt != 1 || a.Operator != "alice@ops" {
		t.Errorf("resend: %+v", a)
	}
	if tx := e.get(t, resent.ID); tx.State != txmanager.StateBroadcasted || tx.SubState != txmanager.SubNone || *tx.Hash != *resent.Hash {
		t.Errorf("resent: %s/%s %s, want BROADCASTED with its first attempt", tx.State, tx.SubState, tx.Hash)
	}

	bumped := e.stuckSigned(t, refuse, "bumped")
	a = e.act(t, bumped.ID, txmanager.ActionBump)
	as := e.attempts(t, bumped.ID)
	if a.Outcome != txmanager.ActionDone || a.Attempt == nil || *a.Attempt != 2 || len(as) != 2 {
		t.Fatalf("bump: %+v; attempts %+v", a, as)
	}
	if as[1].kind != txmanager.AttemptFeeBump || !as[1].currentOfTx || as[1].nonce != as[0].nonce ||
		as[1].maxFee.Cmp(raised(as[0].maxFee)) < 0 || as[1].tip.Cmp(raised(as[0].tip)) < 0 {
		t.Errorf("the bump's attempt %+v after %+v: want a fee_bump at the same nonce, both caps up 10%%", as[1], as[0])
	}
	if tx := e.waitState(t, bumped.ID, txmanager.StateBroadcasted); *tx.Hash != as[1].hash {
		t.Errorf("broadcast %s, want the bump %s", tx.Hash, as[1].hash)
	}
	// Its broadcast is told as what it is: a fee bump replacing the first.
	var kind, replaces string
	if err := e.pool.QueryRow(ctx(t), `SELECT payload->>'kind', payload->>'replaces' FROM event
		WHERE tx_id = $1 AND type = $2 AND (payload->>'attempt')::int = 2`, bumped.ID, txmanager.EventAttempt).Scan(&kind, &replaces); err != nil ||
		kind != txmanager.AttemptFeeBump || replaces != as[0].hash.Hex() {
		t.Errorf("the bump's tx.attempt: kind %q replacing %s (%v), want %s replacing %s", kind, replaces, err, txmanager.AttemptFeeBump, as[0].hash.Hex())
	}

	cancelled := e.stuckSigned(t, refuse, "cancelled")
	a = e.act(t, cancelled.ID, txmanager.ActionCancel)
	as = e.attempts(t, cancelled.ID)
	if a.Outcome != txmanager.ActionDone || len(as) != 2 || as[1].kind != txmanager.AttemptCancel || as[1].gasLimit == nil || *as[1].gasLimit != 21000 {
		t.Fatalf("cancel: %+v; attempts %+v", a, as)
	}
	e.waitState(t, cancelled.ID, txmanager.StateBroadcasted)

	abandoned := e.stuckSigned(t, refuse, "abandoned")
	a = e.act(t, abandoned.ID, txmanager.ActionAbandon)
	if a.Outcome != txmanager.ActionDone || a.Filler == nil {
		t.Fatalf("abandon: %+v", a)
	}
	tx := e.get(t, abandoned.ID)
	if tx.State != txmanager.StateFailed || tx.Reason != txmanager.ReasonAbandoned || tx.Nonce != nil {
		t.Errorf("abandoned: %s %q nonce %v", tx.State, tx.Reason, tx.Nonce)
	}
	filler := e.filler(t, abandoned.ID)
	if *a.Filler != filler.ID {
		t.Errorf("the action names filler %s, want %s", a.Filler, filler.ID)
	}
	filler = e.waitState(t, filler.ID, txmanager.StateBroadcasted)
	if *filler.Nonce != *abandoned.Nonce || *filler.To != e.signer || filler.Value.Sign() != 0 {
		t.Errorf("the filler: nonce %d to %s value %s, want nonce %d to the signer, 0", *filler.Nonce, filler.To, filler.Value, *abandoned.Nonce)
	}
	after := e.create(t, "after", big.NewInt(1))
	e.waitState(t, after.ID, txmanager.StateBroadcasted)

	e.checkChain(t, []uuid.UUID{resent.ID, behind.ID, bumped.ID, cancelled.ID, filler.ID, after.ID})
	// The cancel is what was mined at its nonce: a 0-value transfer to the
	// signer.
	mined, _, err := e.chain.Node.Client().TransactionByHash(ctx(t), as[1].hash)
	if err != nil || mined.To() == nil || *mined.To() != e.signer || mined.Value().Sign() != 0 {
		t.Errorf("the cancel: %v %v", mined, err)
	}
	if r := chaintest.WaitReceipt(t, e.chain.Node, as[1].hash); r.Status != 1 {
		t.Errorf("the cancel's receipt status %d", r.Status)
	}
}

// raised is v + 10%, rounded up.
func raised(v *big.Int) *big.Int {
	out := new(big.Int).Mul(v, big.NewInt(110))
	out.Add(out, big.NewInt(99))
	return out.Div(out, big.NewInt(100))
}

// TestOperatorActionsOnARefusedSignature: signerd's rolling window (5 ETH
// an hour) refuses the second and fourth transfers of a batch of five
// (3, 3, 1, 3 and 0.5 ETH) after their nonces were allocated and later
// nonces signed: both stay ALLOCATED, stuck, and the signer allocates
// nothing more. A resend and a bump ask signerd again (the bump at fees
// fixed anew), and are refused with signerd's reason while the window is
// full. An abandon fills the second's nonce with a 0-value transfer to the
// signer and FAILS it (abandoned); a cancel signs such a transfer for the
// fourth, as its own attempt. The gap closed, the next transfer gets the
// next nonce, and the chain ends with one transaction per nonce, no gap.
func TestOperatorActionsOnARefusedSignature(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, nil, 5), SignerSettings: `"cancels": true`})
	var txs []txmanager.Tx
	for i, v := range []*big.Int{ether(3), ether(3), ether(1), ether(3), new(big.Int).Div(ether(1), big.NewInt(2))} {
		txs = append(txs, e.create(t, fmt.Sprintf("w-%d", i), v))
	}
	e.own(t, "node-a")
	for _, i := range []int{0, 2, 4} {
		e.waitState(t, txs[i].ID, txmanager.StateBroadcasted)
	}
	for _, i := range []int{1, 3} {
		eventually(t, fmt.Sprintf("w-%d stuck", i), func() bool { txs[i] = e.get(t, txs[i].ID); return txs[i].SubState == txmanager.SubStuck })
		if txs[i].State != txmanager.StateAllocated || !strings.HasPrefix(txs[i].Reason, txmanager.ReasonSigningRefused) {
			t.Fatalf("w-%d: %s %q", i, txs[i].State, txs[i].Reason)
		}
	}
	abandoned, cancelled := txs[1], txs[3]

	for _, action := range []string{txmanager.ActionResend, txmanager.ActionBump} {
		a := e.act(t, abandoned.ID, action)
		if a.Outcome != txmanager.ActionRefused || !strings.Contains(a.Detail, "denied") {
			t.Errorf("%s while the window is full: %+v, want refused by signerd", action, a)
		}
		if tx := e.get(t, abandoned.ID); tx.State != txmanager.StateAllocated || *tx.Nonce != *abandoned.Nonce {
			t.Errorf("after the %s: %s nonce %v", action, tx.State, tx.Nonce)
		}
	}

	a := e.act(t, abandoned.ID, txmanager.ActionAbandon)
	if a.Outcome != txmanager.ActionDone || a.Filler == nil {
		t.Fatalf("abandon: %+v", a)
	}
	if tx := e.get(t, abandoned.ID); tx.State != txmanager.StateFailed || tx.Reason != txmanager.ReasonAbandoned || tx.Nonce != nil {
		t.Errorf("abandoned: %s %q nonce %v", tx.State, tx.Reason, tx.Nonce)
	}
	filler := e.waitState(t, e.filler(t, abandoned.ID).ID, txmanager.StateBroadcasted)
	if *filler.Nonce != *abandoned.Nonce || *filler.To != e.signer || filler.Value.Sign() != 0 {
		t.Errorf("the filler: nonce %d to %s value %s", *filler.Nonce, filler.To, filler.Value)
	}

	a = e.act(t, cancelled.ID, txmanager.ActionCancel)
	as := e.attempts(t, cancelled.ID)
	if a.Outcome != txmanager.ActionDone || len(as) != 1 || as[0].kind != txmanager.AttemptCancel || as[0].nonce != int64(*cancelled.Nonce) {
		t.Fatalf("cancel: %+v; attempts %+v", a, as)
	}
	e.waitState(t, cancelled.ID, txmanager.StateBroadcasted)

	next := e.create(t, "next", big.NewInt(1))
	if tx := e.waitState(t, next.ID, txmanager.StateBroadcasted); *tx.Nonce != 5 {
		t.Errorf("the next transfer got nonce %d, want 5", *tx.Nonce)
	}
	e.checkChain(t, []uuid.UUID{txs[0].ID, filler.ID, txs[2].ID, cancelled.ID, txs[4].ID, next.ID})
}
