package booking_test

import (
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
)

var (
	depositTx    = common.HexToHash("0xd0")
	depositBlock = ledger.Block{Number: 8, Hash: common.HexToHash("0xB8")}
)

func TestADepositBooksWhatReachedWalletsFromTheirSources(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		inflows []booking.Inflow
		want    map[string]string // nil: no journal
	}{
		{"native value", []booking.Inflow{{ledger.Native, stranger, ours, big.NewInt(5)}}, map[string]string{
			key(ledger.DepositSource, ledger.Native, stranger): "-5",
			key(ledger.Wallet, ledger.Native, ours):            "5",
		}},
		{"value and tokens to two wallets, the same route summed", []booking.Inflow{
			{ledger.Native, stranger, ours, big.NewInt(5)},
			{token, stranger, ours, big.NewInt(7)},
			{token, stranger, alsoOurs, big.NewInt(2)},
			{token, stranger, ours, big.NewInt(1)},
		}, map[string]string{
			key(ledger.DepositSource, ledger.Native, stranger): "-5",
			key(ledger.Wallet, ledger.Native, ours):            "5",
			key(ledger.DepositSource, token, stranger):         "-10",
			key(ledger.Wallet, token, ours):                    "8",
			key(ledger.Wallet, token, alsoOurs):                "2",
		}},
		{"an outsider moving tokens between two wallets", []booking.Inflow{{token, ours, alsoOurs, big.NewInt(3)}}, map[string]string{
			key(ledger.Wallet, token, ours):     "-3",
			key(ledger.Wallet, token, alsoOurs): "3",
		}},
		{"to an address that is no wallet", []booking.Inflow{{token, stranger, common.HexToAddress("0xe1"), big.NewInt(3)}}, nil},
		{"zero", []booking.Inflow{{ledger.Native, stranger, ours, new(big.Int)}}, nil},
		{"a wallet to itself", []booking.Inflow{{token, ours, ours, big.NewInt(3)}}, nil},
		{"nothing", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			js := booking.Deposit(chain, depositTx, depositBlock, c.inflows, wallets)
			if c.want == nil {
				if len(js) != 0 {
					t.Fatalf("booked %+v, want nothing", js[0].Legs)
				}
				return
			}
			if len(js) != 1 {
				t.Fatalf("%d journals, want one", len(js))
			}
			j := js[0]
			equal(t, c.name, balances(t, j), c.want)
			if j.Kind != ledger.Deposit || j.Key != booking.DepositKey(chain, depositTx, depositBlock.Hash) || *j.TxHash != depositTx ||
				*j.Block != depositBlock || j.Status != "success" {
				t.Errorf("journal %+v: want a successful deposit of the transaction in its block", j)
			}
		})
	}
}

// A wallet opened at or after the deposit's block holds the deposit in its
// opening balance: the deposit is not booked again.
func TestADepositToAWalletNotOpenedBeforeItsBlockBooksNothing(t *testing.T) {
	t.Parallel()
	in := []booking.Inflow{{ledger.Native, stranger, ours, big.NewInt(5)}}
	if js := booking.Deposit(chain, depositTx, depositBlock, in, openedAt{ours: depositBlock.Number}); len(js) != 0 {
		t.Errorf("booked %+v for a wallet opened at the deposit's block", js[0].Legs)
	}
	if js := booking.Deposit(chain, depositTx, depositBlock, in, openedAt{ours: depositBlock.Number - 1}); len(js) != 1 {
		t.Error("booked nothing for a wallet opened the block before")
	}
}

// Anyone can log transfers to our wallets: a transaction logging more than
// a journal holds, or amounts summing beyond a uint256, is still booked,
// over several journals, each valid.
func TestADepositOfAnySizeIsBooked(t *testing.T) {
	t.Parallel()
	var in []booking.Inflow
	for i := range ledger.MaxLegs / 2 { // a journal's worth of routes
		from := common.BigToAddress(big.NewInt(int64(1000 + i)))
		in = append(in, booking.Inflow{Asset: token, From: from, To: ours, Amount: big.NewInt(1)})
	}
	in = append(in, booking.Inflow{Asset: token, From: stranger, To: alsoOurs, Amount: ledger.MaxAmount},
		booking.Inflow{Asset: token, From: stranger, To: alsoOurs, Amount: ledger.MaxAmount})
	js := booking.Deposit(chain, depositTx, depositBlock, in, wallets)
	if len(js) != 2 {
		t.Fatalf("%d journals, want two", len(js))
	}
	total := map[string]*big.Int{}
	for i, j := range js {
		if err := j.Validate(); err != nil {
			t.Errorf("journal %d: %v", i, err)
		}
		for _, l := range j.Legs {
			k := key(l.Account.Kind, l.Account.Asset, l.Account.Address)
			if total[k] == nil {
				total[k] = new(big.Int)
			}
			total[k].Add(total[k], l.Amount)
		}
	}
	if js[0].Key != booking.DepositKey(chain, depositTx, depositBlock.Hash) || js[1].Key != js[0].Key+"/2" {
		t.Errorf("keys %s, %s", js[0].Key, js[1].Key)
	}
	if got, want := total[key(ledger.Wallet, token, ours)], big.NewInt(ledger.MaxLegs/2); got.Cmp(want) != 0 {
		t.Errorf("booked %s to the first wallet, want %s", got, want)
	}
	if got, want := total[key(ledger.Wallet, token, alsoOurs)], new(big.Int).Lsh(ledger.MaxAmount, 1); got.Cmp(want) != 0 {
		t.Errorf("booked %s to the second wallet, want %s", got, want)
	}
}

func TestAnOpeningBooksEachHeldAssetAgainstTheOpeningBalance(t *testing.T) {
	t.Parallel()
	j := booking.Opening(chain, ours, depositBlock, map[string]*big.Int{ledger.Native: big.NewInt(9), token: big.NewInt(4), "0x" + common.Bytes2Hex(stranger.Bytes()): new(big.Int)})
	equal(t, "opening", balances(t, j), map[string]string{
		key(ledger.Wallet, ledger.Native, ours):         "9",
		key(ledger.OpeningBalance, ledger.Native, ours): "-9",
		key(ledger.Wallet, token, ours):                 "4",
		key(ledger.OpeningBalance, token, ours):         "-4",
	})
	if j.Kind != ledger.Opening || j.Key != booking.OpeningKey(chain, ours, depositBlock.Hash) || *j.Block != depositBlock || j.TxHash != nil || j.Status != "" {
		t.Errorf("journal %+v: want an opening at its block", j)
	}
	if j := booking.Opening(chain, ours, depositBlock, map[string]*big.Int{ledger.Native: new(big.Int)}); j != nil {
		t.Errorf("an empty wallet's opening booked %+v", j.Legs)
	}
}

func TestKeysAreLowerCase(t *testing.T) {
	t.Parallel()
	if got, want := booking.DepositKey(chain, common.HexToHash("0xAB"), common.HexToHash("0xCD")),
		"deposit:31337:0x00000000000000000000000000000000000000000000000000000000000000ab:0x00000000000000000000000000000000000000000000000000000000000000cd"; got != want {
		t.Errorf("DepositKey = %s, want %s", got, want)
	}
	if got, want := booking.OpeningKey(chain, common.HexToAddress("0x00000000000000000000000000000000000A11cE"), common.HexToHash("0xCD")),
		"opening:31337:0x00000000000000000000000000000000000a11ce:0x00000000000000000000000000000000000000000000000000000000000000cd"; got != want {
		t.Errorf("OpeningKey = %s, want %s", got, want)
	}
}
