package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
)

const chain = 31337

var (
	hot   = common.HexToAddress("0x00000000000000000000000000000000000a11ce")
	bob   = common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	token = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
)

func books(t testing.TB) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	return ledgertest.Store(t)
}

func acct(kind ledger.AccountKind, asset string, addr common.Address) ledger.AccountKey {
	return ledger.AccountKey{ChainID: chain, Asset: asset, Kind: kind, Address: addr}
}

func leg(k ledger.AccountKey, amount int64) ledger.Leg {
	return ledger.Leg{Account: k, Amount: big.NewInt(amount)}
}

// transfer is a confirmed transaction's journal: value from wallet to
// counterparty, and the fee to fee expense.
func transfer(key string, from, to common.Address, value, fee int64) *ledger.Journal {
	return &ledger.Journal{Kind: ledger.Confirmed, Key: key, ChainID: chain, Status: "success", Legs: []ledger.Leg{
		leg(acct(ledger.Wallet, ledger.Native, from), -value), leg(acct(ledger.Counterparty, ledger.Native, to), value),
		leg(acct(ledger.Wallet, ledger.Native, from), -fee), leg(acct(ledger.FeeExpense, ledger.Native, from), fee),
	}}
}

func balance(t testing.TB, s *postgres.Store, k ledger.AccountKey) *big.Int {
	t.Helper()
	b, err := s.Balance(context.Background(), k)
	if err != nil {
		t.Fatalf("balance of %s: %v", k, err)
	}
	return b
}

func TestPostBooksAndReplaysAreNoOps(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	j := transfer("tx-1", hot, bob, 1000, 21)
	first, err := s.Post(ctx, j)
	if err != nil || !first.Created || first.JournalID == 0 {
		t.Fatalf("post: %+v %v", first, err)
	}
	// The same fact, legs in another order, is a replay.
	again := transfer("tx-1", hot, bob, 1000, 21)
	again.Legs[0], again.Legs[3] = again.Legs[3], again.Legs[0]
	if p, err := s.Post(ctx, again); err != nil || p.Created || p.JournalID != first.JournalID {
		t.Errorf("replay: %+v %v; want journal %d, not created", p, err, first.JournalID)
	}
	if _, err := s.Post(ctx, transfer("tx-1", hot, bob, 1001, 21)); !errs.Is(err, errs.Conflict) {
		t.Errorf("another fact under the key: %v, want a conflict", err)
	}
	for k, want := range map[ledger.AccountKey]int64{
		acct(ledger.Wallet, ledger.Native, hot):       -1021,
		acct(ledger.Counterparty, ledger.Native, bob): 1000,
		acct(ledger.FeeExpense, ledger.Native, hot):   21,
	} {
		if got := balance(t, s, k); got.Int64() != want {
			t.Errorf("balance of %s: %s, want %d", k, got, want)
		}
	}
	if _, err := s.Balance(ctx, acct(ledger.Suspense, ledger.Native, hot)); !errs.Is(err, errs.NotFound) {
		t.Errorf("an account never booked: %v, want not found", err)
	}
}

