package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// insertEvent writes the tx.state_changed event of t's change in the
// caller's transaction: the change and its event commit together or not
// at all.
func insertEvent(ctx context.Context, tx pgx.Tx, t *txmanager.Tx, data txmanager.StateChanged) error {
	if data.Nonce == nil {
		data.Nonce = t.Nonce
	}
	if data.Hash == nil {
		data.Hash = t.Hash
	}
	if data.SubState == "" {
		data.SubState = t.SubState
	}
	payload, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO event (tx_id, type, payload) VALUES ($1, $2, $3)`, t.ID, txmanager.EventStateChanged, payload); err != nil {
		return fmt.Errorf("write the event of %s: %w", t.ID, err)
	}
	return nil
}

// sequencerLock is the advisory lock that makes one sequencer run at a
// time across every node.
const sequencerLock = 0x7466_6576_656e_7473 // "tfevents"

// Sequence gives the next feed sequence numbers to events whose writing
// transactions have all ended (their xid is below the oldest transaction
// still running), in the order they were written, and returns how many it
// numbered. An event still being written, or written by a transaction
// that began before a running one, waits for a later call: so the feed
// never shows seq N+1 and afterwards an N. Any node may call it at any
// time; calls serialize on an advisory lock.
func (s *Store) Sequence(ctx context.Context) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(sequencerLock)); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `
			WITH ready AS (
				SELECT id, row_number() OVER (ORDER BY id) AS rn
				FROM event
				WHERE seq IS NULL AND xid < pg_snapshot_xmin(pg_current_snapshot())
				ORDER BY id
				LIMIT 10000
			), numbered AS (
				UPDATE event e SET seq = (SELECT last_seq FROM event_sequence) + ready.rn
				FROM ready WHERE e.id = ready.id
				RETURNING 1
			)
			SELECT count(*) FROM numbered`).Scan(&n)
		if err != nil || n == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE event_sequence SET last_seq = last_seq + $1`, n)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sequence events: %w", err)
	}
	return n, nil
}

// EventsAfter reads up to limit events of the feed after seq, in order.
func (s *Store) EventsAfter(ctx context.Context, after uint64, limit int) ([]txmanager.Event, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT e.seq, e.type, e.tx_id, t.chain_id, e.created_at, e.payload
		FROM event e JOIN tx t USING (tx_id)
		WHERE e.seq > $1 ORDER BY e.seq LIMIT $2`, int64(after), limit)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Event, error) {
		var e txmanager.Event
		var seq, chainID int64
		err := r.Scan(&seq, &e.Type, &e.TxID, &chainID, &e.CreatedAt, &e.Data)
		e.Seq, e.ChainID = uint64(seq), uint64(chainID)
		return e, err
	})
}
