package booking_test

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
)

var (
	bridge     = common.HexToAddress("0x00000000000000000000000000000000b81d9e00")
	otherToken = common.HexToAddress("0x0000000000000000000000000000000000070c2e")
)

func tokenLog(tok, from, to common.Address, amount int64) *types.Log {
	l := transferLog(from, to, big.NewInt(amount))
	l.Address = tok
	return l
}

func memoOf(t *testing.T, j *ledger.Journal) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(j.Memo, &m); err != nil {
		t.Fatalf("memo %s: %v", j.Memo, err)
	}
	return m
}

// The source of a transit books what its wallet pays counterparties in
// the crossing asset into the wallet's in_transit account, its fee as
// usual; a token crosses before native value, which stays a payment.
func TestATransitSourcePaysInTransit(t *testing.T) {
	end := booking.TransitSide{ID: "rb-1", Role: booking.TransitSource, Wallet: ours}
	for name, c := range map[string]struct {
		to     common.Address
		value  int64
		logs   []*types.Log
		asset  string
		moved  int64
		bridge common.Address
		want   map[string]string
	}{
		"the bridge takes a token, and a fee to a collector": {
			to:    bridge,
			logs:  []*types.Log{transferLog(ours, stranger, big.NewInt(3)), transferLog(ours, bridge, big.NewInt(1000))},
			asset: token, moved: 1003, bridge: bridge,
			want: map[string]string{
				key(ledger.Wallet, ledger.Native, ours): "-21000", key(ledger.FeeExpense, ledger.Native, ours): "21000",
				key(ledger.Wallet, token, ours): "-1003", key(ledger.InTransit, token, ours): "1003",
			},
		},
		"a token burnt by the bridge, and a messaging fee in value": {
			to: bridge, value: 50,
			logs:  []*types.Log{transferLog(ours, common.Address{}, big.NewInt(700))},
			asset: token, moved: 700, bridge: bridge,
			want: map[string]string{
				key(ledger.Wallet, ledger.Native, ours): "-21050", key(ledger.FeeExpense, ledger.Native, ours): "21000",
				key(ledger.Counterparty, ledger.Native, bridge): "50",
				key(ledger.Wallet, token, ours):                 "-700", key(ledger.InTransit, token, ours): "700",
			},
		},
		"native value, and a token received, which stays as it is": {
			to: bridge, value: 9000,
			logs:  []*types.Log{transferLog(stranger, ours, big.NewInt(4))},
			asset: ledger.Native, moved: 9000, bridge: bridge,
			want: map[string]string{
				key(ledger.Wallet, ledger.Native, ours): "-30000", key(ledger.FeeExpense, ledger.Native, ours): "21000",
				key(ledger.InTransit, ledger.Native, ours): "9000",
				key(ledger.Wallet, token, ours):            "4", key(ledger.Counterparty, token, stranger): "-4",
			},
		},
		"a plain transfer of the token: the bridge is who it paid most": {
			to:    tokenAddr,
			logs:  []*types.Log{transferLog(ours, stranger, big.NewInt(4)), transferLog(ours, bridge, big.NewInt(10)), transferLog(ours, stranger, big.NewInt(5))},
			asset: token, moved: 19, bridge: bridge,
			want: map[string]string{
				key(ledger.Wallet, ledger.Native, ours): "-21000", key(ledger.FeeExpense, ledger.Native, ours): "21000",
				key(ledger.Wallet, token, ours): "-19", key(ledger.InTransit, token, ours): "19",
			},
		},
		"a token to another wallet of ours crosses nothing of it": {
			to:    bridge,
			logs:  []*types.Log{transferLog(ours, alsoOurs, big.NewInt(5)), transferLog(ours, bridge, big.NewInt(10))},
			asset: token, moved: 10, bridge: bridge,
			want: map[string]string{
				key(ledger.Wallet, ledger.Native, ours): "-21000", key(ledger.FeeExpense, ledger.Native, ours): "21000",
				key(ledger.Wallet, token, ours): "-15", key(ledger.Wallet, token, alsoOurs): "5", key(ledger.InTransit, token, ours): "10",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			s := &booking.Settled{ChainID: chain, From: ours, To: &c.to, Value: big.NewInt(c.value), Receipt: receipt(1, 21000, 1, c.logs...)}
			j, moved, err := booking.TransitJournal(s, wallets, end)
			if err != nil {
				t.Fatal(err)
			}
			if j.Kind != ledger.TransitOut || j.Key != ledger.TxKey(chain, common.HexToHash("0x01"), common.HexToHash("0xb1")) || j.Status != "success" {
				t.Errorf("journal %s %s %s", j.Kind, j.Key, j.Status)
			}
			if m := memoOf(t, j); m["transit_id"] != "rb-1" || m["transit_part"] != "source" {
				t.Errorf("memo %s", j.Memo)
			}
			if moved.Asset != c.asset || moved.Amount.Int64() != c.moved || moved.Bridge != c.bridge {
				t.Errorf("moved %s %s to bridge %s, want %d %s to %s", moved.Amount, moved.Asset, moved.Bridge, c.moved, c.asset, c.bridge)
			}
			equal(t, name, balances(t, j), c.want)
		})
	}
}

