package worker_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/txmanager"
)

var eth = big.NewInt(1e18)

func ether(n int64) *big.Int { return new(big.Int).Mul(big.NewInt(n), eth) }

// approvers are Ed25519 keys the test policy lists.
type approvers map[string]ed25519.PrivateKey

func newApprovers(t *testing.T, ids ...string) approvers {
	t.Helper()
	out := approvers{}
	for _, id := range ids {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = priv
	}
	return out
}

// sign is what `signerctl approver sign` does for approver id over tx, at
// fee caps up to maxFee wei per gas.
func (a approvers) sign(t *testing.T, id string, tx txmanager.Tx, maxFee *big.Int, ttl time.Duration) txmanager.Approval {
	t.Helper()
	req := &signer.Request{TxID: tx.ID.String(), ChainID: tx.ChainID, From: tx.From, Type: signer.DynamicFee, To: tx.To, Value: tx.Value, Data: tx.Data}
	ap := signer.SignApproval(a[id], id, req, maxFee, time.Now().Add(ttl))
	return txmanager.Approval{Approver: ap.Approver, MaxFeePerGas: ap.MaxFeePerGas, Expiry: ap.Expiry, Signature: ap.Signature}
}

// anyFee is a fee ceiling above the test policy's 10000 gwei cap: the
// approvals it signs cover whatever txmanager prices at.
var anyFee = new(big.Int).Mul(big.NewInt(10001), big.NewInt(1e9))

