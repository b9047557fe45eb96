package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/pgtest"
)

// blockHash is the hash the tests give block n.
func blockHash(n uint64) common.Hash {
	return sha256.Sum256(binary.BigEndian.AppendUint64([]byte("block"), n))
}

// inBlock sets j's transaction and block: the transaction is named after
// j's key.
func inBlock(j *ledger.Journal, n uint64) *ledger.Journal {
	tx := common.Hash(sha256.Sum256([]byte(j.Key)))
	j.TxHash, j.Block = &tx, &ledger.Block{Number: n, Hash: blockHash(n)}
	return j
}

// reversal is the journal that undoes j, booked as id: its legs negated,
// in j's block.
func reversal(id int64, j *ledger.Journal) *ledger.Journal {
	legs := make([]ledger.Leg, len(j.Legs))
	for i, l := range j.Legs {
		legs[i] = ledger.Leg{Account: l.Account, Amount: new(big.Int).Neg(l.Amount)}
	}
	return &ledger.Journal{Kind: ledger.Reversal, Key: ledger.ReversalKey(id), ChainID: j.ChainID, TxHash: j.TxHash,
		Block: j.Block, Status: j.Status, Reverses: id, Legs: legs}
}

func post(t testing.TB, s *postgres.Store, j *ledger.Journal) int64 {
	t.Helper()
	p, err := s.Post(context.Background(), j)
	if err != nil {
		t.Fatalf("post %s: %v", j.Key, err)
	}
	return p.JournalID
}

// seed books journals journals straight into the tables, fast: each moves
// pairs amounts from the native wallet of hot to one of counterparties
// counterparty accounts (addresses 0x…01 up), in blocks from firstBlock
// on, perBlock journals a block. Their keys start with prefix. The
// entries of each block are one statement, as a batch of postings books
// them: a movement, a balance version, of each account they move. A
// transaction books 50 blocks: more would make chains of versions of each
// balance row, which no one can prune before it commits.
func seed(t testing.TB, pool *pgxpool.Pool, prefix string, journals, pairs, counterparties, firstBlock, perBlock int) {
	t.Helper()
	ctx := context.Background()
	var wallet int64
	var others []int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
			INSERT INTO account (chain_id, asset, kind, address) VALUES ($1, 'native', 'wallet', $2)
			ON CONFLICT DO NOTHING`, chain, hot.Bytes()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO account (chain_id, asset, kind, address)
			SELECT $1, 'native', 'counterparty', decode(lpad(to_hex(i), 40, '0'), 'hex') FROM generate_series(1, $2::int) i
			ON CONFLICT DO NOTHING`, chain, counterparties); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `
			SELECT (SELECT account_id FROM account WHERE chain_id = $1 AND kind = 'wallet' AND asset = 'native' AND address = $2),
				(SELECT array_agg(account_id ORDER BY address) FROM account
				WHERE chain_id = $1 AND kind = 'counterparty' AND asset = 'native'
					AND address IN (SELECT decode(lpad(to_hex(i), 40, '0'), 'hex') FROM generate_series(1, $3::int) i))`,
			chain, hot.Bytes(), counterparties).Scan(&wallet, &others)
	})
	const blocksATx = 50
	for first := 0; err == nil && first < journals; first += blocksATx * perBlock {
		last := min(first+blocksATx*perBlock, journals) - 1
		var b pgx.Batch
		b.Queue(`
			INSERT INTO journal (kind, idem_key, payload_hash, chain_id, tx_hash, block_number, block_hash, status)
			SELECT 'confirmed', $1 || i, sha256(($1 || i)::bytea), $2, sha256(('tx' || $1 || i)::bytea), n, sha256(('block' || n)::bytea), 'success'
			FROM generate_series($3::int, $4::int) i, LATERAL (SELECT $5::bigint + i / $6::int AS n) b`,
			prefix, chain, first, last, firstBlock, perBlock)
		for n := firstBlock + first/perBlock; n <= firstBlock+last/perBlock; n++ {
			b.Queue(`
				INSERT INTO entry (journal_id, account_id, amount)
				SELECT j.journal_id, leg.account_id, leg.amount
				FROM journal j CROSS JOIN generate_series(0, $4::int - 1) k,
					LATERAL (SELECT (j.journal_id * $4::int + k) % cardinality($3::bigint[]) AS c) pick,
					LATERAL (VALUES ($2::bigint, -(pick.c + 1)), (($3::bigint[])[pick.c + 1], pick.c + 1)) AS leg(account_id, amount)
				WHERE j.chain_id = $1 AND j.block_number = $5 AND j.idem_key LIKE $6 || '%'
				ORDER BY j.journal_id, k`, chain, wallet, others, pairs, n, prefix)
		}
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, &b).Close() })
	}
	if err != nil {
		t.Fatalf("seed %d journals: %v", journals, err)
	}
}

