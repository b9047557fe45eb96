package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/follow.sql.
var (
	qFeedHead           = query("FeedHead")
	qChangedSince       = query("ChangedSince")
	qTracking           = query("Tracking")
	qLockTxForReceipt   = query("LockTxForReceipt")
	qRecordReceipt      = fenced("RecordReceipt")
	qCountConfirmations = fenced("CountConfirmations")
	qAttemptKind        = query("AttemptKind")
	qLockTxForReorg     = query("LockTxForReorg")
	qReopen             = fenced("Reopen")
	qForgetReceipts     = query("ForgetReceipts")
	qClaimResend        = fenced("ClaimResend")
	qCountDrop          = fenced("CountDrop")
)

// The chain follower's reads and writes: which broadcast transactions to
// look for in blocks, and what it found. Every write is fenced like the
// worker's and writes its event in the same transaction.

// Tracking lists key's transactions the follower watches: every
// BROADCASTED one, every SIGNED one (whatever its sub-state: a node may
// mine a transaction whose send it refused, and one held for funds or
// stuck on a refusal may have its nonce consumed elsewhere), and those
// CONFIRMED or REVERTED in a block at or above fromBlock.
func (s *Store) Tracking(ctx context.Context, key txmanager.SignerKey, fromBlock uint64) ([]txmanager.Tracked, error) {
	return s.tracking(ctx, key, fromBlock, nil)
}

// FeedHead is the highest sequence the event feed has given: every event
// up to it is committed and numbered.
func (s *Store) FeedHead(ctx context.Context) (uint64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, qFeedHead.SQL).Scan(&seq); err != nil {
		return 0, fmt.Errorf("the feed's head: %w", err)
	}
	return uint64(seq), nil
}

// TrackingSince reads what changed after the feed sequence after, up to
// the feed's head (upTo): changed are the transactions with an event in
// between, of any signer, and rows the ones of them key's follower still
// watches (Tracking's rule). A changed transaction missing from rows is no
// longer watched.
func (s *Store) TrackingSince(ctx context.Context, key txmanager.SignerKey, fromBlock, after uint64) (rows []txmanager.Tracked, changed []uuid.UUID, upTo uint64, err error) {
	if upTo, err = s.FeedHead(ctx); err != nil || upTo <= after {
		return nil, nil, max(upTo, after), err
	}
	ids, err := s.pool.Query(ctx, qChangedSince.SQL, int64(after), int64(upTo))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("changes since %d: %w", after, err)
	}
	if changed, err = pgx.CollectRows(ids, pgx.RowTo[uuid.UUID]); err != nil {
		return nil, nil, 0, fmt.Errorf("changes since %d: %w", after, err)
	}
	if len(changed) == 0 {
		return nil, nil, upTo, nil
	}
	rows, err = s.tracking(ctx, key, fromBlock, changed)
	return rows, changed, upTo, err
}