// writePolicy writes a signerd policy for chain 31337 and anvil's first
// account: transfers to 0xdead denied; anything else allowed up to 100 ETH
// a transaction and windowETH per hour (0: 1000 ETH, more than any test
// sends), at up to 10000 gwei a gas and 30M gas with 1000 ETH of fees a
// day, 2 of the approvers required above 1 ETH.
func writePolicy(t *testing.T, as approvers, windowETH int64) string {
	t.Helper()
	keys := map[string]string{}
	var ids []string
	for id, priv := range as {
		keys[id] = base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
		ids = append(ids, id)
	}
	if windowETH == 0 {
		windowETH = 1000
	}
	limits := map[string]any{
		"max_value_per_tx": ether(100).String(),
		"windows":          []any{map[string]any{"duration": "1h", "max_value": ether(windowETH).String()}},
		"max_fee_per_gas":  "10000000000000", "max_gas": 30_000_000,
		"fee_windows": []any{map[string]any{"duration": "24h", "max_fee": ether(1000).String()}},
	}
	allow := map[string]any{"id": "payouts", "effect": "allow", "match": map[string]any{"from": []string{signertest.DevAddress(0).Hex()}},
		"limits": limits}
	if len(ids) > 0 {
		allow["approval"] = map[string]any{"threshold": 2, "approvers": ids, "above_value": ether(1).String(), "max_ttl": "2h"}
	}
	pol := map[string]any{
		"version": "test-1", "chains": []int{31337},
		"rules": []any{
			map[string]any{"id": "no-dead", "effect": "deny", "match": map[string]any{"to": []string{"0x000000000000000000000000000000000000dEaD"}}},
			allow,
		},
	}
	if len(keys) > 0 {
		pol["approvers"] = keys
	}
	raw, err := json.Marshal(pol)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (e *env) get(t *testing.T, id uuid.UUID) txmanager.Tx {
	t.Helper()
	tx, err := e.store.Get(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func (e *env) waitState(t *testing.T, id uuid.UUID, want txmanager.State) txmanager.Tx {
	t.Helper()
	var tx txmanager.Tx
	eventually(t, fmt.Sprintf("%s %s", id, want), func() bool { tx = e.get(t, id); return tx.State == want })
	return tx
}

// lastEvent is the data of the transaction's last state change.
func (e *env) lastEvent(t *testing.T, id uuid.UUID) txmanager.StateChanged {
	t.Helper()
	var raw []byte
	if err := e.pool.QueryRow(ctx(t), `SELECT payload FROM event WHERE tx_id = $1 ORDER BY id DESC LIMIT 1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var ev txmanager.StateChanged
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestApprovalsGateSigning: above 1 ETH the policy wants 2 of 3
// approvals. Such a transaction waits in PENDING_APPROVAL without a nonce
// while smaller ones go on; one approval, an approval by someone the
// policy does not list and a forged one change nothing; the second valid
// approval lets it through, signed with both. A rejection fails another,
// an expired wait a third, neither spending a nonce.
func TestApprovalsGateSigning(t *testing.T) {
	t.Parallel()
	as := newApprovers(t, "alice", "bob", "carol")
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, as, 0)})
	e.deps.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	big1 := e.create(t, "big-1", ether(2))
	rejected := e.create(t, "big-2", ether(3))
	expiring := e.create(t, "big-3", ether(4))
	small := e.create(t, "small", big.NewInt(1))
	e.own(t, "node-a")

	for _, id := range []uuid.UUID{big1.ID, rejected.ID, expiring.ID} {
		tx := e.waitState(t, id, txmanager.StatePendingApproval)
		if tx.Nonce != nil || tx.ApprovalExpiresAt == nil || tx.Reason != txmanager.ReasonApprovalRequired {
			t.Errorf("waiting for approvals: %+v", tx)
		}
		if ev := e.lastEvent(t, id); ev.Rule != "payouts" {
			t.Errorf("the event of %s names rule %q, want payouts", id, ev.Rule)
		}
	}
	if tx := e.waitState(t, small.ID, txmanager.StateBroadcasted); *tx.Nonce != 0 {
		t.Errorf("the small transaction got nonce %d, want 0: those waiting hold none", *tx.Nonce)
	}

	// One approval, one by a stranger, one forged: not enough.
	mallory := newApprovers(t, "mallory")
	forged := as.sign(t, "bob", big1, anyFee, time.Hour)
	forged.Signature[0] ^= 0xff
	for _, a := range []txmanager.Approval{as.sign(t, "alice", big1, anyFee, time.Hour), mallory.sign(t, "mallory", big1, anyFee, time.Hour), forged} {
		if _, err := e.store.Approve(ctx(t), big1.ID, a, 3); err != nil {
			t.Fatal(err)
		}
	}
	// The worker asks signerd again after each change; a later small
	// transaction passing shows at least one full round went by.
	later := e.create(t, "small-2", big.NewInt(1))
	e.waitState(t, later.ID, txmanager.StateBroadcasted)
	if tx := e.get(t, big1.ID); tx.State != txmanager.StatePendingApproval {
		t.Fatalf("with one valid approval: %s", tx.State)
	}

	if _, err := e.store.Approve(ctx(t), big1.ID, as.sign(t, "bob", big1, anyFee, time.Hour), 3); err != nil {
		t.Fatal(err)
	}
	tx := e.waitState(t, big1.ID, txmanager.StateBroadcasted)
	if *tx.Nonce != 2 {
		t.Errorf("the approved transaction got nonce %d, want 2", *tx.Nonce)
	}
	var approvedBy []string
	if err := e.pool.QueryRow(ctx(t), `SELECT array(SELECT jsonb_array_elements_text(payload->'approvers')) FROM event
		WHERE tx_id = $1 AND payload->>'to_state' = 'SIMULATED'`, big1.ID).Scan(&approvedBy); err != nil {
		t.Fatal(err)
	}
	slices.Sort(approvedBy)
	if fmt.Sprint(approvedBy) != "[alice bob]" {
		t.Errorf("approvers counted: %v, want [alice bob]", approvedBy)
	}

	if _, err := e.store.Reject(ctx(t), rejected.ID, txmanager.Rejection{Approver: "carol", Expiry: time.Now().Add(time.Hour).Truncate(time.Second),
		Signature: make([]byte, 64)}); err != nil {
		t.Fatal(err)
	}
	if tx := e.get(t, rejected.ID); tx.State != txmanager.StateFailed || tx.Reason != txmanager.ReasonApprovalRejected || tx.Nonce != nil {
		t.Errorf("rejected: %+v", tx)
	}
	if _, err := e.store.Approve(ctx(t), rejected.ID, as.sign(t, "alice", rejected, anyFee, time.Hour), 3); err == nil {
		t.Error("an approval of a rejected transaction was stored")
	}

	// The wait ends (by the database's clock, as the worker reads it).
	if _, err := e.pool.Exec(ctx(t), `UPDATE tx SET approval_expires_at = now() - interval '1 second' WHERE tx_id = $1`, expiring.ID); err != nil {
		t.Fatal(err)
	}
	if tx := e.waitState(t, expiring.ID, txmanager.StateFailed); tx.Reason != txmanager.ReasonApprovalExpired || tx.Nonce != nil {
		t.Errorf("expired: %+v", tx)
	}
	var maxNonce int64
	if err := e.pool.QueryRow(ctx(t), `SELECT max(nonce) FROM tx`).Scan(&maxNonce); err != nil || maxNonce != 2 {
		t.Errorf("highest nonce %d (%v), want 2: no nonce went to a refused transaction", maxNonce, err)
	}
}

// TestJunkApprovalsDoNotStallTheWallet reproduces issue 21's stall: 33
// junk approvals on one waiting transaction (more than signerd takes in
// one request, stored as the API used to store anything) made signerd
// refuse the worker's question, which failed the whole round, so the
// wallet's new transactions never got past INIT until the junk-laden one
// expired. That refusal is the one transaction's: later transactions of
// the wallet are broadcast while it keeps waiting, and once its approvals
// change it is asked again.
func TestJunkApprovalsDoNotStallTheWallet(t *testing.T) {
	t.Parallel()
	as := newApprovers(t, "alice", "bob", "carol")
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, as, 0)})
	e.deps.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	junked := e.create(t, "junked", ether(2))
	e.own(t, "node-a")
	e.waitState(t, junked.ID, txmanager.StatePendingApproval)
	if _, err := e.pool.Exec(ctx(t), `INSERT INTO approval (tx_id, approver, decision, expiry, signature, max_fee_per_gas)
		SELECT $1, 'junk-' || i, 'approve', now() + interval '1 hour', '\x00', 1 FROM generate_series(1, 33) i`, junked.ID); err != nil {
		t.Fatal(err)
	}
	later := e.create(t, "later", big.NewInt(1))
	if tx := e.waitState(t, later.ID, txmanager.StateBroadcasted); *tx.Nonce != 0 {
		t.Errorf("the later transaction got nonce %d, want 0", *tx.Nonce)
	}
	if tx := e.get(t, junked.ID); tx.State != txmanager.StatePendingApproval || tx.Nonce != nil {
		t.Fatalf("the junk-laden transaction: %s, nonce %v; want it still waiting without one", tx.State, tx.Nonce)
	}

	// Its junk cleared and two real approvals given, it is asked again and
	// signed.
	if _, err := e.pool.Exec(ctx(t), `DELETE FROM approval WHERE tx_id = $1`, junked.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"alice", "bob"} {
		if _, err := e.store.Approve(ctx(t), junked.ID, as.sign(t, id, junked, anyFee, time.Hour), 3); err != nil {
			t.Fatal(err)
		}
	}
	if tx := e.waitState(t, junked.ID, txmanager.StateBroadcasted); *tx.Nonce != 1 {
		t.Errorf("the approved transaction got nonce %d, want 1", *tx.Nonce)
	}
}

// TestAnInvalidSigningRequestFailsOnlyItsTransaction: signerd refuses a
// whole signing batch when one request is malformed (here, 33 junk
// approvals stored beside a transaction that needs none, as the API used
// to store anything). The worker used to retry that batch for ever, so
// none of the wallet's transactions was signed again; now the others are
// signed, and the malformed one is settled as a denied one is: its nonce,
// the batch's last, is given back and it fails as refused by the signer.
func TestAnInvalidSigningRequestFailsOnlyItsTransaction(t *testing.T) {
	t.Parallel()
	as := newApprovers(t, "alice", "bob", "carol")
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, as, 0)})
	e.deps.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	first := e.create(t, "first", big.NewInt(1))
	junked := e.create(t, "junked", big.NewInt(1))
	if _, err := e.pool.Exec(ctx(t), `INSERT INTO approval (tx_id, approver, decision, expiry, signature, max_fee_per_gas)
		SELECT $1, 'junk-' || i, 'approve', now() + interval '1 hour', '\x00', 1 FROM generate_series(1, 33) i`, junked.ID); err != nil {
		t.Fatal(err)
	}
	e.own(t, "node-a") // both in one signing batch
	if tx := e.waitState(t, first.ID, txmanager.StateBroadcasted); *tx.Nonce != 0 {
		t.Errorf("the first transaction got nonce %d, want 0", *tx.Nonce)
	}
	if tx := e.waitState(t, junked.ID, txmanager.StateFailed); tx.Nonce != nil {
		t.Errorf("the refused transaction kept nonce %d", *tx.Nonce)
	}
	var reason string
	if err := e.pool.QueryRow(ctx(t), `SELECT payload->>'reason' FROM event WHERE tx_id = $1 AND payload->>'to_state' = 'FAILED'`, junked.ID).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if reason != txmanager.ReasonSigningRefused {
		t.Errorf("failed with reason %q, want %q", reason, txmanager.ReasonSigningRefused)
	}
	// The nonce went back: the next transaction takes it.
	next := e.create(t, "next", big.NewInt(1))
	if tx := e.waitState(t, next.ID, txmanager.StateBroadcasted); *tx.Nonce != 1 {
		t.Errorf("the next transaction got nonce %d, want 1", *tx.Nonce)
	}
}

// TestApprovalsBelowTheFeeCapDoNotCount: txmanager prices a transaction
// that needs 2 of 3 approvals at the market, under its signer's cap of 100
// gwei. Two approvals whose fee ceiling (1 wei per gas) is below that
// price are stored and passed to signerd, which does not count them: the
// transaction keeps waiting without a nonce while later ones go on.
// Approved again up to the transaction's fee ceiling (the signer's cap, as
// txctl approve does by default), it is signed and sent at a fee cap
// within it.
func TestApprovalsBelowTheFeeCapDoNotCount(t *testing.T) {
	t.Parallel()
	as := newApprovers(t, "alice", "bob", "carol")
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, as, 0), SignerSettings: `"max_fee_per_gas": "100000000000"`})
	e.deps.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	big1 := e.create(t, "big-1", ether(2))
	e.own(t, "node-a")
	big1 = e.waitState(t, big1.ID, txmanager.StatePendingApproval)

	for _, id := range []string{"alice", "bob"} {
		if _, err := e.store.Approve(ctx(t), big1.ID, as.sign(t, id, big1, big.NewInt(1), time.Hour), 3); err != nil {
			t.Fatal(err)
		}
	}
	// The worker asks signerd again after each change; a later small
	// transaction passing shows at least one full round went by.
	later := e.create(t, "small", big.NewInt(1))
	e.waitState(t, later.ID, txmanager.StateBroadcasted)
	if tx := e.get(t, big1.ID); tx.State != txmanager.StatePendingApproval || tx.Nonce != nil {
		t.Fatalf("with two approvals below its fee cap: %s, nonce %v", tx.State, tx.Nonce)
	}

	sc, ok := e.deps.Chains.Signer(big1.Key())
	if !ok {
		t.Fatal("the signer is not configured")
	}
	ceiling := sc.FeeCeiling(&big1.Intent)
	if ceiling == nil || ceiling.Cmp(big.NewInt(100e9)) != 0 {
		t.Fatalf("fee ceiling %v, want the signer's 100 gwei", ceiling)
	}
	for _, id := range []string{"alice", "bob"} {
		if _, err := e.store.Approve(ctx(t), big1.ID, as.sign(t, id, big1, ceiling, time.Hour), 3); err != nil {
			t.Fatal(err)
		}
	}
	tx := e.waitState(t, big1.ID, txmanager.StateBroadcasted)
	if tx.SigningFees == nil || tx.SigningFees.MaxFeePerGas == nil || tx.SigningFees.MaxFeePerGas.Cmp(ceiling) > 0 {
		t.Errorf("signed with fees %+v, want a fee cap within %s", tx.SigningFees, ceiling)
	}
}

// TestApprovalsCountOnceTheMarketFallsToTheirCeiling: approvals up to 50
// gwei arrive while txmanager prices the transaction near 200 gwei, so
// they do not count and it waits; once the market falls below their
// ceiling, with no approval changed, the owner node asks signerd again
// and the transaction is signed within the ceiling.
func TestApprovalsCountOnceTheMarketFallsToTheirCeiling(t *testing.T) {
	t.Parallel()
	as := newApprovers(t, "alice", "bob", "carol")
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, as, 0)})
	e.deps.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	node := e.chain.Node
	setBaseFee := func(wei int64) {
		t.Helper()
		if err := node.SetNextBlockBaseFee(ctx(t), big.NewInt(wei)); err != nil {
			t.Fatal(err)
		}
		if err := node.Mine(ctx(t), 1); err != nil {
			t.Fatal(err)
		}
	}
	setBaseFee(100e9)
	big1 := e.create(t, "big-1", ether(2))
	e.own(t, "node-a")
	big1 = e.waitState(t, big1.ID, txmanager.StatePendingApproval)
	ceiling := big.NewInt(50e9)
	for _, id := range []string{"alice", "bob"} {
		if _, err := e.store.Approve(ctx(t), big1.ID, as.sign(t, id, big1, ceiling, time.Hour), 3); err != nil {
			t.Fatal(err)
		}
	}
	later := e.create(t, "small", big.NewInt(1))
	e.waitState(t, later.ID, txmanager.StateBroadcasted)
	if tx := e.get(t, big1.ID); tx.State != txmanager.StatePendingApproval {
		t.Fatalf("with approvals up to 50 gwei and the market near 200: %s", tx.State)
	}

	setBaseFee(1e9)
	tx := e.waitState(t, big1.ID, txmanager.StateBroadcasted)
	if tx.SigningFees == nil || tx.SigningFees.MaxFeePerGas == nil || tx.SigningFees.MaxFeePerGas.Cmp(ceiling) > 0 {
		t.Errorf("signed with fees %+v, want a fee cap within %s", tx.SigningFees, ceiling)
	}
}

// TestASignatureRefusedAfterAllocation: the policy's rolling window (5 ETH
// an hour) is checked against what was signed, so the dry run passes 3, 3
// and 1 ETH one by one but signing them as a batch refuses the second.
// With gap_policy fill its nonce goes to a 0-value transfer to the signer
// and the third is mined after it; a refused transaction with no signed
// nonce after it gives its nonce back instead.
func TestASignatureRefusedAfterAllocation(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, nil, 5), SignerSettings: `"gap_policy": "fill"`})
	first := e.create(t, "w-1", ether(3))
	refused := e.create(t, "w-2", ether(3))
	third := e.create(t, "w-3", ether(1))
	p := e.own(t, "node-a")

	tx := e.waitState(t, refused.ID, txmanager.StateFailed)
	if tx.Reason != txmanager.ReasonSigningRefused || tx.Nonce != nil {
		t.Errorf("the refused transaction: %+v", tx)
	}
	filler, err := e.store.GetByRequest(ctx(t), e.key(), txmanager.GapFillRequestID(refused.ID))
	if err != nil {
		t.Fatal(err)
	}
	filler = e.waitState(t, filler.ID, txmanager.StateBroadcasted)
	if *filler.Nonce != 1 || *filler.To != e.signer || filler.Value.Sign() != 0 {
		t.Errorf("the filler: %+v", filler)
	}
	e.waitState(t, third.ID, txmanager.StateBroadcasted)
	if err := e.chain.Node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uuid.UUID{first.ID, filler.ID, third.ID} {
		tx := e.get(t, id)
		if r := chaintest.WaitReceipt(t, e.chain.Node, *tx.Hash); r.Status != 1 {
			t.Errorf("%s (nonce %d) not mined", id, *tx.Nonce)
		}
	}

	// 4 ETH are signed this hour. 0.5 and then 0.6 ETH more, in one batch:
	// the dry run passes each alone, signing refuses the second, and with
	// nothing signed after it its nonce is given back and used next.
	p.Lost(e.key(), "pause to batch the next two")
	half := e.create(t, "w-4", new(big.Int).Div(ether(1), big.NewInt(2)))
	over := e.create(t, "w-5", new(big.Int).Div(ether(6), big.NewInt(10)))
	p.Acquired(e.fence(t, "node-a"))
	if tx := e.waitState(t, half.ID, txmanager.StateBroadcasted); *tx.Nonce != 3 {
		t.Errorf("0.5 ETH got nonce %d, want 3", *tx.Nonce)
	}
	tx = e.waitState(t, over.ID, txmanager.StateFailed)
	if tx.Reason != txmanager.ReasonSigningRefused || tx.Nonce != nil {
		t.Errorf("refused with nothing signed after it: %+v", tx)
	}
	if ev := e.lastEvent(t, over.ID); ev.FromState != txmanager.StateAllocated {
		t.Errorf("the refused transaction failed from %s, want ALLOCATED (refused at signing, not by the dry run)", ev.FromState)
	}
	next := e.create(t, "w-6", big.NewInt(1))
	if tx := e.waitState(t, next.ID, txmanager.StateBroadcasted); *tx.Nonce != 4 {
		t.Errorf("after a released nonce the next transaction got %d, want 4", *tx.Nonce)
	}
}

// TestARefusalBeforeSignedNoncesHaltsAllocation: gap_policy halt (the
// default). The refused transaction keeps its nonce, ALLOCATED with the
// sub-state stuck and the reason; the one signed after it is broadcast;
// nothing new gets a nonce while the gap is open.
func TestARefusalBeforeSignedNoncesHaltsAllocation(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, nil, 5)})
	e.create(t, "h-1", ether(3))
	refused := e.create(t, "h-2", ether(3))
	third := e.create(t, "h-3", ether(1))
	e.own(t, "node-a")
	e.waitState(t, third.ID, txmanager.StateBroadcasted)
	var tx txmanager.Tx
	eventually(t, "the refused transaction stuck", func() bool { tx = e.get(t, refused.ID); return tx.SubState == txmanager.SubStuck })
	if tx.State != txmanager.StateAllocated || *tx.Nonce != 1 || !strings.HasPrefix(tx.Reason, txmanager.ReasonSigningRefused) {
		t.Errorf("the refused transaction: %s %v %q", tx.State, tx.Nonce, tx.Reason)
	}
	// Two later transactions pass intake, the second only after the
	// first's round allocated whatever it would.
	waiting := e.create(t, "h-4", big.NewInt(1))
	e.waitState(t, waiting.ID, txmanager.StateSimulated)
	marker := e.create(t, "h-5", big.NewInt(1))
	e.waitState(t, marker.ID, txmanager.StateSimulated)
	if tx := e.get(t, waiting.ID); tx.State != txmanager.StateSimulated || tx.Nonce != nil {
		t.Errorf("allocated while a gap is open: %s %v", tx.State, tx.Nonce)
	}
}

// fence is node's current fence on the env's signer.
func (e *env) fence(t *testing.T, node string) txmanager.Fence {
	t.Helper()
	var token int64
	if err := e.pool.QueryRow(ctx(t), `SELECT fencing_token FROM signer_lease WHERE owner_node = $1`, node).Scan(&token); err != nil {
		t.Fatal(err)
	}
	return txmanager.Fence{Node: node, Key: e.key(), Token: token}
}

// TestHeldForFundsUntilTheBalanceCoversEverythingPending: the signer has
// 10 ETH. 6 ETH passes; another 6 ETH would simulate alone but not with
// the first pending, so it is held (insufficient_funds, no nonce) until
// the balance grows, then goes on.
func TestHeldForFundsUntilTheBalanceCoversEverythingPending(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, envOptions{PolicyFile: writePolicy(t, nil, 0)})
	e.deps.FundsRetry = 50 * time.Millisecond
	node := e.chain.Node
	if err := node.SetBalance(ctx(t), e.signer, ether(10)); err != nil {
		t.Fatal(err)
	}
	first := e.create(t, "f-1", ether(6))
	second := e.create(t, "f-2", ether(6))
	e.own(t, "node-a")
	e.waitState(t, first.ID, txmanager.StateBroadcasted)
	eventually(t, "the second held", func() bool {
		tx := e.get(t, second.ID)
		return tx.State == txmanager.StateInit && tx.SubState == txmanager.SubInsufficientFunds
	})
	if tx := e.get(t, second.ID); tx.Nonce != nil || tx.Reason != txmanager.ReasonInsufficientFunds {
		t.Errorf("held: %+v", tx)
	}
	if err := node.SetBalance(ctx(t), e.signer, ether(20)); err != nil {
		t.Fatal(err)
	}
	if tx := e.waitState(t, second.ID, txmanager.StateBroadcasted); *tx.Nonce != 1 || tx.SubState != txmanager.SubNone {
		t.Errorf("after the top-up: %+v", tx)
	}
}

// revertsNope is init code that reverts with Error("nope").
var revertsNope = common.FromHex("7f08c379a0" + strings.Repeat("00", 28) + "600052" + "6020600452" + "6004602452" +
	"7f6e6f7065" + strings.Repeat("00", 28) + "604452" + "60646000fd")

// TestASimulatedRevertSpendsNoNonce: a transaction whose simulation
// reverts FAILS with the decoded reason in its event, before any nonce;
// the next transaction gets nonce 0.
func TestASimulatedRevertSpendsNoNonce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reverts, _, err := e.store.Create(ctx(t), &txmanager.Intent{ChainID: e.chain.Node.ChainID(), From: e.signer, RequestID: "reverts",
		Value: new(big.Int), Data: revertsNope, Route: txmanager.RoutePublic})
	if err != nil {
		t.Fatal(err)
	}
	after := e.create(t, "after", big.NewInt(1))
	e.own(t, "node-a")
	tx := e.waitState(t, reverts.ID, txmanager.StateFailed)
	if tx.Reason != txmanager.ReasonSimulationReverted || tx.Nonce != nil {
		t.Errorf("the reverting transaction: %s %q nonce %v", tx.State, tx.Reason, tx.Nonce)
	}
	if ev := e.lastEvent(t, reverts.ID); ev.RevertReason != "nope" {
		t.Errorf("revert reason in the event %q, want nope", ev.RevertReason)
	}
	if tx := e.waitState(t, after.ID, txmanager.StateBroadcasted); *tx.Nonce != 0 {
		t.Errorf("the next transaction got nonce %d, want 0", *tx.Nonce)
	}
}

// TestAKeyUsedOutsideWhileOwnedIsSkippedPast: the key sends a transaction
// outside txfence while the worker owns the signer; the next allocation
// reads the chain's pending nonce and skips past it.
func TestAKeyUsedOutsideWhileOwnedIsSkippedPast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	node := e.chain.Node
	first := e.create(t, "before", big.NewInt(1))
	e.own(t, "node-a")
	if tx := e.waitState(t, first.ID, txmanager.StateBroadcasted); *tx.Nonce != 0 {
		t.Fatalf("first nonce %d", *tx.Nonce)
	}
	external := chaintest.SendTransfer(t, node, node.Accounts()[0].Key, common.HexToAddress("0xdead"), big.NewInt(1))
	if external.Nonce() != 1 {
		t.Fatalf("the external transaction took nonce %d, want 1", external.Nonce())
	}
	next := e.create(t, "after", big.NewInt(1))
	if tx := e.waitState(t, next.ID, txmanager.StateBroadcasted); *tx.Nonce != 2 {
		t.Errorf("after the key was used outside, the next nonce is %d, want 2", *tx.Nonce)
	}
	if err := node.Mine(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	if r := chaintest.WaitReceipt(t, node, *e.get(t, next.ID).Hash); r.Status != 1 {
		t.Error("the transaction after the external one was not mined")
	}
}