func accountID(t testing.TB, pool *pgxpool.Pool, k ledger.AccountKey) int64 {
	t.Helper()
	var id int64
	err := pool.QueryRow(context.Background(), `SELECT account_id FROM account WHERE chain_id = $1 AND asset = $2 AND kind = $3 AND address = $4`,
		int64(k.ChainID), k.Asset, string(k.Kind), k.Address.Bytes()).Scan(&id)
	if err != nil {
		t.Fatalf("account %s: %v", k, err)
	}
	return id
}

// TestBalancesAsOfABlock reads balances as of blocks between, before and
// after the journals, backwards from the current balance while few
// journals follow the block and forwards over the journals up to it once
// many do, with a reversal and a journal without a block.
func TestBalancesAsOfABlock(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	wallet, fee, cp := acct(ledger.Wallet, ledger.Native, hot), acct(ledger.FeeExpense, ledger.Native, hot), acct(ledger.Counterparty, ledger.Native, bob)
	first := post(t, s, inBlock(transfer("tx-5", hot, bob, 100, 1), 5))
	post(t, s, inBlock(transfer("tx-9", hot, bob, 50, 2), 9))
	// A journal without a block counts in the current balance, at no block.
	post(t, s, transfer("no-block", hot, bob, 7, 1))
	id := accountID(t, pool, wallet)

	check := func(when string) {
		t.Helper()
		for at, want := range map[uint64][3]int64{ // wallet, fee expense, counterparty
			0: {0, 0, 0}, 4: {0, 0, 0}, 5: {-101, 1, 100}, 7: {-101, 1, 100}, 9: {-153, 3, 150}, 1 << 62: {-153, 3, 150},
		} {
			got, err := s.Accounts(ctx, ledger.AccountFilter{ChainID: chain, AtBlock: &at, Limit: 100})
			if err != nil {
				t.Fatalf("%s: accounts at %d: %v", when, at, err)
			}
			byKey := map[ledger.AccountKey]string{}
			for _, a := range got {
				if a.AtBlock == nil || *a.AtBlock != at || a.Version != 0 {
					t.Errorf("%s: at %d: %+v, want as of the block and no version", when, at, a)
				}
				byKey[a.AccountKey] = a.Balance.String()
			}
			for i, k := range []ledger.AccountKey{wallet, fee, cp} {
				if byKey[k] != fmt.Sprint(want[i]) {
					t.Errorf("%s: %s at block %d: %s, want %d", when, k, at, byKey[k], want[i])
				}
			}
			one, err := s.Account(ctx, id, &at)
			if err != nil || one.Balance.Int64() != want[0] || one.ID != id || one.AccountKey != wallet {
				t.Errorf("%s: account %d at %d: %+v %v, want %d", when, id, at, one, err, want[0])
			}
		}
	}
	check("few journals after the blocks")

	// Undone: the reversal carries the block of the journal it reverses.
	post(t, s, reversal(first, inBlock(transfer("tx-5", hot, bob, 100, 1), 5)))
	// Enough journals in later blocks that balances as of block 99 and
	// before are summed forwards.
	seed(t, pool, "later-", 1200, 1, 3, 100, 1)
	for at, want := range map[uint64]int64{4: 0, 5: 0, 9: -52, 99: -52} {
		for name, read := range map[string]func() (ledger.AccountBalance, error){
			"Account": func() (ledger.AccountBalance, error) { return s.Account(ctx, id, &at) },
			"Accounts": func() (ledger.AccountBalance, error) {
				return onlyAccount(s.Accounts(ctx, ledger.AccountFilter{Address: &hot, Kind: ledger.Wallet, AtBlock: &at, Limit: 2}))
			},
		} {
			if got, err := read(); err != nil || got.Balance.Int64() != want {
				t.Errorf("%s: the wallet at block %d after the reversal: %v %v, want %d", name, at, got.Balance, err, want)
			}
		}
	}
	cur, err := s.Account(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := balance(t, s, wallet); cur.Balance.Cmp(want) != 0 || cur.Version == 0 || cur.AtBlock != nil {
		t.Errorf("current: %+v, want balance %s with a version", cur, want)
	}
	if _, err := s.Account(ctx, id+1_000_000, nil); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown account: %v, want not found", err)
	}
	if _, err := s.Account(ctx, id+1_000_000, new(uint64(5))); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown account at a block: %v, want not found", err)
	}
}