func TestPostRefusesJournalsThatBreakTheRules(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	huge := new(big.Int).Lsh(big.NewInt(1), 256)
	tests := map[string]func(j *ledger.Journal){
		"unbalanced":                func(j *ledger.Journal) { j.Legs[1].Amount = big.NewInt(999) },
		"one leg":                   func(j *ledger.Journal) { j.Legs = j.Legs[:1] },
		"a zero amount":             func(j *ledger.Journal) { j.Legs[0].Amount, j.Legs[1].Amount = new(big.Int), new(big.Int) },
		"an amount over 2^256 - 1":  func(j *ledger.Journal) { j.Legs[0].Amount, j.Legs[1].Amount = new(big.Int).Neg(huge), huge },
		"balanced across assets":    func(j *ledger.Journal) { j.Legs[1].Account.Asset = token },
		"a leg on another chain":    func(j *ledger.Journal) { j.Legs[1].Account.ChainID = 1 },
		"an asset not lower-case":   func(j *ledger.Journal) { j.Legs[0].Account.Asset = strings.ToUpper(token) },
		"an unknown account kind":   func(j *ledger.Journal) { j.Legs[0].Account.Kind = "equity" },
		"a reversal naming nothing": func(j *ledger.Journal) { j.Kind = ledger.Reversal },
		"memo not an object":        func(j *ledger.Journal) { j.Memo = []byte(`[1]`) },
	}
	for name, spoil := range tests {
		j := transfer("bad-"+name, hot, bob, 1000, 21)
		spoil(j)
		if _, err := s.Post(context.Background(), j); !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM journal) + (SELECT count(*) FROM entry)`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows stored by refused journals (%v)", n, err)
	}
}

// The database itself refuses what the rules forbid, whatever writes to
// it: an unbalanced journal commits nothing, nothing booked changes, and
// balances move only with entries.
func TestTheDatabaseEnforcesTheBooks(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	booked, err := s.Post(ctx, transfer("tx-1", hot, bob, 1000, 21))
	if err != nil {
		t.Fatal(err)
	}
	var wallet int64
	if err := pool.QueryRow(ctx, `SELECT account_id FROM account WHERE kind = 'wallet'`).Scan(&wallet); err != nil {
		t.Fatal(err)
	}
	newJournal := `INSERT INTO journal (kind, idem_key, payload_hash, chain_id) VALUES ('deposit', 'raw', decode(repeat('00', 32), 'hex'), 31337) RETURNING journal_id`
	entryOf := func(amount string) string {
		return `INSERT INTO entry (journal_id, account_id, amount) SELECT max(journal_id), %[1]d, ` + amount + ` FROM journal`
	}
	zeros := `decode(repeat('00', 32), 'hex')`
	for _, c := range []struct {
		name  string
		stmts []string
		want  string // in the error
	}{
		{"an unbalanced journal", []string{newJournal, entryOf("5"), entryOf("-4")}, "does not balance"},
		{"a journal of one entry", []string{newJournal, entryOf("5")}, "has 1 entries"},
		{"a journal with no entry", []string{newJournal}, "has 0 entries"},
		{"an entry in a committed journal", []string{`INSERT INTO entry (journal_id, account_id, amount) VALUES (%[2]d, %[1]d, 1)`}, "is closed"},
		{"an entry in no journal", []string{`INSERT INTO entry (journal_id, account_id, amount) VALUES (-1, %[1]d, 1)`}, "does not exist"},
		{"an entry on no account", []string{newJournal, `INSERT INTO entry (journal_id, account_id, amount) SELECT max(journal_id), -1, 5 FROM journal`,
			`INSERT INTO entry (journal_id, account_id, amount) SELECT max(journal_id), -2, -5 FROM journal`}, "account -1, which does not exist"},
		{"an amount out of range", []string{newJournal, entryOf("2::numeric ^ 256"), entryOf("-(2::numeric ^ 256)")}, "amount_check"},
		{"a fractional amount", []string{newJournal, entryOf("0.5"), entryOf("-0.5")}, "amount_check"},
		{"an update of a journal", []string{`UPDATE journal SET status = 'reverted'`}, "append-only"},
		{"a delete of a journal", []string{`DELETE FROM journal`}, "append-only"},
		{"an update of an entry", []string{`UPDATE entry SET amount = amount * 2`}, "append-only"},
		{"a delete of an entry", []string{`DELETE FROM entry`}, "append-only"},
		{"a truncate of the entries", []string{`TRUNCATE entry`}, "append-only"},
		{"an update of an account", []string{`UPDATE account SET kind = 'suspense'`}, "append-only"},
		{"a balance written by hand", []string{`UPDATE balance SET amount = 0`}, "balances change only by entries"},
		{"a balance made by hand", []string{`INSERT INTO balance (account_id, amount, version) SELECT account_id, 1, 1 FROM account WHERE kind = 'counterparty'`}, "balances change only by entries"},
		{"a balance deleted", []string{`DELETE FROM balance`}, "append-only"},
		{"a second reversal of one journal", []string{
			`INSERT INTO journal (kind, idem_key, payload_hash, chain_id, reverses) VALUES ('reversal', 'r1', ` + zeros + `, 31337, %[2]d)`,
			`INSERT INTO journal (kind, idem_key, payload_hash, chain_id, reverses) VALUES ('reversal', 'r2', ` + zeros + `, 31337, %[2]d)`,
		}, "journal_reverses_key"},
		{"a reversal naming no journal", []string{`INSERT INTO journal (kind, idem_key, payload_hash, chain_id) VALUES ('reversal', 'r3', ` + zeros + `, 31337)`}, "violates check constraint"},
	} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range c.stmts {
			if strings.Contains(stmt, "%[") {
				stmt = fmt.Sprintf(stmt, wallet, booked.JournalID)
			}
			if _, err = tx.Exec(ctx, stmt); err != nil {
				break
			}
		}
		if err == nil {
			err = tx.Commit(ctx)
		} else {
			_ = tx.Rollback(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
	var journals, entries int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM journal), (SELECT count(*) FROM entry)`).Scan(&journals, &entries); err != nil || journals != 1 || entries != 4 {
		t.Errorf("after the refused writes: %d journals and %d entries (%v), want the 1 and 4 booked", journals, entries, err)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != -1021 {
		t.Errorf("the wallet's balance moved to %s", got)
	}
}

