package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// The statements of queries/feed.sql.
var (
	qFeedCursor       = Queries.Use("FeedCursor")
	qWallets          = Queries.Use("Wallets")
	qInsertFeedCursor = Queries.Use("InsertFeedCursor")
	qMoveFeedCursor   = Queries.Use("MoveFeedCursor")
	qRegisterWallets  = Queries.Use("RegisterWallets")
	qReversalOf       = Queries.Use("ReversalOf")
	qJournalByKey     = Queries.Use("JournalByKey")
	qJournalLegs      = Queries.Use("JournalLegs")
)

// Cursor is the seq up to which feed's events are booked; 0 before any.
func (s *Store) Cursor(ctx context.Context, feed string) (uint64, error) {
	var seq int64
	err := s.pool.QueryRow(ctx, qFeedCursor.SQL, feed).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uint64(seq), err
}

// Wallets reads the wallet registry.
func (s *Store) Wallets(ctx context.Context) ([]ledger.RegisteredWallet, error) {
	rows, err := s.pool.Query(ctx, qWallets.SQL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.RegisteredWallet, error) {
		var chain int64
		var addr, openedHash []byte
		var openedBlock *int64
		if err := row.Scan(&chain, &addr, &openedBlock, &openedHash); err != nil {
			return ledger.RegisteredWallet{}, err
		}
		w := ledger.RegisteredWallet{WalletKey: ledger.WalletKey{ChainID: uint64(chain), Address: common.BytesToAddress(addr)}}
		if openedBlock != nil {
			w.Opened = &ledger.Block{Number: uint64(*openedBlock), Hash: common.BytesToHash(openedHash)}
		}
		return w, nil
	})
}

