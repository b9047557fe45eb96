package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/events.sql.
var (
	qWriteEvents      = query("WriteEvents")
	qSetLockTimeout   = query("SetLockTimeout")
	qLockEventBarrier = query("LockEventBarrier")
	qNumberEvents     = query("NumberEvents")
	qMoveFeedHead     = query("MoveFeedHead")
	qEventsAfter      = query("EventsAfter")
	qHeadSeq          = query("HeadSeq")
	qTxEvents         = query("TxEvents")
)

// insertEvent writes the tx.state_changed event of t's change in the
// caller's transaction: the change and its event commit together or not
// at all.
func insertEvent(ctx context.Context, tx pgx.Tx, t *txmanager.Tx, data txmanager.StateChanged) error {
	return insertEvents(ctx, tx, []txmanager.Tx{*t}, []txmanager.StateChanged{data})
}

// insertEvents writes the events of several changes, data[i] for txs[i],
// in one statement. The nonce, hash and sub-state an event leaves out are
// the transaction's.
func insertEvents(ctx context.Context, tx pgx.Tx, txs []txmanager.Tx, data []txmanager.StateChanged) error {
	ids := make([]uuid.UUID, len(txs))
	payloads := make([]string, len(txs))
	for i := range txs {
		t, d := &txs[i], data[i]
		if d.Nonce == nil {
			d.Nonce = t.Nonce
		}
		if d.Hash == nil {
			d.Hash = t.Hash
		}
		if d.SubState == "" {
			d.SubState = t.SubState
		}
		payload, err := json.Marshal(d)
		if err != nil {
			return err
		}
		ids[i], payloads[i] = t.ID, string(payload)
	}
	return writeEvents(ctx, tx, txmanager.EventStateChanged, ids, payloads)
}

// insertTypedEvent writes one event of another type than a state change,
// data its JSON payload.
func insertTypedEvent(ctx context.Context, tx pgx.Tx, typ string, id uuid.UUID, data any) error {
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	return writeEvents(ctx, tx, typ, []uuid.UUID{id}, []string{string(payload)})
}

// writeEvents inserts events of one type, payloads[i] for ids[i], in that
// order.
func writeEvents(ctx context.Context, tx pgx.Tx, typ string, ids []uuid.UUID, payloads []string) error {
	// The shared barrier lock, held until this transaction ends, tells the
	// sequencer an event is being written (see Sequence).
	if _, err := tx.Exec(ctx, qWriteEvents.SQL, ids, payloads, typ, int64(eventBarrier)); err != nil {
		return fmt.Errorf("write %d %s events: %w", len(ids), typ, err)
	}
	return nil
}

// eventBarrier is the advisory lock between event writers, which hold it
// shared until their transaction ends, and the sequencer, which takes it
// exclusively: once the sequencer holds it, every event written so far is
// committed or rolled back, and no new one can be written until it lets
// go. Only transactions that write events take part: a long transaction
// elsewhere in the cluster (another database, a report) delays nothing.
const eventBarrier = EventBarrier

// EventBarrier is eventBarrier's value, for tests (txmanagertest) that
// write events into the feed as the follower does, holding it shared.
const EventBarrier = 0x7466_6576_656e_7473 // "tfevents"

// sequencerWait bounds how long the sequencer waits for in-flight writers
// (and so how long new writers may queue behind it); a writer frozen in
// its transaction makes the call give up and try again later, until the
// server ends that session (DB_IDLE_IN_TX_TIMEOUT).
const sequencerWait = "100ms"

// sequenceBatch bounds how many events one numbering transaction takes.
const sequenceBatch = 10000

// Sequence gives the next feed sequence numbers to every event written so
// far (up to sequenceBatch of them), in the order they were written, and
// returns how many it numbered. It takes the event barrier exclusively
// first, so no event it leaves unnumbered can commit with a lower id
// afterwards: the feed never shows seq N+1 and afterwards an N. Any node
// may call it at any time; calls serialize on the barrier.
//
// It is one bounded try, for a caller that calls again anyway
// (txmanagerd's sequencer, every SEQUENCE_EVERY): when writers do not
// finish within sequencerWait it numbers nothing and returns 0. So 0 does
// not mean that nothing is left to number; a caller that needs what was
// written before it called in the feed calls SequenceAll.
func (s *Store) Sequence(ctx context.Context) (int, error) {
	n, _, err := s.sequence(ctx)
	return n, err
}

// SequenceAll numbers every event committed before it was called (and
// whatever else it reaches), however many tries that takes, and returns
// how many it numbered: for a caller that reads the feed right after a
// change and must find it there. While writers are in flight it tries
// again, each try bounded by sequencerWait as Sequence's, so writers never
// queue behind it for longer than that. Being busy is no answer here: it
// returns when nothing is left or ctx ends, so a writer frozen in its
// transaction holds it until the server ends that session
// (DB_IDLE_IN_TX_TIMEOUT); nothing after that writer's event could be
// numbered before then anyway.
func (s *Store) SequenceAll(ctx context.Context) (int, error) {
	total := 0
	for {
		n, busy, err := s.sequence(ctx)
		total += n
		if err != nil || (!busy && n < sequenceBatch) {
			return total, err
		}
	}
}

// sequence is one numbering try: busy when writers did not finish within
// sequencerWait (nothing numbered).
func (s *Store) sequence(ctx context.Context) (n int, busy bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, qSetLockTimeout.SQL, sequencerWait); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qLockEventBarrier.SQL, int64(eventBarrier)); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
				return errWritersBusy
			}
			return err
		}
		err := tx.QueryRow(ctx, qNumberEvents.SQL, sequenceBatch).Scan(&n)
		if err != nil || n == 0 {
			return err
		}
		// The new head goes to the long polls' FeedWatch at commit.
		_, err = tx.Exec(ctx, qMoveFeedHead.SQL, n)
		return err
	})
	if errors.Is(err, errWritersBusy) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("sequence events: %w", err)
	}
	return n, false, nil
}

var errWritersBusy = errors.New("event writers still in flight")

// EventsAfter reads up to limit events of the feed after seq, in order.
func (s *Store) EventsAfter(ctx context.Context, after uint64, limit int) ([]txmanager.Event, error) {
	rows, err := s.pool.Query(ctx, qEventsAfter.SQL, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return pgx.CollectRows(rows, scanEvent)
}

// HeadSeq is the highest sequence numbered so far (0 before the first).
func (s *Store) HeadSeq(ctx context.Context) (uint64, error) {
	var head int64
	if err := s.pool.QueryRow(ctx, qHeadSeq.SQL).Scan(&head); err != nil {
		return 0, fmt.Errorf("read the feed's head: %w", err)
	}
	return uint64(head), nil
}

// TxEvents reads the events of one transaction already in the feed, in
// seq order: its timeline. An unknown transaction is NotFound.
func (s *Store) TxEvents(ctx context.Context, id uuid.UUID) ([]txmanager.Event, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, qTxEvents.SQL, id)
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", id, err)
	}
	return pgx.CollectRows(rows, scanEvent)
}

func scanEvent(r pgx.CollectableRow) (txmanager.Event, error) {
	var e txmanager.Event
	var seq, chainID int64
	var signer []byte
	err := r.Scan(&seq, &e.Type, &e.TxID, &chainID, &signer, &e.CreatedAt, &e.Data)
	e.Seq, e.ChainID, e.Signer = uint64(seq), uint64(chainID), common.BytesToAddress(signer)
	return e, err
}
