package postgres_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/testinfra/logtest"
)

// A fact that takes a wallet below zero is booked all the same, and is an
// alert once, when the wallet crosses zero: not again while it stays
// below, nor for a replay. The stats count the wallet until it is back.
func TestABookingThatTakesAWalletBelowZeroIsBookedAndAlerted(t *testing.T) {
	t.Parallel()
	_, pool := books(t)
	logs := &logtest.Buffer{}
	s := postgres.New(pool, slog.New(slog.NewJSONHandler(logs, nil)))
	ctx := context.Background()
	run := func(journals ...*ledger.Journal) {
		t.Helper()
		from, err := s.Cursor(ctx, feed)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.BookFeed(ctx, &ledger.FeedBooking{Feed: feed, From: from, To: from + 1, Journals: journals}); err != nil {
			t.Fatal(err)
		}
	}
	negatives := func() int {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.NegativeWallets[chain]
	}
	in := &ledger.Journal{Kind: ledger.Deposit, Key: "in", ChainID: chain, Legs: []ledger.Leg{
		leg(acct(ledger.Wallet, ledger.Native, hot), 100), leg(acct(ledger.DepositSource, ledger.Native, bob), -100)}}
	run(in, transfer("fits", hot, bob, 60, 1))
	if n := len(logs.Alerts(t)); n != 0 || negatives() != 0 {
		t.Fatalf("%d alerts and %d negative wallets with 39 left", n, negatives())
	}

	run(transfer("beyond", hot, bob, 50, 1))
	alerts := logs.Alerts(t)
	if len(alerts) != 1 || alerts[0]["balance"] != "-12" || alerts[0]["before"] != "39" || alerts[0]["asset"] != ledger.Native ||
		alerts[0]["address"] != hot.Hex() || alerts[0]["chain_id"] != float64(chain) {
		t.Fatalf("alerts: %v, want one taking %s from 39 to -12", alerts, hot)
	}
	if got := balance(t, s, acct(ledger.Wallet, ledger.Native, hot)); got.Int64() != -12 || negatives() != 1 {
		t.Errorf("booked to %s, %d negative wallets; want -12 and 1", got, negatives())
	}

	// Further below, and a replay of what took it there: no new alert.
	run(transfer("further", hot, bob, 5, 1), transfer("beyond", hot, bob, 50, 1))
	if n := len(logs.Alerts(t)); n != 1 {
		t.Errorf("%d alerts, want still 1", n)
	}

	// Back above zero, then below again: a crossing anew.
	run(&ledger.Journal{Kind: ledger.Deposit, Key: "in-2", ChainID: chain, Legs: []ledger.Leg{
		leg(acct(ledger.Wallet, ledger.Native, hot), 100), leg(acct(ledger.DepositSource, ledger.Native, bob), -100)}})
	if negatives() != 0 {
		t.Errorf("%d negative wallets after the deposit", negatives())
	}
	run(transfer("again", hot, bob, 200, 1))
	if n := len(logs.Alerts(t)); n != 2 || negatives() != 1 {
		t.Errorf("%d alerts, %d negative wallets; want 2 and 1", n, negatives())
	}
}
