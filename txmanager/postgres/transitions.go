package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/shared/pg"
	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/transitions.sql.
var (
	qMoveToSimulated       = fenced("MoveToSimulated")
	qMoveToPendingApproval = fenced("MoveToPendingApproval")
	qMoveApproved          = fenced("MoveApproved")
	qMoveWithReason        = fenced("MoveWithReason")
	qMoveKeepingReason     = fenced("MoveKeepingReason")
	qMoveSubState          = fenced("MoveSubState")
	qMoveGivingUpNonce     = fenced("MoveGivingUpNonce")
	qMoveFoundMined        = fenced("MoveFoundMined")
	qTxState               = query("TxState")
	qAllocate              = fenced("Allocate")
	qAdvanceNonceCursor    = fenced("AdvanceNonceCursor")
	qStoreSigned           = fenced("StoreSigned")
	qLockTxStates          = query("LockTxStates")
	qBroadcasted           = fenced("Broadcasted")
	qAcceptedLate          = fenced("AcceptedLate")
)

// The state changes of the owner's worker. Each runs in one transaction
// whose every write is fenced: conditioned, in the same statement, on the
// worker's node holding the signer's current unexpired lease. A fenced
// write that touches nothing rolls the whole transaction back and returns
// a *txmanager.FencedError: the node must stop working on the signer.

// fencedTx runs fn in a transaction on f's signer.
func (s *Store) fencedTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pg.InTx(ctx, s.pool, pg.TxOptions{}, fn)
}

// move changes one transaction's state from one of from to `to` with q,
// one of the Move statements of queries/transitions.sql, under the fence,
// and writes its event. set are q's own columns ($8 on). It returns the
// transaction as changed.
func move(ctx context.Context, tx pgx.Tx, f txmanager.Fence, q fencedQuery, id uuid.UUID, from []txmanager.State, to txmanager.State,
	ev txmanager.StateChanged, set ...any) (txmanager.Tx, error) {
	states := make([]string, len(from))
	for i, s := range from {
		states[i] = string(s)
	}
	// Lock the row first: the state read is the one the update replaces.
	var prev string
	if err := tx.QueryRow(ctx, qLockTxState.SQL, id).Scan(&prev); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return txmanager.Tx{}, fmt.Errorf("no transaction %s", id)
		}
		return txmanager.Tx{}, err
	}
	t, err := scanTx(q.queryRow(ctx, tx, f, append([]any{id, states, string(to)}, set...)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, whyNotMoved(ctx, tx, f, id, from)
	}
	if err != nil {
		return t, err
	}
	ev.FromState, ev.ToState = txmanager.State(prev), to
	return t, insertEvent(ctx, tx, &t, ev)
}

// whyNotMoved tells a fenced write that touched nothing from a
// transaction that was not in an expected state (cancelled meanwhile).
func whyNotMoved(ctx context.Context, tx pgx.Tx, f txmanager.Fence, id uuid.UUID, from []txmanager.State) error {
	var held bool
	if err := qHoldsLease.queryRow(ctx, tx, f).Scan(&held); err != nil {
		return err
	}
	if !held {
		return &txmanager.FencedError{Fence: f, Op: "state change of " + id.String()}
	}
	var state string
	err := tx.QueryRow(ctx, qTxState.SQL, id).Scan(&state)
	if err != nil {
		return fmt.Errorf("transaction %s: %w", id, err)
	}
	return &txmanager.StateError{TxID: id, State: txmanager.State(state), Want: from}
}

// Simulated records a passed simulation: INIT → SIMULATED with the gas
// limit fixed.
func (s *Store) Simulated(ctx context.Context, f txmanager.Fence, id uuid.UUID, gasLimit uint64) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, qMoveToSimulated, id, []txmanager.State{txmanager.StateInit}, txmanager.StateSimulated,
			txmanager.StateChanged{}, int64(gasLimit))
		return err
	})
	return out, err
}

// Fail ends a transaction that holds no nonce yet as FAILED, why giving
// the reason (and the rule or the decoded revert reason, if any). An
// allocated transaction gives its nonce up only through ReleaseNonces,
// which checks that no later nonce is taken.
func (s *Store) Fail(ctx context.Context, f txmanager.Fence, id uuid.UUID, why txmanager.StateChanged) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, qMoveWithReason, id, []txmanager.State{txmanager.StateInit, txmanager.StateSimulated, txmanager.StatePendingApproval},
			txmanager.StateFailed, why, why.Reason)
		return err
	})
	return out, err
}

