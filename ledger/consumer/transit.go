package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/openapi/components"
)

// Transits (ledger.Transit): the INIT events of a transfer's two
// transactions link them under its transit id, the source first, then the
// destination, which depends on it. Their settlements book through
// in_transit accounts (booking.TransitJournal), and the second one booked
// books the bridge fee too (booking.TransitFee). A reorg that undoes an
// end's booking undoes the bridge fee with it and re-opens the transit.

// transitPage is the transits a page of the feed links or moves, as its
// events so far leave them: read once for the page (TransitsOf), changed
// by each event, written with the page.
type transitPage struct {
	byID    map[string]*ledger.TransitWrite
	byTx    map[uuid.UUID]*ledger.TransitWrite
	changed []string // transit ids, in the order first changed
}

// loadTransits reads the transits events may link or move: those their
// INIT events name, and those of their transactions.
func (c *Consumer) loadTransits(ctx context.Context, events []components.Event) (*transitPage, error) {
	var txs []uuid.UUID
	var ids []string
	for _, ev := range events {
		id, err := uuid.Parse(ev.TxId)
		if err != nil {
			continue // not txmanager's: no transit's
		}
		txs = append(txs, id)
		var d stateChanged
		if ev.Type == components.EventTxStateChanged && json.Unmarshal(ev.Data, &d) == nil && d.accepted() {
			if key, ok := d.transit(); ok && key != "" {
				ids = append(ids, key)
			}
		}
	}
	stored, err := c.Store.TransitsOf(ctx, slices.Compact(slices.SortedFunc(slices.Values(txs), compareUUID)), ids)
	if err != nil {
		return nil, err
	}
	p := &transitPage{byID: map[string]*ledger.TransitWrite{}, byTx: map[uuid.UUID]*ledger.TransitWrite{}}
	for _, t := range stored {
		p.index(&ledger.TransitWrite{Transit: t})
	}
	return p, nil
}

func compareUUID(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }

func (p *transitPage) index(w *ledger.TransitWrite) {
	p.byID[w.ID] = w
	p.byTx[w.Source.TxID] = w
	if w.Destination.TxID != uuid.Nil {
		p.byTx[w.Destination.TxID] = w
	}
}

// ofTx is a copy of the transit transaction tx is an end of, for an event
// to change; nil when it is none's.
func (p *transitPage) ofTx(tx components.TxId) *ledger.TransitWrite {
	id, err := uuid.Parse(tx)
	if err != nil || p.byTx[id] == nil {
		return nil
	}
	w := *p.byTx[id]
	return &w
}

// put keeps w as the page's events leave its transit.
func (p *transitPage) put(w *ledger.TransitWrite) {
	if !slices.Contains(p.changed, w.ID) {
		p.changed = append(p.changed, w.ID)
	}
	p.index(w)
}

// written is what the page writes: the transits its events changed.
func (p *transitPage) written() []ledger.TransitWrite {
	out := make([]ledger.TransitWrite, len(p.changed))
	for i, id := range p.changed {
		out[i] = *p.byID[id]
	}
	return out
}

// endOf is the end of t that tx is, and its role.
func endOf(t *ledger.TransitWrite, tx components.TxId) (*ledger.TransitEnd, booking.TransitRole) {
	if t.Source.TxID.String() == tx {
		return &t.Source, booking.TransitSource
	}
	return &t.Destination, booking.TransitDestination
}

// link is what an INIT event naming a transit does: the first transaction
// to name it is its source; one whose parents include the source is its
// destination (it may wait for other transactions as well). Any other is no end of it, and an alert: it is booked as
// a plain transaction.
func (c *Consumer) link(ev components.Event, d *stateChanged, page *pageBooking) eventBooking {
	if d.TransitID == "" {
		return eventBooking{}
	}
	key, valid := d.transit()
	log := c.log().With("seq", ev.Seq, "tx_id", ev.TxId, "transit_id", ledger.TransitKey(d.TransitNamespace, d.TransitID))
	id, err := uuid.Parse(ev.TxId)
	if err != nil || !valid {
		log.Error("ledger: a transaction names a malformed transit; it is booked as a plain transaction", "alert", true)
		return eventBooking{}
	}
	end := ledger.TransitEnd{TxID: id, ChainID: uint64(ev.ChainId), Wallet: common.HexToAddress(ev.Signer)}
	// Transits are found by the namespaced id: a transaction of one tenant
	// never reaches another tenant's transit, whatever id it names.
	stored := page.transits.byID[key]
	switch {
	case stored == nil:
		return eventBooking{transit: &ledger.TransitWrite{Transit: ledger.Transit{ID: key, Status: ledger.TransitPending, Source: end}}}
	case stored.Source.TxID == id || stored.Destination.TxID == id:
		return eventBooking{} // linked already
	case stored.Destination.TxID == uuid.Nil && d.DependsOn.Index(stored.Source.TxID) >= 0:
		w := *stored
		w.Destination = end
		return eventBooking{transit: &w}
	}
	log.Error("ledger: a transaction names a transit it cannot be an end of (the transit has its destination, or the transaction does not depend on its source); it is booked as a plain transaction",
		"alert", true, "source_tx_id", stored.Source.TxID.String())
	return eventBooking{}
}