// BookFeed books what a run of b.Feed's events produced, in one
// transaction: the signers they named join the wallets, the journals are
// booked (one already booked is a replay, as in Post), the transits are
// written, the events set aside join the backlog and those booked from it
// leave it, and the feed's cursor moves from b.From to b.To (b.To may be
// b.From when the run books only from the backlog). b.From must be
// the cursor as stored; otherwise another consumer has moved it, and
// nothing is booked (errs.Conflict). A journal whose key holds another
// fact fails the whole run, the cursor unmoved (errs.Conflict, and an
// alert): the feed stops there rather than book past a contradiction.
func (s *Store) BookFeed(ctx context.Context, b *ledger.FeedBooking) ([]ledger.Posted, error) {
	if b.To < b.From {
		return nil, fmt.Errorf("feed %s: cursor from %d back to %d", b.Feed, b.From, b.To)
	}
	posts, err := newPosts(b.Journals)
	if err != nil {
		return nil, err
	}
	if err := validTransitWrites(b); err != nil {
		return nil, err
	}
	if err := validBacklog(b); err != nil {
		return nil, err
	}
	var out []ledger.Posted
	err = s.inBookingTx(ctx, func(tx pgx.Tx, w *journalWriter) error {
		if err := moveCursor(ctx, tx, b.Feed, b.From, b.To); err != nil {
			return err
		}
		if err := drainBacklog(ctx, tx, b.Feed, b.Drained); err != nil {
			return err
		}
		if err := addBacklog(ctx, tx, b.Feed, b.Backlog); err != nil {
			return err
		}
		if err := addWallets(ctx, tx, b.Signers); err != nil {
			return err
		}
		if out, err = w.bookOnce(ctx, tx, posts); err != nil {
			return err
		}
		return writeTransits(ctx, tx, b, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// moveCursor moves feed's cursor from from to to, in tx, or fails with
// errs.Conflict when it is not at from.
func moveCursor(ctx context.Context, tx pgx.Tx, feed string, from, to uint64) error {
	if _, err := tx.Exec(ctx, qInsertFeedCursor.SQL, feed); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, qMoveFeedCursor.SQL, feed, int64(from), int64(to))
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errs.Errorf(errs.Conflict, "feed %s: the cursor is no longer at %d: another consumer moved it", feed, from)
	}
	return nil
}

// addWallets registers the signers a page of the feed named.
func addWallets(ctx context.Context, tx pgx.Tx, wallets []ledger.WalletKey) error {
	return registerWallets(ctx, tx, wallets, "signer")
}

// AddWallets registers configured wallets: addresses the ledger books as
// its own besides txmanager's signers (deposit addresses it watches). The
// scanner opens them. A wallet registered already stays as it is.
func (s *Store) AddWallets(ctx context.Context, wallets []ledger.WalletKey) error {
	return registerWallets(ctx, s.pool, wallets, "configured")
}

func registerWallets(ctx context.Context, db querier, wallets []ledger.WalletKey, source string) error {
	if len(wallets) == 0 {
		return nil
	}
	chains, addrs := make([]int64, len(wallets)), make([][]byte, len(wallets))
	for i, w := range wallets {
		chains[i], addrs[i] = int64(w.ChainID), w.Address.Bytes()
	}
	_, err := db.Exec(ctx, qRegisterWallets.SQL, chains, addrs, source)
	return err
}

// LiveJournal reads the journal that books key's fact now: the one under
// key, or, when that was reversed and its fact booked again (its block left
// the chain and came back), the last such rebooking. What a reversal
// negates. errs.NotFound when none is booked.
func (s *Store) LiveJournal(ctx context.Context, key string) (int64, *ledger.Journal, error) {
	id, j, err := s.Journal(ctx, key)
	for err == nil {
		var reversal int64
		err = s.pool.QueryRow(ctx, qReversalOf.SQL, id).Scan(&reversal)
		if errors.Is(err, pgx.ErrNoRows) {
			return id, j, nil
		}
		if err != nil {
			return 0, nil, err
		}
		rebooked, rj, rerr := s.Journal(ctx, RebookKey(key, reversal))
		if errs.Is(rerr, errs.NotFound) {
			return id, j, nil // reversed, not booked again: the reversal stands
		}
		id, j, err = rebooked, rj, rerr // rebookings are keyed by the original key
	}
	return 0, nil, err
}

// Journal reads the journal booked under key, with its legs: what a
// reversal negates. errs.NotFound when none is.
func (s *Store) Journal(ctx context.Context, key string) (int64, *ledger.Journal, error) {
	var id, chain int64
	var kind, status string
	var txHash, blockHash []byte
	var blockNumber, reverses *int64
	err := s.pool.QueryRow(ctx, qJournalByKey.SQL, key).Scan(&id, &kind, &chain, &txHash, &blockNumber, &blockHash, &status, &reverses)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil, errs.Errorf(errs.NotFound, "no journal under key %q", key)
	}
	if err != nil {
		return 0, nil, err
	}
	j := &ledger.Journal{Kind: ledger.JournalKind(kind), Key: key, ChainID: uint64(chain), Status: status}
	if txHash != nil {
		h := common.BytesToHash(txHash)
		j.TxHash = &h
	}
	if blockNumber != nil {
		j.Block = &ledger.Block{Number: uint64(*blockNumber), Hash: common.BytesToHash(blockHash)}
	}
	if reverses != nil {
		j.Reverses = *reverses
	}
	rows, err := s.pool.Query(ctx, qJournalLegs.SQL, id)
	if err != nil {
		return 0, nil, err
	}
	j.Legs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.Leg, error) {
		var c int64
		var asset, kind, amount string
		var addr []byte
		if err := row.Scan(&c, &asset, &kind, &addr, &amount); err != nil {
			return ledger.Leg{}, err
		}
		v, ok := new(big.Int).SetString(amount, 10)
		if !ok {
			return ledger.Leg{}, fmt.Errorf("entry amount %q", amount)
		}
		return ledger.Leg{Account: ledger.AccountKey{ChainID: uint64(c), Asset: asset, Kind: ledger.AccountKind(kind), Address: common.BytesToAddress(addr)}, Amount: v}, nil
	})
	if err != nil {
		return 0, nil, err
	}
	return id, j, nil
}