// tracking reads Tracking's rows, only among ids when ids is not nil.
func (s *Store) tracking(ctx context.Context, key txmanager.SignerKey, fromBlock uint64, ids []uuid.UUID) ([]txmanager.Tracked, error) {
	rows, err := s.pool.Query(ctx, qTracking.SQL, int64(key.ChainID), key.Signer.Bytes(), int64(fromBlock), ids)
	if err != nil {
		return nil, fmt.Errorf("transactions to follow of %s: %w", key, err)
	}
	var out []txmanager.Tracked
	var (
		id                      uuid.UUID
		state, route            string
		stuck                   bool
		nonce, confirmations    int64
		current, mined, attempt int
		hash                    []byte
		blockNumber, gasUsed    *int64
		blockHash               []byte
		status                  *int16
		price                   *string
		sentAt, firstSentAt     time.Time
		kind                    string
		fees                    [3]*string
		gasLimit                int64
		waitingSince            *int64
		attemptRoute            string
		drops                   int
		planAttempt             *int32
		planKind                *string
		planGas                 *int64
		planFees                [3]*string
		planAction              *uuid.UUID
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &state, &stuck, &route, &nonce, &current, &mined, &confirmations,
		&attempt, &hash, &blockNumber, &blockHash, &status, &gasUsed, &price, &sentAt, &firstSentAt, &kind, &fees[0], &fees[1], &fees[2], &gasLimit, &waitingSince,
		&attemptRoute, &drops,
		&planAttempt, &planKind, &planGas, &planFees[0], &planFees[1], &planFees[2], &planAction}, func() error {
		if len(out) == 0 || out[len(out)-1].TxID != id {
			out = append(out, txmanager.Tracked{TxID: id, Key: key, State: txmanager.State(state), Stuck: stuck, Route: txmanager.Route(route), Nonce: uint64(nonce), Current: current,
				Attempts: map[common.Hash]int{}, Confirmations: uint64(confirmations), GasLimit: uint64(gasLimit)})
			if planAttempt != nil {
				out[len(out)-1].Plan = &txmanager.Plan{Attempt: int(*planAttempt), Kind: *planKind, GasLimit: uint64(*planGas), ActionID: planAction,
					Fees: txmanager.Fees{MaxFeePerGas: bigOf(planFees[0]), MaxPriorityFeePerGas: bigOf(planFees[1]), GasPrice: bigOf(planFees[2])}}
			}
		}
		t := &out[len(out)-1]
		h := common.BytesToHash(hash)
		t.Attempts[h] = attempt
		if attempt == current {
			t.SentAt, t.CurrentKind, t.CurrentRoute, t.Drops = sentAt, kind, txmanager.Route(attemptRoute), drops
			t.Fees = txmanager.Fees{MaxFeePerGas: bigOf(fees[0]), MaxPriorityFeePerGas: bigOf(fees[1]), GasPrice: bigOf(fees[2])}
			if waitingSince != nil {
				since := uint64(*waitingSince)
				t.WaitingSince = &since
			}
		}
		if t.FirstSentAt.IsZero() || firstSentAt.Before(t.FirstSentAt) {
			t.FirstSentAt = firstSentAt
		}
		if attempt == mined && blockNumber != nil {
			t.Mined = &txmanager.Receipt{Attempt: attempt, Hash: h, BlockNumber: uint64(*blockNumber), BlockHash: common.BytesToHash(blockHash),
				Status: uint8(*status), GasUsed: uint64(valueOr(gasUsed)), EffectiveGasPrice: bigOf(price)}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("transactions to follow of %s: %w", key, err)
	}
	return out, nil
}

func valueOr(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// Mined records that an attempt of a BROADCASTED or SIGNED transaction is
// in a canonical block with confirmations confirmations: the attempt's
// receipt, the transaction's sub-state included, and a tx.confirmation
// event, with new_fork set when an earlier receipt of the transaction was
// reported (a reorg took it away). The chain's word beats a send's
// verdict: a SIGNED transaction (its broadcast refused, held for funds or
// stuck, whatever the node answered) moves to BROADCASTED, included, with
// its tx.state_changed event before the tx.confirmation, and ends as its
// receipt says like any other.
func (s *Store) Mined(ctx context.Context, f txmanager.Fence, id uuid.UUID, r txmanager.Receipt, confirmations uint64) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		// Lock the row first: the state read is the one the update replaces.
		var from string
		var newFork bool
		if err := tx.QueryRow(ctx, qLockTxForReceipt.SQL, id, txmanager.EventConfirmation).Scan(&from, &newFork); err != nil {
			return fmt.Errorf("record the receipt of %s: %w", id, err)
		}
		tag, err := qRecordReceipt.exec(ctx, tx, f, id, r.Attempt, int64(r.BlockNumber), r.BlockHash.Bytes(), int16(r.Status), int64(r.GasUsed),
			optNumeric(r.EffectiveGasPrice), int64(confirmations))
		if err != nil {
			return fmt.Errorf("record the receipt of %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return s.notFollowed(ctx, tx, f, id, "record the receipt of")
		}
		if txmanager.State(from) == txmanager.StateSigned {
			moved, err := scanTx(tx.QueryRow(ctx, qGetTx.SQL, id))
			if err != nil {
				return fmt.Errorf("record the receipt of %s: %w", id, err)
			}
			if err := insertEvent(ctx, tx, &moved, txmanager.StateChanged{FromState: txmanager.StateSigned, ToState: txmanager.StateBroadcasted,
				Hash: &r.Hash}); err != nil {
				return err
			}
		}
		return insertTypedEvent(ctx, tx, txmanager.EventConfirmation, id, txmanager.Confirmation{Hash: r.Hash, BlockNumber: r.BlockNumber,
			BlockHash: r.BlockHash, Confirmations: confirmations, ReceiptStatus: r.Status, NewFork: newFork})
	})
}

// Confirmed records a mined transaction's new confirmation count with its
// tx.confirmation event.
func (s *Store) Confirmed(ctx context.Context, f txmanager.Fence, id uuid.UUID, r txmanager.Receipt, confirmations uint64) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		tag, err := qCountConfirmations.exec(ctx, tx, f, id, int64(confirmations), r.Attempt)
		if err != nil {
			return fmt.Errorf("count the confirmations of %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return s.notFollowed(ctx, tx, f, id, "count the confirmations of")
		}
		return insertTypedEvent(ctx, tx, txmanager.EventConfirmation, id, txmanager.Confirmation{Hash: r.Hash, BlockNumber: r.BlockNumber,
			BlockHash: r.BlockHash, Confirmations: confirmations, ReceiptStatus: r.Status})
	})
}

