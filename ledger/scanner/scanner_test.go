package scanner_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math/big"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/ledgertest/token"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/ledger/scanner"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// waitTimeout bounds every wait of these tests.
const waitTimeout = 30 * time.Second

// rig is a real anvil with a real token, and the ledger's store. The dev
// accounts 0 and 1 are wallets; the others, outsiders. The token's
// deployer is the last account.
type rig struct {
	node     *anvil.Node
	store    *postgres.Store
	pool     *pgxpool.Pool
	token    common.Address
	wallets  []anvil.Account
	outsider []anvil.Account
	minter   anvil.Account
}

func newRig(t *testing.T) *rig {
	t.Helper()
	node := chaintest.Anvil(t, anvil.Options{})
	store, pool := ledgertest.Store(t)
	accts := node.Accounts()
	r := &rig{node: node, store: store, pool: pool, wallets: accts[:2], outsider: accts[2:9], minter: accts[9]}
	r.token = token.Deploy(t, node, r.minter.Key)
	return r
}

func (r *rig) chainID() uint64 { return r.node.ChainID() }

func (r *rig) scanner(t *testing.T) *scanner.Scanner {
	return &scanner.Scanner{Store: r.store, ChainID: r.chainID(), RPC: r.node.RPC(), Tokens: []common.Address{r.token},
		Poll: 10 * time.Millisecond, Log: slog.New(slog.NewTextHandler(t.Output(), nil))}
}

// register adds wallets to the registry, as the feed consumer or the
// configuration does.
func (r *rig) register(t *testing.T, wallets ...common.Address) {
	t.Helper()
	chains, addrs := make([]int64, len(wallets)), make([][]byte, len(wallets))
	for i, w := range wallets {
		chains[i], addrs[i] = int64(r.chainID()), w.Bytes()
	}
	if _, err := r.pool.Exec(context.Background(), `
		INSERT INTO wallet (chain_id, address, source) SELECT c, a, 'configured' FROM unnest($1::bigint[], $2::bytea[]) AS w(c, a)`, chains, addrs); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) walletAddrs() []common.Address {
	return []common.Address{r.wallets[0].Address, r.wallets[1].Address}
}

// head is the chain's newest block.
func (r *rig) head(t *testing.T) ledger.Block {
	t.Helper()
	h, err := r.node.Client().HeaderByNumber(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Block{Number: h.Number.Uint64(), Hash: h.Hash()}
}

func (r *rig) cursor(t *testing.T) ledger.Block {
	t.Helper()
	c, err := r.store.ScanCursor(context.Background(), r.chainID())
	if err != nil || c == nil {
		t.Fatalf("scan cursor %v %v", c, err)
	}
	return *c
}

// drain steps sc until it has booked the chain up to its head and opened
// every wallet.
func (r *rig) drain(t *testing.T, sc *scanner.Scanner) {
	t.Helper()
	r.drainAfter(t, sc, false)
}

// drainAfter is drain; after a crash, the cursor may refuse a step: the
// crashed scanner's last commit can land after it gave up waiting for it.
func (r *rig) drainAfter(t *testing.T, sc *scanner.Scanner, crash bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		if _, err := sc.Step(ctx); err != nil && !(crash && errs.Is(err, errs.Conflict)) {
			t.Fatalf("step: %v", err)
		}
		c, err := r.store.ScanCursor(ctx, r.chainID())
		if err != nil {
			t.Fatal(err)
		}
		unopened, err := r.store.UnopenedWallets(ctx, r.chainID())
		if err != nil {
			t.Fatal(err)
		}
		if c != nil && *c == r.head(t) && len(unopened) == 0 {
			return
		}
	}
}

