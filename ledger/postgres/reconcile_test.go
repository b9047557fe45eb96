package postgres_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/pg"
)

var carol = common.HexToAddress("0x00000000000000000000000000000000000ca201")

// openWallet registers addr as a wallet of chain opened at block number.
func openWallet(t *testing.T, pool *pgxpool.Pool, addr common.Address, number int64) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `
		INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', $3, $4)`,
		chain, addr.Bytes(), number, common.BigToHash(big.NewInt(number)).Bytes()); err != nil {
		t.Fatal(err)
	}
}

// inReconciliation runs fn in a reconciliation of chain and fails t on an
// error.
func inReconciliation(t *testing.T, s *postgres.Store, fn func(ledger.ReconcileTx) error) {
	t.Helper()
	if err := s.Reconcile(context.Background(), chain, fn); err != nil {
		t.Fatal(err)
	}
}

// Holdings are, for the wallets opened by a block, the sum of each wallet
// and suspense account's entries in journals at or before it, whatever
// was booked after it or without a block: checked against that sum,
// computed literally, at every block of a random history.
func TestHoldingsAreTheBooksAsOfABlock(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	openWallet(t, pool, hot, 0)
	openWallet(t, pool, bob, 0)
	openWallet(t, pool, carol, 10) // not yet a wallet before block 10
	rng := rand.New(rand.NewPCG(7, 11))
	wallets, assets := []common.Address{hot, bob, carol}, []string{ledger.Native, token}
	for i := range 200 {
		w, asset := wallets[rng.IntN(len(wallets))], assets[rng.IntN(len(assets))]
		other := acct(ledger.Counterparty, asset, bob)
		if rng.IntN(4) == 0 {
			other = acct(ledger.Suspense, asset, w)
		}
		amount := rng.Int64N(2001) - 1000
		if amount == 0 {
			amount = 1
		}
		j := &ledger.Journal{Kind: ledger.Confirmed, Key: fmt.Sprintf("j-%d", i), ChainID: chain,
			Legs: []ledger.Leg{leg(acct(ledger.Wallet, asset, w), amount), leg(other, -amount)}}
		if rng.IntN(10) != 0 { // a tenth have no block
			n := uint64(rng.IntN(20))
			j.Block = &ledger.Block{Number: n, Hash: common.BigToHash(big.NewInt(int64(n)))}
		}
		if _, err := s.Post(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	// Another chain's journals count for nothing here.
	if _, err := s.Post(ctx, &ledger.Journal{Kind: ledger.Deposit, Key: "elsewhere", ChainID: chain + 1, Block: &ledger.Block{Number: 1},
		Legs: []ledger.Leg{{Account: ledger.AccountKey{ChainID: chain + 1, Asset: ledger.Native, Kind: ledger.Wallet, Address: hot}, Amount: big.NewInt(9)},
			{Account: ledger.AccountKey{ChainID: chain + 1, Asset: ledger.Native, Kind: ledger.DepositSource, Address: bob}, Amount: big.NewInt(-9)}}}); err != nil {
		t.Fatal(err)
	}

	for n := range uint64(21) {
		var got []ledger.Holding
		inReconciliation(t, s, func(r ledger.ReconcileTx) (err error) {
			got, err = r.Holdings(ctx, n)
			return err
		})
		rows, err := pool.Query(ctx, `
			SELECT a.address, a.asset, a.kind, sum(e.amount) FILTER (WHERE j.block_number <= $2)
			FROM account a JOIN entry e USING (account_id) JOIN journal j USING (journal_id)
			JOIN wallet w ON w.chain_id = a.chain_id AND w.address = a.address AND w.opened_block <= $2
			WHERE a.chain_id = $1 AND a.kind IN ('wallet', 'suspense')
			GROUP BY 1, 2, 3`, chain, int64(n))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for rows.Next() {
			var addr []byte
			var asset, kind string
			var sum *string
			if err := rows.Scan(&addr, &asset, &kind, &sum); err != nil {
				t.Fatal(err)
			}
			if sum != nil && *sum != "0" {
				want[fmt.Sprintf("%x/%s/%s", addr, asset, kind)] = *sum
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		have := map[string]string{}
		for _, h := range got {
			for kind, v := range map[string]*big.Int{"wallet": h.Wallet, "suspense": h.Suspense} {
				if v.Sign() != 0 {
					have[fmt.Sprintf("%x/%s/%s", h.Address.Bytes(), h.Asset, kind)] = v.String()
				}
			}
			if h.Address == carol && n < 10 {
				t.Errorf("block %d: carol, opened at 10, is listed", n)
			}
		}
		if fmt.Sprint(have) != fmt.Sprint(want) {
			t.Errorf("block %d: holdings %v, want the literal sums %v", n, have, want)
		}
	}
}

// Unbooked lists the wallets' transactions in the range, after their
// opening, that no journal books, young or not by the database's clock.
func TestUnbookedListsWhatTheFeedHasNotBooked(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	openWallet(t, pool, hot, 5)
	hash := func(i int64) common.Hash { return common.BigToHash(big.NewInt(1000 + i)) }
	block := func(n int64) common.Hash { return common.BigToHash(big.NewInt(n)) }
	// Transaction i is hash(i), in block n.
	for i, tx := range []struct {
		chain, n, age int64
		sender        common.Address
	}{
		{chain, 3, 0, hot},        // 0: in the opening balance
		{chain, 7, 0, hot},        // 1: booked below
		{chain, 8, 0, hot},        // 2: young
		{chain, 9, 3600, hot},     // 3: an hour old
		{chain, 12, 3600, hot},    // 4: after the range
		{chain, 8, 3600, bob},     // 5: not a wallet
		{chain + 1, 8, 3600, hot}, // 6: another chain
	} {
		if _, err := pool.Exec(ctx, `
			INSERT INTO wallet_tx (chain_id, tx_hash, block_hash, block_number, sender, seen_at)
			VALUES ($1, $2, $3, $4, $5, now() - make_interval(secs => $6))`,
			tx.chain, hash(int64(i)).Bytes(), block(tx.n).Bytes(), tx.n, tx.sender.Bytes(), float64(tx.age)); err != nil {
			t.Fatal(err)
		}
	}
	booked := hash(1)
	if _, err := s.Post(ctx, &ledger.Journal{Kind: ledger.Confirmed, Key: ledger.TxKey(chain, booked, block(7)), ChainID: chain, TxHash: &booked,
		Block: &ledger.Block{Number: 7, Hash: block(7)}, Status: "success", Legs: []ledger.Leg{leg(acct(ledger.Wallet, ledger.Native, hot), -1), leg(acct(ledger.FeeExpense, ledger.Native, hot), 1)}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, upTo uint64
		grace      time.Duration
		want       []ledger.UnbookedTx
	}{
		{0, 10, 10 * time.Minute, []ledger.UnbookedTx{{Sender: hot, Hash: hash(2), Block: 8, Young: true}, {Sender: hot, Hash: hash(3), Block: 9, Young: false}}},
		{9, 10, 10 * time.Minute, []ledger.UnbookedTx{{Sender: hot, Hash: hash(3), Block: 9, Young: false}}},
		{0, 10, 2 * time.Hour, []ledger.UnbookedTx{{Sender: hot, Hash: hash(2), Block: 8, Young: true}, {Sender: hot, Hash: hash(3), Block: 9, Young: true}}},
		{0, 10, -1, []ledger.UnbookedTx{{Sender: hot, Hash: hash(2), Block: 8, Young: false}, {Sender: hot, Hash: hash(3), Block: 9, Young: false}}},
		{10, 11, 0, nil},
	} {
		var got []ledger.UnbookedTx
		inReconciliation(t, s, func(r ledger.ReconcileTx) (err error) {
			got, err = r.Unbooked(ctx, c.from, c.upTo, c.grace)
			return err
		})
		if !slices.Equal(got, c.want) {
			t.Errorf("blocks %d to %d, grace %s: %+v, want %+v", c.from, c.upTo, c.grace, got, c.want)
		}
	}
}

// A stored report reads back to the wei and is never changed; old runs
// may be deleted with their items, and their journals stay.
func TestAReportIsKeptAsStored(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	huge := new(big.Int).Set(ledger.MaxAmount)
	owed := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 300)) // a ledger sum beyond one amount's range
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	run := &ledger.ReconciliationRun{ChainID: chain, Block: ledger.Block{Number: 42, Hash: common.HexToHash("0x42")}, Trigger: ledger.TriggerRequest,
		StartedAt: at, FinishedAt: at.Add(time.Second), Status: ledger.RunIncomplete, Problem: "1 deferred", Differences: 1, Deferred: 1,
		Items: []ledger.ReconciliationItem{
			{Address: bob, Asset: ledger.Native, Ledger: owed, Chain: huge, Difference: new(big.Int).Sub(huge, owed), Cause: "inbound", Negative: true},
			{Address: hot, Asset: token, Ledger: big.NewInt(5), Chain: big.NewInt(5), Pending: []common.Hash{common.HexToHash("0x1"), common.HexToHash("0x2")}, Cause: "deferred"},
		}}
	inReconciliation(t, s, func(r ledger.ReconcileTx) (err error) {
		if run.ID, err = r.NewRunID(ctx); err != nil {
			return err
		}
		return r.Save(ctx, run)
	})
	got, err := s.ReconciliationRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	got.StartedAt, got.FinishedAt = got.StartedAt.UTC(), got.FinishedAt.UTC()
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", run) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, run)
	}
	for _, stmt := range []string{`UPDATE reconciliation_run SET problem = 'none'`, `UPDATE reconciliation_item SET cause = 'none'`} {
		if _, err := pool.Exec(ctx, stmt); pg.Code(err) != "23001" {
			t.Errorf("%s: %v, want refused", stmt, err)
		}
	}
	if _, err := pool.Exec(ctx, `DELETE FROM reconciliation_run WHERE run_id = $1`, run.ID); err != nil {
		t.Errorf("delete an old run: %v", err)
	}
	var items int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_item`).Scan(&items); err != nil || items != 0 {
		t.Errorf("%d items left of a deleted run (%v)", items, err)
	}
}