// Many writers posting to one hot wallet lose no update: its balance is
// every journal's amount.
func TestConcurrentPostingsToOneHotWallet(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	const writers, each = 32, 25
	var wg sync.WaitGroup
	errors := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				counterparty := common.BigToAddress(big.NewInt(int64(1000 + w*each + i)))
				if _, err := s.Post(context.Background(), transfer(fmt.Sprintf("hot-%d-%d", w, i), hot, counterparty, 7, 1)); err != nil {
					errors <- err
				}
			}
		})
	}
	wg.Wait()
	close(errors)
	for err := range errors {
		t.Errorf("post: %v", err)
	}
	if got, want := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)), int64(-8*writers*each); got.Int64() != want {
		t.Errorf("hot wallet balance %s, want %d", got, want)
	}
	var version int64
	// The version counts the statements that moved the balance: postings
	// that shared a transaction moved it once.
	if err := pool.QueryRow(context.Background(), `SELECT version FROM balance JOIN account USING (account_id) WHERE kind = 'wallet'`).Scan(&version); err != nil || version < 1 || version > writers*each {
		t.Errorf("hot wallet balance version %d (%v), want 1 to %d", version, err, writers*each)
	}
}

// A seeded random workload against an in-memory model: 6,000 operations
// from four concurrent writers, journals of two to four legs over a few
// accounts and two assets, with replays, key conflicts, bad journals and
// reversals mixed in. The books must equal the model exactly, and
// conservation must hold.
func TestRandomWorkloadMatchesTheModel(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	var accounts []ledger.AccountKey
	for _, asset := range []string{ledger.Native, token} {
		for _, kind := range []ledger.AccountKind{ledger.Wallet, ledger.Counterparty, ledger.FeeExpense, ledger.Suspense} {
			for a := range 3 {
				accounts = append(accounts, acct(kind, asset, common.BigToAddress(big.NewInt(int64(a+1)))))
			}
		}
	}
	var mu sync.Mutex
	model := map[ledger.AccountKey]*big.Int{}
	apply := func(j *ledger.Journal) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range j.Legs {
			if model[l.Account] == nil {
				model[l.Account] = new(big.Int)
			}
			model[l.Account].Add(model[l.Account], l.Amount)
		}
	}
	// Four writers at once, 1,500 operations each, seeded: postings of 2
	// and 4 legs of every size, replays, other facts under booked keys,
	// unbalanced journals, and reversals (each journal reversed once).
	const writers, ops = 4, 1500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(7, uint64(11+w)))
			type booked struct {
				id       int64
				j        *ledger.Journal
				reversed bool
			}
			var posted []*booked
			for i := range ops {
				switch r := rng.IntN(12); {
				case r == 0 && len(posted) > 0: // a replay
					b := posted[rng.IntN(len(posted))]
					if p, err := s.Post(ctx, b.j); err != nil || p.Created || p.JournalID != b.id {
						t.Errorf("replay of %s: %+v %v", b.j.Key, p, err)
						return
					}
				case r == 1 && len(posted) > 0: // another fact under a booked key
					j := *posted[rng.IntN(len(posted))].j
					j.Legs = append([]ledger.Leg(nil), j.Legs...)
					step := big.NewInt(1) // one wei more, or less where that would leave the range
					if j.Legs[1].Amount.Cmp(ledger.MaxAmount) == 0 {
						step.Neg(step)
					}
					j.Legs[0].Amount, j.Legs[1].Amount = new(big.Int).Sub(j.Legs[0].Amount, step), new(big.Int).Add(j.Legs[1].Amount, step)
					if _, err := s.Post(ctx, &j); !errs.Is(err, errs.Conflict) {
						t.Errorf("conflict under %s: %v", j.Key, err)
						return
					}
				case r == 2 && len(posted) > 0: // a reversal, the first or a replay of it
					b := posted[rng.IntN(len(posted))]
					rev := booking.Reverse(b.id, b.j)
					p, err := s.Post(ctx, rev)
					if err != nil || p.Created == b.reversed {
						t.Errorf("reversal of %s (reversed before: %v): %+v %v", b.j.Key, b.reversed, p, err)
						return
					}
					if !b.reversed {
						b.reversed = true
						apply(rev)
					}
				default:
					asset := []string{ledger.Native, token}[rng.IntN(2)]
					var pool []ledger.AccountKey
					for _, a := range accounts {
						if a.Asset == asset {
							pool = append(pool, a)
						}
					}
					j := &ledger.Journal{Kind: ledger.Deposit, Key: fmt.Sprintf("op-%d-%d", w, i), ChainID: chain}
					for range 1 + rng.IntN(2) { // one or two pairs: journals of 2 or 4 legs
						raw := make([]byte, 32)
						for b := range raw {
							raw[b] = byte(rng.Uint32())
						}
						amount := new(big.Int).SetBytes(raw)
						amount.Rsh(amount, uint(rng.IntN(257))) // from 0 to 2^256 - 1, every size
						if amount.Sign() == 0 {
							amount.SetInt64(1)
						}
						from, to := pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
						j.Legs = append(j.Legs, ledger.Leg{Account: from, Amount: new(big.Int).Neg(amount)}, ledger.Leg{Account: to, Amount: amount})
					}
					bad := rng.IntN(20) == 0
					if bad {
						j.Legs[0].Amount = new(big.Int).Add(j.Legs[0].Amount, big.NewInt(1))
					}
					p, err := s.Post(ctx, j)
					if bad {
						if !errs.Is(err, errs.Invalid) {
							t.Errorf("unbalanced journal %s: %v", j.Key, err)
							return
						}
						continue
					}
					if err != nil {
						t.Errorf("post %s: %v", j.Key, err)
						return
					}
					posted = append(posted, &booked{id: p.JournalID, j: j})
					apply(j)
				}
			}
		})
	}
	wg.Wait()
	for k, want := range model {
		if got := balance(t, s, k); got.Cmp(want) != 0 {
			t.Errorf("%s: books %s, model %s", k, got, want)
		}
	}
}