// Allocate gives consecutive nonces from first to the transactions of ids
// that are still SIMULATED, in the order given, with the fees each will be
// signed with (fees[i] for ids[i]), moves them to ALLOCATED and advances
// the signer's cursor past them, all in one fenced transaction of three
// statements, whatever the batch's size. It returns the allocated
// transactions in nonce order (those cancelled meanwhile are left out and
// take no nonce).
func (s *Store) Allocate(ctx context.Context, f txmanager.Fence, ids []uuid.UUID, fees []txmanager.Fees, first uint64) ([]txmanager.Tx, error) {
	if len(fees) != len(ids) {
		return nil, fmt.Errorf("allocate: %d transactions, %d fees", len(ids), len(fees))
	}
	if len(ids) == 0 {
		return nil, nil
	}
	maxFee, tip, price := make([]*string, len(fees)), make([]*string, len(fees)), make([]*string, len(fees))
	for i, fe := range fees {
		maxFee[i], tip[i], price[i] = optNumeric(fe.MaxFeePerGas), optNumeric(fe.MaxPriorityFeePerGas), optNumeric(fe.GasPrice)
	}
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		out = out[:0]
		rows, err := qAllocate.query(ctx, tx, f, ids, int64(first), maxFee, tip, price)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Tx, error) { return scanTx(r) })
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return fencedOrNothing(ctx, tx, f, "allocate")
		}
		slices.SortFunc(out, func(a, b txmanager.Tx) int { return cmp.Compare(*a.Nonce, *b.Nonce) })
		events := make([]txmanager.StateChanged, len(out))
		for i := range out {
			events[i] = txmanager.StateChanged{FromState: txmanager.StateSimulated, ToState: txmanager.StateAllocated}
		}
		if err := insertEvents(ctx, tx, out, events); err != nil {
			return err
		}
		tag, err := qAdvanceNonceCursor.exec(ctx, tx, f, int64(first)+int64(len(out)))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return &txmanager.FencedError{Fence: f, Op: "advance the nonce cursor"}
		}
		return nil
	})
	return out, err
}

// fencedOrNothing explains a fenced batch write that touched no row: the
// fence no longer holds (a *txmanager.FencedError), or none of the rows
// was in the state the write expects (nil: nothing to do).
func fencedOrNothing(ctx context.Context, tx pgx.Tx, f txmanager.Fence, op string) error {
	var held bool
	if err := qHoldsLease.queryRow(ctx, tx, f).Scan(&held); err != nil {
		return err
	}
	if !held {
		return &txmanager.FencedError{Fence: f, Op: op}
	}
	return nil
}

func signingFeeArgs(f txmanager.Fees) []any {
	return []any{optNumeric(f.MaxFeePerGas), optNumeric(f.MaxPriorityFeePerGas), optNumeric(f.GasPrice)}
}

// Signed stores a batch's first signed attempts, ALLOCATED → SIGNED, in
// one fenced transaction of three statements: the raw transactions and
// hashes are durable before anything is broadcast, and the batch costs one
// commit. Every transaction of the batch must be ALLOCATED.
func (s *Store) Signed(ctx context.Context, f txmanager.Fence, attempts []txmanager.Attempt) ([]txmanager.Tx, error) {
	if len(attempts) == 0 {
		return nil, nil
	}
	n := len(attempts)
	ids, hashes, raws := make([]uuid.UUID, n), make([][]byte, n), make([][]byte, n)
	maxFee, tip, price := make([]*string, n), make([]*string, n), make([]*string, n)
	byID := make(map[uuid.UUID]common.Hash, n)
	for i, a := range attempts {
		ids[i], hashes[i], raws[i] = a.TxID, a.Hash.Bytes(), a.Raw
		maxFee[i], tip[i], price[i] = optNumeric(a.MaxFeePerGas), optNumeric(a.MaxPriorityFeePerGas), optNumeric(a.GasPrice)
		byID[a.TxID] = a.Hash
	}
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		rows, err := qStoreSigned.query(ctx, tx, f, ids, hashes, raws, maxFee, tip, price)
		if out, err = collectBatch(ctx, tx, f, rows, err, n, "store signed attempts", txmanager.StateAllocated); err != nil {
			return err
		}
		events := make([]txmanager.StateChanged, n)
		for i := range out {
			// The attempt rows this statement wrote are not visible to
			// its own RETURNING: the hash comes from the batch.
			h := byID[out[i].ID]
			out[i].Hash = &h
			events[i] = txmanager.StateChanged{FromState: txmanager.StateAllocated, ToState: txmanager.StateSigned}
		}
		return insertEvents(ctx, tx, out, events)
	})
	return out, err
}

