package booking_test

import (
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
)

const chain = 31337

var (
	ours      = common.HexToAddress("0x00000000000000000000000000000000000a11ce")
	alsoOurs  = common.HexToAddress("0x00000000000000000000000000000000000ca201")
	stranger  = common.HexToAddress("0x0000000000000000000000000000000000000b0b")
	tokenAddr = common.HexToAddress("0x5FbDB2315678afecb367f032d93F642f64180aa3")
	token     = strings.ToLower(tokenAddr.Hex())
)

type walletSet map[common.Address]bool

func (w walletSet) BooksAt(chainID uint64, a common.Address, _ uint64) bool {
	return chainID == chain && w[a]
}

var wallets = walletSet{ours: true, alsoOurs: true}

func receipt(status uint64, gasUsed, price int64, logs ...*types.Log) *types.Receipt {
	return &types.Receipt{Status: status, GasUsed: uint64(gasUsed), EffectiveGasPrice: big.NewInt(price), Logs: logs,
		TxHash: common.HexToHash("0x01"), BlockHash: common.HexToHash("0xb1"), BlockNumber: big.NewInt(7)}
}

func transferLog(from, to common.Address, amount *big.Int) *types.Log {
	return &types.Log{Address: tokenAddr, Topics: []common.Hash{booking.TransferTopic, common.BytesToHash(from.Bytes()), common.BytesToHash(to.Bytes())},
		Data: common.LeftPadBytes(amount.Bytes(), 32)}
}

// key names an account in balances' answer.
func key(kind ledger.AccountKind, asset string, addr common.Address) string {
	return string(kind) + ":" + asset + ":" + strings.ToLower(addr.Hex())
}

// balances sums a journal's legs per account, as the books would.
func balances(t *testing.T, j *ledger.Journal) map[string]string {
	t.Helper()
	if err := j.Validate(); err != nil {
		t.Fatalf("the journal would be refused: %v", err)
	}
	sums := map[string]*big.Int{}
	for _, l := range j.Legs {
		k := key(l.Account.Kind, l.Account.Asset, l.Account.Address)
		if sums[k] == nil {
			sums[k] = new(big.Int)
		}
		sums[k].Add(sums[k], l.Amount)
	}
	out := map[string]string{}
	for k, v := range sums {
		out[k] = v.String()
	}
	return out
}

func equal(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	keys := func(m map[string]string) []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		slices.Sort(out)
		return out
	}
	if g, w := keys(got), keys(want); !slices.Equal(g, w) {
		t.Errorf("%s:\n got %v\nwant %v", what, g, w)
	}
}

func TestAConfirmedTransferBooksValueAndFee(t *testing.T) {
	to := stranger
	j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(1000), Receipt: receipt(1, 21000, 3)}, wallets)
	if j.Kind != ledger.Confirmed || j.Status != "success" || j.Key != ledger.TxKey(chain, common.HexToHash("0x01"), common.HexToHash("0xb1")) ||
		j.Block == nil || j.Block.Number != 7 || *j.TxHash != common.HexToHash("0x01") {
		t.Errorf("journal %+v", j)
	}
	equal(t, "a transfer to a stranger", balances(t, j), map[string]string{
		key(ledger.Wallet, ledger.Native, ours): "-64000", key(ledger.FeeExpense, ledger.Native, ours): "63000",
		key(ledger.Counterparty, ledger.Native, stranger): "1000",
	})
}

func TestAConfirmedTransferBetweenWalletsStaysInTheWallets(t *testing.T) {
	to := alsoOurs
	j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(1000), Receipt: receipt(1, 21000, 1)}, wallets)
	var walletLegs int
	for _, l := range j.Legs {
		if l.Account.Kind == ledger.Counterparty {
			t.Errorf("a counterparty leg between two wallets: %+v", l)
		}
		if l.Account.Kind == ledger.Wallet {
			walletLegs++
		}
	}
	if walletLegs != 3 { // the value out, the value in, the fee out
		t.Errorf("%d wallet legs, want 3", walletLegs)
	}
	balances(t, j)
}

func TestARevertedTransactionBooksItsFeeOnly(t *testing.T) {
	to := stranger
	r := receipt(0, 50000, 2, transferLog(ours, stranger, big.NewInt(5))) // logs of a reverted tx do not exist; booking ignores them
	j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(1000), Receipt: r}, wallets)
	if j.Kind != ledger.Reverted || j.Status != "reverted" {
		t.Errorf("journal kind %s status %s", j.Kind, j.Status)
	}
	equal(t, "a reverted transaction", balances(t, j), map[string]string{key(ledger.Wallet, ledger.Native, ours): "-100000", key(ledger.FeeExpense, ledger.Native, ours): "100000"})

	if j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(1), Receipt: receipt(0, 21000, 0)}, wallets); j != nil {
		t.Errorf("a reverted transaction that paid nothing: %+v, want no journal", j)
	}
}

func TestFeesAddBlobGasAndL1DataFees(t *testing.T) {
	to := stranger
	r := receipt(1, 21000, 10)
	r.BlobGasUsed, r.BlobGasPrice = 131072, big.NewInt(3)
	s := &booking.Settled{ChainID: chain, From: ours, To: &to, Value: new(big.Int), Receipt: r, L1Fee: big.NewInt(12345)}
	if got, want := s.Fee(), big.NewInt(21000*10+131072*3+12345); got.Cmp(want) != 0 {
		t.Errorf("fee %s, want %s", got, want)
	}
	equal(t, "a blob transaction on an OP-stack chain", balances(t, booking.Journal(s, wallets)), map[string]string{
		key(ledger.Wallet, ledger.Native, ours): "-" + s.Fee().String(), key(ledger.FeeExpense, ledger.Native, ours): s.Fee().String(),
	})
}

