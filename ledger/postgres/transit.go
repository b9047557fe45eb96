package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// The statements of queries/transit.sql.
var (
	qWriteTransit   = Queries.Use("WriteTransit")
	qTransitsOf     = Queries.Use("TransitsOf")
	qTransit        = Queries.Use("Transit")
	qTransits       = Queries.Use("Transits")
	qWalletTransits = Queries.Use("WalletTransits")
	qAlertTransits  = Queries.Use("AlertTransits")
)

// Transits: transfers between chains (see ledger.Transit), written by the
// feed consumer with the page of the feed that links or books them
// (ledger.FeedBooking.Transits), and read by the API and the age alert.

// validTransitWrites names the first transit b would write inconsistently:
// the database refuses the same, in less helpful words.
func validTransitWrites(b *ledger.FeedBooking) error {
	booked := make(map[*ledger.Journal]bool, len(b.Journals))
	for _, j := range b.Journals {
		booked[j] = true
	}
	for _, w := range b.Transits {
		t := &w.Transit
		var problems []error
		add := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
		if !ledger.ValidTransitID(t.ID) {
			add("id: 1 to %d characters of [A-Za-z0-9._:-], after a namespace of 1 to %d and %q or alone", ledger.MaxTransitIDLen, ledger.MaxTransitNamespaceLen, ledger.NamespaceSeparator)
		}
		if t.Status != t.StatusOf() {
			add("status %q, but its booked ends make it %q", t.Status, t.StatusOf())
		}
		for name, j := range map[string]*ledger.Journal{"source": w.SourceJournal, "destination": w.DestinationJournal, "fee": w.FeeJournal} {
			if j != nil && !booked[j] {
				add("%s journal %q: not one of the run's journals", name, j.Key)
			}
		}
		for name, e := range map[string]struct {
			end     *ledger.TransitEnd
			journal *ledger.Journal
		}{"source": {&t.Source, w.SourceJournal}, "destination": {&t.Destination, w.DestinationJournal}} {
			if e.end.Booked() != (e.end.JournalID != 0 || e.journal != nil) {
				add("%s: an amount and a journal, or neither", name)
			}
		}
		if t.Source.Booked() != (t.Bridge != nil) {
			add("bridge: known once the source is booked, and only then")
		}
		completed := t.Status == ledger.TransitCompleted
		if completed != (t.BridgeFee != nil) {
			add("bridge fee: set once completed, and only then")
		}
		if t.BridgeFee != nil && (t.BridgeFee.Sign() == 0) != (t.FeeJournalID == 0 && w.FeeJournal == nil) {
			add("bridge fee %s: a journal unless it is zero", t.BridgeFee)
		}
		if len(problems) > 0 {
			return errs.Wrap(errs.Invalid, "transit "+t.ID, errors.Join(problems...))
		}
	}
	return nil
}

