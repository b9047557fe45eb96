package ledgertest

import (
	"context"
	"crypto/sha256"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/postgres"
)

// TransitEnd is one end of a transit BookTransit books: a wallet on a
// chain, and what crosses its in_transit account when the end is booked.
type TransitEnd struct {
	ChainID uint64
	Wallet  common.Address
	Asset   string
	Amount  int64
}

// BookTransit books transit id from source to destination as the feed
// consumer would, through store's feed cursor ("txmanager"): linked, then
// with booked ends (0: pending; 1: the source booked, open; 2: both, and
// the bridge fee, completed). Each end's journal moves its amount between
// the wallet and its in_transit account in block 1; bridge takes the fee.
// It answers the transit as stored.
func BookTransit(t testing.TB, store *postgres.Store, id string, source, destination TransitEnd, bridge common.Address, booked int) ledger.Transit {
	t.Helper()
	ctx := context.Background()
	w := ledger.TransitWrite{Transit: ledger.Transit{ID: id, Status: ledger.TransitPending,
		Source:      ledger.TransitEnd{TxID: uuid.New(), ChainID: source.ChainID, Wallet: source.Wallet},
		Destination: ledger.TransitEnd{TxID: uuid.New(), ChainID: destination.ChainID, Wallet: destination.Wallet}}}
	var journals []*ledger.Journal
	if booked >= 1 {
		w.SourceJournal = crossing(id, ledger.TransitOut, source)
		w.Source.TxHash, w.Source.BlockHash = w.SourceJournal.TxHash, &w.SourceJournal.Block.Hash
		w.Source.Asset, w.Source.Amount, w.Bridge = source.Asset, big.NewInt(source.Amount), &bridge
		journals = append(journals, w.SourceJournal)
	}
	if booked >= 2 {
		w.DestinationJournal = crossing(id, ledger.TransitIn, destination)
		w.Destination.TxHash, w.Destination.BlockHash = w.DestinationJournal.TxHash, &w.DestinationJournal.Block.Hash
		w.Destination.Asset, w.Destination.Amount = destination.Asset, big.NewInt(destination.Amount)
		w.BridgeFee = big.NewInt(source.Amount - destination.Amount)
		inTransit := ledger.AccountKey{ChainID: source.ChainID, Asset: source.Asset, Kind: ledger.InTransit, Address: source.Wallet}
		w.FeeJournal = booking.TransitFee(id, inTransit, bridge, w.SourceJournal.Key, w.DestinationJournal.Key, w.BridgeFee)
		journals = append(journals, w.DestinationJournal)
		if w.FeeJournal != nil {
			journals = append(journals, w.FeeJournal)
		}
	}
	w.Status = w.StatusOf()
	from, err := store.Cursor(ctx, "txmanager")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.BookFeed(ctx, &ledger.FeedBooking{Feed: "txmanager", From: from, To: from + 1, Journals: journals,
		Transits: []ledger.TransitWrite{w}}); err != nil {
		t.Fatalf("book transit %s: %v", id, err)
	}
	stored, err := store.Transit(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

// crossing is the journal of one end of transit id: its amount out of the
// wallet into in_transit at the source, the other way at the destination.
func crossing(id string, kind ledger.JournalKind, e TransitEnd) *ledger.Journal {
	tx := common.Hash(sha256.Sum256([]byte(id + "/" + string(kind))))
	block := ledger.Block{Number: 1, Hash: sha256.Sum256([]byte("block 1"))}
	wallet := ledger.AccountKey{ChainID: e.ChainID, Asset: e.Asset, Kind: ledger.Wallet, Address: e.Wallet}
	inTransit := wallet
	inTransit.Kind = ledger.InTransit
	amount := big.NewInt(e.Amount)
	if kind == ledger.TransitOut {
		amount.Neg(amount)
	}
	return &ledger.Journal{Kind: kind, Key: ledger.TxKey(e.ChainID, tx, block.Hash), ChainID: e.ChainID, TxHash: &tx, Block: &block,
		Status: "success", Legs: []ledger.Leg{{Account: wallet, Amount: amount}, {Account: inTransit, Amount: new(big.Int).Neg(amount)}}}
}
