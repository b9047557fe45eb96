package ledgerd_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/consumer"
	"github.com/txfence/txfence/ledger/ledgerd"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/daemon"
	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/txmanagertest"
)

var killSeed = flag.Uint64("kill-seed", 0, "seed of TestKill9NeverBooksTwiceNorSkips's random kills; 0 picks one (and logs it)")

const (
	// killTransfers is how many settled transactions the feed holds:
	// with the eight events of each, ten pages of the consumer's 500.
	killTransfers = 600
	// killCrashPages is how many pages the deterministic phase books,
	// one per process, each killed right after its commit.
	killCrashPages = 3
	// killRandomKills is how many processes the random phase kills
	// after a random delay, wherever they are.
	killRandomKills = 12
	// killPage is the consumer's page of events, which ledgerd does not
	// configure.
	killPage = 500
)

// TestKill9NeverBooksTwiceNorSkips books a real feed of 600 settled
// transactions (transfers between dev wallets, to outside addresses, and
// reverted calls), read from a real anvil, with ledgerd processes that die
// by SIGKILL: first each right after a page's booking commits (its own
// fault injection, TEST_CRASH_AFTER=booked), then at random moments. After
// every death the books hold exactly the journals of the feed up to the
// cursor, each once; in the end every settled transaction is booked once,
// the cursor is at the feed's head, the books conserve and every wallet's
// balance is the chain's to the wei. The page and its cursor are one
// transaction (postgres.Store.BookFeed): a kill can never split them.
func TestKill9NeverBooksTwiceNorSkips(t *testing.T) {
	t.Parallel()
	r := newKillRig(t)
	ctx := context.Background()

	// Phase A: each process books one page and kills itself right after
	// the commit, before anything else (caught up, memory).
	crash := servicetest.Merge(r.env, map[string]string{ledgerd.Spec.EnvPrefix + "TEST_CRASH_AFTER": "booked"})
	var cursor uint64
	var pageRun time.Duration // the longest start and page
	for run := range killCrashPages {
		start := time.Now()
		p := servicetest.StartKilled(t, r.bin, crash)
		p.WaitKilled(t, 30*time.Second)
		pageRun = max(pageRun, time.Since(start))
		now := r.requireBookedUpTo(t, fmt.Sprintf("crash run %d", run+1))
		if want := min(cursor+killPage, r.last); now != want {
			t.Fatalf("crash run %d moved the cursor from %d to %d, want one page, to %d\n%s", run+1, cursor, now, want, p.Output())
		}
		t.Logf("crash run %d booked events %d to %d and died by SIGKILL", run+1, cursor+1, now)
		cursor = now
	}

	// Phase B: processes without the fault, killed after random delays
	// from their start, wherever they are: starting, reading the feed or
	// the chain, writing, committing. The delays scale with how long a
	// start and a page took above, so that on a fast or a loaded machine
	// alike a process is killed before its first page, or after a few.
	seed := *killSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("random kills within %s of a start: seed %d (rerun with -kill-seed=%d)", 3*pageRun, seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for kill := range killRandomKills {
		delay := time.Duration(rng.Int64N(int64(3 * pageRun)))
		p := servicetest.StartKilled(t, r.bin, r.env)
		select {
		case <-p.Done():
			t.Fatalf("ledgerd exited on its own before kill %d: %v\n%s", kill+1, p.Err(), p.Output())
		case <-time.After(delay):
		}
		p.Kill()
		p.WaitKilled(t, 10*time.Second)
		now := r.requireBookedUpTo(t, fmt.Sprintf("kill %d", kill+1))
		if now < cursor {
			t.Fatalf("kill %d: the cursor went back from %d to %d", kill+1, cursor, now)
		}
		t.Logf("kill %d after %s: cursor %d (%d events booked by that process)", kill+1, delay.Round(time.Millisecond), now, now-cursor)
		cursor = now
	}

	// The last process books the rest and is stopped at the test's end
	// (SIGTERM, exit 0).
	final := servicetest.StartProcess(t, r.bin, nil, r.env, "internal")
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for cursor < r.last {
		select {
		case <-deadline:
			t.Fatalf("the cursor is at %d 30 s after the last start, want %d\n%s", cursor, r.last, final.Logs())
		case <-tick.C:
		}
		c, err := r.store.Cursor(ctx, consumer.Feed)
		if err != nil {
			t.Fatal(err)
		}
		cursor = c
	}
	if got := r.requireBookedUpTo(t, "the end"); got != r.last {
		t.Errorf("the cursor is at %d, want the feed's last seq %d", got, r.last)
	}
	ledgertest.RequireConservation(t, r.pool)
	for _, a := range r.node.Accounts() {
		held, err := r.node.Client().BalanceAt(ctx, a.Address, nil)
		if err != nil {
			t.Fatal(err)
		}
		booked, err := r.store.Balance(ctx, ledger.AccountKey{ChainID: r.node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: a.Address})
		if err != nil {
			t.Fatalf("wallet %s: %v", a.Address, err)
		}
		if booked.Cmp(held) != 0 {
			t.Errorf("wallet %s: the chain holds %s wei, the books %s", a.Address, held, booked)
		}
	}
}

// killRig is a real anvil and a real txmanager feed of settled
// transactions, ledgerd's binary and environment, and the ledger's
// database as the test reads it.
type killRig struct {
	bin   string
	env   map[string]string
	node  *anvil.Node
	txm   *txmanagertest.Server
	pool  *pgxpool.Pool
	store *postgres.Store
	// settled are the feed's settlements, by transaction hash.
	settled map[common.Hash]killSettlement
	// last is the feed's last seq.
	last uint64
}

// killSettlement is a settlement event of the feed: its seq and the
// journal it books.
type killSettlement struct {
	seq  uint64
	kind ledger.JournalKind
}

// killSent is a transaction the test sent and anvil mined.
type killSent struct {
	from    common.Address
	to      common.Address
	value   *big.Int
	gas     uint64
	receipt *types.Receipt
}

func newKillRig(t *testing.T) *killRig {
	t.Helper()
	ctx := context.Background()
	pki := servicetest.PKI(t)
	node := chaintest.Anvil(t, anvil.Options{})
	txm := txmanagertest.Serve(t, pki, txmanagertest.Options{})
	r := &killRig{bin: servicetest.Build(t, "github.com/txfence/txfence/ledger/cmd/ledgerd"), node: node, txm: txm, settled: map[common.Hash]killSettlement{}}
	r.env = servicetest.Merge(servicetest.TLSEnv(ledgerd.Spec.EnvPrefix, pki, ledgerd.Spec.Identity), map[string]string{
		ledgerd.Spec.EnvPrefix + "DATABASE_URL":  pgtest.URL(t),
		ledgerd.Spec.EnvPrefix + "TXMANAGER_URL": txm.URL,
		ledgerd.Spec.EnvPrefix + "CHAIN_RPC":     fmt.Sprintf("%d=%s", node.ChainID(), node.URL()),
	})
	if logs, err := servicetest.RunOnce(t, ledgerd.Run, []string{daemon.Migrate}, r.env); err != nil {
		t.Fatalf("migrate: %v\n%s", err, logs)
	}
	pool, err := pg.Open(ctx, r.env[ledgerd.Spec.EnvPrefix+"DATABASE_URL"], pg.PoolOptions{MaxConns: 4, Application: "crash_test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	r.pool, r.store = pool, postgres.New(pool, slog.New(slog.DiscardHandler))

	// Every dev account is a wallet opened at genesis before ledgerd
	// first starts: the consumer books their movements from block 1 on,
	// and a scanner, were one running, finds them opened.
	for _, a := range node.Accounts() {
		openAtGenesis(t, r.pool, r.store, node, a.Address)
	}
	r.seedFeed(t, settleOn(t, r.node, killTransfers))
	return r
}

// openAtGenesis opens wallet of node at block 0 as the scanner would: its
// balance there is its opening, and its movements after it are the
// ledger's to book.
func openAtGenesis(t *testing.T, pool *pgxpool.Pool, store *postgres.Store, node *anvil.Node, wallet common.Address) {
	t.Helper()
	ctx := context.Background()
	genesis, err := node.Client().HeaderByNumber(ctx, big.NewInt(0))
	if err != nil {
		t.Fatal(err)
	}
	chainID := node.ChainID()
	if _, err := pool.Exec(ctx, `
		INSERT INTO wallet (chain_id, address, source, opened_block, opened_hash) VALUES ($1, $2, 'configured', 0, $3)`,
		int64(chainID), wallet.Bytes(), genesis.Hash().Bytes()); err != nil {
		t.Fatal(err)
	}
	held, err := node.Client().BalanceAt(ctx, wallet, genesis.Number)
	if err != nil {
		t.Fatal(err)
	}
	k := ledger.AccountKey{ChainID: chainID, Asset: ledger.Native, Kind: ledger.Wallet, Address: wallet}
	equity := k
	equity.Kind = ledger.OpeningBalance
	if _, err := store.Post(ctx, &ledger.Journal{Kind: ledger.Opening, Key: fmt.Sprintf("opening:%d:%s:%s", chainID, wallet.Hex(), genesis.Hash().Hex()),
		ChainID: chainID, Block: &ledger.Block{Number: 0, Hash: genesis.Hash()},
		Legs: []ledger.Leg{{Account: k, Amount: held}, {Account: equity, Amount: new(big.Int).Neg(held)}}}); err != nil {
		t.Fatal(err)
	}
}

// settleOn sends n transactions from node's dev accounts, one block each:
// a third to another dev wallet, every 40th a call with value to a
// contract that reverts, the rest to outside addresses.
func settleOn(t *testing.T, node *anvil.Node, n int) []killSent {
	t.Helper()
	// A loaded machine (CI builds and runs other packages beside it) can
	// take most of a minute to send and mine 600 transactions: the bound is
	// for a node that stopped, not for a slow one.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reverter := common.HexToAddress("0x000000000000000000000000000000000000fa11")
	// PUSH1 0 PUSH1 0 REVERT: every call reverts.
	if err := node.RPC().CallContext(ctx, nil, "anvil_setCode", reverter, "0x60006000fd"); err != nil {
		t.Fatal(err)
	}
	accounts := node.Accounts()
	chainID := new(big.Int).SetUint64(node.ChainID())
	signer := types.LatestSignerForChainID(chainID)
	nonces := map[common.Address]uint64{}
	sent := make([]killSent, n)
	hashes := make([]common.Hash, n)
	for i := range sent {
		from := accounts[i%len(accounts)]
		s := killSent{from: from.Address, value: big.NewInt(params.GWei + int64(i)), gas: params.TxGas}
		switch {
		case i%40 == 39:
			s.to, s.gas = reverter, 60_000
		case i%3 == 0:
			s.to = accounts[(i+1+i/len(accounts))%len(accounts)].Address
			if s.to == s.from {
				s.to = accounts[(i+2)%len(accounts)].Address
			}
		default:
			s.to = common.BigToAddress(big.NewInt(int64(0xb0b000 + i%50)))
		}
		tx, err := types.SignNewTx(from.Key, signer, &types.DynamicFeeTx{ChainID: chainID, Nonce: nonces[from.Address],
			GasTipCap: big.NewInt(params.GWei), GasFeeCap: big.NewInt(100 * params.GWei), Gas: s.gas, To: &s.to, Value: s.value})
		if err != nil {
			t.Fatal(err)
		}
		nonces[from.Address]++
		if err := node.Client().SendTransaction(ctx, tx); err != nil {
			t.Fatalf("send transaction %d: %v", i, err)
		}
		sent[i], hashes[i] = s, tx.Hash()
	}

	// Automine mines each as it comes; read the receipts, again for any
	// not there yet (null).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var reads []rpc.BatchElem
		for i := range sent {
			if sent[i].receipt == nil {
				reads = append(reads, rpc.BatchElem{Method: "eth_getTransactionReceipt", Args: []any{hashes[i]}, Result: &sent[i].receipt})
			}
		}
		if len(reads) == 0 {
			break
		}
		if err := node.RPC().BatchCallContext(ctx, reads); err != nil {
			t.Fatal(err)
		}
		for _, read := range reads {
			if read.Error != nil {
				t.Fatalf("receipt of %s: %v", read.Args[0], read.Error)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d transactions not mined in time", len(reads))
		case <-tick.C:
		}
	}
	var reverted int
	for i, s := range sent {
		want := types.ReceiptStatusSuccessful
		if s.to == reverter {
			want = types.ReceiptStatusFailed
			reverted++
		}
		if s.receipt.Status != want {
			t.Fatalf("transaction %d to %s: status %d, want %d", i, s.to, s.receipt.Status, want)
		}
	}
	if reverted == 0 {
		t.Fatal("no reverted transaction")
	}
	return sent
}

// seedFeed makes each sent transaction one of txmanager's, with the
// events of its way from INIT (its creation's event) to CONFIRMED or
// REVERTED in the block anvil mined it, and numbers them.
func (r *killRig) seedFeed(t *testing.T, sent []killSent) {
	t.Helper()
	ctx := context.Background()
	intents := make([]*txmanager.Intent, len(sent))
	for i, s := range sent {
		gas := s.gas
		intents[i] = &txmanager.Intent{ChainID: r.node.ChainID(), From: s.from, RequestID: fmt.Sprintf("kill-%d", i),
			To: &s.to, Value: s.value, Data: []byte{}, Gas: &gas, Route: txmanager.RoutePublic}
	}
	ids := make([]uuid.UUID, len(intents))
	for i, res := range r.txm.Store.CreateMany(ctx, intents) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		ids[i] = res.Tx.ID
	}
	var events []txmanagertest.Event
	for i, s := range sent {
		events = append(events, txmanagertest.SettlementEvents(ids[i], s.receipt)...)
	}
	r.txm.WriteEvents(t, events...)

	// What the feed says, as numbered: each settlement's seq.
	var settled map[common.Hash]killSettlement
	r.last, settled = settlementsInFeed(t, r.txm.Pool)
	maps.Copy(r.settled, settled)
	if len(r.settled) != len(sent) || r.last != uint64(8*len(sent)) {
		t.Fatalf("the feed holds %d settlements and %d events, want %d and %d", len(r.settled), r.last, len(sent), 8*len(sent))
	}
}

// requireBookedUpTo reads the feed's cursor and fails t unless the books
// hold, besides the openings, exactly one journal per settlement at or
// before it, of its kind, and none after it. It returns the cursor.
func (r *killRig) requireBookedUpTo(t *testing.T, when string) uint64 {
	t.Helper()
	ctx := context.Background()
	cursor, err := r.store.Cursor(ctx, consumer.Feed)
	if err != nil {
		t.Fatal(err)
	}
	if cursor > r.last {
		t.Fatalf("%s: the cursor is at %d, past the feed's last seq %d", when, cursor, r.last)
	}
	booked := map[common.Hash]bool{}
	var problems int
	for _, j := range ledgertest.BookedJournals(t, r.pool) {
		h := common.BytesToHash(j.Hash)
		s, ok := r.settled[h]
		switch {
		case j.Hash == nil || !ok:
			t.Errorf("%s: %d %s journals of %x, which the feed never settled", when, j.Count, j.Kind, j.Hash)
		case j.Kind != s.kind:
			t.Errorf("%s: a %s journal of %s, whose settlement (seq %d) books %s", when, j.Kind, h, s.seq, s.kind)
		case s.seq > cursor:
			t.Errorf("%s: %s (seq %d) is booked, past the cursor %d", when, h, s.seq, cursor)
		case j.Count != 1:
			t.Errorf("%s: %s (seq %d) is booked %d times", when, h, s.seq, j.Count)
		default:
			booked[h] = true
			continue
		}
		problems++
	}
	for h, s := range r.settled {
		if s.seq <= cursor && !booked[h] {
			if problems++; problems <= 10 {
				t.Errorf("%s: %s (seq %d) is not booked, the cursor at %d", when, h, s.seq, cursor)
			}
		}
	}
	if problems > 0 {
		t.Fatalf("%s: %d settlements booked wrongly or not at all", when, problems)
	}
	return cursor
}

// settlementsInFeed reads txmanager's feed as numbered: its last seq, and
// each settlement's seq and journal kind by transaction hash.
func settlementsInFeed(t *testing.T, pool *pgxpool.Pool) (last uint64, settled map[common.Hash]killSettlement) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT last_seq FROM event_sequence`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT seq, payload->>'to_state', payload->>'hash' FROM event
		WHERE type = $1 AND payload->>'to_state' IN ('CONFIRMED', 'REVERTED')`, txmanager.EventStateChanged)
	if err != nil {
		t.Fatal(err)
	}
	settled = map[common.Hash]killSettlement{}
	var seq uint64
	var state, hash string
	if _, err := pgx.ForEachRow(rows, []any{&seq, &state, &hash}, func() error {
		kind := ledger.Confirmed
		if state == "REVERTED" {
			kind = ledger.Reverted
		}
		settled[common.HexToHash(hash)] = killSettlement{seq: seq, kind: kind}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return last, settled
}