// collectBatch reads the transactions a fenced batch write returned (rows
// and err are its query's). All want of them must have moved: fewer means
// the fence no longer holds (a *txmanager.FencedError) or one was not in
// the state from, and the caller's transaction rolls back.
func collectBatch(ctx context.Context, tx pgx.Tx, f txmanager.Fence, rows pgx.Rows, err error, want int, op string, from txmanager.State) ([]txmanager.Tx, error) {
	if err != nil {
		return nil, fmt.Errorf("%s (%d): %w", op, want, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Tx, error) { return scanTx(r) })
	if err != nil {
		return nil, fmt.Errorf("%s (%d): %w", op, want, err)
	}
	if len(out) != want {
		if err := fencedOrNothing(ctx, tx, f, op); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %d of %d transactions were %s", op, len(out), want, from)
	}
	return out, nil
}

// Broadcasted records accepted broadcasts, SIGNED → BROADCASTED, each with
// its state change and a tx.attempt event (the first attempt a route
// accepted: kind initial, or the operator's bump or cancel of a
// transaction stuck before its broadcast), in one fenced transaction. A transaction the
// chain follower found mined before this records its broadcast (a node
// may mine what it was sent at once) is BROADCASTED, CONFIRMED or REVERTED
// already: it keeps its state and is not returned, and gets its tx.attempt
// unless an earlier acceptance of the attempt was recorded. Every other
// transaction of the batch must be SIGNED.
func (s *Store) Broadcasted(ctx context.Context, f txmanager.Fence, sent []txmanager.Sent, at time.Time) ([]txmanager.Tx, error) {
	if len(sent) == 0 {
		return nil, nil
	}
	var out []txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		// Lock the rows first, in one order (the follower's writes lock a
		// transaction before its attempts too): the states read are the
		// ones the update replaces.
		all := make([]uuid.UUID, len(sent))
		for i, b := range sent {
			all[i] = b.TxID
		}
		rows, err := tx.Query(ctx, qLockTxStates.SQL, all)
		if err != nil {
			return fmt.Errorf("record broadcasts (%d): %w", len(sent), err)
		}
		states := make(map[uuid.UUID]txmanager.State, len(sent))
		var id uuid.UUID
		var state string
		if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error {
			states[id] = txmanager.State(state)
			return nil
		}); err != nil {
			return fmt.Errorf("record broadcasts (%d): %w", len(sent), err)
		}
		var signed, minedFirst []txmanager.Sent
		for _, b := range sent {
			switch st := states[b.TxID]; st {
			case txmanager.StateSigned:
				signed = append(signed, b)
			case txmanager.StateBroadcasted, txmanager.StateConfirmed, txmanager.StateReverted:
				minedFirst = append(minedFirst, b)
			default:
				if err := fencedOrNothing(ctx, tx, f, "record broadcasts"); err != nil {
					return err
				}
				return &txmanager.StateError{TxID: b.TxID, State: st, Want: []txmanager.State{txmanager.StateSigned}}
			}
		}
		if len(signed) > 0 {
			if out, err = broadcasted(ctx, tx, f, signed, at); err != nil {
				return err
			}
		}
		if len(minedFirst) == 0 {
			return nil
		}
		n, err := acceptedLate(ctx, tx, f, minedFirst, at)
		if err == nil && n == 0 && len(signed) == 0 {
			err = fencedOrNothing(ctx, tx, f, "record broadcasts")
		}
		return err
	})
	return out, err
}

// sentRow is an attempt as its tx.attempt event tells it: a row of the
// columns Broadcasted and AcceptedLate return (queries/transitions.sql),
// in dests' order.
type sentRow struct {
	id               uuid.UUID
	attempt          int
	nonce, gasLimit  int64
	hash             []byte
	route            string
	sentAt           time.Time
	maxFee, tip, gas string
	// kind is the attempt's: a bump or cancel an operator made before the
	// first broadcast is sent as that, and replaces the attempt before it.
	kind     string
	replaces []byte
}

func (r *sentRow) dests() []any {
	return []any{&r.id, &r.attempt, &r.nonce, &r.hash, &r.route, &r.sentAt, &r.gasLimit, &r.maxFee, &r.tip, &r.gas, &r.kind, &r.replaces}
}