// Final ends a mined transaction at the configured depth: BROADCASTED →
// CONFIRMED, or REVERTED when the receipt's status is 0, or CANCELLED
// (cancel_mined) when the attempt mined is a cancel.
func (s *Store) Final(ctx context.Context, f txmanager.Fence, id uuid.UUID, r txmanager.Receipt) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var kind string
		if err := tx.QueryRow(ctx, qAttemptKind.SQL, id, r.Attempt).Scan(&kind); err != nil {
			return fmt.Errorf("end %s: attempt %d: %w", id, r.Attempt, err)
		}
		from := []txmanager.State{txmanager.StateBroadcasted}
		ev := txmanager.StateChanged{Hash: &r.Hash, BlockNumber: &r.BlockNumber, BlockHash: &r.BlockHash}
		var err error
		switch {
		case kind == txmanager.AttemptCancel:
			ev.Reason = txmanager.ReasonCancelMined
			out, err = move(ctx, tx, f, qMoveWithReason, id, from, txmanager.StateCancelled, ev, txmanager.ReasonCancelMined)
		case r.Status == 0:
			out, err = move(ctx, tx, f, qMoveKeepingReason, id, from, txmanager.StateReverted, ev)
		default:
			out, err = move(ctx, tx, f, qMoveKeepingReason, id, from, txmanager.StateConfirmed, ev)
		}
		return err
	})
	return out, err
}

// Reorged re-opens a transaction whose receipt's block left the canonical
// chain: the receipt is forgotten, the transaction is BROADCASTED again
// (from BROADCASTED, CONFIRMED, REVERTED, or CANCELLED by a mined cancel) and tracked anew, and a
// tx.reorged event says which block was lost. Its attempts wait anew:
// bump_after_blocks counts from the block the follower next sees them
// waiting at.
func (s *Store) Reorged(ctx context.Context, f txmanager.Fence, id uuid.UUID, lost txmanager.Receipt) error {
	return s.fencedTx(ctx, func(tx pgx.Tx) error {
		var from string
		var confirmations *int64
		if err := tx.QueryRow(ctx, qLockTxForReorg.SQL, id).Scan(&from, &confirmations); err != nil {
			return fmt.Errorf("re-open %s: %w", id, err)
		}
		tag, err := qReopen.exec(ctx, tx, f, id, lost.Attempt)
		if err != nil {
			return fmt.Errorf("re-open %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return s.notFollowed(ctx, tx, f, id, "re-open")
		}
		if _, err := tx.Exec(ctx, qForgetReceipts.SQL, id); err != nil {
			return fmt.Errorf("re-open %s: %w", id, err)
		}
		return insertTypedEvent(ctx, tx, txmanager.EventReorged, id, txmanager.Reorged{Hash: lost.Hash, BlockNumber: lost.BlockNumber,
			BlockHash: lost.BlockHash, Confirmations: uint64(valueOr(confirmations)), FromState: txmanager.State(from), ToState: txmanager.StateBroadcasted})
	})
}

// Resend claims a resend of a BROADCASTED transaction's current attempt,
// unchanged: its sent-at moves to now, with a tx.attempt event (kind
// resend), before anything is sent, and the raw transaction to send is
// returned. The attempt's first send is kept (first_sent_at, written by
// the first resend): the stuck clock runs from it, not from the last
// resend. A claim that is not followed by a send (a crash) is made again
// after the next interval.
func (s *Store) Resend(ctx context.Context, f txmanager.Fence, id uuid.UUID, attempt int) ([]byte, error) {
	var raw []byte
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var (
			hash               []byte
			nonce, gasLimit    int64
			route              string
			sentAt             time.Time
			maxFee, tip, price string
		)
		err := qClaimResend.queryRow(ctx, tx, f, id, attempt).Scan(&raw, &hash, &nonce, &gasLimit, &route, &sentAt, &maxFee, &tip, &price)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.notFollowed(ctx, tx, f, id, "resend")
		}
		if err != nil {
			return fmt.Errorf("resend %s: %w", id, err)
		}
		return insertTypedEvent(ctx, tx, txmanager.EventAttempt, id, txmanager.AttemptSent{Attempt: attempt, Kind: txmanager.AttemptResend,
			Nonce: uint64(nonce), Hash: common.BytesToHash(hash), Route: txmanager.Route(route), SentAt: sentAt.UTC(),
			Fees: txmanager.AttemptFees{GasLimit: uint64(gasLimit), MaxFeePerGas: maxFee, MaxPriorityFeePerGas: tip, GasPrice: price}})
	})
	return raw, err
}