// ledgerBalance is an account's balance in the books; zero when it has
// none.
func (r *rig) ledgerBalance(t *testing.T, kind ledger.AccountKind, asset string, addr common.Address) *big.Int {
	t.Helper()
	b, err := r.store.Balance(context.Background(), ledger.AccountKey{ChainID: r.chainID(), Asset: asset, Kind: kind, Address: addr})
	if errs.Is(err, errs.NotFound) {
		return new(big.Int)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requireTiesOut fails t unless each of wallets' books, native and in the
// token, equal its balances on chain at the scan cursor, to the wei.
func (r *rig) requireTiesOut(t *testing.T, wallets ...common.Address) {
	t.Helper()
	at := r.cursor(t)
	for _, w := range wallets {
		onChain, err := r.node.Client().BalanceAtHash(context.Background(), w, at.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if books := r.ledgerBalance(t, ledger.Wallet, ledger.Native, w); books.Cmp(onChain) != 0 {
			t.Errorf("%s holds %s wei at block %d, the books say %s", w, onChain, at.Number, books)
		}
		held := token.BalanceOf(t, r.node, r.token, w, at.Hash)
		if books := r.ledgerBalance(t, ledger.Wallet, r.asset(), w); books.Cmp(held) != 0 {
			t.Errorf("%s holds %s of the token at block %d, the books say %s", w, held, at.Number, books)
		}
	}
}

func (r *rig) asset() string { return strings.ToLower(r.token.Hex()) }

// journal reads the journal under key; nil when there is none.
func (r *rig) journal(t *testing.T, key string) (int64, *ledger.Journal) {
	t.Helper()
	id, j, err := r.store.Journal(context.Background(), key)
	if errs.Is(err, errs.NotFound) {
		return 0, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return id, j
}

func (r *rig) depositOf(t *testing.T, rc *types.Receipt) *ledger.Journal {
	t.Helper()
	_, j := r.journal(t, booking.DepositKey(r.chainID(), rc.TxHash, rc.BlockHash))
	return j
}

// countJournals counts the journals of a kind.
func (r *rig) countJournals(t *testing.T, kind ledger.JournalKind) int {
	t.Helper()
	var n int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM journal WHERE kind = $1`, string(kind)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// requireLegs fails t unless j moves exactly amount of asset from from's
// account of fromKind to wallet to.
func requireLegs(t *testing.T, j *ledger.Journal, asset string, fromKind ledger.AccountKind, from, to common.Address, amount *big.Int) {
	t.Helper()
	if j == nil {
		t.Fatalf("no journal, want %s of %s from %s to %s", amount, asset, from, to)
	}
	name := func(kind ledger.AccountKind, asset string, a common.Address) string {
		return string(kind) + "/" + asset + "/" + a.Hex()
	}
	want := map[string]string{name(fromKind, asset, from): new(big.Int).Neg(amount).String(), name(ledger.Wallet, asset, to): amount.String()}
	got := map[string]string{}
	for _, l := range j.Legs {
		got[name(l.Account.Kind, l.Account.Asset, l.Account.Address)] = l.Amount.String()
	}
	if !maps.Equal(got, want) {
		t.Errorf("legs %v, want %v", got, want)
	}
}

// The first start opens every registered wallet at the start block: what
// each held there, native and in the configured token, is its opening, and
// the books equal the chain's at the cursor, to the wei.
func TestTheFirstStartOpensWalletsWithWhatTheyHold(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	empty := common.HexToAddress("0x00000000000000000000000000000000000e3971")
	token.Mint(t, r.node, r.minter.Key, r.token, r.wallets[0].Address, big.NewInt(1234))
	r.register(t, append(r.walletAddrs(), empty)...)
	start := r.head(t)

	r.drain(t, r.scanner(t))
	if c := r.cursor(t); c != start {
		t.Fatalf("cursor at %v, want the head at the start, %v", c, start)
	}
	ws, err := r.store.Wallets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.Opened == nil || *w.Opened != start {
			t.Errorf("wallet %s opened at %v, want %v", w.Address, w.Opened, start)
		}
	}
	_, opening := r.journal(t, booking.OpeningKey(r.chainID(), r.wallets[0].Address, start.Hash))
	if opening == nil || opening.Kind != ledger.Opening || *opening.Block != start || len(opening.Legs) != 4 {
		t.Errorf("opening %+v, want native and token legs at the start block", opening)
	}
	if _, j := r.journal(t, booking.OpeningKey(r.chainID(), empty, start.Hash)); j != nil {
		t.Errorf("an empty wallet's opening booked %+v", j.Legs)
	}
	if got := r.ledgerBalance(t, ledger.Wallet, r.asset(), r.wallets[0].Address); got.Int64() != 1234 {
		t.Errorf("token opening %s, want 1234", got)
	}
	r.requireTiesOut(t, append(r.walletAddrs(), empty)...)
}

// Value an outsider sends a wallet is a deposit. Value between wallets is
// the feed consumer's to book (the scanner records the transaction); a
// reverted transaction and a transaction of no value book nothing.
func TestNativeDeposits(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	// The token stands for a contract wallet (a multisig): a call with value
	// to it reverts, as a transfer to a contract that refuses it does.
	r.register(t, append(r.walletAddrs(), r.token)...)
	sc := r.scanner(t)
	r.drain(t, sc)

	outsider, w0, w1 := r.outsider[0], r.wallets[0], r.wallets[1]
	paid := chaintest.Transfer(t, r.node, outsider.Key, w0.Address, big.NewInt(1_000_000))
	r.drain(t, sc)
	requireLegs(t, r.depositOf(t, paid), ledger.Native, ledger.DepositSource, outsider.Address, w0.Address, big.NewInt(1_000_000))
	r.requireTiesOut(t, w0.Address, w1.Address, r.token)

	internal := chaintest.Transfer(t, r.node, w0.Key, w1.Address, big.NewInt(5))
	reverted := chaintest.SendCall(t, r.node, outsider.Key, chaintest.Call{To: &r.token, Value: big.NewInt(7), Gas: 100_000})
	if reverted.Status != types.ReceiptStatusFailed {
		t.Fatal("a payment to the token succeeded")
	}
	nothing := chaintest.Transfer(t, r.node, outsider.Key, w1.Address, new(big.Int))
	r.drain(t, sc)
	for name, rc := range map[string]*types.Receipt{"between wallets": internal, "reverted": reverted, "of no value": nothing} {
		if j := r.depositOf(t, rc); j != nil {
			t.Errorf("a transaction %s booked %+v", name, j.Legs)
		}
	}
	if n := r.countJournals(t, ledger.Deposit); n != 1 {
		t.Errorf("%d deposits, want one", n)
	}
	var sender []byte
	var number int64
	if err := r.pool.QueryRow(context.Background(), `SELECT sender, block_number FROM wallet_tx WHERE tx_hash = $1 AND block_hash = $2`,
		internal.TxHash.Bytes(), internal.BlockHash.Bytes()).Scan(&sender, &number); err != nil || common.BytesToAddress(sender) != w0.Address || uint64(number) != internal.BlockNumber.Uint64() {
		t.Errorf("wallet_tx row: %x %d %v, want the wallet's transaction in its block", sender, number, err)
	}
	var walletTxs int
	if err := r.pool.QueryRow(context.Background(), `SELECT count(*) FROM wallet_tx`).Scan(&walletTxs); err != nil || walletTxs != 1 {
		t.Errorf("%d wallet transactions (%v), want the one a wallet sent", walletTxs, err)
	}
	r.requireTiesOut(t, r.token)
}

// Tokens an outsider sends a wallet, or mints to it, are deposits in the
// token's asset; transfers between outsiders, and a transfer that
// reverts, book nothing.
func TestTokenDeposits(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	sc := r.scanner(t)
	r.drain(t, sc)

	holder, other, w0 := r.outsider[0], r.outsider[1], r.wallets[0]
	minted := token.Mint(t, r.node, r.minter.Key, r.token, w0.Address, big.NewInt(40))
	token.Mint(t, r.node, r.minter.Key, r.token, holder.Address, big.NewInt(1000))
	sent := token.Transfer(t, r.node, holder.Key, r.token, w0.Address, big.NewInt(300))
	between := token.Transfer(t, r.node, holder.Key, r.token, other.Address, big.NewInt(200))
	tooMuch := token.Transfer(t, r.node, other.Key, r.token, w0.Address, big.NewInt(201))
	if tooMuch.Status != types.ReceiptStatusFailed {
		t.Fatal("a transfer beyond the balance succeeded")
	}
	r.drain(t, sc)

	requireLegs(t, r.depositOf(t, minted), r.asset(), ledger.DepositSource, common.Address{}, w0.Address, big.NewInt(40))
	requireLegs(t, r.depositOf(t, sent), r.asset(), ledger.DepositSource, holder.Address, w0.Address, big.NewInt(300))
	for name, rc := range map[string]*types.Receipt{"between outsiders": between, "reverted": tooMuch} {
		if j := r.depositOf(t, rc); j != nil {
			t.Errorf("a transfer %s booked %+v", name, j.Legs)
		}
	}
	if n := r.countJournals(t, ledger.Deposit); n != 2 {
		t.Errorf("%d deposits, want two", n)
	}
	r.requireTiesOut(t, r.walletAddrs()...)
}

// With more wallets than one eth_getLogs call names, a deposit to the
// last is found; and with more than the calls allowed, reading every
// Transfer log of the block finds it too.
func TestDepositsToOneOfManyWallets(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name              string
		perCall, maxCalls int
	}{{"wallets in two calls", 500, 8}, {"every transfer log in one call", 500, 1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t)
			many := make([]common.Address, 600)
			for i := range many {
				many[i] = crypto.CreateAddress(common.HexToAddress("0x5ca1ab1e"), uint64(i))
			}
			r.register(t, many...)
			sc := r.scanner(t)
			scanner.SetLogCalls(sc, c.perCall, c.maxCalls)
			r.drain(t, sc)

			last := many[0]
			for _, w := range many {
				if w.Cmp(last) > 0 {
					last = w
				}
			}
			holder := r.outsider[0]
			token.Mint(t, r.node, r.minter.Key, r.token, holder.Address, big.NewInt(1000))
			sent := token.Transfer(t, r.node, holder.Key, r.token, last, big.NewInt(77))
			paid := chaintest.Transfer(t, r.node, holder.Key, last, big.NewInt(88))
			r.drain(t, sc)
			requireLegs(t, r.depositOf(t, sent), r.asset(), ledger.DepositSource, holder.Address, last, big.NewInt(77))
			requireLegs(t, r.depositOf(t, paid), ledger.Native, ledger.DepositSource, holder.Address, last, big.NewInt(88))
			if n := r.countJournals(t, ledger.Deposit); n != 2 {
				t.Errorf("%d deposits, want two", n)
			}
			r.requireTiesOut(t, last, many[0])
		})
	}
}

// A deposit whose block a reorg removes is reversed, and the books equal
// the chain again; the same transaction mined in another block is booked
// anew. anvil_reorg replaces the newest blocks with empty ones and drops
// their transactions (they are neither re-mined nor back in the pool).
func TestAReorgReversesTheDepositsOfTheBlocksItRemoved(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	sc := r.scanner(t)
	r.drain(t, sc)
	ctx := context.Background()

	holder, outsider, w0 := r.outsider[0], r.outsider[1], r.wallets[0]
	token.Mint(t, r.node, r.minter.Key, r.token, holder.Address, big.NewInt(1000))
	tokenTx := token.Transfer(t, r.node, holder.Key, r.token, w0.Address, big.NewInt(10))
	// From another sender: sent again alone after the reorg, its nonce is
	// the next one.
	tx := chaintest.SendTransfer(t, r.node, outsider.Key, w0.Address, big.NewInt(1_000_000))
	paid := chaintest.WaitReceipt(t, r.node, tx.Hash())
	r.drain(t, sc)
	if r.depositOf(t, paid) == nil || r.depositOf(t, tokenTx) == nil {
		t.Fatal("the deposits were not booked")
	}
	r.requireTiesOut(t, r.walletAddrs()...)

	if err := r.node.Reorg(ctx, 2); err != nil {
		t.Fatal(err)
	}
	r.drain(t, sc)
	for _, rc := range []*types.Receipt{paid, tokenTx} {
		id, _ := r.journal(t, booking.DepositKey(r.chainID(), rc.TxHash, rc.BlockHash))
		if _, rev := r.journal(t, ledger.ReversalKey(id)); rev == nil {
			t.Errorf("the deposit of %s, whose block left the chain, is not reversed", rc.TxHash)
		}
	}
	r.requireTiesOut(t, r.walletAddrs()...)

	if err := r.node.Client().SendTransaction(ctx, tx); err != nil {
		t.Fatalf("send the deposit again: %v", err)
	}
	again := chaintest.WaitReceipt(t, r.node, tx.Hash())
	if again.BlockHash == paid.BlockHash {
		t.Fatal("the deposit came back in the same block")
	}
	r.drain(t, sc)
	requireLegs(t, r.depositOf(t, again), ledger.Native, ledger.DepositSource, outsider.Address, w0.Address, big.NewInt(1_000_000))
	r.requireTiesOut(t, r.walletAddrs()...)
}

// A reorg below every block the scanner keeps stops it: it cannot tell
// what to undo.
func TestAReorgDeeperThanTheWindowStopsTheScanner(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	sc := r.scanner(t)
	sc.Window = 2
	r.drain(t, sc)
	if err := r.node.Mine(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	r.drain(t, sc)
	if err := r.node.Reorg(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := sc.Run(ctx); !errors.Is(err, scanner.ErrDeepReorg) {
		t.Errorf("Run = %v, want ErrDeepReorg", err)
	}
}

// A chain started afresh under the books (a development chain whose state
// was lost) has none of the blocks the scanner keeps: a fork below them
// all, which stops the scanner, booking nothing on the new chain.
func TestAChainStartedAfreshStopsTheScanner(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	sc := r.scanner(t)
	r.drain(t, sc)
	before := r.cursor(t)
	journals := r.countJournals(t, ledger.Opening)

	// Another genesis, as a chain started afresh has: anvils started in
	// the same second share their genesis block, and a fork at genesis is
	// no deep fork.
	fresh := chaintest.Anvil(t, anvil.Options{ExtraArgs: []string{"--timestamp", "1000"}})
	afresh := r.scanner(t)
	afresh.RPC = fresh.RPC()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	err := afresh.Run(ctx)
	if !errors.Is(err, scanner.ErrDeepReorg) || !strings.Contains(err.Error(), "behind the scan cursor") {
		t.Fatalf("Run = %v, want ErrDeepReorg, the endpoint behind the scan cursor", err)
	}
	if got := r.cursor(t); got != before {
		t.Errorf("the cursor moved from %v to %v", before, got)
	}
	if got := r.countJournals(t, ledger.Opening); got != journals {
		t.Errorf("%d openings, want the %d booked before", got, journals)
	}
}

// An endpoint that answers another chain id is refused before anything is
// read from it; one that moves to another chain while the scanner runs is
// found when the scanner sees the chain change under its cursor, and named
// as such rather than as a fork.
func TestAnEndpointOnAnotherChainStopsTheScanner(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	other := chaintest.Anvil(t, anvil.Options{ChainID: r.chainID() + 1})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	wrong := r.scanner(t)
	wrong.RPC = other.RPC()
	if err := wrong.Run(ctx); !errors.Is(err, scanner.ErrWrongChain) {
		t.Fatalf("Run on an endpoint of chain %d = %v, want ErrWrongChain", other.ChainID(), err)
	}
	if c, err := r.store.ScanCursor(ctx, r.chainID()); err != nil || c != nil {
		t.Fatalf("a scan started from another chain's endpoint: cursor %v, %v", c, err)
	}

	// The endpoint, behind a proxy, moves to the other chain, which is
	// longer: the block after the cursor does not follow it.
	var upstream atomic.Pointer[url.URL]
	upstream.Store(mustParse(t, r.node.URL()))
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(upstream.Load()) }})
	t.Cleanup(proxy.Close)
	client, err := rpc.Dial(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	sc := r.scanner(t)
	sc.RPC = client
	r.drain(t, sc)
	if err := other.Mine(ctx, int(r.cursor(t).Number)+5); err != nil {
		t.Fatal(err)
	}
	upstream.Store(mustParse(t, other.URL()))
	if err := sc.Run(ctx); !errors.Is(err, scanner.ErrWrongChain) {
		t.Fatalf("Run after the endpoint moved to chain %d = %v, want ErrWrongChain", other.ChainID(), err)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// With a feed consumer to wait for, a block is booked only once the
// consumer has caught up after the scanner read it: every signer with a
// transaction in it is a wallet by then.
func TestABlockWaitsForTheFeedToCatchUp(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	sc := r.scanner(t)
	// The feed's head as txmanager would answer it: 7 events numbered.
	var head atomic.Uint64
	head.Store(7)
	sc.Feed, sc.FeedHead = "txmanager", func(context.Context) (uint64, error) { return head.Load(), nil }
	ctx := context.Background()
	if _, err := sc.Step(ctx); err != nil { // the first start opens the wallets, feed or not
		t.Fatal(err)
	}
	if _, err := sc.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if unopened, err := r.store.UnopenedWallets(ctx, r.chainID()); err != nil || len(unopened) != 0 {
		t.Fatalf("unopened %v %v", unopened, err)
	}
	paid := chaintest.Transfer(t, r.node, r.outsider[0].Key, r.wallets[0].Address, big.NewInt(5))
	// The consumer has booked up to 6: not yet the head read with the
	// deposit's block.
	r.feedBookedTo(t, sc.Feed, 6)
	for range 3 {
		if n, err := sc.Step(ctx); err != nil || n != 0 {
			t.Fatalf("step before the feed caught up: %d blocks, %v", n, err)
		}
	}
	if r.depositOf(t, paid) != nil {
		t.Fatal("booked before the feed caught up")
	}
	head.Store(9) // later blocks wait for more; the deposit's block does not
	r.feedBookedTo(t, sc.Feed, 7)
	if n, err := sc.Step(ctx); err != nil || n != 1 {
		t.Fatalf("step after the feed caught up: %d blocks, %v; want the deposit's", n, err)
	}
	requireLegs(t, r.depositOf(t, paid), ledger.Native, ledger.DepositSource, r.outsider[0].Address, r.wallets[0].Address, big.NewInt(5))
}

// feedBookedTo sets the feed consumer's cursor, as if it had booked the
// feed up to seq.
func (r *rig) feedBookedTo(t *testing.T, feed string, seq uint64) {
	t.Helper()
	if _, err := r.pool.Exec(context.Background(), `INSERT INTO feed_cursor (feed, seq) VALUES ($1, $2)
		ON CONFLICT (feed) DO UPDATE SET seq = $2`, feed, int64(seq)); err != nil {
		t.Fatal(err)
	}
}

// deposits sends n deposits from outsiders to the wallets, one a block.
func (r *rig) deposits(t *testing.T, n int) []*types.Receipt {
	t.Helper()
	out := make([]*types.Receipt, n)
	for i := range out {
		from, to := r.outsider[i%len(r.outsider)], r.wallets[i%len(r.wallets)]
		out[i] = chaintest.Transfer(t, r.node, from.Key, to.Address, big.NewInt(int64(1000+i)))
	}
	return out
}

// requireBookedOnce requires every deposit of paid booked, none twice,
// and the books of every wallet to tie out with the chain: what two
// scanners racing, or one taking over from another, must leave.
func (r *rig) requireBookedOnce(t *testing.T, paid []*types.Receipt) {
	t.Helper()
	for _, rc := range paid {
		if r.depositOf(t, rc) == nil {
			t.Errorf("deposit %s not booked", rc.TxHash)
		}
	}
	if n := r.countJournals(t, ledger.Deposit); n != len(paid) {
		t.Errorf("%d deposits, want %d", n, len(paid))
	}
	r.requireTiesOut(t, r.walletAddrs()...)
}

// Two scanners of one chain racing book every block once: the cursor
// refuses the one that lost.
func TestTwoScannersBookEachBlockOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	r.drain(t, r.scanner(t))
	paid := r.deposits(t, 20)
	head := r.head(t)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 2 {
		sc := r.scanner(t)
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := sc.Step(ctx)
				if errs.Is(err, errs.Conflict) {
					refused.Add(1)
				} else if err != nil {
					t.Errorf("step: %v", err)
					return
				}
				if c, err := r.store.ScanCursor(ctx, r.chainID()); err != nil || *c == head {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("the cursor refused %d blocks booked by the other scanner", refused.Load())
	r.requireBookedOnce(t, paid)
}

// A scanner stopped anywhere (its context cancelled mid-run) and another
// started in its place book each fact once.
func TestAStoppedScannerIsTakenOverWithoutLossOrRepeat(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.walletAddrs()...)
	r.drain(t, r.scanner(t))
	start := r.cursor(t)
	paid := r.deposits(t, 40)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	first := r.scanner(t)
	go func() { done <- first.Run(ctx) }()
	deadline := time.After(waitTimeout)
	for r.cursor(t).Number < start.Number+5 {
		select {
		case <-deadline:
			t.Fatal("the scanner does not move")
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	r.drainAfter(t, r.scanner(t), true)
	r.requireBookedOnce(t, paid)
}

// A wallet registered while the scanner runs is opened at the block the
// scanner is at, with what it holds there, and its later deposits are
// booked.
func TestAWalletRegisteredWhileScanningIsOpenedAndBooked(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.register(t, r.wallets[0].Address)
	sc := r.scanner(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()

	late := r.wallets[1]
	token.Mint(t, r.node, r.minter.Key, r.token, late.Address, big.NewInt(55))
	r.deposits(t, 3)
	r.register(t, late.Address)
	opened := r.waitOpened(t, late.Address)
	if opened.Number > r.head(t).Number {
		t.Fatalf("opened at %d, beyond the head", opened.Number)
	}
	native, err := r.node.Client().BalanceAtHash(ctx, late.Address, opened.Hash)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{ledger.Native: native.String(), r.asset(): token.BalanceOf(t, r.node, r.token, late.Address, opened.Hash).String()}
	_, opening := r.journal(t, booking.OpeningKey(r.chainID(), late.Address, opened.Hash))
	if opening == nil {
		t.Fatal("no opening journal")
	}
	booked := map[string]string{ledger.Native: "0", r.asset(): "0"}
	for _, l := range opening.Legs {
		if l.Account.Kind == ledger.Wallet {
			booked[l.Account.Asset] = l.Amount.String()
		}
	}
	if !maps.Equal(booked, held) {
		t.Errorf("opened at block %d with %v, the chain had %v", opened.Number, booked, held)
	}

	paid := chaintest.Transfer(t, r.node, r.outsider[0].Key, late.Address, big.NewInt(9))
	deadline := time.After(waitTimeout)
	for r.depositOf(t, paid) == nil {
		select {
		case <-deadline:
			t.Fatal("the deposit to the new wallet is not booked")
		case <-time.After(5 * time.Millisecond):
		}
	}
	for r.cursor(t) != r.head(t) {
		select {
		case <-deadline:
			t.Fatal("the scanner does not reach the head")
		case <-time.After(5 * time.Millisecond):
		}
	}
	r.requireTiesOut(t, r.walletAddrs()...)
}

// waitOpened waits for the scanner to open wallet and returns the block.
func (r *rig) waitOpened(t *testing.T, wallet common.Address) ledger.Block {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		ws, err := r.store.Wallets(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.Address == wallet && w.Opened != nil {
				return *w.Opened
			}
		}
		select {
		case <-deadline:
			t.Fatalf("wallet %s not opened", wallet)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