func onlyAccount(as []ledger.AccountBalance, err error) (ledger.AccountBalance, error) {
	if err == nil && len(as) != 1 {
		err = fmt.Errorf("%d accounts, want 1", len(as))
	}
	if err != nil {
		return ledger.AccountBalance{Balance: new(big.Int)}, err
	}
	return as[0], nil
}

func TestAccountFiltersAndPages(t *testing.T) {
	t.Parallel()
	s, _ := books(t)
	ctx := context.Background()
	post(t, s, inBlock(transfer("tx-1", hot, bob, 10, 1), 1))
	tok := &ledger.Journal{Kind: ledger.Deposit, Key: "deposit-1", ChainID: chain, Legs: []ledger.Leg{
		leg(acct(ledger.Wallet, token, hot), 5), leg(acct(ledger.DepositSource, token, bob), -5)}}
	post(t, s, inBlock(tok, 2))
	other := inBlock(transfer("tx-other-chain", hot, bob, 3, 1), 3)
	other.ChainID = 1
	for i := range other.Legs {
		other.Legs[i].Account.ChainID = 1
	}
	post(t, s, other)

	count := func(f ledger.AccountFilter) int {
		t.Helper()
		f.Limit = 100
		got, err := s.Accounts(ctx, f)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		for _, a := range got {
			if (f.ChainID != 0 && a.ChainID != f.ChainID) || (f.Address != nil && a.Address != *f.Address) ||
				(f.Kind != "" && a.Kind != f.Kind) || (f.Asset != "" && a.Asset != f.Asset) {
				t.Errorf("%+v answered %+v", f, a)
			}
		}
		return len(got)
	}
	for _, c := range []struct {
		f    ledger.AccountFilter
		want int
	}{
		{ledger.AccountFilter{}, 8},
		{ledger.AccountFilter{ChainID: chain}, 5},
		{ledger.AccountFilter{ChainID: chain, Address: &hot}, 3},
		{ledger.AccountFilter{Address: &hot}, 5},
		{ledger.AccountFilter{Address: &bob, Kind: ledger.DepositSource}, 1},
		{ledger.AccountFilter{Asset: token}, 2},
		{ledger.AccountFilter{ChainID: 1, Kind: ledger.Wallet}, 1},
		{ledger.AccountFilter{ChainID: 5}, 0},
		{ledger.AccountFilter{Address: &hot, AtBlock: new(uint64(1))}, 5},
	} {
		if got := count(c.f); got != c.want {
			t.Errorf("%+v: %d accounts, want %d", c.f, got, c.want)
		}
	}

	var all []ledger.AccountBalance
	for f := (ledger.AccountFilter{Limit: 2}); ; {
		page, err := s.Accounts(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		f.After = page[len(page)-1].ID
	}
	for i := 1; i < len(all); i++ {
		if all[i].ID <= all[i-1].ID {
			t.Errorf("page order: %d after %d", all[i].ID, all[i-1].ID)
		}
	}
	if len(all) != 8 {
		t.Errorf("paged through %d accounts, want 8", len(all))
	}
	if _, err := s.Accounts(ctx, ledger.AccountFilter{Limit: 0}); !errs.Is(err, errs.Invalid) {
		t.Errorf("limit 0: %v, want invalid", err)
	}
}

// TestStatementPagesCarryTheRunningBalance reads a statement in pages,
// each starting from where the previous ended: the running balance goes
// entry by entry to the account's balance, and a reversal is among the
// entries.
func TestStatementPagesCarryTheRunningBalance(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	wallet := acct(ledger.Wallet, ledger.Native, hot)
	var reversed int64
	var undone *ledger.Journal
	for i := range 23 {
		j := inBlock(transfer(fmt.Sprintf("tx-%d", i), hot, bob, int64(100+i), int64(1+i%3)), uint64(10+i))
		id := post(t, s, j)
		if i == 11 {
			reversed, undone = id, j
		}
	}
	rev := post(t, s, reversal(reversed, undone))
	id := accountID(t, pool, wallet)

	var lines []ledger.StatementLine
	pos := ledger.StatementPosition{}
	pages := 0
	for {
		page, err := s.Statement(ctx, id, pos, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		pages++
		lines = append(lines, page...)
		pos = positionAfter(page)
	}
	if len(lines) != 2*24 || pages != 10 {
		t.Fatalf("%d entries in %d pages, want 48 in 10", len(lines), pages)
	}
	running := new(big.Int)
	sawReversal := 0
	for i, l := range lines {
		running.Add(running, l.Amount)
		if l.Balance.Cmp(running) != 0 {
			t.Errorf("entry %d (%d): running balance %s, want %s", i, l.EntryID, l.Balance, running)
		}
		if i > 0 && l.EntryID <= lines[i-1].EntryID {
			t.Errorf("entry %d after entry %d", l.EntryID, lines[i-1].EntryID)
		}
		if l.Block == nil || l.TxHash == nil || l.Block.Hash != blockHash(l.Block.Number) {
			t.Errorf("entry %d: block %+v, tx %v", l.EntryID, l.Block, l.TxHash)
		}
		if l.Kind == ledger.Reversal {
			sawReversal++
			if l.JournalID != rev || l.Reverses != reversed || l.Block.Number != 21 {
				t.Errorf("reversal entry %+v, want journal %d reversing %d in block 21", l, rev, reversed)
			}
		}
	}
	if sawReversal != 2 {
		t.Errorf("%d reversal entries, want the wallet's 2", sawReversal)
	}
	if want := balance(t, s, wallet); running.Cmp(want) != 0 {
		t.Errorf("the statement ends at %s, the balance is %s", running, want)
	}
	if _, err := s.Statement(ctx, id+1_000_000, ledger.StatementPosition{}, 5); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown account's statement: %v, want not found", err)
	}
	for _, pos := range []ledger.StatementPosition{{EntryID: lines[3].EntryID, Balance: lines[3].Balance}, {Version: -1}, {Version: 1, EntryID: -1}} {
		if _, err := s.Statement(ctx, id, pos, 5); !errs.Is(err, errs.Invalid) {
			t.Errorf("a statement after %+v: %v, want invalid", pos, err)
		}
	}
}

func TestJournalsReadBack(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	j := inBlock(transfer("tx-1", hot, bob, 1000, 21), 7)
	id := post(t, s, j)
	rev := post(t, s, reversal(id, j))
	dep := &ledger.Journal{Kind: ledger.Deposit, Key: "deposit-1", ChainID: chain, Memo: []byte(`{"from": "scanner"}`), Legs: []ledger.Leg{
		leg(acct(ledger.Wallet, token, hot), 5), leg(acct(ledger.DepositSource, token, bob), -5)}}
	depID := post(t, s, dep)

	got, err := s.JournalByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.Kind != ledger.Confirmed || got.ChainID != chain || *got.TxHash != *j.TxHash || *got.Block != *j.Block ||
		got.Status != "success" || got.Reverses != 0 || got.ReversedBy != rev || string(got.Memo) != "{}" || got.CreatedAt.IsZero() {
		t.Errorf("journal %d: %+v", id, got)
	}
	if len(got.Entries) != len(j.Legs) {
		t.Fatalf("%d entries, want %d", len(got.Entries), len(j.Legs))
	}
	for i, e := range got.Entries {
		if e.Account != j.Legs[i].Account || e.Amount.Cmp(j.Legs[i].Amount) != 0 || e.AccountID != accountID(t, pool, e.Account) {
			t.Errorf("entry %d: %+v, want %+v", i, e, j.Legs[i])
		}
	}
	r, err := s.JournalByID(ctx, rev)
	if err != nil || r.Kind != ledger.Reversal || r.Reverses != id || r.ReversedBy != 0 || *r.Block != *j.Block || len(r.Entries) != 4 ||
		r.Entries[0].Amount.Cmp(new(big.Int).Neg(j.Legs[0].Amount)) != 0 {
		t.Errorf("reversal %d: %+v %v", rev, r, err)
	}
	d, err := s.JournalByID(ctx, depID)
	if err != nil || d.TxHash != nil || d.Block != nil || d.Status != "" || string(d.Memo) != `{"from": "scanner"}` {
		t.Errorf("deposit %d: %+v %v", depID, d, err)
	}
	if _, err := s.JournalByID(ctx, depID+1000); !errs.Is(err, errs.NotFound) {
		t.Errorf("an unknown journal: %v, want not found", err)
	}

	ids := func(f ledger.JournalFilter) []int64 {
		t.Helper()
		if f.Limit == 0 {
			f.Limit = 100
		}
		js, err := s.Journals(ctx, f)
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		out := []int64{}
		for _, j := range js {
			if j.Entries != nil {
				t.Errorf("the list read journal %d's entries", j.ID)
			}
			out = append(out, j.ID)
		}
		return out
	}
	other := common.HexToHash("0x01")
	for _, c := range []struct {
		f    ledger.JournalFilter
		want []int64
	}{
		{ledger.JournalFilter{}, []int64{id, rev, depID}},
		{ledger.JournalFilter{ChainID: chain, TxHash: j.TxHash}, []int64{id, rev}},
		{ledger.JournalFilter{ChainID: chain, TxHash: &other}, []int64{}},
		{ledger.JournalFilter{Kind: ledger.Reversal}, []int64{rev}},
		{ledger.JournalFilter{ChainID: 1}, []int64{}},
		{ledger.JournalFilter{After: id, Limit: 1}, []int64{rev}},
		{ledger.JournalFilter{After: rev}, []int64{depID}},
	} {
		if got := ids(c.f); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
}

// TestBalancesAsOfAgreeWithTheirEntries compares balances as of blocks
// all over a history with the plain sum of each account's entries up to
// the block, so that each of the three ways of reading one is checked:
// few journals after the block, few up to it, and many either side.
func TestBalancesAsOfAgreeWithTheirEntries(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	seed(t, pool, "early-", 1500, 2, 3, 1, 10) // blocks 1 to 150
	undone := inBlock(transfer("tx-50", hot, bob, 1000, 21), 50)
	post(t, s, reversal(post(t, s, undone), undone))
	post(t, s, inBlock(transfer("tx-151", hot, bob, 77, 3), 151))
	post(t, s, transfer("no-block", hot, bob, 5, 1))
	seed(t, pool, "late-", 1500, 2, 3, 200, 10) // blocks 200 to 349

	all, err := s.Accounts(ctx, ledger.AccountFilter{Limit: 100})
	if err != nil || len(all) != 6 {
		t.Fatalf("%d accounts %v, want 6", len(all), err)
	}
	for _, at := range []uint64{0, 1, 40, 50, 99, 100, 151, 160, 199, 200, 250, 340, 349, 10_000} {
		got, err := s.Accounts(ctx, ledger.AccountFilter{AtBlock: &at, Limit: 100})
		if err != nil || len(got) != len(all) {
			t.Fatalf("accounts at %d: %d %v", at, len(got), err)
		}
		for _, a := range got {
			var want string
			if err := pool.QueryRow(ctx, `
				SELECT coalesce(sum(e.amount), 0)::text FROM entry e JOIN journal j USING (journal_id)
				WHERE e.account_id = $1 AND j.block_number <= $2`, a.ID, int64(at)).Scan(&want); err != nil {
				t.Fatal(err)
			}
			one, err := s.Account(ctx, a.ID, &at)
			if a.Balance.String() != want || err != nil || one.Balance.String() != want {
				t.Errorf("%s at block %d: %s in the list, %s alone (%v), want %s", a.AccountKey, at, a.Balance, one.Balance, err, want)
			}
		}
	}
}

// statementFrom reads account id's statement from pos to its end, limit
// entries a page, and returns its lines and the position after them.
func statementFrom(t testing.TB, s *postgres.Store, id int64, pos ledger.StatementPosition, limit int) ([]ledger.StatementLine, ledger.StatementPosition) {
	t.Helper()
	var lines []ledger.StatementLine
	for {
		page, err := s.Statement(context.Background(), id, pos, limit)
		if err != nil {
			t.Fatalf("account %d's statement after %+v: %v", id, pos, err)
		}
		if len(page) == 0 {
			return lines, pos
		}
		lines = append(lines, page...)
		pos = positionAfter(page)
	}
}

// positionAfter is where the page after page starts.
func positionAfter(page []ledger.StatementLine) ledger.StatementPosition {
	last := page[len(page)-1]
	return ledger.StatementPosition{Version: last.Version, EntryID: last.EntryID, Balance: last.Balance}
}

// entriesByID is a page of account id's statement as it was read before
// 0007: its entries after entry after, in id order.
func entriesByID(t testing.TB, pool *pgxpool.Pool, id, after int64) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT entry_id FROM entry WHERE account_id = $1 AND entry_id > $2 ORDER BY entry_id`, id, after)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// requireWholeStatement checks that lines are account id's statement from
// its start: every entry of the account once, the running balance entry
// by entry up to the account's balance, and versions without gaps up to
// the balance's.
func requireWholeStatement(t testing.TB, s *postgres.Store, pool *pgxpool.Pool, id int64, lines []ledger.StatementLine) {
	t.Helper()
	var shown []int64
	running := new(big.Int)
	for i, l := range lines {
		shown = append(shown, l.EntryID)
		running.Add(running, l.Amount)
		if l.Balance.Cmp(running) != 0 {
			t.Errorf("account %d, line %d (entry %d): running balance %s, want %s", id, i, l.EntryID, l.Balance, running)
		}
		if i > 0 {
			prev := lines[i-1]
			if l.Version != prev.Version && l.Version != prev.Version+1 || l.Version == prev.Version && l.EntryID <= prev.EntryID {
				t.Errorf("account %d, line %d: version %d entry %d after version %d entry %d", id, i, l.Version, l.EntryID, prev.Version, prev.EntryID)
			}
		}
	}
	slices.Sort(shown)
	if want := entriesByID(t, pool, id, 0); !slices.Equal(shown, want) {
		t.Errorf("account %d's statement shows entries %v, want each of %v once", id, shown, want)
	}
	a, err := s.Account(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Balance.Cmp(running) != 0 {
		t.Errorf("account %d's statement ends at %s, its balance is %s", id, running, a.Balance)
	}
	if len(lines) > 0 && lines[len(lines)-1].Version != a.Version {
		t.Errorf("account %d's statement ends at version %d, its balance is at %d", id, lines[len(lines)-1].Version, a.Version)
	}
}

// TestStatementShowsEntriesCommittedOutOfIDOrder reads a statement
// between the commits of two postings of one account that commit out of
// entry id order: the first takes its entry ids and is held before its
// statement reaches the balance (as a batch of postings is while it
// writes), the second takes later ids and commits, a page is read, the
// first commits, and the next page is read. Paged by entry id, as before
// 0007, the statement skips the first posting's entry for good; paged by
// version, it shows every entry once.
func TestStatementShowsEntriesCommittedOutOfIDOrder(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	wallet := acct(ledger.Wallet, ledger.Native, hot)
	post(t, s, transfer("first", hot, bob, 10, 1))
	id, cp := accountID(t, pool, wallet), accountID(t, pool, acct(ledger.Counterparty, ledger.Native, bob))

	lines, pos := statementFrom(t, s, id, ledger.StatementPosition{}, 100)
	byID := entriesByID(t, pool, id, 0)

	// held waits on an advisory lock this test holds, between taking its
	// entry ids and reaching the balance.
	hold, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Release()
	var key int64
	if err := hold.QueryRow(ctx, `SELECT hashtextextended(current_schema(), 0)`).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	first, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	locked := true
	unlock := func() {
		if locked {
			locked = false
			if _, err := hold.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
				t.Error(err)
			}
		}
	}
	held := make(chan error, 1)
	waiting := false // for held
	defer func() {
		// Should the test end early: the held statement ends before its
		// transaction does (a no-op once committed).
		unlock()
		if waiting {
			<-held
		}
		_ = first.Rollback(ctx)
	}()
	var pid int32
	var journal int64
	if err := first.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := first.QueryRow(ctx, `
		INSERT INTO journal (kind, idem_key, payload_hash, chain_id) VALUES ('deposit', 'held', sha256('held'), $1)
		RETURNING journal_id`, chain).Scan(&journal); err != nil {
		t.Fatal(err)
	}
	waiting = true
	go func() {
		// The count reads every entry inserted, so the ids are taken before
		// the lock is asked for.
		_, err := first.Exec(ctx, `
			WITH e AS (INSERT INTO entry (journal_id, account_id, amount) VALUES ($1, $2, -5), ($1, $3, 5) RETURNING entry_id)
			SELECT pg_advisory_xact_lock($4) FROM (SELECT count(*) FROM e) taken`, journal, id, cp, key)
		held <- err
	}()
	waitForAdvisoryLock(t, pool, pid)

	post(t, s, transfer("second", hot, bob, 20, 2))
	page, pos := statementFrom(t, s, id, pos, 100)
	lines = append(lines, page...)
	byID = append(byID, entriesByID(t, pool, id, byID[len(byID)-1])...)

	unlock()
	waiting = false
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	page, _ = statementFrom(t, s, id, pos, 100)
	lines = append(lines, page...)
	byID = append(byID, entriesByID(t, pool, id, byID[len(byID)-1])...)

	var heldEntry int64
	if err := pool.QueryRow(ctx, `SELECT entry_id FROM entry WHERE journal_id = $1 AND account_id = $2`, journal, id).Scan(&heldEntry); err != nil {
		t.Fatal(err)
	}
	all := entriesByID(t, pool, id, 0)
	if all[len(all)-1] < heldEntry {
		t.Fatalf("the held posting's entry %d is the last of %v: the second posting took no later id", heldEntry, all)
	}
	if want := slices.DeleteFunc(slices.Clone(all), func(e int64) bool { return e == heldEntry }); !slices.Equal(byID, want) {
		t.Errorf("paged by entry id: %v, want all of %v but the held entry %d, which it skips", byID, all, heldEntry)
	}
	if len(page) != 1 || page[0].EntryID != heldEntry {
		t.Errorf("the page after the held posting committed: %+v, want its entry %d", page, heldEntry)
	}
	requireWholeStatement(t, s, pool, id, lines)
}

// waitForAdvisoryLock waits until session pid waits for an advisory lock.
func waitForAdvisoryLock(t *testing.T, pool *pgxpool.Pool, pid int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		var waiting bool
		if err := pool.QueryRow(context.Background(), `
			SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted)`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d does not wait for the advisory lock", pid)
		}
		<-tick.C
	}
}

// TestStatementReadWhilePosting pages a hot wallet's statement over and
// over while many writers post to it, their postings sharing flushes that
// commit out of entry id order: the pages show every entry once, and the
// running balance ends at the balance. So do the statements of the
// counterparties, read once the postings are done.
func TestStatementReadWhilePosting(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	const writers, each = 8, 40
	wallet := acct(ledger.Wallet, ledger.Native, hot)
	post(t, s, transfer("open", hot, bob, 1, 1))
	id := accountID(t, pool, wallet)

	var wg sync.WaitGroup
	failed := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				counterparty := common.BigToAddress(big.NewInt(int64(1 + i%5)))
				if _, err := s.Post(ctx, transfer(fmt.Sprintf("w%d-%d", w, i), hot, counterparty, int64(10+i), int64(1+w))); err != nil {
					failed <- err
				}
			}
		})
	}
	posted := make(chan struct{})
	go func() { wg.Wait(); close(posted) }()

	var lines []ledger.StatementLine
	pos := ledger.StatementPosition{}
	pages := 0
	for {
		// Once every posting has committed, an empty page is the end.
		done := false
		select {
		case <-posted:
			done = true
		default:
		}
		page, err := s.Statement(ctx, id, pos, 7)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if len(page) == 0 {
			if done {
				break
			}
			continue
		}
		lines = append(lines, page...)
		pos = positionAfter(page)
	}
	close(failed)
	for err := range failed {
		t.Errorf("post: %v", err)
	}
	if want := 2 * (1 + writers*each); len(lines) != want {
		t.Errorf("%d lines, want %d", len(lines), want)
	}
	backwards := 0
	for i := 1; i < len(lines); i++ {
		if lines[i].EntryID < lines[i-1].EntryID {
			backwards++
		}
	}
	t.Logf("%d pages; %d entries follow one with a later id", pages, backwards)
	requireWholeStatement(t, s, pool, id, lines)
	for i := range 5 {
		cp := accountID(t, pool, acct(ledger.Counterparty, ledger.Native, common.BigToAddress(big.NewInt(int64(1+i)))))
		got, _ := statementFrom(t, s, cp, ledger.StatementPosition{}, 9)
		requireWholeStatement(t, s, pool, cp, got)
	}
}

// migrationsUpTo is the ledger's migrations up to version last.
func migrationsUpTo(t testing.TB, last int64) *pg.Migrations {
	t.Helper()
	files := fstest.MapFS{}
	for _, m := range postgres.Migrations.List()[:last] {
		files[fmt.Sprintf("%04d_%s.sql", m.Version, m.Name)] = &fstest.MapFile{Data: []byte(m.SQL)}
	}
	ms, err := pg.LoadMigrations(files)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestStatementOfBooksKeptBefore0007 books journals on the schema before
// 0007, concurrently (postings share transactions) and in a transaction
// that moves the wallet in two statements, then migrates: each account's
// statement shows every entry once, its versions end at the balance's,
// which the migration left as it was, and postings after it follow on.
func TestStatementOfBooksKeptBefore0007(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	if _, err := migrationsUpTo(t, 6).Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledgertest.RequireConservation(t, pool) })
	s := postgres.New(pool, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20 {
				j := transfer(fmt.Sprintf("w%d-%d", w, i), hot, common.BigToAddress(big.NewInt(int64(1+(w+i)%3))), int64(100+i), int64(1+w))
				if _, err := s.Post(ctx, j); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	walletID := accountID(t, pool, acct(ledger.Wallet, ledger.Native, hot))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, key := range []string{"by-hand-1", "by-hand-2"} {
			if _, err := tx.Exec(ctx, `
				WITH j AS (INSERT INTO journal (kind, idem_key, payload_hash, chain_id) VALUES ('deposit', $1, sha256(convert_to($1, 'UTF8')), $2) RETURNING journal_id)
				INSERT INTO entry (journal_id, account_id, amount)
				SELECT journal_id, a, v FROM j, (VALUES ($3::bigint, 3), ($4::bigint, -3)) AS l(a, v)`,
				key, chain, walletID, accountID(t, pool, acct(ledger.Counterparty, ledger.Native, common.BigToAddress(big.NewInt(1))))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	before, err := s.Accounts(ctx, ledger.AccountFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := postgres.Migrations.Up(ctx, pool, nil); err != nil {
		t.Fatal(err)
	}
	var txids int64
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT j.txid) FROM entry e JOIN journal j USING (journal_id) WHERE e.account_id = $1`, walletID).Scan(&txids); err != nil {
		t.Fatal(err)
	}
	for _, a := range before {
		lines, _ := statementFrom(t, s, a.ID, ledger.StatementPosition{}, 4)
		requireWholeStatement(t, s, pool, a.ID, lines)
		after, err := s.Account(ctx, a.ID, nil)
		if err != nil || after.Version != a.Version || after.Balance.Cmp(a.Balance) != 0 {
			t.Errorf("account %d after the migration: %+v %v, want %+v", a.ID, after, err, a)
		}
		// One movement per transaction, numbered down from the version:
		// the wallet's two statements of one transaction are one.
		if a.ID == walletID && (lines[0].Version != a.Version-txids+1 || lines[0].Version < 2) {
			t.Errorf("the wallet's statement starts at version %d, its version is %d over %d transactions", lines[0].Version, a.Version, txids)
		}
	}

	_, pos := statementFrom(t, s, walletID, ledger.StatementPosition{}, 1000)
	post(t, s, transfer("after", hot, bob, 5, 1))
	lines, _ := statementFrom(t, s, walletID, pos, 1000)
	if len(lines) != 2 || lines[0].Version != pos.Version+1 || lines[1].Version != pos.Version+1 {
		t.Errorf("the wallet's statement after the migration: %+v, want the new posting's 2 entries at version %d", lines, pos.Version+1)
	}
}