// Dropped records that the current attempt of a BROADCASTED transaction,
// not mined, was dropped by the nodes since it was last sent (the chain
// follower found it unknown to every read endpoint at two blocks in a
// row): the drop counted on the attempt and a tx.attempt event of kind
// dropped, in one fenced transaction. Once the attempt has been dropped
// maxDrops times, the transaction is left to an operator in the same
// transaction: sub-state stuck, reason dropped_by_node, with its
// tx.state_changed event; it stays BROADCASTED, never FAILED (its nonce
// is signed: a failure would leave a gap under every later nonce), and
// tracked, so that it still ends as the chain says if it is mined.
func (s *Store) Dropped(ctx context.Context, f txmanager.Fence, id uuid.UUID, attempt, maxDrops int) (txmanager.Drop, error) {
	var out txmanager.Drop
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		// Lock the transaction first, as a state change does.
		if _, err := tx.Exec(ctx, qLockTxState.SQL, id); err != nil {
			return fmt.Errorf("record the drop of %s: %w", id, err)
		}
		var (
			hash               []byte
			nonce, gasLimit    int64
			route, sub, reason string
			sentAt             time.Time
			maxFee, tip, price string
		)
		err := qCountDrop.queryRow(ctx, tx, f, id, attempt).Scan(&out.Drops, &hash, &nonce, &gasLimit, &route, &sentAt, &maxFee, &tip, &price, &sub, &reason)
		if errors.Is(err, pgx.ErrNoRows) {
			return s.notFollowed(ctx, tx, f, id, "record the drop of")
		}
		if err != nil {
			return fmt.Errorf("record the drop of %s: %w", id, err)
		}
		if err := insertTypedEvent(ctx, tx, txmanager.EventAttempt, id, txmanager.AttemptSent{Attempt: attempt, Kind: txmanager.AttemptDropped,
			Nonce: uint64(nonce), Hash: common.BytesToHash(hash), Route: txmanager.Route(route), SentAt: sentAt.UTC(), Drops: out.Drops,
			Fees: txmanager.AttemptFees{GasLimit: uint64(gasLimit), MaxFeePerGas: maxFee, MaxPriorityFeePerGas: tip, GasPrice: price}}); err != nil {
			return err
		}
		if out.Drops < maxDrops {
			return nil
		}
		out.Refused = true
		if txmanager.SubState(sub) == txmanager.SubStuck && strings.HasPrefix(reason, txmanager.ReasonDroppedByNode+":") {
			out.Reason = reason // refused before (an operator resent it since): one state change
			return nil
		}
		out.Reason = fmt.Sprintf("%s: attempt %d (%s) dropped %d times: unknown to every read endpoint at two blocks in a row after its send",
			txmanager.ReasonDroppedByNode, attempt, common.BytesToHash(hash).Hex(), out.Drops)
		_, err = move(ctx, tx, f, qMoveSubState, id, []txmanager.State{txmanager.StateBroadcasted}, txmanager.StateBroadcasted,
			txmanager.StateChanged{SubState: txmanager.SubStuck, Reason: out.Reason}, string(txmanager.SubStuck), out.Reason)
		return err
	})
	return out, err
}

// ConsumedExternally fails a BROADCASTED (or stuck SIGNED) transaction whose nonce the chain
// consumed with none of its attempts (the key was used outside txfence):
// FAILED with nonce_consumed_externally. Its nonce stays with it: it is
// spent.
func (s *Store) ConsumedExternally(ctx context.Context, f txmanager.Fence, id uuid.UUID) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = move(ctx, tx, f, qMoveWithReason, id, []txmanager.State{txmanager.StateBroadcasted, txmanager.StateSigned}, txmanager.StateFailed,
			txmanager.StateChanged{Reason: txmanager.ReasonNonceConsumedExternally}, txmanager.ReasonNonceConsumedExternally)
		return err
	})
	return out, err
}

// notFollowed explains a follower write that touched nothing: fenced, or
// the transaction changed.
func (s *Store) notFollowed(ctx context.Context, tx pgx.Tx, f txmanager.Fence, id uuid.UUID, op string) error {
	if err := fencedOrNothing(ctx, tx, f, op+" "+id.String()); err != nil {
		return err
	}
	return fmt.Errorf("%s %s: %w", op, id, txmanager.ErrNotFollowed)
}
