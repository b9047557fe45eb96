package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// The statements of queries/restore.sql.
var (
	qNonceCursor        = query("NonceCursor")
	qNoncesHeld         = query("NoncesHeld")
	qInsertFoundAttempt = query("InsertFoundAttempt")
)

// What a signer's new owner reads and writes when the chain is ahead of
// the database: after a restore from a backup, the chain holds nonces the
// database never saw assigned (txmanager.ReasonFoundMined).

// NonceCursor is the signer's stored next nonce; ok is false when no
// nonce was ever allocated to the signer here.
func (s *Store) NonceCursor(ctx context.Context, key txmanager.SignerKey) (next uint64, ok bool, err error) {
	var n int64
	err = s.pool.QueryRow(ctx, qNonceCursor.SQL, int64(key.ChainID), key.Signer.Bytes()).Scan(&n)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("nonce cursor of %s: %w", key, err)
	}
	return uint64(n), true, nil
}

// NoncesHeld are the nonces from from to to-1 that a transaction of the
// signer holds.
func (s *Store) NoncesHeld(ctx context.Context, key txmanager.SignerKey, from, to uint64) (map[uint64]bool, error) {
	rows, err := s.pool.Query(ctx, qNoncesHeld.SQL, int64(key.ChainID), key.Signer.Bytes(), int64(from), int64(to))
	if err != nil {
		return nil, fmt.Errorf("nonces held by %s: %w", key, err)
	}
	held := map[uint64]bool{}
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&n}, func() error { held[uint64(n)] = true; return nil })
	if err != nil {
		return nil, fmt.Errorf("nonces held by %s: %w", key, err)
	}
	return held, nil
}

// AdoptFound records a transaction found mined at a nonce the database
// had not assigned: INIT, SIMULATED or PENDING_APPROVAL → BROADCASTED with
// the nonce, the fees and the attempt the chain holds (attempt 1, sent
// now as far as the database knows), a state change event with reason
// txmanager.ReasonFoundMined and a tx.attempt event, in one fenced
// transaction. The chain follower then finds its receipt by hash and
// takes it on to CONFIRMED or REVERTED. It never signs or sends anything.
func (s *Store) AdoptFound(ctx context.Context, f txmanager.Fence, found txmanager.Found) (txmanager.Tx, error) {
	var out txmanager.Tx
	err := s.fencedTx(ctx, func(tx pgx.Tx) error {
		fees := signingFeeArgs(found.Fees)
		tag, err := tx.Exec(ctx, qInsertFoundAttempt.SQL,
			append([]any{found.TxID, int64(found.Nonce), found.Hash.Bytes(), found.Raw}, append(fees, int64(found.GasLimit))...)...)
		if err != nil {
			return fmt.Errorf("adopt %s found mined at nonce %d: %w", found.TxID, found.Nonce, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("adopt %s found mined at nonce %d: it is no longer waiting for a nonce", found.TxID, found.Nonce)
		}
		why := fmt.Sprintf("%s: mined in block %d at nonce %d before the database was restored", txmanager.ReasonFoundMined, found.Block, found.Nonce)
		nonce, hash := found.Nonce, found.Hash
		out, err = move(ctx, tx, f, qMoveFoundMined, found.TxID, []txmanager.State{txmanager.StateInit, txmanager.StateSimulated, txmanager.StatePendingApproval},
			txmanager.StateBroadcasted, txmanager.StateChanged{Reason: why, Nonce: &nonce, Hash: &hash},
			append([]any{int64(found.Nonce), int64(found.GasLimit)}, append(fees, why)...)...)
		if err != nil {
			return err
		}
		out.Hash = &hash
		return insertTypedEvent(ctx, tx, txmanager.EventAttempt, found.TxID, txmanager.AttemptSent{Attempt: 1, Kind: txmanager.AttemptInitial,
			Nonce: found.Nonce, Hash: found.Hash, Route: out.Route, SentAt: time.Now().UTC(),
			Fees: txmanager.AttemptFees{GasLimit: found.GasLimit, MaxFeePerGas: deref(optNumeric(found.Fees.MaxFeePerGas)),
				MaxPriorityFeePerGas: deref(optNumeric(found.Fees.MaxPriorityFeePerGas)), GasPrice: deref(optNumeric(found.Fees.GasPrice))}})
	})
	return out, err
}