// TestMovementsAreTheTriggersAlone: movements are written by the trigger
// that moves balances, and never changed. A version missing all the same
// stops the statement before it with errs.Unavailable.
func TestMovementsAreTheTriggersAlone(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	for i := range 3 {
		post(t, s, transfer(fmt.Sprintf("tx-%d", i), hot, bob, 10, 1))
	}
	id := accountID(t, pool, acct(ledger.Wallet, ledger.Native, hot))
	for _, c := range []struct{ stmt, want string }{
		{`INSERT INTO movement (account_id, version, txid, first_entry_id, last_entry_id) VALUES ($1, 4, pg_current_xact_id(), 1, 1)`, "movements are written only by entries"},
		{`UPDATE movement SET version = version + 10 WHERE account_id = $1`, "append-only"},
		{`DELETE FROM movement WHERE account_id = $1`, "append-only"},
		{`TRUNCATE movement`, "append-only"},
	} {
		args := []any{id}
		if c.stmt == `TRUNCATE movement` {
			args = nil
		}
		if _, err := pool.Exec(ctx, c.stmt, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.stmt, err, c.want)
		}
	}
	lines, _ := statementFrom(t, s, id, ledger.StatementPosition{}, 100)
	requireWholeStatement(t, s, pool, id, lines)

	// Past the guards, by the table's owner: version 2 goes missing.
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			ALTER TABLE movement DISABLE TRIGGER movement_append_only;
			DELETE FROM movement WHERE account_id = `+fmt.Sprint(id)+` AND version = 2;
			ALTER TABLE movement ENABLE TRIGGER movement_append_only`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pos := range []ledger.StatementPosition{{}, positionAfter(lines[:2])} {
		if got, err := s.Statement(ctx, id, pos, 100); !errs.Is(err, errs.Unavailable) {
			t.Errorf("a statement after %+v over a missing version: %+v %v, want unavailable", pos, got, err)
		}
	}
}
