// Package transit watches transfers between chains (ledger.Transit) that
// stay in transit: a transit open longer than an age (its destination not
// booked an hour after its source, by default) is an alert, raised once
// per opening by whichever ledgerd node sees it first.
package transit

import (
	"context"
	"log/slog"
	"time"

	"github.com/txfence/txfence/ledger"
)

// Defaults of Watch.
const (
	DefaultAge   = time.Hour
	DefaultEvery = time.Minute
)

// Watch raises the age alert of open transits. Every node may run one:
// the store hands each opening to one of them (ledger.TransitStore.AlertTransits).
type Watch struct {
	Store ledger.TransitStore
	// Age is how long a transit may stay open before its alert; Every how
	// often Run looks. Defaults DefaultAge and DefaultEvery.
	Age, Every time.Duration
	// Now is the clock, time.Now by default; a test sets it.
	Now func() time.Time
	Log *slog.Logger
}

func (w *Watch) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

// Check raises the alert of every transit open longer than w.Age and not
// alerted in its current opening, and returns how many it raised. A
// transit opened by the database's clock is compared with w.Now: the two
// should agree within a fraction of the age.
func (w *Watch) Check(ctx context.Context) (int, error) {
	age, now := w.Age, time.Now
	if age <= 0 {
		age = DefaultAge
	}
	if w.Now != nil {
		now = w.Now
	}
	at := now()
	overdue, err := w.Store.AlertTransits(ctx, at.Add(-age), at)
	if err != nil {
		return 0, err
	}
	for _, t := range overdue {
		args := []any{"alert", true, "transit_id", t.ID, "opened_at", *t.OpenedAt, "open_for", at.Sub(*t.OpenedAt).Round(time.Second).String(),
			"source_chain_id", t.Source.ChainID, "source_tx_id", t.Source.TxID.String(), "source_booked", t.Source.Booked()}
		if t.Destination.ChainID != 0 {
			args = append(args, "destination_chain_id", t.Destination.ChainID, "destination_tx_id", t.Destination.TxID.String(),
				"destination_booked", t.Destination.Booked())
		}
		w.log().Error("ledger: a transfer between chains has been in transit too long", args...)
	}
	return len(overdue), nil
}

// Run checks every w.Every until ctx ends. A failed check is logged and
// tried again at the next tick.
func (w *Watch) Run(ctx context.Context) error {
	every := w.Every
	if every <= 0 {
		every = DefaultEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if _, err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.log().Warn("ledger: checking transits for their age failed; trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