// Postings gathered into one transaction are each answered as if posted
// alone: a replay inside the batch finds the first, another fact under a
// key is a conflict, and a journal the database refuses (a reversal of a
// journal that does not exist) fails alone, the rest booked.
func TestPostingsShareATransaction(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	before, err := s.Post(ctx, transfer("before", hot, bob, 5, 1))
	if err != nil {
		t.Fatal(err)
	}
	orphan := transfer("orphan", hot, bob, 5, 1)
	orphan.Kind, orphan.Reverses = ledger.Reversal, 1<<40
	journals := []*ledger.Journal{
		transfer("a", hot, bob, 10, 1),
		transfer("before", hot, bob, 5, 1), // booked before: a replay
		transfer("a", hot, bob, 10, 1),     // a replay inside the batch
		transfer("a", hot, bob, 11, 1),     // another fact under the key
		transfer("b", hot, bob, 20, 2),
	}
	type outcome struct {
		posted ledger.Posted
		err    error
	}
	run := func(js []*ledger.Journal) []outcome {
		queued, release := postgres.HoldPosts(s)
		out := make([]outcome, len(js))
		done := make(chan struct{}, len(js))
		for i, j := range js {
			go func() {
				p, err := s.Post(ctx, j)
				out[i] = outcome{p, err}
				done <- struct{}{}
			}()
			waitQueued(t, queued, i+1) // one at a time: the batch keeps this order
		}
		release()
		for range js {
			<-done
		}
		return out
	}
	out := run(journals)
	if o := out[0]; o.err != nil || !o.posted.Created {
		t.Errorf("a: %+v %v", o.posted, o.err)
	}
	if o := out[1]; o.err != nil || o.posted.Created || o.posted.JournalID != before.JournalID {
		t.Errorf("the replay of an earlier journal: %+v %v, want journal %d", o.posted, o.err, before.JournalID)
	}
	if o := out[2]; o.err != nil || o.posted.Created || o.posted.JournalID != out[0].posted.JournalID {
		t.Errorf("the replay inside the batch: %+v %v, want journal %d", o.posted, o.err, out[0].posted.JournalID)
	}
	if o := out[3]; !errs.Is(o.err, errs.Conflict) {
		t.Errorf("another fact under a: %v, want a conflict", o.err)
	}
	if o := out[4]; o.err != nil || !o.posted.Created {
		t.Errorf("b: %+v %v", o.posted, o.err)
	}

	out = run([]*ledger.Journal{transfer("c", hot, bob, 30, 3), orphan, transfer("d", hot, bob, 40, 4)})
	if out[0].err != nil || out[2].err != nil || !out[0].posted.Created || !out[2].posted.Created {
		t.Errorf("good journals beside a refused one: %+v, %+v", out[0], out[2])
	}
	if !errs.Is(out[1].err, errs.Invalid) {
		t.Errorf("a reversal of no journal: %v, want invalid", out[1].err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM journal`).Scan(&n); err != nil || n != 5 {
		t.Errorf("%d journals (%v), want before, a, b, c and d", n, err)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != -(6 + 11 + 22 + 33 + 44) {
		t.Errorf("hot wallet %s, want -116", got)
	}
}

// waitQueued waits until n postings are queued.
func waitQueued(t *testing.T, queued func() int, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d postings queued, want %d", queued(), n)
		}
		<-tick.C
	}
}
