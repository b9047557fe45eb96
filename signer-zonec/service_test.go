package signer_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	signer "github.com/txfence/txfence/signer-zonec"
	"github.com/txfence/txfence/signer-zonec/postgres"
	"github.com/txfence/txfence/signer-zonec/signertest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// devKeyHex is anvil's first development key: public, never for value.
var devKeyHex = signertest.DevKeys[0]

// openPolicy allows every request of the listed chains, with an optional
// rolling-window cap, so these tests exercise the service and the store;
// the policy engine has its own tests.
type openPolicy struct {
	chains      map[uint64]bool
	windowMax   *big.Int
	window      time.Duration
	allowCancel bool
}

func (p openPolicy) Evaluate(ctx context.Context, r *signer.Request, _ time.Time, usage signer.Usage) (signer.Decision, error) {
	d := signer.Decision{Verdict: signer.Allow, RuleID: "test-allow", PolicyVersion: p.Version(), PolicyHash: p.Hash()}
	if !p.chains[r.ChainID] {
		d.Verdict, d.RuleID = signer.Deny, "default-deny"
		return d, nil
	}
	if p.windowMax != nil {
		s, err := usage.Value(ctx, p.window)
		if err != nil {
			return d, err
		}
		if new(big.Int).Add(s, r.Value).Cmp(p.windowMax) > 0 {
			d.Verdict, d.RuleID, d.Reasons = signer.Deny, "test-window", []string{"window exceeded"}
		}
	}
	return d, nil
}
func (p openPolicy) EvaluateCancel(ctx context.Context, r *signer.Request, now time.Time, usage signer.Usage) (signer.Decision, error) {
	if !p.allowCancel {
		return signer.Decision{Verdict: signer.Deny, RuleID: "default-deny", PolicyVersion: p.Version(), PolicyHash: p.Hash()}, nil
	}
	return p.Evaluate(ctx, r, now, usage)
}
func (p openPolicy) Version() string                          { return "test-1" }
func (p openPolicy) Hash() common.Hash                        { return common.HexToHash("0x01") }
func (p openPolicy) AllowsCancel(uint64, common.Address) bool { return p.allowCancel }

// CheckApprovals: this policy needs no approvals, so none can count.
func (p openPolicy) CheckApprovals(*signer.Request, *signer.Rejection, time.Time) signer.ApprovalCheck {
	return signer.ApprovalCheck{Why: "no rule needs approvals", PolicyVersion: p.Version(), PolicyHash: p.Hash()}
}

func newService(t testing.TB, pool *pgxpool.Pool, keys signer.KeyBackend, pol signer.Policy) *signer.Service {
	t.Helper()
	return &signer.Service{Keys: keys, Policy: pol, Store: postgres.New(pool)}
}

func migratedPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := pgtest.URL(t)
	pool, err := pg.Open(context.Background(), u, pg.PoolOptions{MaxConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := postgres.Migrations.Up(context.Background(), pool, nil); err != nil {
		t.Fatal(err)
	}
	return pool, u
}

func devRequest(txID string, chainID, nonce uint64, typ signer.TxType, value int64, fee *big.Int) *signer.Request {
	to := bob
	r := &signer.Request{TxID: txID, ChainID: chainID, From: devAddr(), Nonce: nonce, Type: typ, To: &to, Value: big.NewInt(value), Gas: 21000}
	if typ == signer.Legacy {
		r.GasPrice = fee
	} else {
		r.MaxFeePerGas, r.MaxPriorityFeePerGas = fee, new(big.Int).Div(fee, big.NewInt(10))
	}
	return r
}

func devAddr() common.Address { return signertest.DevAddress(0) }

func signOne(t *testing.T, svc *signer.Service, r *signer.Request) signer.Result {
	t.Helper()
	res, err := svc.Sign(context.Background(), "txmanager", []*signer.Request{r})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

func TestSignedTransactionsRecoverToTheirSender(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	chains := []uint64{1, 10, 137, 8453, 31337, 11155111}
	pol := openPolicy{chains: map[uint64]bool{}}
	for _, c := range chains {
		pol.chains[c] = true
	}
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), pol)
	var nonce uint64
	for _, chainID := range chains {
		for _, typ := range []signer.TxType{signer.Legacy, signer.DynamicFee} {
			nonce++
			r := devRequest(fmt.Sprintf("tx-%d-%s", chainID, typ), chainID, nonce, typ, 1000, gwei(50))
			res := signOne(t, svc, r)
			if res.Outcome != signer.OutcomeSigned {
				t.Fatalf("chain %d %s: %+v", chainID, typ, res)
			}
			var tx types.Transaction
			if err := tx.UnmarshalBinary(res.RawTx); err != nil {
				t.Fatal(err)
			}
			from, err := types.Sender(types.LatestSignerForChainID(new(big.Int).SetUint64(chainID)), &tx)
			if err != nil || from != r.From {
				t.Errorf("chain %d %s: recovered %s (%v), want %s", chainID, typ, from.Hex(), err, r.From.Hex())
			}
			if tx.Hash() != res.TxHash || tx.Nonce() != nonce || tx.Value().Cmp(r.Value) != 0 || *tx.To() != *r.To {
				t.Errorf("chain %d %s: the signed transaction is not the request", chainID, typ)
			}
			if typ == signer.DynamicFee && tx.ChainId().Uint64() != chainID {
				t.Errorf("chain id %d signed as %d", chainID, tx.ChainId())
			}
		}
	}
}

func TestIdenticalRequestGetsTheSameSignature(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), openPolicy{chains: map[uint64]bool{31337: true}})
	r := devRequest("tx-1", 31337, 0, signer.DynamicFee, 5, gwei(30))
	first, again := signOne(t, svc, r), signOne(t, svc, r)
	if again.Outcome != signer.OutcomeReplayed || string(again.RawTx) != string(first.RawTx) || again.TxHash != first.TxHash {
		t.Errorf("second answer %v %x, want the stored signature %x", again.Outcome, again.TxHash, first.TxHash)
	}
	if again.AuditSeq != first.AuditSeq+1 {
		t.Errorf("the replay was not audited: seqs %d then %d", first.AuditSeq, again.AuditSeq)
	}
}

func TestFeeBumpAllowedOthersRefused(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), openPolicy{chains: map[uint64]bool{31337: true}, allowCancel: true})
	orig := devRequest("tx-1", 31337, 3, signer.DynamicFee, 5, gwei(100))
	if res := signOne(t, svc, orig); res.Outcome != signer.OutcomeSigned {
		t.Fatal(res.Outcome)
	}
	steps := []struct {
		name string
		req  *signer.Request
		want signer.Outcome
	}{
		{"lower fee", devRequest("tx-1", 31337, 3, signer.DynamicFee, 5, gwei(90)), signer.OutcomeRefused},
		{"other intent", devRequest("tx-2", 31337, 3, signer.DynamicFee, 6, gwei(500)), signer.OutcomeRefused},
		{"fee bump", devRequest("tx-1", 31337, 3, signer.DynamicFee, 5, gwei(110)), signer.OutcomeSigned},
		{"bump of the first, not the second", devRequest("tx-1", 31337, 3, signer.DynamicFee, 5, gwei(115)), signer.OutcomeRefused},
		{"cancel", cancelOf(devRequest("tx-1", 31337, 3, signer.DynamicFee, 5, gwei(200)), gwei(200), gwei(20)), signer.OutcomeSigned},
	}
	for _, st := range steps {
		if res := signOne(t, svc, st.req); res.Outcome != st.want {
			t.Errorf("%s: %v (%v), want %v", st.name, res.Outcome, res.Refusal, st.want)
		}
	}
}

