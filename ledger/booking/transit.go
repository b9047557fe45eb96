package booking

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
)

// A transit is a transfer between chains (a rebalancing): a source
// transaction on one chain sends funds away from a wallet (to a bridge),
// and a destination transaction on another chain brings them to a wallet
// (a claim, a mint). Each is booked on its own chain, so journals stay
// single-chain and each chain's books balance on their own; what has left
// and not yet arrived sits in in_transit accounts:
//
//   - the source books wallet A → in_transit (chain A) instead of paying the
//     counterparty (journal kind transit_out);
//   - the destination books in_transit (chain B) → wallet B instead of being
//     paid by a counterparty (kind transit_in);
//   - once both are booked, the difference (sent − received, one asset by
//     the operator's declaration, compared as integers) moves from
//     in_transit (chain A) to the bridge's fee_expense account (kind
//     transit_out): the bridge fee. in_transit then holds +received on
//     chain A and −received on chain B: the transfer nets to zero.
//
// An in_transit account belongs to a wallet: its address is the wallet's
// (the source's sender on chain A, the destination's on chain B), so a
// wallet's in_transit balance is what it has sent and not yet seen
// arrive, over all its transfers.

// TransitRole says which end of a transit a transaction is.
type TransitRole string

// The ends of a transit.
const (
	TransitSource      TransitRole = "source"
	TransitDestination TransitRole = "destination"
)

// TransitSide names a settled transaction as one end of a transit, for
// booking it.
type TransitSide struct {
	// ID is the transit's id.
	ID   string
	Role TransitRole
	// Wallet is the transaction's sender: the wallet whose funds leave
	// (source) or arrive (destination), and whose in_transit account
	// holds them meanwhile.
	Wallet common.Address
}

// TransitMove is what one end of a transit moved through its in_transit
// account: one asset, a positive amount (into in_transit at the source,
// out of it at the destination).
type TransitMove struct {
	Asset  string
	Amount *big.Int
	// Bridge, at the source, is who the bridge fee is paid to: the
	// transaction's recipient (the bridge contract that took the funds),
	// or, when the transaction calls the crossing token itself (a plain
	// transfer to the bridge), the counterparty it paid the most.
	Bridge common.Address
}

