package txmanagertest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/google/uuid"

	"github.com/txfence/txfence/txmanager"
	"github.com/txfence/txfence/txmanager/postgres"
)

// Event is an event a test writes into the feed, as txmanager's own
// writers would: of transaction TxID, of Type, with Payload marshalled to
// JSON (a json.RawMessage as it is).
type Event struct {
	TxID    uuid.UUID
	Type    string
	Payload any
}

// WriteEvents writes events in one transaction holding the event barrier
// shared, as txmanager's writers do, and numbers them: the feed serves
// them once it returns.
func (s *Server) WriteEvents(t testing.TB, events ...Event) {
	t.Helper()
	ctx := context.Background()
	ids, kinds, payloads := make([]uuid.UUID, len(events)), make([]string, len(events)), make([]string, len(events))
	for i, ev := range events {
		payload, err := json.Marshal(ev.Payload)
		if err != nil {
			t.Fatal(err)
		}
		ids[i], kinds[i], payloads[i] = ev.TxID, ev.Type, string(payload)
	}
	if _, err := s.Pool.Exec(ctx, `
		INSERT INTO event (tx_id, type, payload)
		SELECT id, typ, payload::jsonb FROM unnest($1::uuid[], $2::text[], $3::text[]) WITH ORDINALITY AS e(id, typ, payload, n),
			(SELECT pg_advisory_xact_lock_shared($4)) AS writing
		ORDER BY n`, ids, kinds, payloads, int64(postgres.EventBarrier)); err != nil {
		t.Fatal(err)
	}
	// Sequence alone may find other tests' writers busy and number
	// nothing: the barrier lock is the whole database's.
	if _, err := s.Store.SequenceAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// SettlementEvents are the events of transaction id's way from INIT (which
// creating it wrote) to its end in receipt's block: its state changes, its
// first attempt's tx.attempt (after the move to BROADCASTED, in the same
// transaction), a confirmation, and CONFIRMED, or REVERTED when the
// receipt's status is 0.
func SettlementEvents(id uuid.UUID, receipt *types.Receipt) []Event {
	where := map[string]any{"hash": receipt.TxHash, "block_number": receipt.BlockNumber.Uint64(), "block_hash": receipt.BlockHash}
	with := func(m map[string]any) map[string]any {
		for k, v := range where {
			m[k] = v
		}
		return m
	}
	var out []Event
	for _, step := range [][2]string{{"INIT", "SIMULATED"}, {"SIMULATED", "ALLOCATED"}, {"ALLOCATED", "SIGNED"}, {"SIGNED", "BROADCASTED"}} {
		out = append(out, Event{id, txmanager.EventStateChanged, map[string]any{"from_state": step[0], "to_state": step[1]}})
	}
	final := "CONFIRMED"
	if receipt.Status == types.ReceiptStatusFailed {
		final = "REVERTED"
	}
	return append(out,
		Event{id, txmanager.EventAttempt, map[string]any{"attempt": 1, "kind": txmanager.AttemptInitial, "hash": receipt.TxHash}},
		Event{id, txmanager.EventConfirmation, with(map[string]any{"confirmations": 1, "receipt_status": receipt.Status})},
		Event{id, txmanager.EventStateChanged, with(map[string]any{"from_state": "BROADCASTED", "to_state": final})})
}
