package chain_test

import (
	"context"
	"log/slog"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/anvil"
	"github.com/txfence/txfence/testinfra/chaintest"
	"github.com/txfence/txfence/testinfra/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// emitterCode deploys a contract standing in for a token: a call with
// (to, amount) as two words logs Transfer(caller, to, amount), as an
// ERC-20 transfer does, and keeps no balances. It is enough to book token
// movements from logs; reconciling them with balanceOf needs a real token.
//
//	init:    PUSH1 49 PUSH1 12 PUSH1 0 CODECOPY PUSH1 49 PUSH1 0 RETURN
//	runtime: PUSH1 32 CALLDATALOAD PUSH1 0 MSTORE         (memory: amount)
//	         PUSH1 0 CALLDATALOAD CALLER PUSH32 Transfer  (topics: to, from, Transfer)
//	         PUSH1 32 PUSH1 0 LOG3 STOP
var emitterCode = common.FromHex("0x6031600c60003960316000f3" + // init: 12 bytes
	"60203560005260003533" + "7f" + strings.TrimPrefix(booking.TransferTopic.Hex(), "0x") + "60206000a300") // runtime: 49 bytes

// revertingInit is init code that reverts: its creation is mined with
// status 0, and pays its gas.
var revertingInit = common.FromHex("0x60006000fd")

type walletSet map[common.Address]bool

func (w walletSet) BooksAt(_ uint64, a common.Address, _ uint64) bool { return w[a] }

// nodeAndBooks starts a chain, its reader and empty books to book what the
// reader reads.
func nodeAndBooks(t *testing.T) (*anvil.Node, *postgres.Store, *chain.Reader) {
	t.Helper()
	node := chaintest.Anvil(t, anvil.Options{})
	store := postgres.New(pgtest.Migrated(t, postgres.Migrations), slog.New(slog.DiscardHandler))
	return node, store, chain.NewReader(node.RPC(), node.ChainID())
}

// A chain's transactions, read from the node and booked, leave every
// wallet's books equal to its balance on chain, to the wei: transfers out
// and between wallets, a reverted creation's fee, a creation, and token
// logs in and out.
func TestBookedTransactionsTieOutToTheChain(t *testing.T) {
	t.Parallel()
	node, store, reader := nodeAndBooks(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	accts := node.Accounts()
	a, b, stranger := accts[0], accts[1], accts[2]
	wallets := walletSet{a.Address: true, b.Address: true}
	genesis, err := node.Client().HeaderByNumber(ctx, big.NewInt(0))
	if err != nil {
		t.Fatal(err)
	}
	start := map[common.Address]*big.Int{}
	for _, w := range []common.Address{a.Address, b.Address} {
		if start[w], err = reader.BalanceAt(ctx, w, genesis.Hash()); err != nil {
			t.Fatal(err)
		}
	}

	book := func(r *types.Receipt) *ledger.Journal {
		t.Helper()
		s, err := reader.Settled(ctx, r.TxHash, r.BlockHash)
		if err != nil {
			t.Fatalf("read %s: %v", r.TxHash, err)
		}
		j := booking.Journal(s, wallets)
		if j == nil {
			t.Fatalf("%s booked nothing", r.TxHash)
		}
		if _, err := store.Post(ctx, j); err != nil {
			t.Fatalf("post %s: %v", r.TxHash, err)
		}
		return j
	}
	to := stranger.Address
	book(chaintest.Transfer(t, node, a.Key, to, chaintest.Ether))
	book(chaintest.Transfer(t, node, a.Key, b.Address, new(big.Int).Div(chaintest.Ether, big.NewInt(2))))
	reverted := chaintest.SendCall(t, node, a.Key, chaintest.Call{Data: revertingInit, Gas: 100_000})
	if reverted.Status != types.ReceiptStatusFailed {
		t.Fatalf("the reverting creation has status %d", reverted.Status)
	}
	if j := book(reverted); j.Kind != ledger.Reverted {
		t.Errorf("a reverted creation booked as %s", j.Kind)
	}
	created := chaintest.SendCall(t, node, a.Key, chaintest.Call{Data: emitterCode, Gas: 200_000})
	if created.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("deploying the emitter failed")
	}
	book(created)
	emitter := created.ContractAddress
	word := func(v *big.Int) []byte { return common.LeftPadBytes(v.Bytes(), 32) }
	call := func(from anvil.Account, to common.Address, amount int64) *types.Receipt {
		data := append(word(new(big.Int).SetBytes(to.Bytes())), word(big.NewInt(amount))...)
		r := chaintest.SendCall(t, node, from.Key, chaintest.Call{To: &emitter, Data: data, Gas: 60_000})
		if r.Status != types.ReceiptStatusSuccessful || len(r.Logs) != 1 {
			t.Fatalf("the emitter's call: status %d, %d logs", r.Status, len(r.Logs))
		}
		return r
	}
	book(call(a, stranger.Address, 12345))
	book(call(b, a.Address, 7))

	head, err := node.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []common.Address{a.Address, b.Address} {
		now, err := reader.BalanceAt(ctx, w, head.Hash())
		if err != nil {
			t.Fatal(err)
		}
		moved := new(big.Int).Sub(now, start[w])
		booked, err := store.Balance(ctx, ledger.AccountKey{ChainID: node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: w})
		if err != nil {
			t.Fatal(err)
		}
		if booked.Cmp(moved) != 0 {
			t.Errorf("wallet %s: the chain moved %s wei, the books %s", w, moved, booked)
		}
	}
	asset := strings.ToLower(emitter.Hex())
	for addr, want := range map[ledger.AccountKey]int64{
		{ChainID: node.ChainID(), Asset: asset, Kind: ledger.Wallet, Address: a.Address}:              -12345 + 7,
		{ChainID: node.ChainID(), Asset: asset, Kind: ledger.Wallet, Address: b.Address}:              -7,
		{ChainID: node.ChainID(), Asset: asset, Kind: ledger.Counterparty, Address: stranger.Address}: 12345,
	} {
		got, err := store.Balance(ctx, addr)
		if err != nil || got.Int64() != want {
			t.Errorf("%s: %v %v, want %d", addr, got, err, want)
		}
	}
}

// A receipt is read only from the block the event named: another block
// hash, a transaction the node does not know, and a block that left the
// chain are all refused, so nothing is booked from them; the reversal of
// what was booked from the orphaned block brings the books back to the
// chain.
func TestSettledIsPinnedToItsBlock(t *testing.T) {
	t.Parallel()
	node, store, reader := nodeAndBooks(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, stranger := node.Accounts()[0], node.Accounts()[1]
	wallets := walletSet{a.Address: true}
	before, err := node.Client().BalanceAt(ctx, a.Address, nil)
	if err != nil {
		t.Fatal(err)
	}

	r := chaintest.Transfer(t, node, a.Key, stranger.Address, chaintest.Ether)
	if _, err := reader.Settled(ctx, r.TxHash, common.HexToHash("0x1234")); !errs.Is(err, errs.Conflict) {
		t.Errorf("another block's hash: %v, want a conflict", err)
	}
	if _, err := reader.Settled(ctx, common.HexToHash("0xdead"), r.BlockHash); !errs.Is(err, errs.Conflict) {
		t.Errorf("an unknown transaction: %v, want a conflict", err)
	}
	s, err := reader.Settled(ctx, r.TxHash, r.BlockHash)
	if err != nil {
		t.Fatal(err)
	}
	j := booking.Journal(s, wallets)
	posted, err := store.Post(ctx, j)
	if err != nil {
		t.Fatal(err)
	}

	if err := node.Reorg(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Settled(ctx, r.TxHash, r.BlockHash); !errs.Is(err, errs.Conflict) {
		t.Errorf("a transaction whose block left the chain: %v, want a conflict", err)
	}
	if _, err := store.Post(ctx, booking.Reverse(posted.JournalID, j)); err != nil {
		t.Fatal(err)
	}
	after, err := node.Client().BalanceAt(ctx, a.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	booked, err := store.Balance(ctx, ledger.AccountKey{ChainID: node.ChainID(), Asset: ledger.Native, Kind: ledger.Wallet, Address: a.Address})
	if err != nil {
		t.Fatal(err)
	}
	if moved := new(big.Int).Sub(after, before); booked.Cmp(moved) != 0 {
		t.Errorf("after the reorg and the reversal: the chain moved %s wei, the books %s", moved, booked)
	}
}
