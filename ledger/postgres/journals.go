package postgres

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
)

// The statements of queries/journals.sql.
var qTakenKeys = Queries.Use("TakenKeys")

// Booking in a transaction that moves a cursor too (the feed's, the
// scanner's): the journals, and the cursor, commit together or not at all.

// newPosts validates journals for booking.
func newPosts(journals []*ledger.Journal) ([]*pendingPost, error) {
	posts := make([]*pendingPost, len(journals))
	for i, j := range journals {
		if err := j.Validate(); err != nil {
			return nil, errs.Wrap(errs.Invalid, "journal "+j.Key, err)
		}
		posts[i] = &pendingPost{j: j, hash: j.PayloadHash()}
	}
	return posts, nil
}

// journalWriter writes journals in a transaction that also writes other
// rows (a cursor's move), and keeps the accounts it made for the cache and
// the wallets it took below zero for the alert.
type journalWriter struct {
	s        *Store
	made     map[ledger.AccountKey]int64
	negative []wentNegative
}

// inBookingTx runs fn in a transaction (contention retried) in which w
// writes journals; once it commits, the accounts made are cached, and each
// wallet its journals took below zero is an alert. A key holding another
// fact is an errs.Conflict, and an alert.
func (s *Store) inBookingTx(ctx context.Context, fn func(tx pgx.Tx, w *journalWriter) error) error {
	w := &journalWriter{s: s}
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		w.made, w.negative = map[ledger.AccountKey]int64{}, nil
		return fn(tx, w)
	})
	if err != nil {
		var conflict *keyConflict
		if errors.As(err, &conflict) {
			return s.classify(err, &ledger.Journal{Key: conflict.key})
		}
		return err
	}
	s.cacheAccounts(w.made)
	for _, n := range w.negative {
		s.log.Error("ledger: a booking took a wallet's balance below zero: the chain settled more than the books hold (see the reconciliation runbook)",
			"alert", true, "chain_id", n.account.ChainID, "address", n.account.Address.Hex(), "asset", n.account.Asset,
			"balance", n.after.String(), "before", n.before.String(), "journals", n.journals)
	}
	return nil
}

// bookOnce books posts in tx, each fact once: a journal booked before
// under its key is a replay, unless that booking has been reversed (its
// block left the chain and came back); then it is booked anew, under a key
// derived from the reversal's id.
func (w *journalWriter) bookOnce(ctx context.Context, tx pgx.Tx, posts []*pendingPost) ([]ledger.Posted, error) {
	out := make([]ledger.Posted, len(posts))
	trying := slices.Clone(posts) // what is tried for posts[i], under its key or a rebooking's
	open := make([]int, len(posts))
	for i := range open {
		open[i] = i
	}
	for len(open) > 0 {
		keys := make([]string, len(open))
		for n, i := range open {
			keys[n] = trying[i].j.Key
		}
		taken, err := takenKeys(ctx, tx, keys)
		if err != nil {
			return nil, err
		}
		var free, again []int
		for _, i := range open {
			p := trying[i]
			t, ok := taken[p.j.Key]
			switch {
			case !ok:
				free = append(free, i)
			case t.reversedBy != 0:
				rebooked := *p.j
				rebooked.Key = RebookKey(posts[i].j.Key, t.reversedBy)
				trying[i] = &pendingPost{j: &rebooked, hash: p.hash}
				again = append(again, i)
			case !bytes.Equal(t.hash, p.hash[:]):
				return nil, &keyConflict{key: p.j.Key, id: t.id}
			default:
				out[i] = ledger.Posted{JournalID: t.id}
			}
		}
		writing := make([]*pendingPost, len(free))
		for n, i := range free {
			writing[n] = trying[i]
		}
		written, made, err := w.s.writeJournals(ctx, tx, writing)
		if err != nil {
			return nil, err
		}
		maps.Copy(w.made, made)
		for _, i := range free {
			if id, ok := written.claim(trying[i]); ok {
				out[i] = ledger.Posted{JournalID: id, Created: true}
			} else if out[i], err = bookedIn(ctx, tx, trying[i].j.Key, trying[i].hash); err != nil {
				return nil, err // a key twice in posts, the second another fact
			}
		}
		open = again
	}
	var written []*ledger.Journal
	for i, p := range out {
		if p.Created {
			written = append(written, trying[i].j)
		}
	}
	negative, err := walletsWentNegative(ctx, tx, written)
	if err != nil {
		return nil, err
	}
	w.negative = append(w.negative, negative...)
	return out, nil
}

// RebookKey is the key under which a fact booked under key is booked
// again after reversal (its block left the chain and came back).
func RebookKey(key string, reversal int64) string {
	return key + ":rebook:" + strconv.FormatInt(reversal, 10)
}

// takenKey is a journal key already booked.
type takenKey struct {
	id         int64
	hash       []byte
	reversedBy int64 // 0 when not reversed
}

func takenKeys(ctx context.Context, tx pgx.Tx, keys []string) (map[string]takenKey, error) {
	rows, err := tx.Query(ctx, qTakenKeys.SQL, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]takenKey{}
	for rows.Next() {
		var key string
		var t takenKey
		if err := rows.Scan(&key, &t.id, &t.hash, &t.reversedBy); err != nil {
			return nil, err
		}
		out[key] = t
	}
	return out, rows.Err()
}
