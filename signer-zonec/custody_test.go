package signer_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/policy"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
)

// TestApprovalsCannotBeReplayedAtASecondNonce: one set of approvals is
// given to one tx id, so the tx id is bound to the first nonce it is signed
// at. The same request (approvals and all) at other nonces, alone or in one
// batch, is refused and audited; fee bumps at its own nonce still pass.
func TestApprovalsCannotBeReplayedAtASecondNonce(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), openPolicy{chains: map[uint64]bool{31337: true}})
	approved := func(nonce uint64) *signer.Request {
		r := devRequest("payout-1", 31337, nonce, signer.DynamicFee, 100, gwei(30))
		r.Approvals = []signer.Approval{{Approver: "alice", Signature: []byte{1}}, {Approver: "bob", Signature: []byte{2}}}
		return r
	}
	if res := signOne(t, svc, approved(0)); res.Outcome != signer.OutcomeSigned {
		t.Fatalf("first signature: %v", res.Outcome)
	}
	for nonce := uint64(1); nonce <= 4; nonce++ {
		res := signOne(t, svc, approved(nonce))
		if res.Outcome != signer.OutcomeRefused || res.Decision.RuleID != signer.RuleTxIDBinding || res.Refusal.Earlier.Nonce != 0 {
			t.Errorf("payout-1 at nonce %d: %v by %s (%v), want refused by %s", nonce, res.Outcome, res.Decision.RuleID, res.Refusal, signer.RuleTxIDBinding)
		}
		checkAudited(t, pool, res, signer.OutcomeRefused, signer.RuleTxIDBinding)
	}
	// In one batch: the second nonce of a new tx id is refused too.
	res, err := svc.Sign(context.Background(), "txmanager", []*signer.Request{
		devRequest("payout-2", 31337, 1, signer.DynamicFee, 100, gwei(30)),
		devRequest("payout-2", 31337, 2, signer.DynamicFee, 100, gwei(30)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != signer.OutcomeSigned || res[1].Outcome != signer.OutcomeRefused || res[1].Decision.RuleID != signer.RuleTxIDBinding {
		t.Errorf("one batch, one tx id at two nonces: %v then %v by %s", res[0].Outcome, res[1].Outcome, res[1].Decision.RuleID)
	}
	// The tx id's own nonce still takes its fee bump.
	bump := approved(0)
	bump.MaxFeePerGas, bump.MaxPriorityFeePerGas = gwei(40), gwei(4)
	if res := signOne(t, svc, bump); res.Outcome != signer.OutcomeSigned || res.Reuse != signer.Replacement {
		t.Errorf("a fee bump at the bound nonce: %v %v", res.Outcome, res.Reuse)
	}
	// And the same tx id on another chain is still that tx id.
	other := devRequest("payout-1", 1, 0, signer.DynamicFee, 100, gwei(30))
	svc.Policy = openPolicy{chains: map[uint64]bool{31337: true, 1: true}}
	if res := signOne(t, svc, other); res.Outcome != signer.OutcomeRefused || res.Decision.RuleID != signer.RuleTxIDBinding {
		t.Errorf("payout-1 on chain 1: %v by %s", res.Outcome, res.Decision.RuleID)
	}
}

// TestNonceFarAheadIsRefused: a fresh nonce more than MaxNonceAhead above
// the signer's next one is refused and audited, whatever policy says; the
// next nonce follows what was signed (in the batch too) and an operator's
// declared start; the default bound holds when none is set.
func TestNonceFarAheadIsRefused(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), openPolicy{chains: map[uint64]bool{31337: true, 1: true, 10: true}})
	tx := 0
	sign := func(chainID, nonce uint64) signer.Result {
		tx++
		return signOne(t, svc, devRequest("tx-"+strings.Repeat("n", tx), chainID, nonce, signer.DynamicFee, 1, gwei(30)))
	}
	// The default: 2^40 with nothing below it is refused, the last nonce
	// within the bound is signed.
	if res := sign(31337, 1<<40); res.Outcome != signer.OutcomeRefused || res.Decision.RuleID != signer.RuleNonceAhead {
		t.Fatalf("nonce 2^40 of a fresh signer: %v by %s", res.Outcome, res.Decision.RuleID)
	} else {
		checkAudited(t, pool, res, signer.OutcomeRefused, signer.RuleNonceAhead)
	}
	if res := sign(31337, signer.DefaultMaxNonceAhead); res.Outcome != signer.OutcomeRefused {
		t.Errorf("nonce %d of a fresh signer: %v", signer.DefaultMaxNonceAhead, res.Outcome)
	}
	if res := sign(31337, signer.DefaultMaxNonceAhead-1); res.Outcome != signer.OutcomeSigned {
		t.Errorf("nonce %d of a fresh signer: %v", signer.DefaultMaxNonceAhead-1, res.Outcome)
	}

	svc.MaxNonceAhead = 4
	for _, st := range []struct {
		nonce uint64
		want  signer.Outcome
	}{{4, signer.OutcomeRefused}, {3, signer.OutcomeSigned}, {8, signer.OutcomeRefused}, {7, signer.OutcomeSigned}, {11, signer.OutcomeSigned}} {
		if res := sign(1, st.nonce); res.Outcome != st.want {
			t.Errorf("chain 1, bound 4, nonce %d: %v (%v), want %v", st.nonce, res.Outcome, res.Refusal, st.want)
		}
	}
	// In one batch, each signature moves the next nonce for the requests
	// after it.
	var batch []*signer.Request
	for n := uint64(12); n < 24; n += 3 {
		tx++
		batch = append(batch, devRequest("tx-"+strings.Repeat("n", tx), 1, n, signer.DynamicFee, 1, gwei(30)))
	}
	res, err := svc.Sign(context.Background(), "txmanager", batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Outcome != signer.OutcomeSigned {
			t.Errorf("batch request %d at nonce %d: %v (%v)", i, r.Request.Nonce, r.Outcome, r.Refusal)
		}
	}

	// An account with history: the operator declares where it starts.
	if _, err := pool.Exec(context.Background(), `INSERT INTO nonce_start (chain_id, signer, nonce) VALUES (10, $1, 5000)`, devAddr().Bytes()); err != nil {
		t.Fatal(err)
	}
	if res := sign(10, 5003); res.Outcome != signer.OutcomeSigned {
		t.Errorf("within the bound above a declared start: %v (%v)", res.Outcome, res.Refusal)
	}
	if res := sign(10, 5008); res.Outcome != signer.OutcomeRefused {
		t.Errorf("beyond the bound above what was signed: %v", res.Outcome)
	}
	if res := sign(10, math.MaxInt64); res.Outcome != signer.OutcomeRefused {
		t.Errorf("the largest nonce stored: %v", res.Outcome)
	}
}

