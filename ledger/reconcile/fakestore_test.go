package reconcile_test

// A run reads the chain between two database transactions, and a wallet
// may open in between: the second transaction then finds a holding whose
// chain balance is not read. Tested against fakes of ReconcileStore and
// ReconcileTx (and an in-process node): a real database would need the
// opening staged between the two transactions, and could not tell which
// reads and writes each transaction made.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/reconcile"
	"github.com/txfence/txfence/shared/errs"
)

const fakeChainID = 31337

// pinned is the block the fake node calls finalized.
var pinned = ledger.Block{Number: 100, Hash: common.HexToHash("0xb100")}

// fakeStore hands each Reconcile call the next of txs; a run that asks
// for more transactions than the test set up fails. Any other call
// panics on the nil embedded interface.
type fakeStore struct {
	ledger.ReconcileStore

	txs  []*fakeTx
	used int
}

func (s *fakeStore) Reconcile(_ context.Context, chainID uint64, fn func(ledger.ReconcileTx) error) error {
	if chainID != fakeChainID {
		return fmt.Errorf("reconcile chain %d, want %d", chainID, fakeChainID)
	}
	if s.used == len(s.txs) {
		return fmt.Errorf("reconciliation transaction %d: the test set up %d", s.used+1, len(s.txs))
	}
	tx := s.txs[s.used]
	s.used++
	return fn(tx)
}

// fakeTx is the books as one reconciliation transaction finds them: the
// scanner at the pinned block, no run before, nothing unbooked. It records
// every call, and what was booked and saved; a call it does not answer
// panics, so a test also proves what a transaction did not do.
type fakeTx struct {
	ledger.ReconcileTx

	wallets  []common.Address
	holdings []ledger.Holding

	calls  []string
	booked []*ledger.Journal
	saved  *ledger.ReconciliationRun
}

// books is a transaction finding wallets, and holdings in the books.
func books(wallets []common.Address, holdings ...ledger.Holding) *fakeTx {
	return &fakeTx{wallets: wallets, holdings: holdings}
}

func (tx *fakeTx) ScanCursor(context.Context) (*ledger.Block, error) {
	tx.calls = append(tx.calls, "ScanCursor")
	return &pinned, nil
}

func (tx *fakeTx) ScannedHash(_ context.Context, number uint64) (common.Hash, bool, error) {
	tx.calls = append(tx.calls, "ScannedHash")
	return pinned.Hash, number == pinned.Number, nil
}

func (tx *fakeTx) NewestRun(context.Context, bool) (*ledger.ReconciliationRun, error) {
	tx.calls = append(tx.calls, "NewestRun")
	return nil, nil
}

func (tx *fakeTx) Wallets(_ context.Context, block uint64) ([]common.Address, error) {
	tx.calls = append(tx.calls, "Wallets")
	if block != pinned.Number {
		return nil, fmt.Errorf("wallets at block %d, want the pinned %d", block, pinned.Number)
	}
	return tx.wallets, nil
}

func (tx *fakeTx) Holdings(context.Context, uint64) ([]ledger.Holding, error) {
	tx.calls = append(tx.calls, "Holdings")
	return tx.holdings, nil
}

func (tx *fakeTx) Unbooked(context.Context, uint64, uint64, time.Duration) ([]ledger.UnbookedTx, error) {
	tx.calls = append(tx.calls, "Unbooked")
	return nil, nil
}

func (tx *fakeTx) NewRunID(context.Context) (int64, error) {
	tx.calls = append(tx.calls, "NewRunID")
	return 7, nil
}

func (tx *fakeTx) Booked(context.Context, []string) (map[string]int64, error) {
	tx.calls = append(tx.calls, "Booked")
	return map[string]int64{}, nil
}

func (tx *fakeTx) Book(_ context.Context, journals []*ledger.Journal) ([]int64, error) {
	tx.calls = append(tx.calls, "Book")
	tx.booked = append(tx.booked, journals...)
	ids := make([]int64, len(journals))
	for i := range ids {
		ids[i] = int64(100 + i)
	}
	return ids, nil
}

