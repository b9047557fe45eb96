package postgres_test

import (
	"errors"
	"fmt"
	"math/big"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

var aliceKey = txmanager.SignerKey{ChainID: 31337, Signer: alice}

// lease takes alice's lease for node and returns its fence.
func lease(t *testing.T, s *postgres.Store, node string) txmanager.Fence {
	t.Helper()
	token, ok, err := s.Acquire(ctx(t), node, aliceKey, time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire for %s: ok=%v %v", node, ok, err)
	}
	return txmanager.Fence{Node: node, Key: aliceKey, Token: token}
}

// simulatedTxs creates n transactions and simulates them under f.
func simulatedTxs(t *testing.T, s *postgres.Store, f txmanager.Fence, prefix string, n int) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for i := range n {
		tx, _, err := s.Create(ctx(t), intent(fmt.Sprintf("%s-%d", prefix, i), 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Simulated(ctx(t), f, tx.ID, 21000); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tx.ID)
	}
	return ids
}

// feesFor are fees to allocate ids with.
func feesFor(ids []uuid.UUID) []txmanager.Fees {
	fees := make([]txmanager.Fees, len(ids))
	for i := range fees {
		fees[i] = txmanager.Fees{MaxFeePerGas: big.NewInt(2e9), MaxPriorityFeePerGas: big.NewInt(1e9)}
	}
	return fees
}

func attemptFor(id uuid.UUID) txmanager.Attempt {
	return txmanager.Attempt{TxID: id, Raw: id[:], Hash: crypto.Keccak256Hash(id[:]), MaxFeePerGas: big.NewInt(2e9), MaxPriorityFeePerGas: big.NewInt(1e9)}
}

func TestTheWayThroughTheFence(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	f := lease(t, s, "node-a")
	ids := simulatedTxs(t, s, f, "happy", 1)
	allocated, err := s.Allocate(ctx(t), f, ids, feesFor(ids), 7)
	if err != nil || len(allocated) != 1 || *allocated[0].Nonce != 7 || allocated[0].State != txmanager.StateAllocated {
		t.Fatalf("allocate: %+v %v", allocated, err)
	}
	signed, err := s.Signed(ctx(t), f, []txmanager.Attempt{attemptFor(ids[0])})
	if err != nil || len(signed) != 1 || signed[0].State != txmanager.StateSigned || signed[0].Hash == nil || *signed[0].Hash != attemptFor(ids[0]).Hash {
		t.Fatalf("signed: %+v %v", signed, err)
	}
	sent, err := s.Broadcasted(ctx(t), f, []txmanager.Sent{{TxID: ids[0], Route: txmanager.RoutePrivate}}, time.Now())
	if err != nil || len(sent) != 1 || sent[0].State != txmanager.StateBroadcasted {
		t.Fatalf("broadcasted: %+v %v", sent, err)
	}
	var states []string
	rows, err := pool.Query(ctx(t), `SELECT coalesce(payload->>'to_state', type) FROM event WHERE tx_id = $1 ORDER BY id`, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var st string
		if err := rows.Scan(&st); err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
	}
	if fmt.Sprint(states) != "[INIT SIMULATED ALLOCATED SIGNED BROADCASTED tx.attempt]" {
		t.Errorf("events %v", states)
	}
	// The first send accepted is an attempt: kind initial, as stored.
	var sentEv txmanager.AttemptSent
	if err := pool.QueryRow(ctx(t), `SELECT payload FROM event WHERE tx_id = $1 AND type = 'tx.attempt'`, ids[0]).Scan(&sentEv); err != nil {
		t.Fatal(err)
	}
	a := attemptFor(ids[0])
	if sentEv.Kind != txmanager.AttemptInitial || sentEv.Attempt != 1 || sentEv.Nonce != 7 || sentEv.Hash != a.Hash || sentEv.Route != txmanager.RoutePrivate ||
		sentEv.Fees.GasLimit != 21000 || sentEv.Fees.MaxFeePerGas != a.MaxFeePerGas.String() || sentEv.Fees.MaxPriorityFeePerGas != a.MaxPriorityFeePerGas.String() ||
		sentEv.SentAt.IsZero() {
		t.Errorf("tx.attempt %+v", sentEv)
	}
	var route string
	if err := pool.QueryRow(ctx(t), `SELECT route FROM attempt WHERE tx_id = $1`, ids[0]).Scan(&route); err != nil || route != "private" {
		t.Errorf("attempt route %q %v", route, err)
	}
	// A state change out of order is refused, not fenced.
	var stateErr *txmanager.StateError
	if _, err := s.Simulated(ctx(t), f, ids[0], 21000); !errors.As(err, &stateErr) || stateErr.State != txmanager.StateBroadcasted {
		t.Errorf("simulating a broadcast transaction: %v", err)
	}
}

// TestAStaleOwnerWritesNothing: once another node took the lease over,
// every write of the old owner is fenced, and nothing it tried is stored.
func TestAStaleOwnerWritesNothing(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	old := lease(t, s, "node-a")
	ids := simulatedTxs(t, s, old, "stale", 3)
	if _, err := s.Allocate(ctx(t), old, ids[:1], feesFor(ids[:1]), 0); err != nil {
		t.Fatal(err)
	}
	// node-a pauses past its lease; node-b takes over.
	if _, err := pool.Exec(ctx(t), `UPDATE signer_lease SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	current := lease(t, s, "node-b")
	if current.Token <= old.Token {
		t.Fatalf("takeover token %d, old %d", current.Token, old.Token)
	}
	snapshot := func() string {
		var n int
		var sum string
		if err := pool.QueryRow(ctx(t), `SELECT (SELECT count(*) FROM event), (SELECT string_agg(state || coalesce(nonce::text, '-'), ',' ORDER BY accept_seq) FROM tx)`).Scan(&n, &sum); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(n, sum)
	}
	newTx, _, err := s.Create(ctx(t), intent("stale-new", 1))
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot()
	writes := map[string]func() error{
		"simulate": func() error { _, err := s.Simulated(ctx(t), old, newTx.ID, 21000); return err },
		"allocate": func() error { _, err := s.Allocate(ctx(t), old, ids[1:], feesFor(ids[1:]), 1); return err },
		"release": func() error {
			_, err := s.ReleaseNonces(ctx(t), old, []txmanager.NonceRelease{{TxID: ids[0], To: txmanager.StateFailed, Reason: "signing_refused"}})
			return err
		},
		"fill a gap": func() error {
			_, _, err := s.FillGap(ctx(t), old, ids[0], "signing_refused", feesFor(ids[:1])[0])
			return err
		},
		"wait for approvals": func() error {
			_, err := s.PendingApproval(ctx(t), old, newTx.ID, 21000, time.Now().Add(time.Hour), txmanager.StateChanged{})
			return err
		},
		"hold": func() error {
			_, err := s.SetSubState(ctx(t), old, newTx.ID, txmanager.StateInit, txmanager.SubInsufficientFunds, "insufficient_funds")
			return err
		},
		"sign": func() error { _, err := s.Signed(ctx(t), old, []txmanager.Attempt{attemptFor(ids[0])}); return err },
		"fail": func() error {
			_, err := s.Fail(ctx(t), old, ids[2], txmanager.StateChanged{Reason: txmanager.ReasonPolicyDenied})
			return err
		},
		"broadcast": func() error {
			_, err := s.Broadcasted(ctx(t), old, []txmanager.Sent{{TxID: ids[0], Route: txmanager.RoutePublic}}, time.Now())
			return err
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, txmanager.ErrFenced) {
			t.Errorf("%s by the stale owner: %v, want fenced", name, err)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("the stale owner changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// The current owner carries on from the same nonce.
	next, err := s.NextNonce(ctx(t), current, nil)
	if err != nil || next != 1 {
		t.Fatalf("next nonce after takeover: %d %v", next, err)
	}
	if got, err := s.Allocate(ctx(t), current, ids[1:], feesFor(ids[1:]), next); err != nil || len(got) != 2 || *got[1].Nonce != 2 {
		t.Errorf("allocate by the new owner: %+v %v", got, err)
	}
}

// TestNoncesStayUniqueAndContiguousThroughTakeovers: three nodes race to
// own alice and allocate while her lease is yanked away again and again.
// Every transaction ends with exactly one nonce, 0..n-1 without a gap.
func TestNoncesStayUniqueAndContiguousThroughTakeovers(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 12)
	setup := lease(t, s, "setup")
	const n = 60
	ids := simulatedTxs(t, s, setup, "race", n)
	if err := s.Release(ctx(t), "setup", []txmanager.SignerKey{aliceKey}); err != nil {
		t.Fatal(err)
	}

	// The owners lose the lease only to the yanks below, which are paced
	// by progress: a lease short enough to lapse by itself (it was 50 ms)
	// lapsed, on a loaded machine, before every owner got from its
	// acquisition to its allocation, and nothing was ever allocated.
	const leaseTTL = time.Hour
	var (
		allocated atomic.Int64
		// failedInARow counts the owners' tries (an acquisition, then an
		// allocation) that failed since the last one that went through.
		failedInARow atomic.Int64
		fenced       atomic.Int64 // tries a yank fenced, in all
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for node := range 3 {
		wg.Go(func() {
			name := fmt.Sprintf("node-%d", node)
			for allocated.Load() < n {
				select {
				case <-stop:
					return
				default:
				}
				token, ok, err := s.Acquire(ctx(t), name, aliceKey, leaseTTL)
				if err != nil || !ok {
					continue
				}
				f := txmanager.Fence{Node: name, Key: aliceKey, Token: token}
				first, err := s.NextNonce(ctx(t), f, nil)
				if err != nil {
					if errors.Is(err, txmanager.ErrFenced) {
						fenced.Add(1)
					}
					failedInARow.Add(1)
					continue
				}
				var open []uuid.UUID
				rows, err := pool.Query(ctx(t), `SELECT tx_id FROM tx WHERE state = 'SIMULATED' ORDER BY accept_seq LIMIT 4`)
				if err != nil {
					t.Error(err)
					return
				}
				for rows.Next() {
					var id uuid.UUID
					_ = rows.Scan(&id)
					open = append(open, id)
				}
				rows.Close()
				got, err := s.Allocate(ctx(t), f, open, feesFor(open), first)
				switch {
				case errors.Is(err, txmanager.ErrFenced):
					fenced.Add(1)
					failedInARow.Add(1)
				case err != nil:
					// A racing owner allocated the same rows first: the
					// unique nonce index or the state check refused.
					failedInARow.Add(1)
				default:
					allocated.Add(int64(len(got)))
					failedInARow.Store(0)
				}
			}
		})
	}
	// The lease is yanked from whoever holds it, again and again, often
	// in the middle of an owner's allocation: every 15 ms while the owners
	// get through, and not again after three failed tries in a row until
	// one goes through. Fast, the yanks land between and inside many
	// allocations; slow, the owners still finish.
	var yanks atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(15 * time.Millisecond)
		defer tick.Stop()
		for allocated.Load() < n {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if failedInARow.Load() >= 3 {
				continue
			}
			if _, err := pool.Exec(ctx(t), `UPDATE signer_lease SET expires_at = now() - interval '1 second'`); err == nil {
				yanks.Add(1)
			}
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// The yanks let every third try through, so the owners always get on:
	// the test fails only when nothing is allocated for a long while (a
	// deadlock or livelock, not a slow machine), never on the total time.
	const stalled = 2 * time.Minute
	check := time.NewTicker(time.Second)
	defer check.Stop()
	last, lastMoved := allocated.Load(), time.Now()
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		case <-check.C:
			if now := allocated.Load(); now != last {
				last, lastMoved = now, time.Now()
			} else if time.Since(lastMoved) > stalled {
				close(stop)
				<-done
				t.Fatalf("%d of %d allocated, none in the last %s (%d yanks)", allocated.Load(), n, stalled, yanks.Load())
			}
		}
	}

	var tokens int64
	if err := pool.QueryRow(ctx(t), `SELECT fencing_token FROM signer_lease`).Scan(&tokens); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lease yanks, %d acquisitions, %d tries fenced", yanks.Load(), tokens, fenced.Load())
	var count, distinct int
	var lo, hi int64
	if err := pool.QueryRow(ctx(t), `SELECT count(*), count(DISTINCT nonce), min(nonce), max(nonce) FROM tx WHERE tx_id = ANY($1)`, ids).
		Scan(&count, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if count != n || distinct != n || lo != 0 || hi != n-1 {
		t.Errorf("%d transactions, %d distinct nonces from %d to %d; want %d, %d, 0 to %d", count, distinct, lo, hi, n, n, n-1)
	}
	var events int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM event WHERE payload->>'to_state' = 'ALLOCATED'`).Scan(&events); err != nil || events != n {
		t.Errorf("%d ALLOCATED events, want %d (%v)", events, n, err)
	}
}

// TestANonceIsReleasedOnlyWithNothingAfterIt: SYSTEM.md invariant 1 lets
// a nonce go back only while no later nonce of the signer is taken. With
// a later transaction still allocated, releasing one alone changes
// nothing; releasing both fails them and moves the cursor back, so the
// next allocation reuses the lower nonce.
func TestANonceIsReleasedOnlyWithNothingAfterIt(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	f := lease(t, s, "node-a")
	ids := simulatedTxs(t, s, f, "release", 3)
	if _, err := s.Allocate(ctx(t), f, ids, feesFor(ids), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Signed(ctx(t), f, []txmanager.Attempt{attemptFor(ids[0])}); err != nil {
		t.Fatal(err)
	}
	refuse := func(ids ...uuid.UUID) error {
		var rs []txmanager.NonceRelease
		for _, id := range ids {
			rs = append(rs, txmanager.NonceRelease{TxID: id, To: txmanager.StateFailed, Reason: txmanager.ReasonSigningRefused})
		}
		_, err := s.ReleaseNonces(ctx(t), f, rs)
		return err
	}
	if err := refuse(ids[1]); !errors.Is(err, txmanager.ErrLaterNonceSigned) {
		t.Fatalf("releasing nonce 1 with nonce 2 allocated: %v", err)
	}
	if err := refuse(ids[0]); err == nil {
		t.Fatal("a signed transaction's nonce was released")
	}
	if err := refuse(ids[1], ids[2]); err != nil {
		t.Fatal(err)
	}
	var failed int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM tx WHERE state = 'FAILED' AND nonce IS NULL`).Scan(&failed); err != nil || failed != 2 {
		t.Errorf("%d failed without a nonce (%v), want 2", failed, err)
	}
	if next, err := s.NextNonce(ctx(t), f, nil); err != nil || next != 1 {
		t.Errorf("next nonce %d (%v), want 1", next, err)
	}
}

// TestMinedBeforeItsBroadcastIsRecorded: the follower finds a SIGNED
// transaction mined (a node mined it while answering its send with an
// error, or before the worker recorded the acceptance): Mined moves it to
// BROADCASTED, included, with one state change naming its hash, then its
// confirmation. The worker's late Broadcasted of it, in a batch with a
// transaction still SIGNED, leaves it as the chain has it and moves the
// other one only; the route's acceptance of each is one tx.attempt event
// (kind initial), however often the worker reports it.
func TestMinedBeforeItsBroadcastIsRecorded(t *testing.T) {
	t.Parallel()
	s, pool := store(t, 4)
	f := lease(t, s, "node-a")
	ids := simulatedTxs(t, s, f, "mined-first", 2)
	if _, err := s.Allocate(ctx(t), f, ids, feesFor(ids), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Signed(ctx(t), f, []txmanager.Attempt{attemptFor(ids[0]), attemptFor(ids[1])}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSubState(ctx(t), f, ids[0], txmanager.StateSigned, txmanager.SubStuck, "broadcast_refused: rejected: execution reverted"); err != nil {
		t.Fatal(err)
	}
	hash := attemptFor(ids[0]).Hash
	if err := s.Mined(ctx(t), f, ids[0], txmanager.Receipt{Attempt: 1, Hash: hash, BlockNumber: 7, BlockHash: crypto.Keccak256Hash([]byte("b7")),
		Status: 0, GasUsed: 21000, EffectiveGasPrice: big.NewInt(1e9)}, 1); err != nil {
		t.Fatalf("mined while SIGNED: %v", err)
	}
	mined, err := s.Get(ctx(t), ids[0])
	if err != nil || mined.State != txmanager.StateBroadcasted || mined.SubState != txmanager.SubIncluded || mined.Reason != "" {
		t.Fatalf("after Mined: %s/%s %q %v", mined.State, mined.SubState, mined.Reason, err)
	}
	sent, err := s.Broadcasted(ctx(t), f, []txmanager.Sent{{TxID: ids[0], Route: txmanager.RoutePublic}, {TxID: ids[1], Route: txmanager.RoutePublic}}, time.Now())
	if err != nil || len(sent) != 1 || sent[0].ID != ids[1] || sent[0].State != txmanager.StateBroadcasted {
		t.Fatalf("the worker's late broadcast: %+v %v", sent, err)
	}
	// Told again (a resend after a restart, answered "already known"):
	// nothing more.
	if sent, err := s.Broadcasted(ctx(t), f, []txmanager.Sent{{TxID: ids[0], Route: txmanager.RoutePrivate}}, time.Now()); err != nil || len(sent) != 0 {
		t.Fatalf("the late broadcast again: %+v %v", sent, err)
	}
	// The route accepted the attempt: one tx.attempt each, the mined one's
	// after its receipt.
	for _, id := range ids {
		if n := count(t, pool, `SELECT count(*) FROM event WHERE tx_id = $1 AND type = 'tx.attempt' AND payload->>'kind' = 'initial'
			AND payload->>'route' = 'public' AND payload->>'hash' = $2`, id, attemptFor(id).Hash.Hex()); n != 1 {
			t.Errorf("%s: %d tx.attempt events, want 1", id, n)
		}
	}
	if again, err := s.Get(ctx(t), ids[0]); err != nil || again.State != txmanager.StateBroadcasted || again.SubState != txmanager.SubIncluded {
		t.Errorf("the mined one after the late broadcast: %s/%s %v", again.State, again.SubState, err)
	}
	rows, err := pool.Query(ctx(t), `SELECT type, coalesce(payload->>'from_state', ''), coalesce(payload->>'to_state', ''),
		coalesce(payload->>'sub_state', ''), coalesce(payload->>'hash', '') FROM event WHERE tx_id = $1 ORDER BY id`, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var typ, from, to, sub, h string
		if err := rows.Scan(&typ, &from, &to, &sub, &h); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s>%s %s %s", typ, from, to, sub, h))
	}
	want := []string{
		"tx.state_changed >INIT  ",
		"tx.state_changed INIT>SIMULATED  ",
		"tx.state_changed SIMULATED>ALLOCATED  ",
		"tx.state_changed ALLOCATED>SIGNED  " + hash.Hex(),
		"tx.state_changed SIGNED>SIGNED stuck " + hash.Hex(),
		"tx.state_changed SIGNED>BROADCASTED included " + hash.Hex(),
		"tx.confirmation >  " + hash.Hex(),
		"tx.attempt >  " + hash.Hex(),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n%q, want\n%q", got, want)
	}
}