// The destination of a transit books what its wallet receives from
// counterparties (a mint, a bridge's release) out of its in_transit
// account.
func TestATransitDestinationComesFromInTransit(t *testing.T) {
	to := tokenAddr
	s := &booking.Settled{ChainID: chain, From: ours, To: &to, Value: new(big.Int), Receipt: receipt(1, 40000, 2,
		transferLog(common.Address{}, ours, big.NewInt(990)), transferLog(ours, stranger, big.NewInt(1)))}
	j, moved, err := booking.TransitJournal(s, wallets, booking.TransitSide{ID: "rb-1", Role: booking.TransitDestination, Wallet: ours})
	if err != nil {
		t.Fatal(err)
	}
	if j.Kind != ledger.TransitIn || memoOf(t, j)["transit_part"] != "destination" {
		t.Errorf("journal %s, memo %s", j.Kind, j.Memo)
	}
	if moved.Asset != token || moved.Amount.Int64() != 990 || moved.Bridge != (common.Address{}) {
		t.Errorf("moved %s %s, want 990 of the token", moved.Amount, moved.Asset)
	}
	equal(t, "a mint to the wallet", balances(t, j), map[string]string{
		key(ledger.Wallet, ledger.Native, ours): "-80000", key(ledger.FeeExpense, ledger.Native, ours): "80000",
		key(ledger.InTransit, token, ours): "-990", key(ledger.Wallet, token, ours): "989", key(ledger.Counterparty, token, stranger): "1",
	})
}

// A transaction that cannot be an end of a transit is booked as a plain
// transaction, with the reason it is not.
func TestWhatIsNotATransitSideIsBookedPlainly(t *testing.T) {
	to := bridge
	source := booking.TransitSide{ID: "rb-1", Role: booking.TransitSource, Wallet: ours}
	for name, c := range map[string]struct {
		s    *booking.Settled
		end  booking.TransitSide
		want string
	}{
		"reverted": {&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(5), Receipt: receipt(0, 21000, 1)}, source, "reverted"},
		"nothing out": {&booking.Settled{ChainID: chain, From: ours, To: &to, Value: new(big.Int), Receipt: receipt(1, 21000, 1,
			transferLog(stranger, ours, big.NewInt(3)))}, source, "moved nothing"},
		"two tokens out": {&booking.Settled{ChainID: chain, From: ours, To: &to, Value: new(big.Int), Receipt: receipt(1, 21000, 1,
			transferLog(ours, bridge, big.NewInt(3)), tokenLog(otherToken, ours, bridge, 4))}, source, "2 tokens"},
		"another wallet's payment": {&booking.Settled{ChainID: chain, From: ours, To: &to, Value: new(big.Int), Receipt: receipt(1, 21000, 1,
			transferLog(alsoOurs, bridge, big.NewInt(3)))}, source, "moved nothing"},
		"a destination that receives nothing": {&booking.Settled{ChainID: chain, From: ours, To: &to, Value: big.NewInt(8), Receipt: receipt(1, 21000, 1)},
			booking.TransitSide{ID: "rb-1", Role: booking.TransitDestination, Wallet: ours}, "moved nothing"},
	} {
		t.Run(name, func(t *testing.T) {
			j, _, err := booking.TransitJournal(c.s, wallets, c.end)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			plain := booking.Journal(c.s, wallets)
			if j.PayloadHash() != plain.PayloadHash() {
				t.Errorf("booked %+v, want the plain journal %+v", j, plain)
			}
		})
	}
}

// Once both ends are booked, the difference moves from the source's
// in_transit to the bridge's fee expense, so that in_transit nets to zero
// over the two chains; a negative difference is booked the other way, and
// none is no journal.
func TestTheBridgeFeeClosesTheTransit(t *testing.T) {
	const chainB = 10
	source := ledger.AccountKey{ChainID: chain, Asset: token, Kind: ledger.InTransit, Address: ours}
	srcKey, dstKey := ledger.TxKey(chain, common.HexToHash("0x01"), common.HexToHash("0xb1")), ledger.TxKey(chainB, common.HexToHash("0x02"), common.HexToHash("0xb2"))
	for _, c := range []struct{ sent, received int64 }{{1000, 990}, {1000, 1004}} {
		fee := big.NewInt(c.sent - c.received)
		j := booking.TransitFee("rb-1", source, bridge, srcKey, dstKey, fee)
		if j.Kind != ledger.TransitOut || j.ChainID != chain || j.Key != booking.TransitFeeKey("rb-1", srcKey, dstKey) || len(j.Key) > 512 {
			t.Errorf("journal %s on %d under %q", j.Kind, j.ChainID, j.Key)
		}
		if m := memoOf(t, j); m["transit_part"] != "bridge_fee" {
			t.Errorf("memo %s", j.Memo)
		}
		got := balances(t, j)
		equal(t, "the bridge fee", got, map[string]string{
			key(ledger.InTransit, token, ours): new(big.Int).Neg(fee).String(), key(ledger.FeeExpense, token, bridge): fee.String(),
		})
		// in_transit on the source chain: +sent, then the fee; on the
		// destination chain: -received.
		onA := new(big.Int).Add(big.NewInt(c.sent), j.Legs[0].Amount)
		if onA.Int64()-c.received != 0 {
			t.Errorf("sent %d, received %d: in_transit holds %s on the source chain and -%d on the destination's", c.sent, c.received, onA, c.received)
		}
	}
	if j := booking.TransitFee("rb-1", source, bridge, srcKey, dstKey, new(big.Int)); j != nil {
		t.Errorf("no difference booked %+v", j)
	}
	longest := ledger.TransitKey(strings.Repeat("n", ledger.MaxTransitNamespaceLen), strings.Repeat("x", ledger.MaxTransitIDLen))
	longKey := ledger.TxKey(1<<63-1, common.HexToHash("0x01"), common.HexToHash("0xb1"))
	if j := booking.TransitFee(longest, source, bridge, longKey, longKey, big.NewInt(1)); j.Validate() != nil {
		t.Errorf("the longest key: %v", j.Validate())
	}
}