// event is the row's tx.attempt event, of the attempt's kind.
func (r *sentRow) event() txmanager.AttemptSent {
	e := txmanager.AttemptSent{Attempt: r.attempt, Kind: r.kind, Nonce: uint64(r.nonce), Hash: common.BytesToHash(r.hash),
		Route: txmanager.Route(r.route), SentAt: r.sentAt.UTC(),
		Fees: txmanager.AttemptFees{GasLimit: uint64(r.gasLimit), MaxFeePerGas: r.maxFee, MaxPriorityFeePerGas: r.tip, GasPrice: r.gas}}
	if r.replaces != nil {
		prev := common.BytesToHash(r.replaces)
		e.Replaces = &prev
	}
	return e
}

// writeSent writes the tx.attempt events of sent, in its order.
func writeSent(ctx context.Context, tx pgx.Tx, sent []sentRow) error {
	ids, payloads := make([]uuid.UUID, len(sent)), make([]string, len(sent))
	for i := range sent {
		payload, err := json.Marshal(sent[i].event())
		if err != nil {
			return err
		}
		ids[i], payloads[i] = sent[i].id, string(payload)
	}
	return writeEvents(ctx, tx, txmanager.EventAttempt, ids, payloads)
}

// broadcasted moves the SIGNED transactions of sent to BROADCASTED in one
// statement, and writes the state change and the tx.attempt of each.
func broadcasted(ctx context.Context, tx pgx.Tx, f txmanager.Fence, sent []txmanager.Sent, at time.Time) ([]txmanager.Tx, error) {
	n := len(sent)
	ids, routes := make([]uuid.UUID, n), make([]string, n)
	byID := make(map[uuid.UUID]txmanager.Route, n)
	for i, b := range sent {
		ids[i], routes[i] = b.TxID, string(b.Route)
		byID[b.TxID] = b.Route
	}
	rows, err := qBroadcasted.query(ctx, tx, f, ids, routes, at)
	if err != nil {
		return nil, fmt.Errorf("record broadcasts (%d): %w", n, err)
	}
	var attempts []sentRow
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (txmanager.Tx, error) {
		var a sentRow
		t, err := scanTxWith(r, a.dests()...)
		attempts = append(attempts, a)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("record broadcasts (%d): %w", n, err)
	}
	if len(out) != n {
		if err := fencedOrNothing(ctx, tx, f, "record broadcasts"); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("record broadcasts: %d of %d transactions were %s", len(out), n, txmanager.StateSigned)
	}
	changes := make([]txmanager.StateChanged, n)
	for i := range out {
		changes[i] = txmanager.StateChanged{FromState: txmanager.StateSigned, ToState: txmanager.StateBroadcasted, Route: byID[out[i].ID]}
	}
	if err := insertEvents(ctx, tx, out, changes); err != nil {
		return nil, err
	}
	return out, writeSent(ctx, tx, attempts)
}

// acceptedLate records a route's acceptance of the current attempt of
// transactions the follower found mined first (its route, its sent-at and
// its tx.attempt), unless an acceptance was recorded before. It returns
// how many it recorded.
func acceptedLate(ctx context.Context, tx pgx.Tx, f txmanager.Fence, sent []txmanager.Sent, at time.Time) (int, error) {
	ids, routes := make([]uuid.UUID, len(sent)), make([]string, len(sent))
	for i, b := range sent {
		ids[i], routes[i] = b.TxID, string(b.Route)
	}
	rows, err := qAcceptedLate.query(ctx, tx, f, ids, routes, at)
	if err != nil {
		return 0, fmt.Errorf("record late broadcasts (%d): %w", len(sent), err)
	}
	attempts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sentRow, error) {
		var a sentRow
		return a, r.Scan(a.dests()...)
	})
	if err != nil {
		return 0, fmt.Errorf("record late broadcasts (%d): %w", len(sent), err)
	}
	return len(attempts), writeSent(ctx, tx, attempts)
}

// PendingApproval parks a simulated transaction until approvals arrive:
// INIT → PENDING_APPROVAL with its gas limit fixed and the time it stops
// waiting.
func (s *Store) PendingApproval(ctx context.Context, f txmanager.Fence, id uuid.UUID, gasLimit uint64, expires time.Time, why txmanager.StateChanged) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, qMoveToPendingApproval, id, []txmanager.State{txmanager.StateInit}, txmanager.StatePendingApproval,
			why, int64(gasLimit), expires, why.Reason)
		return err
	})
	return out, err
}