func (tx *fakeTx) Save(_ context.Context, run *ledger.ReconciliationRun) error {
	tx.calls = append(tx.calls, "Save")
	saved := *run
	tx.saved = &saved
	return nil
}

// fakeNode is the eth namespace a run reads: the finalized block, and
// native balances at it, each read recorded.
type fakeNode struct {
	balances map[common.Address]*big.Int

	mu    sync.Mutex
	reads []common.Address
}

func (n *fakeNode) GetBlockByNumber(tag json.RawMessage, _ bool) (map[string]any, error) {
	if string(tag) != `"finalized"` {
		return nil, fmt.Errorf("block %s: only the finalized block is served", tag)
	}
	return map[string]any{"number": hexutil.Uint64(pinned.Number), "hash": pinned.Hash}, nil
}

func (n *fakeNode) GetBalance(addr common.Address, at rpc.BlockNumberOrHash) (*hexutil.Big, error) {
	if h, ok := at.Hash(); !ok || h != pinned.Hash {
		return nil, fmt.Errorf("balance at %+v, want the pinned block's hash", at)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reads = append(n.reads, addr)
	v, ok := n.balances[addr]
	if !ok {
		return nil, fmt.Errorf("no balance of %s", addr)
	}
	return (*hexutil.Big)(v), nil
}

// fakeReconciler reconciles fakeChainID through store and node.
func fakeReconciler(t *testing.T, store ledger.ReconcileStore, node *fakeNode) *reconcile.Reconciler {
	t.Helper()
	srv := rpc.NewServer()
	if err := srv.RegisterName("eth", node); err != nil {
		t.Fatal(err)
	}
	client := rpc.DialInProc(srv)
	t.Cleanup(func() { client.Close(); srv.Stop() })
	return &reconcile.Reconciler{Store: store, Chains: map[uint64]*rpc.Client{fakeChainID: client}, Grace: reconcile.NoGrace,
		Log: slog.New(slog.DiscardHandler)}
}

var (
	alice = common.HexToAddress("0xa11ce")
	carol = common.HexToAddress("0xca201")
	dave  = common.HexToAddress("0xda7e")
)

// foundUnread are the calls of a transaction that finds a holding not
// read from the chain yet: it looks, and leaves, booking and storing
// nothing.
var foundUnread = []string{"ScanCursor", "ScannedHash", "NewestRun", "Wallets", "Holdings"}

// A wallet opened between the run's first transaction and its second is
// read from the chain on its own, and only then does a transaction
// compare, book and store: the earlier ones book nothing, and no balance
// is read twice.
func TestAWalletOpenedWhileTheChainIsReadIsReadBeforeAnythingIsBooked(t *testing.T) {
	ctx := context.Background()
	node := &fakeNode{balances: map[common.Address]*big.Int{alice: big.NewInt(5), carol: big.NewInt(3)}}
	aliceHeld := ledger.Holding{Address: alice, Asset: ledger.Native, Wallet: big.NewInt(5), Suspense: new(big.Int)}
	store := &fakeStore{txs: []*fakeTx{
		books([]common.Address{alice}, aliceHeld),
		books([]common.Address{alice, carol}, aliceHeld), // carol opened meanwhile, with nothing booked yet
		books([]common.Address{alice, carol}, aliceHeld),
	}}

	run, err := fakeReconciler(t, store, node).Reconcile(ctx, fakeChainID, ledger.TriggerRequest)
	if err != nil {
		t.Fatal(err)
	}

	if want := []common.Address{alice, carol}; !slices.Equal(node.reads, want) {
		t.Errorf("balances read %v, want %v: each wallet once, carol once she is found", node.reads, want)
	}
	for i, tx := range store.txs[:2] {
		if !slices.Equal(tx.calls, foundUnread) || tx.booked != nil || tx.saved != nil {
			t.Errorf("transaction %d called %v, booked %d journals, saved %v: want %v and nothing booked or saved",
				i+1, tx.calls, len(tx.booked), tx.saved != nil, foundUnread)
		}
	}
	last := store.txs[2]
	if want := append(slices.Clone(foundUnread), "NewestRun", "Unbooked", "NewRunID", "Booked", "Book", "Save"); !slices.Equal(last.calls, want) {
		t.Errorf("the last transaction called %v, want %v", last.calls, want)
	}
	if last.saved == nil || last.saved.ID != run.ID {
		t.Fatalf("saved %+v, want the run returned (%d)", last.saved, run.ID)
	}

	if run.ID != 7 || run.Block != pinned || run.Status != ledger.RunComplete || run.Differences != 1 || run.Deferred != 0 || len(run.Items) != 2 {
		t.Fatalf("run %+v: want run 7 at the pinned block, complete, carol's one difference", run)
	}
	for _, c := range []struct {
		it                           ledger.ReconciliationItem
		addr                         common.Address
		ledger, chain, diff, journal int64
	}{
		{run.Items[0], alice, 5, 5, 0, 0},
		{run.Items[1], carol, 0, 3, 3, 100},
	} {
		it := c.it
		if it.Address != c.addr || it.Asset != ledger.Native || it.Ledger.Int64() != c.ledger || it.Chain == nil || it.Chain.Int64() != c.chain ||
			it.Difference == nil || it.Difference.Int64() != c.diff || it.JournalID != c.journal {
			t.Errorf("item %+v: want %s ledger %d, chain %d, difference %d, journal %d", it, c.addr, c.ledger, c.chain, c.diff, c.journal)
		}
	}
	if len(last.booked) != 1 {
		t.Fatalf("booked %d journals, want carol's difference", len(last.booked))
	}
	j := last.booked[0]
	wallet := ledger.AccountKey{ChainID: fakeChainID, Asset: ledger.Native, Kind: ledger.Wallet, Address: carol}
	suspense := wallet
	suspense.Kind = ledger.Suspense
	if j.Kind != ledger.Reconciliation || j.Block == nil || *j.Block != pinned || len(j.Legs) != 2 ||
		j.Legs[0].Account != wallet || j.Legs[0].Amount.Int64() != 3 || j.Legs[1].Account != suspense || j.Legs[1].Amount.Int64() != -3 {
		t.Errorf("journal %+v: want carol's wallet +3 against her suspense at the pinned block", j)
	}
}

// Wallets that keep opening every time the chain is read end the run
// after a bounded number of reads, unavailable, with nothing booked or
// stored.
func TestWalletsThatKeepOpeningEndTheRunUnbooked(t *testing.T) {
	ctx := context.Background()
	node := &fakeNode{balances: map[common.Address]*big.Int{alice: big.NewInt(1), carol: big.NewInt(2), dave: big.NewInt(3)}}
	store := &fakeStore{txs: []*fakeTx{
		books([]common.Address{alice}),
		books([]common.Address{alice, carol}),
		books([]common.Address{alice, carol, dave}),
		books([]common.Address{alice, carol, dave}), // never reached
	}}

	run, err := fakeReconciler(t, store, node).Reconcile(ctx, fakeChainID, ledger.TriggerSchedule)
	if !errs.Is(err, errs.Unavailable) || run != nil {
		t.Fatalf("run %+v, err %v: want errs.Unavailable (wallets kept opening)", run, err)
	}
	if store.used != 3 {
		t.Errorf("%d reconciliation transactions, want 3", store.used)
	}
	if want := []common.Address{alice, carol}; !slices.Equal(node.reads, want) {
		t.Errorf("balances read %v, want %v", node.reads, want)
	}
	for i, tx := range store.txs[:store.used] {
		if !slices.Equal(tx.calls, foundUnread) || tx.booked != nil || tx.saved != nil {
			t.Errorf("transaction %d called %v, booked %d journals, saved %v: want %v and nothing booked or saved",
				i+1, tx.calls, len(tx.booked), tx.saved != nil, foundUnread)
		}
	}
}