// writeTransits writes b's transits in tx, once its journals are booked
// (posted[i] is b.Journals[i]'s outcome). Status changes set the times:
// opened_at when value goes into transit (leaving pending, or re-opening
// after completion), completed_at on completion, and the age alert's mark
// is cleared when the transit leaves the opening it was raised for.
func writeTransits(ctx context.Context, tx pgx.Tx, b *ledger.FeedBooking, posted []ledger.Posted) error {
	if len(b.Transits) == 0 {
		return nil
	}
	ids := make(map[*ledger.Journal]int64, len(b.Journals))
	for i, j := range b.Journals {
		ids[j] = posted[i].JournalID
	}
	journal := func(id int64, j *ledger.Journal) *int64 {
		if j != nil {
			id = ids[j]
		}
		if id == 0 {
			return nil
		}
		return &id
	}
	for _, w := range b.Transits {
		t := &w.Transit
		src, dst := &t.Source, &t.Destination
		var dstTx *string
		var dstChain *int64
		var dstWallet []byte
		if dst.TxID != uuid.Nil {
			dstTx, dstChain, dstWallet = new(dst.TxID.String()), new(int64(dst.ChainID)), dst.Wallet.Bytes()
		}
		var bridge []byte
		if t.Bridge != nil {
			bridge = t.Bridge.Bytes()
		}
		var feeJournal *int64
		if t.BridgeFee != nil {
			feeJournal = journal(t.FeeJournalID, w.FeeJournal)
		}
		tag, err := tx.Exec(ctx, qWriteTransit.SQL,
			t.ID, string(t.Status), src.TxID.String(), int64(src.ChainID), src.Wallet.Bytes(),
			journal(src.JournalID, w.SourceJournal), hashBytes(src.TxHash), hashBytes(src.BlockHash), optText(src.Asset), optAmount(src.Amount), bridge,
			dstTx, dstChain, dstWallet, journal(dst.JournalID, w.DestinationJournal), hashBytes(dst.TxHash), hashBytes(dst.BlockHash),
			optText(dst.Asset), optAmount(dst.Amount), optAmount(t.BridgeFee), feeJournal)
		if err != nil {
			return fmt.Errorf("write transit %s: %w", t.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return errs.Errorf(errs.Conflict, "transit %s: stored with another source than transaction %s", t.ID, src.TxID)
		}
	}
	return nil
}

func hashBytes(h *common.Hash) []byte {
	if h == nil {
		return nil
	}
	return h.Bytes()
}

func optText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optAmount(v *big.Int) *string {
	if v == nil {
		return nil
	}
	return new(v.String())
}

// scanTransit reads a transit as the statements of queries/transit.sql
// return it.
func scanTransit(row pgx.CollectableRow) (ledger.Transit, error) {
	var t ledger.Transit
	var status string
	var srcChain int64
	var srcWallet, srcTxHash, srcBlockHash, bridge, dstWallet, dstTxHash, dstBlockHash []byte
	var srcJournal, dstChain, dstJournal, feeJournal *int64
	var srcAsset, srcAmount, dstAsset, dstAmount, fee *string
	var dstTx *uuid.UUID
	if err := row.Scan(&t.ID, &t.Seq, &status,
		&t.Source.TxID, &srcChain, &srcWallet, &srcJournal, &srcTxHash, &srcBlockHash, &srcAsset, &srcAmount, &bridge,
		&dstTx, &dstChain, &dstWallet, &dstJournal, &dstTxHash, &dstBlockHash, &dstAsset, &dstAmount, &fee, &feeJournal,
		&t.OpenedAt, &t.CompletedAt, &t.AlertedAt, &t.UpdatedAt); err != nil {
		return t, err
	}
	t.Status, t.Source.ChainID, t.Source.Wallet = ledger.TransitStatus(status), uint64(srcChain), common.BytesToAddress(srcWallet)
	t.Source.TxHash, t.Source.BlockHash = hashOf(srcTxHash), hashOf(srcBlockHash)
	if dstTx != nil {
		t.Destination.TxID, t.Destination.ChainID, t.Destination.Wallet = *dstTx, uint64(*dstChain), common.BytesToAddress(dstWallet)
	}
	t.Destination.TxHash, t.Destination.BlockHash = hashOf(dstTxHash), hashOf(dstBlockHash)
	if bridge != nil {
		t.Bridge = new(common.BytesToAddress(bridge))
	}
	for _, f := range []struct {
		id  *int64
		out *int64
	}{{srcJournal, &t.Source.JournalID}, {dstJournal, &t.Destination.JournalID}, {feeJournal, &t.FeeJournalID}} {
		if f.id != nil {
			*f.out = *f.id
		}
	}
	if srcAsset != nil {
		t.Source.Asset = *srcAsset
	}
	if dstAsset != nil {
		t.Destination.Asset = *dstAsset
	}
	var err error
	if t.Source.Amount, err = parseOptionalInt(srcAmount); err != nil {
		return t, err
	}
	if t.Destination.Amount, err = parseOptionalInt(dstAmount); err != nil {
		return t, err
	}
	t.BridgeFee, err = parseOptionalInt(fee)
	return t, err
}

// TransitsOf reads the transits named by ids, and those whose source or
// destination is one of txs: what a page of the feed may link or move.
func (s *Store) TransitsOf(ctx context.Context, txs []uuid.UUID, ids []string) ([]ledger.Transit, error) {
	if len(txs) == 0 && len(ids) == 0 {
		return nil, nil
	}
	txIDs := make([]string, len(txs))
	for i, id := range txs {
		txIDs[i] = id.String()
	}
	rows, err := s.pool.Query(ctx, qTransitsOf.SQL, slices.Compact(slices.Sorted(slices.Values(ids))), txIDs)
	if err != nil {
		return nil, fmt.Errorf("read transits: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanTransit)
	if err != nil {
		return nil, fmt.Errorf("read transits: %w", err)
	}
	return out, nil
}

// Transit reads transit id; errs.NotFound when there is none.
func (s *Store) Transit(ctx context.Context, id string) (ledger.Transit, error) {
	rows, err := s.pool.Query(ctx, qTransit.SQL, id)
	if err != nil {
		return ledger.Transit{}, fmt.Errorf("read transit %s: %w", id, err)
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTransit)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Transit{}, errs.Errorf(errs.NotFound, "no transit %q", id)
	}
	if err != nil {
		return ledger.Transit{}, fmt.Errorf("read transit %s: %w", id, err)
	}
	return t, nil
}

// Transits lists the transits f selects, newest first.
func (s *Store) Transits(ctx context.Context, f ledger.TransitFilter) ([]ledger.Transit, error) {
	if f.Limit < 1 || f.Limit > ledger.MaxPage {
		return nil, errs.Errorf(errs.Invalid, "limit %d: 1 to %d", f.Limit, ledger.MaxPage)
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, errs.Errorf(errs.Invalid, "status %q: pending, open or completed", f.Status)
	}
	if f.Before < 0 {
		return nil, errs.Errorf(errs.Invalid, "before %d: a transit's seq", f.Before)
	}
	chain, err := chainArg(f.ChainID)
	if err != nil {
		return nil, err
	}
	before := f.Before
	if before == 0 {
		before = math.MaxInt64
	}
	var status *string
	if f.Status != "" {
		status = new(string(f.Status))
	}
	// The filters are optional: the query is planned for the values it is
	// given (QueryExecModeExec), as Accounts is. A wallet's transits are
	// read through each end's wallet index (0008), with a statement of
	// their own; the others by seq.
	var rows pgx.Rows
	if f.Wallet != nil {
		rows, err = s.pool.Query(ctx, qWalletTransits.SQL, pgx.QueryExecModeExec, before, status, chain, f.Limit, f.Wallet.Bytes())
	} else {
		rows, err = s.pool.Query(ctx, qTransits.SQL, pgx.QueryExecModeExec, before, status, chain, f.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list transits: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanTransit)
	if err != nil {
		return nil, fmt.Errorf("list transits: %w", err)
	}
	return out, nil
}

// AlertTransits marks the open transits opened before openedBefore and not
// alerted in their current opening as alerted at now, and returns them:
// each opening is returned once, whichever node asks. (A transit that
// completes and re-opens is an opening anew.)
func (s *Store) AlertTransits(ctx context.Context, openedBefore, now time.Time) ([]ledger.Transit, error) {
	rows, err := s.pool.Query(ctx, qAlertTransits.SQL, openedBefore, now)
	if err != nil {
		return nil, fmt.Errorf("mark overdue transits: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanTransit)
	if err != nil {
		return nil, fmt.Errorf("mark overdue transits: %w", err)
	}
	slices.SortFunc(out, func(a, b ledger.Transit) int { return a.OpenedAt.Compare(*b.OpenedAt) })
	return out, nil
}
