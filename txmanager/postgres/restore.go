package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/txmanager"
)

// What a signer's new owner reads and writes when the chain is ahead of
// the database: after a restore from a backup, the chain holds nonces the
// database never saw assigned (txmanager.ReasonFoundMined).

// NonceCursor is the signer's stored next nonce; ok is false when no
// nonce was ever allocated to the signer here.
func (s *Store) NonceCursor(ctx context.Context, key txmanager.SignerKey) (next uint64, ok bool, err error) {
	var n int64
	err = s.pool.QueryRow(ctx, `SELECT next_nonce FROM nonce_cursor WHERE chain_id = $1 AND signer = $2`,
		int64(key.ChainID), key.Signer.Bytes()).Scan(&n)
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
	rows, err := s.pool.Query(ctx, `SELECT nonce FROM tx WHERE chain_id = $1 AND signer = $2 AND nonce >= $3 AND nonce < $4`,
		int64(key.ChainID), key.Signer.Bytes(), int64(from), int64(to))
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
		// The transaction's current attempt is checked at commit
		// (tx_current_attempt_fk is deferred): the attempt row comes first
		// only because it needs the route the move below keeps.
		tag, err := tx.Exec(ctx, `
			INSERT INTO attempt (tx_id, attempt, nonce, hash, raw, max_fee_per_gas, max_priority_fee_per_gas, gas_price, gas_limit, route, sent_at, kind)
			SELECT tx_id, 1, $2, $3, $4, $5::numeric, $6::numeric, $7::numeric, $8, route, now(), 'initial'
			FROM tx WHERE tx_id = $1 AND state IN ('INIT', 'SIMULATED', 'PENDING_APPROVAL')`,
			append([]any{found.TxID, int64(found.Nonce), found.Hash.Bytes(), found.Raw}, append(fees, int64(found.GasLimit))...)...)
		if err != nil {
			return fmt.Errorf("adopt %s found mined at nonce %d: %w", found.TxID, found.Nonce, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("adopt %s found mined at nonce %d: it is no longer waiting for a nonce", found.TxID, found.Nonce)
		}
		why := fmt.Sprintf("%s: mined in block %d at nonce %d before the database was restored", txmanager.ReasonFoundMined, found.Block, found.Nonce)
		nonce, hash := found.Nonce, found.Hash
		out, err = move(ctx, tx, f, found.TxID, []txmanager.State{txmanager.StateInit, txmanager.StateSimulated, txmanager.StatePendingApproval},
			txmanager.StateBroadcasted, `, nonce = $6, gas_limit = $7, signing_max_fee_per_gas = $8, signing_max_priority_fee_per_gas = $9,
				signing_gas_price = $10, current_attempt = 1, approval_expires_at = NULL, sub_state = NULL, reason = $11`,
			append([]any{int64(found.Nonce), int64(found.GasLimit)}, append(fees, why)...),
			txmanager.StateChanged{Reason: why, Nonce: &nonce, Hash: &hash})
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