// TransitJournal books s as end of a transit. At the source, the legs
// that would pay a counterparty from the end's wallet (the value, and
// token transfers out of it) pay its in_transit account instead; at the
// destination, the legs that would pay the end's wallet from a
// counterparty (token transfers into it: a claim, a mint) come from its
// in_transit account instead. Everything else (the fee, movements of
// other wallets) is booked as Journal books it. One asset crosses: when
// the source pays counterparties in a token and in native value (a
// bridge's messaging fee), the token crosses and the value is a payment
// as usual.
//
// When s is not such an end (it reverted, moved nothing across, or moved
// several tokens across, which the transfer's single amount cannot say),
// TransitJournal returns the journal Journal books and an error saying
// why: the caller books it as a plain transaction, and the transit stays
// as it was.
func TransitJournal(s *Settled, wallets Wallets, end TransitSide) (*ledger.Journal, TransitMove, error) {
	b, kind, status := build(s, wallets)
	plain := b.journal(s, kind, status)
	if kind != ledger.Confirmed {
		return plain, TransitMove{}, errors.New("the transaction reverted: nothing crossed")
	}
	wallet := b.account(ledger.Wallet, "", end.Wallet)
	// crossing lists, per asset, the pairs of legs (from, to) that cross:
	// b.move appends each movement as its two legs, from first.
	crossing := map[string][]int{}
	for i := 0; i+1 < len(b.legs); i += 2 {
		from, to := b.legs[i].Account, b.legs[i+1].Account
		asset := from.Asset
		from.Asset, to.Asset = "", ""
		switch end.Role {
		case TransitSource:
			if from == wallet && to.Kind == ledger.Counterparty {
				crossing[asset] = append(crossing[asset], i+1)
			}
		case TransitDestination:
			if from.Kind == ledger.Counterparty && to == wallet {
				crossing[asset] = append(crossing[asset], i)
			}
		default:
			return plain, TransitMove{}, fmt.Errorf("transit role %q: source or destination", end.Role)
		}
	}
	assets := slices.Sorted(maps.Keys(crossing))
	if len(assets) > 1 {
		assets = slices.DeleteFunc(assets, func(a string) bool { return a == ledger.Native })
	}
	switch len(assets) {
	case 0:
		return plain, TransitMove{}, fmt.Errorf("the transaction moved nothing between wallet %s and a counterparty", end.Wallet.Hex())
	case 1:
	default:
		return plain, TransitMove{}, fmt.Errorf("the transaction moved %d tokens between wallet %s and counterparties (%s): a transfer crosses in one",
			len(assets), end.Wallet.Hex(), strings.Join(assets, ", "))
	}
	asset := assets[0]
	moved := TransitMove{Asset: asset, Amount: new(big.Int), Bridge: s.Recipient()}
	inTransit := b.account(ledger.InTransit, asset, end.Wallet)
	var top *ledger.Leg // the payment with the most to one counterparty
	paid := map[common.Address]*big.Int{}
	for _, i := range crossing[asset] {
		l := &b.legs[i]
		if end.Role == TransitSource {
			if paid[l.Account.Address] == nil {
				paid[l.Account.Address] = new(big.Int)
			}
			if paid[l.Account.Address].Add(paid[l.Account.Address], l.Amount); top == nil || paid[l.Account.Address].Cmp(paid[top.Account.Address]) > 0 {
				top = l
			}
		}
		moved.Amount.Add(moved.Amount, new(big.Int).Abs(l.Amount))
	}
	switch {
	case end.Role != TransitSource:
		moved.Bridge = common.Address{}
	case top != nil && strings.EqualFold(moved.Bridge.Hex(), asset):
		moved.Bridge = top.Account.Address
	}
	for _, i := range crossing[asset] {
		b.legs[i].Account = inTransit
	}
	j := b.journal(s, ledger.TransitOut, status)
	if end.Role == TransitDestination {
		j.Kind = ledger.TransitIn
	}
	j.Memo = transitMemo(end.ID, string(end.Role))
	return j, moved, nil
}

// TransitFee is the journal completing transit id, booked on the source's
// chain once both ends are: the difference between what left and what
// arrived moves from the source wallet's in_transit account to the
// bridge's fee_expense account (bridge: the source's TransitMove.Bridge).
// A negative difference (more arrived than left) is booked
// the other way. nil when the difference is zero.
//
// Its key derives from the keys of the two ends' journals: the same pair
// of bookings completes the transit once, and a re-booked end (its block
// left the chain) completes it anew.
func TransitFee(id string, source ledger.AccountKey, bridge common.Address, sourceKey, destinationKey string, fee *big.Int) *ledger.Journal {
	if fee.Sign() == 0 {
		return nil
	}
	inTransit := ledger.AccountKey{ChainID: source.ChainID, Asset: source.Asset, Kind: ledger.InTransit, Address: source.Address}
	expense := ledger.AccountKey{ChainID: source.ChainID, Asset: source.Asset, Kind: ledger.FeeExpense, Address: bridge}
	return &ledger.Journal{Kind: ledger.TransitOut, Key: TransitFeeKey(id, sourceKey, destinationKey), ChainID: source.ChainID,
		Memo: transitMemo(id, "bridge_fee"),
		Legs: []ledger.Leg{{Account: inTransit, Amount: new(big.Int).Neg(fee)}, {Account: expense, Amount: new(big.Int).Set(fee)}}}
}

// TransitFeeKey is the key of the journal TransitFee books for transit id
// whose ends are booked under sourceKey and destinationKey (TxKey).
func TransitFeeKey(id, sourceKey, destinationKey string) string {
	return "transit:" + id + ":fee:" + sourceKey + ":" + destinationKey
}

// transitMemo says which transit a journal books, and as which part.
func transitMemo(id, part string) json.RawMessage {
	memo, err := json.Marshal(struct {
		TransitID string `json:"transit_id"`
		Part      string `json:"transit_part"`
	}{id, part})
	if err != nil {
		panic("booking: marshal a transit memo: " + err.Error()) // two strings always marshal
	}
	return memo
}
