package httpapi

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/httpserver"
)

func (a *API) listTransits(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	f := ledger.TransitFilter{Status: p.transitStatus(), ChainID: p.chainID(), Wallet: p.address("address")}
	wallet := ""
	if f.Wallet != nil {
		wallet = lowerHex(f.Wallet.Bytes())
	}
	// Newest first: the cursor's id is the seq of the last transit shown,
	// and the next page holds older ones.
	return writeIDPage(a, w, r, p, idList[ledger.Transit, transitJSON]{kind: transitsCursor,
		scope: fmt.Sprintf("status=%s&chain_id=%d&address=%s", f.Status, f.ChainID, wallet), name: "transits",
		read: func(before int64, limit int) ([]ledger.Transit, error) {
			f.Before, f.Limit = before, limit
			return a.store.Transits(r.Context(), f)
		},
		id: func(t *ledger.Transit) int64 { return t.Seq }, shape: toTransit})
}

func (a *API) getTransit(w http.ResponseWriter, r *http.Request) error {
	p := newParams(nil)
	id := p.transitID(chi.URLParam(r, "transit_id"))
	if err := p.err(); err != nil {
		return err
	}
	t, err := a.store.Transit(r.Context(), id)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toTransit(&t))
	return nil
}

// transitJSON is a Transit in openapi/ledger.yaml's shape.
type transitJSON struct {
	ID           string               `json:"transit_id"`
	Status       ledger.TransitStatus `json:"status"`
	Source       transitEndJSON       `json:"source"`
	Destination  *transitEndJSON      `json:"destination"`
	Bridge       *string              `json:"bridge"`
	BridgeFee    *string              `json:"bridge_fee"`
	FeeJournalID *int64               `json:"fee_journal_id"`
	OpenedAt     *time.Time           `json:"opened_at"`
	CompletedAt  *time.Time           `json:"completed_at"`
	AlertedAt    *time.Time           `json:"alerted_at"`
	UpdatedAt    time.Time            `json:"updated_at"`
}

type transitEndJSON struct {
	TxID      string  `json:"tx_id"`
	ChainID   uint64  `json:"chain_id"`
	Wallet    string  `json:"wallet"`
	JournalID *int64  `json:"journal_id"`
	TxHash    *string `json:"tx_hash"`
	BlockHash *string `json:"block_hash"`
	Asset     *string `json:"asset"`
	Amount    *string `json:"amount"`
}

func toTransit(t *ledger.Transit) transitJSON {
	out := transitJSON{ID: t.ID, Status: t.Status, Source: toTransitEnd(&t.Source), FeeJournalID: nonZero(t.FeeJournalID),
		OpenedAt: utc(t.OpenedAt), CompletedAt: utc(t.CompletedAt), AlertedAt: utc(t.AlertedAt), UpdatedAt: t.UpdatedAt.UTC()}
	if t.Destination.TxID != uuid.Nil {
		out.Destination = new(toTransitEnd(&t.Destination))
	}
	if t.Bridge != nil {
		out.Bridge = new(lowerHex(t.Bridge.Bytes()))
	}
	if t.BridgeFee != nil {
		out.BridgeFee = new(t.BridgeFee.String())
	}
	return out
}

func toTransitEnd(e *ledger.TransitEnd) transitEndJSON {
	out := transitEndJSON{TxID: e.TxID.String(), ChainID: e.ChainID, Wallet: lowerHex(e.Wallet.Bytes()), JournalID: nonZero(e.JournalID)}
	if e.TxHash != nil {
		out.TxHash = new(lowerHex(e.TxHash.Bytes()))
	}
	if e.BlockHash != nil {
		out.BlockHash = new(lowerHex(e.BlockHash.Bytes()))
	}
	if e.Booked() {
		out.Asset, out.Amount = new(e.Asset), new(e.Amount.String())
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return new(t.UTC())
}