func TestAContractCreationPaysTheContract(t *testing.T) {
	r := receipt(1, 100000, 1)
	r.ContractAddress = common.HexToAddress("0x00000000000000000000000000000000c0ffee00")
	j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, Value: big.NewInt(77), Receipt: r}, wallets)
	found := false
	for _, l := range j.Legs {
		if l.Account.Kind == ledger.Counterparty && l.Account.Address == r.ContractAddress && l.Amount.Int64() == 77 {
			found = true
		}
	}
	if !found {
		t.Errorf("no leg paying the created contract: %+v", j.Legs)
	}
	balances(t, j)
}

func TestTokenTransfersTouchingWalletsAreBooked(t *testing.T) {
	to := tokenAddr
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	nft := transferLog(stranger, ours, big.NewInt(9))
	nft.Topics = append(nft.Topics, common.HexToHash("0x09")) // ERC-721: the id is a fourth topic
	nft.Data = nil
	r := receipt(1, 60000, 1,
		transferLog(ours, stranger, big.NewInt(500)),   // paid out
		transferLog(stranger, alsoOurs, big.NewInt(7)), // received
		transferLog(ours, alsoOurs, max),               // between wallets, the largest amount
		transferLog(stranger, stranger, big.NewInt(3)), // not ours: left out
		transferLog(ours, stranger, new(big.Int)),      // zero: nothing moved
		nft,
	)
	j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, To: &to, Value: new(big.Int), Receipt: r}, wallets)
	got := balances(t, j)
	want := map[string]string{
		key(ledger.Wallet, ledger.Native, ours): "-60000", key(ledger.FeeExpense, ledger.Native, ours): "60000",
		key(ledger.Wallet, token, ours):           new(big.Int).Sub(big.NewInt(-500), max).String(),
		key(ledger.Wallet, token, alsoOurs):       new(big.Int).Add(big.NewInt(7), max).String(),
		key(ledger.Counterparty, token, stranger): "493",
	}
	equal(t, "token transfers", got, want)
	var tokenLegs int
	for _, l := range j.Legs {
		if l.Account.Asset == token {
			tokenLegs++
		}
	}
	if tokenLegs != 6 {
		t.Errorf("%d token legs, want 6 (three transfers)", tokenLegs)
	}
}

func TestAReversalNegatesTheJournal(t *testing.T) {
	to := stranger
	j := booking.Journal(&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(1000), Receipt: receipt(1, 21000, 3,
		transferLog(ours, stranger, big.NewInt(5)))}, wallets)
	rev := booking.Reverse(42, j)
	if rev.Kind != ledger.Reversal || rev.Reverses != 42 || rev.Key != ledger.ReversalKey(42) || rev.TxHash != j.TxHash {
		t.Errorf("reversal %+v", rev)
	}
	sum := balances(t, j)
	for k, v := range balances(t, rev) {
		neg, _ := new(big.Int).SetString(v, 10)
		if neg.Neg(neg).String() != sum[k] {
			t.Errorf("%s: reversal %s, original %s", k, v, sum[k])
		}
	}
	if rev.Legs[0].Amount == j.Legs[0].Amount {
		t.Error("the reversal shares the original's amounts")
	}
}

// openedAt books each wallet from the block after its opening.
type openedAt map[common.Address]uint64

func (o openedAt) BooksAt(chainID uint64, a common.Address, block uint64) bool {
	opened, ok := o[a]
	return chainID == chain && ok && opened < block
}

func TestAWalletIsBookedOnlyAfterItsOpening(t *testing.T) {
	to := alsoOurs
	settled := &booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(1000), Receipt: receipt(1, 21000, 1)} // block 7
	// The sender's opening at block 7 holds this transaction already; the
	// recipient opened before it: only the arrival is booked, from the
	// sender as a counterparty, and no fee.
	j := booking.Journal(settled, openedAt{ours: 7, alsoOurs: 6})
	equal(t, "sender opened at the block", balances(t, j), map[string]string{
		key(ledger.Counterparty, ledger.Native, ours): "-1000", key(ledger.Wallet, ledger.Native, alsoOurs): "1000",
	})
	if j := booking.Journal(settled, openedAt{ours: 7, alsoOurs: 9}); j != nil {
		t.Errorf("both wallets' openings hold the transaction, yet it books %+v", j.Legs)
	}
	j = booking.Journal(settled, openedAt{ours: 6, alsoOurs: 6})
	equal(t, "both opened before", balances(t, j), map[string]string{
		key(ledger.Wallet, ledger.Native, ours): "-22000", key(ledger.Wallet, ledger.Native, alsoOurs): "1000",
		key(ledger.FeeExpense, ledger.Native, ours): "21000",
	})
}

func TestPartiesNameEveryAddressAJournalMayMove(t *testing.T) {
	to := tokenAddr
	s := &booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(0),
		Receipt: receipt(1, 21000, 1, transferLog(stranger, alsoOurs, big.NewInt(5)))}
	if got, want := s.Parties(), []common.Address{ours, tokenAddr, stranger, alsoOurs}; !slices.Equal(got, want) {
		t.Errorf("parties %v, want %v", got, want)
	}
}