// checkAudited: res has an audit record with the outcome, naming the rule
// and carrying the digest of the whole request, approvals included.
func checkAudited(t *testing.T, pool *pgxpool.Pool, res signer.Result, outcome signer.Outcome, rule string) {
	t.Helper()
	recs, err := postgres.New(pool).Audit(context.Background(), res.AuditSeq-1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Entry.Outcome != outcome || !strings.Contains(string(recs[0].Body), `"`+rule+`"`) {
		t.Errorf("audit record %d: %+v, want %s by %s", res.AuditSeq, recs, outcome, rule)
	}
	if full := signer.FullRequestDigest(res.Request).Hex(); len(recs) == 1 && !strings.Contains(string(recs[0].Body), full) {
		t.Errorf("audit record %d does not carry the full request digest %s: %s", res.AuditSeq, full, recs[0].Body)
	}
}

// skewedStore is a store whose clock is off by skew: a stand-in for a
// database clock that differs from the replica's own.
type skewedStore struct {
	signer.Store
	skew time.Duration
}

func (s skewedStore) InTx(ctx context.Context, fn func(signer.StoreTx) error) error {
	return s.Store.InTx(ctx, func(tx signer.StoreTx) error { return fn(skewedTx{StoreTx: tx, skew: s.skew}) })
}

type skewedTx struct {
	signer.StoreTx
	skew time.Duration
}

func (t skewedTx) Now(ctx context.Context) (time.Time, error) {
	now, err := t.StoreTx.Now(ctx)
	return now.Add(t.skew), err
}

// clockPolicy is openPolicy remembering the time it was asked at.
type clockPolicy struct {
	openPolicy
	at *time.Time
}

func (p clockPolicy) Evaluate(ctx context.Context, r *signer.Request, now time.Time, usage signer.Usage) (signer.Decision, error) {
	*p.at = now
	return p.openPolicy.Evaluate(ctx, r, now, usage)
}

// TestDecisionsUseTheDatabaseClock: approval expiry and rolling windows
// are decided at the store's clock, the one clock all replicas share, and
// the audit record and the signature carry it; the replica's own clock
// plays no part.
func TestDecisionsUseTheDatabaseClock(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	var asked time.Time
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), clockPolicy{openPolicy{chains: map[uint64]bool{31337: true}}, &asked})
	var before time.Time
	if err := pool.QueryRow(context.Background(), `SELECT now()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	svc.Store = skewedStore{Store: svc.Store, skew: 2 * time.Hour}
	res := signOne(t, svc, devRequest("tx-1", 31337, 0, signer.DynamicFee, 1, gwei(30)))
	if res.Outcome != signer.OutcomeSigned {
		t.Fatal(res.Outcome)
	}
	recs, err := postgres.New(pool).Audit(context.Background(), res.AuditSeq-1, 1)
	if err != nil || len(recs) != 1 {
		t.Fatal(recs, err)
	}
	var signedAt time.Time
	if err := pool.QueryRow(context.Background(), `SELECT signed_at FROM signature WHERE tx_id = 'tx-1'`).Scan(&signedAt); err != nil {
		t.Fatal(err)
	}
	// The database's clock moved forward by under an hour since before;
	// the replica's (this process's) by as much: only the skewed store
	// clock puts all three two hours ahead.
	for what, at := range map[string]time.Time{"policy's now": asked, "audit record": recs[0].Entry.At, "signature": signedAt} {
		if d := at.Sub(before); d < 2*time.Hour || d > 3*time.Hour {
			t.Errorf("%s at %s, %s after the database's clock before signing: not the store's clock", what, at, d)
		}
	}
	if _, err := svc.Evaluate(context.Background(), devRequest("tx-2", 31337, 1, signer.DynamicFee, 1, gwei(30))); err != nil || asked.Sub(before) < 2*time.Hour {
		t.Errorf("the dry run asked policy at %s (%v), not at the store's clock", asked, err)
	}
}

// windowsPolicy is a real policy file: the dev signer pays a token within
// a per-transaction cap and an hourly window, and spends fees within an
// hourly fee window.
const windowsPolicy = `{
  "version": "windows-1",
  "chains": [31337],
  "tokens": {"tok": {"chain": 31337, "address": "0x00000000000000000000000000000000000070c0", "standard": "erc20"}},
  "rules": [{
    "id": "payouts", "effect": "allow",
    "match": {"from": ["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"]},
    "tokens": {"tok": {"max_amount_per_tx": "600", "windows": [{"duration": "1h", "max_amount": "1000"}]}},
    "limits": {"max_value_per_tx": "0", "max_fee_per_gas": "100000000000", "max_gas": 100000,
               "fee_windows": [{"duration": "1h", "max_fee": "21000000000000000"}]}
  }]
}`

// TestTokenAndFeeWindowsCountSignerdsOwnRecord: the token units and fees
// policy limits come from what signerd recorded (a restarted signerd sees
// the same), counted once per nonce, whatever the caller claims.
func TestTokenAndFeeWindowsCountSignerdsOwnRecord(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	pol, err := policy.Parse([]byte(windowsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	keys := signertest.NewMemoryKeys(t, devKeyHex)
	token := common.HexToAddress("0x00000000000000000000000000000000000070c0")
	pay := func(txID string, nonce uint64, units int64, fee *big.Int) *signer.Request {
		data := append([]byte{0xa9, 0x05, 0x9c, 0xbb}, common.LeftPadBytes(bob.Bytes(), 32)...)
		data = append(data, common.LeftPadBytes(big.NewInt(units).Bytes(), 32)...)
		r := devRequest(txID, 31337, nonce, signer.DynamicFee, 0, fee)
		r.To, r.Data, r.Gas = &token, data, 50000
		return r
	}
	svc := newService(t, pool, keys, pol)
	if res := signOne(t, svc, pay("pay-1", 0, 600, gwei(80))); res.Outcome != signer.OutcomeSigned {
		t.Fatalf("600 units: %v %v", res.Outcome, res.Decision.Reasons)
	}
	if res := signOne(t, svc, pay("pay-2", 1, 601, gwei(1))); res.Outcome != signer.OutcomeDenied {
		t.Errorf("601 units, above the per-transaction cap: %v", res.Outcome)
	}
	var recorded string
	if err := pool.QueryRow(context.Background(), `SELECT token_amount::text FROM signature WHERE tx_id = 'pay-1'`).Scan(&recorded); err != nil || recorded != "600" {
		t.Fatalf("recorded token amount %q (%v), want 600", recorded, err)
	}
	// A restarted signerd: 600 of 1000 units spent this hour.
	svc = newService(t, pool, keys, pol)
	if res := signOne(t, svc, pay("pay-3", 1, 401, gwei(1))); res.Outcome != signer.OutcomeDenied {
		t.Errorf("600+401 units in the window: %v", res.Outcome)
	}
	// Fees: pay-1 may cost 50000 × 80 gwei = 0.004 ETH of the 0.021 ETH
	// an hour; a fee bump of it replaces that cost, it does not add to it.
	bump := pay("pay-1", 0, 600, gwei(88))
	bump.MaxPriorityFeePerGas = gwei(9)
	if res := signOne(t, svc, bump); res.Outcome != signer.OutcomeSigned {
		t.Fatalf("a fee bump: %v %v", res.Outcome, res.Decision.Reasons)
	}
	// 0.0044 so far; three more at 0.005 reach 0.0194, a fourth would not
	// fit (were the bump added to its original, the third would not).
	for n := uint64(1); n <= 4; n++ {
		want := signer.OutcomeSigned
		if n == 4 {
			want = signer.OutcomeDenied
		}
		if res := signOne(t, svc, pay(fmt.Sprint("fee-", n), n, 1, gwei(100))); res.Outcome != want {
			t.Errorf("fee window, transaction %d: %v %v, want %v", n, res.Outcome, res.Decision.Reasons, want)
		}
	}
}