// bookEnd books s, the CONFIRMED settlement of an end of transit w: into
// or out of in_transit, and with the bridge fee when the other end is
// booked. A settlement that cannot be an end (booking.TransitJournal says
// why) is booked plainly, and the transit stays as it was: an alert.
func (c *Consumer) bookEnd(ev components.Event, s *booking.Settled, w *ledger.TransitWrite) eventBooking {
	end, role := endOf(w, ev.TxId)
	j, moved, err := booking.TransitJournal(s, c, booking.TransitSide{ID: w.ID, Role: role, Wallet: end.Wallet})
	if err != nil {
		c.log().Error("ledger: a transfer's transaction cannot be booked through in_transit; booked as a plain transaction, the transfer stays as it was",
			"alert", true, "transit_id", w.ID, "role", string(role), "tx_id", ev.TxId, "chain_id", s.ChainID, "err", err)
		return book(j)
	}
	out := eventBooking{journals: []*ledger.Journal{j}, transit: w}
	end.JournalID, end.TxHash, end.BlockHash, end.Asset, end.Amount = 0, j.TxHash, &j.Block.Hash, moved.Asset, moved.Amount
	if role == booking.TransitSource {
		w.SourceJournal, w.Bridge = j, new(moved.Bridge)
	} else {
		w.DestinationJournal = j
	}
	w.Status = w.StatusOf()
	if w.Status != ledger.TransitCompleted {
		return out
	}
	src, dst := &w.Source, &w.Destination
	fee := new(big.Int).Sub(src.Amount, dst.Amount)
	w.BridgeFee, w.FeeJournalID, w.FeeJournal = fee, 0, nil
	inTransit := ledger.AccountKey{ChainID: src.ChainID, Asset: src.Asset, Kind: ledger.InTransit, Address: src.Wallet}
	if fj := booking.TransitFee(w.ID, inTransit, *w.Bridge, ledger.TxKey(src.ChainID, *src.TxHash, *src.BlockHash),
		ledger.TxKey(dst.ChainID, *dst.TxHash, *dst.BlockHash), fee); fj != nil {
		w.FeeJournal = fj
		out.journals = append(out.journals, fj)
	}
	log := c.log().With("transit_id", w.ID, "source_chain_id", src.ChainID, "destination_chain_id", dst.ChainID,
		"sent", src.Amount.String(), "received", dst.Amount.String(), "bridge_fee", fee.String())
	if fee.Sign() < 0 {
		log.Warn("ledger: a transfer between chains completed with more received than sent: a negative bridge fee is booked")
	} else {
		log.Info("ledger: a transfer between chains completed")
	}
	return out
}

// reopen adds to b, the reversal of journal id booked for an end of
// transit w, what it does to the transit: when id books the end, the end
// is booked no more, the bridge fee is reversed too, and the transit
// re-opens.
func (c *Consumer) reopen(ctx context.Context, ev components.Event, id int64, w *ledger.TransitWrite, b eventBooking) (eventBooking, error) {
	end, role := endOf(w, ev.TxId)
	if !end.Booked() || end.JournalID != id {
		return b, nil // the end was booked plainly, or not from this journal
	}
	if w.Status == ledger.TransitCompleted {
		if w.FeeJournal != nil {
			return eventBooking{}, errBookFirst // the fee is booked by this page
		}
		if w.FeeJournalID != 0 {
			fee, err := c.Store.JournalByID(ctx, w.FeeJournalID)
			if err != nil {
				return eventBooking{}, fmt.Errorf("the bridge fee of transit %s: %w", w.ID, err)
			}
			if fee.ReversedBy == 0 {
				b.journals = append(b.journals, booking.Reverse(fee.ID, journalOf(fee)))
			}
		}
		w.BridgeFee, w.FeeJournalID = nil, 0
	}
	*end = ledger.TransitEnd{TxID: end.TxID, ChainID: end.ChainID, Wallet: end.Wallet}
	if role == booking.TransitSource {
		w.SourceJournal, w.Bridge = nil, nil
	} else {
		w.DestinationJournal = nil
	}
	w.Status = w.StatusOf()
	c.log().Warn("ledger: a reorg undid the booking of a transfer's end; the transfer re-opens",
		"transit_id", w.ID, "role", string(role), "tx_id", ev.TxId, "status", string(w.Status))
	b.transit = w
	return b, nil
}

// journalOf is the journal a booked one books, for its reversal.
func journalOf(j ledger.BookedJournal) *ledger.Journal {
	out := &ledger.Journal{Kind: j.Kind, ChainID: j.ChainID, TxHash: j.TxHash, Block: j.Block, Status: j.Status}
	for _, e := range j.Entries {
		out.Legs = append(out.Legs, ledger.Leg{Account: e.Account, Amount: e.Amount})
	}
	return out
}
