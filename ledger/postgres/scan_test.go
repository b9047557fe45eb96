package postgres_test

import (
	"context"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
)

var alsoHot = common.HexToAddress("0x00000000000000000000000000000000000ca201")

// scanned is block n of a test chain whose fork is named by fork: blocks
// of two forks differ in hash from the first block of the fork on.
func scanned(n uint64, fork byte) ledger.ScannedBlock {
	hash := func(n uint64) common.Hash {
		if n == 0 {
			return common.HexToHash("0x6e")
		}
		return common.BytesToHash([]byte{fork, byte(n >> 8), byte(n)})
	}
	b := ledger.ScannedBlock{Number: n, Hash: hash(n)}
	if n > 0 {
		b.Parent = hash(n - 1)
	}
	return b
}

func register(t *testing.T, pool *pgxpool.Pool, wallets ...common.Address) {
	t.Helper()
	for _, w := range wallets {
		if _, err := pool.Exec(context.Background(), `INSERT INTO wallet (chain_id, address, source) VALUES ($1, $2, 'configured')`, chain, w.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
}

func deposit(tx byte, b ledger.ScannedBlock, to common.Address, amount int64) *ledger.Journal {
	return booking.Deposit(chain, common.BytesToHash([]byte{tx}), b.Block(), []booking.Inflow{{Asset: ledger.Native, From: bob, To: to, Amount: big.NewInt(amount)}},
		walletsOpenedBefore{hot: true, alsoHot: true})[0]
}

type walletsOpenedBefore map[common.Address]bool

func (w walletsOpenedBefore) BooksAt(_ uint64, a common.Address, _ uint64) bool { return w[a] }

func opening(w common.Address, at ledger.ScannedBlock, amount int64) *ledger.Journal {
	return booking.Opening(chain, w, at.Block(), map[string]*big.Int{ledger.Native: big.NewInt(amount)})
}

func requireCursor(t *testing.T, s *postgres.Store, want ledger.ScannedBlock) {
	t.Helper()
	got, err := s.ScanCursor(context.Background(), chain)
	if err != nil || got == nil || *got != want.Block() {
		t.Fatalf("scan cursor %v %v, want block %d (%s)", got, err, want.Number, want.Hash)
	}
}

func opened(t *testing.T, s *postgres.Store) map[common.Address]*ledger.Block {
	t.Helper()
	ws, err := s.Wallets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[common.Address]*ledger.Block{}
	for _, w := range ws {
		out[w.Address] = w.Opened
	}
	return out
}

// scanStarted is books with hot registered and chain's scan started at
// blocks, the cursor at the last of them.
func scanStarted(t *testing.T, blocks ...ledger.ScannedBlock) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	s, pool := books(t)
	register(t, pool, hot)
	if _, err := s.StartScan(context.Background(), chain, blocks); err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// A block is booked with the cursor's move, once: the same booking again,
// from where the cursor was, is refused whole. The scanned blocks beyond
// the window are forgotten.
func TestBookScanMovesTheCursorWithItsBlock(t *testing.T) {
	t.Parallel()
	s, pool := books(t)
	ctx := context.Background()
	register(t, pool, hot)
	if c, err := s.ScanCursor(ctx, chain); c != nil || err != nil {
		t.Fatalf("a new chain's cursor: %v %v", c, err)
	}
	b0, b1, b2 := scanned(0, 'a'), scanned(1, 'a'), scanned(2, 'a')
	if c, err := s.StartScan(ctx, chain, []ledger.ScannedBlock{b0, b1}); err != nil || c != b1.Block() {
		t.Fatalf("start: %v %v", c, err)
	}
	if c, err := s.StartScan(ctx, chain, []ledger.ScannedBlock{b2}); err != nil || c != b1.Block() {
		t.Fatalf("a second start: %v %v, want the first's cursor kept", c, err)
	}
	booked := &ledger.ScanBooking{ChainID: chain, Cursor: b1.Block(), Block: &b2, Opened: []common.Address{hot},
		Journals:  []*ledger.Journal{opening(hot, b1, 100), deposit(1, b2, hot, 5)},
		WalletTxs: []ledger.WalletTx{{Hash: common.HexToHash("0x77"), Sender: hot}}, Window: 2}
	posted, err := s.BookScan(ctx, booked)
	if err != nil {
		t.Fatal(err)
	}
	if len(posted) != 2 || !posted[0].Created || !posted[1].Created {
		t.Errorf("posted %+v, want both journals created", posted)
	}
	requireCursor(t, s, b2)
	if got := opened(t, s)[hot]; got == nil || *got != b1.Block() {
		t.Errorf("wallet opened at %v, want block 1", got)
	}
	if kept, err := s.ScannedBlocks(ctx, chain); err != nil || len(kept) != 2 || kept[0] != b2 || kept[1] != b1 {
		t.Errorf("kept %v %v, want blocks 2 and 1: the window is 2", kept, err)
	}
	var walletTxs int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM wallet_tx WHERE block_number = 2 AND block_hash = $1`, b2.Hash.Bytes()).Scan(&walletTxs); err != nil || walletTxs != 1 {
		t.Errorf("%d wallet transactions (%v), want one", walletTxs, err)
	}
	if _, err := s.BookScan(ctx, booked); !errs.Is(err, errs.Conflict) {
		t.Errorf("the same block from the old cursor: %v, want a conflict", err)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != 105 {
		t.Errorf("wallet balance %s, want 105: booked once", got)
	}
}

// A key holding another fact refuses the whole block: the cursor stays,
// no wallet is opened.
func TestBookScanRefusesABlockWhoseKeyHoldsAnotherFact(t *testing.T) {
	t.Parallel()
	b0, b1 := scanned(0, 'a'), scanned(1, 'a')
	s, _ := scanStarted(t, b0)
	ctx := context.Background()
	if _, err := s.Post(ctx, deposit(1, b1, hot, 5)); err != nil {
		t.Fatal(err)
	}
	_, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: b0.Block(), Block: &b1, Opened: []common.Address{hot},
		Journals: []*ledger.Journal{opening(hot, b0, 1), deposit(1, b1, hot, 6)}, Window: 8})
	if !errs.Is(err, errs.Conflict) {
		t.Fatalf("book: %v, want a conflict", err)
	}
	requireCursor(t, s, b0)
	if got := opened(t, s)[hot]; got != nil {
		t.Errorf("wallet opened at %v by a refused block", got)
	}
}

// A rewind undoes what the blocks after the fork point booked, in one
// transaction: their deposits and openings are reversed, their wallets no
// longer opened, their scanned blocks and wallet transactions forgotten.
// When the same blocks come back, their facts are booked anew.
func TestRewindScanUndoesTheBlocksAfterTheForkAndTheyMayComeBack(t *testing.T) {
	t.Parallel()
	b0, b1, b2 := scanned(0, 'a'), scanned(1, 'a'), scanned(2, 'a')
	s, pool := scanStarted(t, b0)
	ctx := context.Background()
	book := func(cursor, b ledger.ScannedBlock, opens []common.Address, journals ...*ledger.Journal) {
		t.Helper()
		if _, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: cursor.Block(), Block: &b, Opened: opens, Journals: journals,
			WalletTxs: []ledger.WalletTx{{Hash: common.BytesToHash([]byte{byte(b.Number)}), Sender: hot}}, Window: 8}); err != nil {
			t.Fatalf("book block %d: %v", b.Number, err)
		}
	}
	book(b0, b1, []common.Address{hot}, opening(hot, b0, 100))
	register(t, pool, alsoHot)
	book(b1, b2, []common.Address{alsoHot}, opening(alsoHot, b1, 7), deposit(1, b2, hot, 5), deposit(2, b2, alsoHot, 3))

	if _, err := s.RewindScan(ctx, chain, b1.Block(), b0.Block()); !errs.Is(err, errs.Conflict) {
		t.Errorf("a rewind from where the cursor is not: %v, want a conflict", err)
	}
	r, err := s.RewindScan(ctx, chain, b2.Block(), b0.Block())
	if err != nil {
		t.Fatal(err)
	}
	if r.Reversed != 3 || len(r.Unopened) != 1 || r.Unopened[0] != alsoHot {
		t.Errorf("rewound %+v, want the deposits and the opening at block 1 reversed, and its wallet unopened", r)
	}
	requireCursor(t, s, b0)
	if w := opened(t, s); w[hot] == nil || *w[hot] != b0.Block() || w[alsoHot] != nil {
		t.Errorf("wallets opened at %v, want the first at block 0 only", w)
	}
	for _, w := range []common.Address{hot, alsoHot} {
		want := map[common.Address]int64{hot: 100, alsoHot: 0}[w]
		if got := balance(t, s, acct(ledger.Wallet, ledger.Native, w)); got.Int64() != want {
			t.Errorf("%s's balance after the rewind: %s, want %d", w, got, want)
		}
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM wallet_tx WHERE block_number > 0) + (SELECT count(*) FROM scanned_block WHERE block_number > 0)`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d wallet transactions and scanned blocks left after the fork (%v)", rows, err)
	}

	// The same blocks come back: the deposit is booked again, under a new
	// key, and the reversed one stays as it was.
	book(b0, b1, []common.Address{alsoHot}, opening(alsoHot, b0, 7))
	posted, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: b1.Block(), Block: &b2, Journals: []*ledger.Journal{deposit(1, b2, hot, 5)}, Window: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !posted[0].Created {
		t.Errorf("the deposit of a block that came back was not booked anew: %+v", posted)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != 105 {
		t.Errorf("balance %s after the block came back, want 105", got)
	}
	// Gone again, and back again: each time once.
	if _, err := s.RewindScan(ctx, chain, b2.Block(), b1.Block()); err != nil {
		t.Fatal(err)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != 100 {
		t.Errorf("balance %s after the second rewind, want 100", got)
	}
	for range 2 {
		_, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: b1.Block(), Block: &b2, Journals: []*ledger.Journal{deposit(1, b2, hot, 5)}, Window: 8})
		if err != nil && !errs.Is(err, errs.Conflict) {
			t.Fatal(err)
		}
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != 105 {
		t.Errorf("balance %s after the block came back twice, want 105", got)
	}
}

// Openings without a block leave the cursor where it is, and are refused
// when it has moved.
func TestBookScanOpensWalletsAtTheCursor(t *testing.T) {
	t.Parallel()
	b0, b1 := scanned(0, 'a'), scanned(1, 'a')
	s, _ := scanStarted(t, b0, b1)
	ctx := context.Background()
	if w, err := s.UnopenedWallets(ctx, chain); err != nil || len(w) != 1 || w[0] != hot {
		t.Fatalf("unopened %v %v, want the wallet", w, err)
	}
	if _, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: b0.Block(), Opened: []common.Address{hot},
		Journals: []*ledger.Journal{opening(hot, b0, 9)}, Window: 8}); !errs.Is(err, errs.Conflict) {
		t.Errorf("openings at a block the cursor left: %v, want a conflict", err)
	}
	if _, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: b1.Block(), Opened: []common.Address{hot},
		Journals: []*ledger.Journal{opening(hot, b1, 9)}, Window: 8}); err != nil {
		t.Fatal(err)
	}
	requireCursor(t, s, b1)
	if w, err := s.UnopenedWallets(ctx, chain); err != nil || len(w) != 0 {
		t.Errorf("unopened %v %v after the opening", w, err)
	}
	if _, err := s.BookScan(ctx, &ledger.ScanBooking{ChainID: chain, Cursor: b1.Block(), Opened: []common.Address{hot}, Window: 8}); !errs.Is(err, errs.Conflict) {
		t.Errorf("opening a wallet twice: %v, want a conflict", err)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != 9 {
		t.Errorf("balance %s, want the opening's 9", got)
	}
}
