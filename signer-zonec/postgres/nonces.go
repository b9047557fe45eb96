package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"
)

// The statements of queries/nonces.sql.
var (
	qLockNonceStart    = Queries.Use("LockNonceStart")
	qDeclareNonceStart = Queries.Use("DeclareNonceStart")
	qNonceStarts       = Queries.Use("NonceStarts")
)

// NonceStart is the next nonce an operator declared for an account that
// has history on chain from before signerd: the nonce look-ahead counts
// from it until signerd has signed above it.
type NonceStart struct {
	ChainID uint64         `json:"chain_id"`
	Signer  common.Address `json:"signer"`
	Nonce   uint64         `json:"nonce"`
	SetAt   time.Time      `json:"set_at"`
}

// DeclareNonceStart records start.Nonce as the next nonce of its account,
// replacing an earlier declaration, and returns that earlier one (nil
// without). Only the tables' owner may: the serving role reads
// nonce_start and nothing more, so a compromised signerd cannot move a
// start ahead to sign far-future nonces.
func (s *Store) DeclareNonceStart(ctx context.Context, start NonceStart) (*NonceStart, error) {
	if start.ChainID == 0 || start.ChainID > 1<<63-1 || start.Nonce > 1<<63-1 {
		return nil, fmt.Errorf("chain id %d or nonce %d out of range", start.ChainID, start.Nonce)
	}
	var before *NonceStart
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// pgx hands a failed query's error on through its rows.
		rows, _ := tx.Query(ctx, qLockNonceStart.SQL, int64(start.ChainID), start.Signer.Bytes())
		earlier, err := pgx.CollectOneRow(rows, scanNonceStart)
		switch {
		case err == nil:
			before = &earlier
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		_, err = tx.Exec(ctx, qDeclareNonceStart.SQL, int64(start.ChainID), start.Signer.Bytes(), int64(start.Nonce))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("declare the start nonce of %s on chain %d: %w", start.Signer.Hex(), start.ChainID, err)
	}
	return before, nil
}

// NonceStarts lists every declared start, by chain and signer.
func (s *Store) NonceStarts(ctx context.Context) ([]NonceStart, error) {
	rows, _ := s.pool.Query(ctx, qNonceStarts.SQL)
	starts, err := pgx.CollectRows(rows, scanNonceStart)
	if err != nil {
		return nil, fmt.Errorf("read the declared start nonces: %w", err)
	}
	return starts, nil
}

func scanNonceStart(row pgx.CollectableRow) (NonceStart, error) {
	var (
		ns             NonceStart
		chainID, nonce int64
		signer         []byte
	)
	err := row.Scan(&chainID, &signer, &nonce, &ns.SetAt)
	ns.ChainID, ns.Signer, ns.Nonce = uint64(chainID), common.BytesToAddress(signer), uint64(nonce)
	return ns, err
}