// TestOneIntentPerNonceUnderRaces runs two services on separate pools, as
// two signerd replicas sharing the store, with many goroutines each
// signing a different intent at the same nonce: exactly one intent gets a
// signature, every other request is refused, and the store holds one row.
func TestOneIntentPerNonceUnderRaces(t *testing.T) {
	t.Parallel()
	_, u := migratedPool(t)
	pol := openPolicy{chains: map[uint64]bool{31337: true}}
	var replicas []*signer.Service
	for range 2 {
		pool, err := pg.Open(context.Background(), u, pg.PoolOptions{MaxConns: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		replicas = append(replicas, newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), pol))
	}
	const racers = 40
	var wg sync.WaitGroup
	results := make(chan signer.Result, racers)
	for i := range racers {
		wg.Go(func() {
			r := devRequest(fmt.Sprintf("tx-%d", i), 31337, 42, signer.DynamicFee, int64(1000+i), gwei(100))
			res, err := replicas[i%2].Sign(context.Background(), "txmanager", []*signer.Request{r})
			if err != nil {
				t.Error(err)
				return
			}
			results <- res[0]
		})
	}
	wg.Wait()
	close(results)
	signed := 0
	for res := range results {
		switch res.Outcome {
		case signer.OutcomeSigned:
			signed++
		case signer.OutcomeRefused:
		default:
			t.Errorf("unexpected outcome %v", res.Outcome)
		}
	}
	if signed != 1 {
		t.Errorf("%d intents signed at one nonce, want exactly 1", signed)
	}
	var rows int
	if err := replicas[0].Store.(*postgres.Store).Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM signature WHERE nonce = 42`).Scan(&rows); err != nil || rows != 1 {
		t.Errorf("%d signature rows at the nonce (%v), want 1", rows, err)
	}
}

func TestOneBatchCannotSignTwoIntentsAtOneNonce(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), openPolicy{chains: map[uint64]bool{31337: true}})
	a := devRequest("tx-a", 31337, 9, signer.DynamicFee, 1, gwei(10))
	b := devRequest("tx-b", 31337, 9, signer.DynamicFee, 2, gwei(100))
	res, err := svc.Sign(context.Background(), "txmanager", []*signer.Request{a, b, a})
	if err != nil {
		t.Fatal(err)
	}
	got := []signer.Outcome{res[0].Outcome, res[1].Outcome, res[2].Outcome}
	want := []signer.Outcome{signer.OutcomeSigned, signer.OutcomeRefused, signer.OutcomeReplayed}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("outcomes %v, want %v", got, want)
			break
		}
	}
}

// TestOneBatchGivesSeveralSignaturesAtOneNonce writes a batch's
// signatures in one statement: attempts follow the stored ones and each
// other in request order, and the audit log (with no tx hash where nothing
// was signed) still verifies.
func TestOneBatchGivesSeveralSignaturesAtOneNonce(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	svc := newService(t, pool, signertest.NewMemoryKeys(t, devKeyHex), openPolicy{chains: map[uint64]bool{31337: true}, allowCancel: true})
	if res := signOne(t, svc, devRequest("tx-5", 31337, 5, signer.DynamicFee, 1, gwei(100))); res.Outcome != signer.OutcomeSigned {
		t.Fatal(res.Outcome)
	}
	bump6 := devRequest("tx-6", 31337, 6, signer.DynamicFee, 1, gwei(110))
	res, err := svc.Sign(context.Background(), "txmanager", []*signer.Request{
		devRequest("tx-5", 31337, 5, signer.DynamicFee, 1, gwei(110)),
		devRequest("tx-other", 31337, 5, signer.DynamicFee, 2, gwei(500)),
		cancelOf(devRequest("tx-5", 31337, 5, signer.DynamicFee, 1, gwei(130)), gwei(130), gwei(13)),
		devRequest("tx-6", 31337, 6, signer.DynamicFee, 1, gwei(100)),
		bump6,
		bump6,
	})
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []signer.Outcome
	for _, r := range res {
		outcomes = append(outcomes, r.Outcome)
	}
	wantOutcomes := []signer.Outcome{signer.OutcomeSigned, signer.OutcomeRefused, signer.OutcomeSigned, signer.OutcomeSigned, signer.OutcomeSigned, signer.OutcomeReplayed}
	if diff := cmp.Diff(wantOutcomes, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}

	type row struct {
		Nonce, Attempt int64
		Kind, TxID     string
		AuditSeq       int64
	}
	rows, err := pool.Query(context.Background(), `SELECT nonce, attempt, kind, tx_id, audit_seq FROM signature ORDER BY nonce, attempt`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{5, 1, "original", "tx-5", 1},
		{5, 2, "replacement", "tx-5", 2},
		{5, 3, "cancel", "tx-5-cancel", 4},
		{6, 1, "original", "tx-6", 5},
		{6, 2, "replacement", "tx-6", 6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signature rows (-want +got):\n%s", diff)
	}
	if n, err := svc.Store.(*postgres.Store).VerifyAudit(context.Background()); err != nil || n != 7 {
		t.Errorf("audit log: %d records verified: %v", n, err)
	}
}

func TestRollingWindowCountsTheBatchAndSurvivesRestarts(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	pol := openPolicy{chains: map[uint64]bool{31337: true}, windowMax: big.NewInt(100), window: time.Hour}
	keys := signertest.NewMemoryKeys(t, devKeyHex)
	svc := newService(t, pool, keys, pol)
	res, err := svc.Sign(context.Background(), "txmanager", []*signer.Request{
		devRequest("tx-1", 31337, 0, signer.DynamicFee, 60, gwei(10)),
		devRequest("tx-2", 31337, 1, signer.DynamicFee, 50, gwei(10)), // 110 > 100 within the same batch
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Outcome != signer.OutcomeSigned || res[1].Outcome != signer.OutcomeDenied {
		t.Fatalf("outcomes %v, %v; want signed then denied", res[0].Outcome, res[1].Outcome)
	}
	// A new service on the same store is a restarted signerd: the window
	// comes from the record, not from memory.
	restarted := newService(t, pool, keys, pol)
	if r := signOne(t, restarted, devRequest("tx-3", 31337, 1, signer.DynamicFee, 41, gwei(10))); r.Outcome != signer.OutcomeDenied {
		t.Errorf("after a restart, 60+41 in the window: %v", r.Outcome)
	}
	if r := signOne(t, restarted, devRequest("tx-4", 31337, 1, signer.DynamicFee, 40, gwei(10))); r.Outcome != signer.OutcomeSigned {
		t.Errorf("after a restart, 60+40 in the window: %v", r.Outcome)
	}
	// A fee bump of tx-1 spends nothing new.
	if r := signOne(t, restarted, devRequest("tx-1", 31337, 0, signer.DynamicFee, 60, gwei(20))); r.Outcome != signer.OutcomeSigned {
		t.Errorf("a fee bump was counted against the window: %v", r.Outcome)
	}
}

func TestFailsClosed(t *testing.T) {
	t.Parallel()
	pool, u := migratedPool(t)
	pol := openPolicy{chains: map[uint64]bool{31337: true}}
	r := devRequest("tx-1", 31337, 0, signer.DynamicFee, 1, gwei(10))

	keys := signertest.NewMemoryKeys(t, devKeyHex)
	keys.SetDown(errors.New("vault is sealed"))
	if _, err := newService(t, pool, keys, pol).Sign(context.Background(), "txmanager", []*signer.Request{r}); !errs.Is(err, errs.Unavailable) {
		t.Errorf("key backend down: %v; want unavailable", err)
	}

	closed, err := pg.Open(context.Background(), u, pg.PoolOptions{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	res, err := newService(t, closed, signertest.NewMemoryKeys(t, devKeyHex), pol).Sign(context.Background(), "txmanager", []*signer.Request{r})
	if !errs.Is(err, errs.Unavailable) || res != nil {
		t.Errorf("store down: %v, %v; want unavailable and no result", res, err)
	}

	if _, err := newService(t, pool, signertest.NewMemoryKeys(t), pol).Sign(context.Background(), "txmanager", []*signer.Request{r}); !errs.Is(err, errs.Invalid) {
		t.Errorf("unknown key: %v; want invalid", err)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM signature`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d signatures recorded while failing (%v)", n, err)
	}
}
