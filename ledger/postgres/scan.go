package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/pg"
)

// The statements of queries/scan.sql.
var (
	qScanCursor               = Queries.Use("ScanCursor")
	qStartScanCursor          = Queries.Use("StartScanCursor")
	qInsertScannedBlocks      = Queries.Use("InsertScannedBlocks")
	qScannedBlocks            = Queries.Use("ScannedBlocks")
	qUnopenedWallets          = Queries.Use("UnopenedWallets")
	qForgetScannedBlocksUpTo  = Queries.Use("ForgetScannedBlocksUpTo")
	qMoveScanCursor           = Queries.Use("MoveScanCursor")
	qOpenWallets              = Queries.Use("OpenWallets")
	qInsertWalletTxs          = Queries.Use("InsertWalletTxs")
	qIsScannedBlock           = Queries.Use("IsScannedBlock")
	qUnopenWalletsAfter       = Queries.Use("UnopenWalletsAfter")
	qForgetWalletTxsAfter     = Queries.Use("ForgetWalletTxsAfter")
	qForgetScannedBlocksAfter = Queries.Use("ForgetScannedBlocksAfter")
	qUnreversedAfter          = Queries.Use("UnreversedAfter")
)

// ScanCursor is the last block the scanner booked on chainID; nil before
// its first start.
func (s *Store) ScanCursor(ctx context.Context, chainID uint64) (*ledger.Block, error) {
	var number int64
	var hash []byte
	err := s.pool.QueryRow(ctx, qScanCursor.SQL, int64(chainID)).Scan(&number, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read chain %d's scan cursor: %w", chainID, err)
	}
	return &ledger.Block{Number: uint64(number), Hash: common.BytesToHash(hash)}, nil
}

// StartScan sets chainID's scan cursor at the last of blocks, oldest
// first, on the scanner's first start, and keeps them all as scanned: a
// reorg right after the start finds its fork point among them. A cursor
// set before (by another scanner) is kept. It returns the cursor.
func (s *Store) StartScan(ctx context.Context, chainID uint64, blocks []ledger.ScannedBlock) (ledger.Block, error) {
	if len(blocks) == 0 {
		return ledger.Block{}, errs.E(errs.Invalid, "start a scan: no block")
	}
	var cursor ledger.Block
	err := pg.InTx(ctx, s.pool, pg.TxOptions{}, func(tx pgx.Tx) error {
		at := blocks[len(blocks)-1]
		tag, err := tx.Exec(ctx, qStartScanCursor.SQL, int64(chainID), int64(at.Number), at.Hash.Bytes())
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			if err := insertScanned(ctx, tx, chainID, blocks); err != nil {
				return err
			}
		}
		var number int64
		var hash []byte
		if err := tx.QueryRow(ctx, qScanCursor.SQL, int64(chainID)).Scan(&number, &hash); err != nil {
			return err
		}
		cursor = ledger.Block{Number: uint64(number), Hash: common.BytesToHash(hash)}
		return nil
	})
	if err != nil {
		return ledger.Block{}, fmt.Errorf("start chain %d's scan: %w", chainID, err)
	}
	return cursor, nil
}

func insertScanned(ctx context.Context, tx pgx.Tx, chainID uint64, blocks []ledger.ScannedBlock) error {
	numbers, hashes, parents := make([]int64, len(blocks)), make([][]byte, len(blocks)), make([][]byte, len(blocks))
	for i, b := range blocks {
		numbers[i], hashes[i], parents[i] = int64(b.Number), b.Hash.Bytes(), b.Parent.Bytes()
	}
	_, err := tx.Exec(ctx, qInsertScannedBlocks.SQL, int64(chainID), numbers, hashes, parents)
	return err
}

// ScannedBlocks are the blocks of chainID the scanner keeps, newest
// first: where a reorg's fork point is looked for.
func (s *Store) ScannedBlocks(ctx context.Context, chainID uint64) ([]ledger.ScannedBlock, error) {
	rows, err := s.pool.Query(ctx, qScannedBlocks.SQL, int64(chainID))
	if err != nil {
		return nil, fmt.Errorf("read chain %d's scanned blocks: %w", chainID, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.ScannedBlock, error) {
		var number int64
		var hash, parent []byte
		err := row.Scan(&number, &hash, &parent)
		return ledger.ScannedBlock{Number: uint64(number), Hash: common.BytesToHash(hash), Parent: common.BytesToHash(parent)}, err
	})
}

// UnopenedWallets are the wallets of chainID in the registry that the
// scanner has not opened.
func (s *Store) UnopenedWallets(ctx context.Context, chainID uint64) ([]common.Address, error) {
	rows, err := s.pool.Query(ctx, qUnopenedWallets.SQL, int64(chainID))
	if err != nil {
		return nil, fmt.Errorf("read chain %d's unopened wallets: %w", chainID, err)
	}
	return pgx.CollectRows(rows, scanAddress)
}

func scanAddress(row pgx.CollectableRow) (common.Address, error) {
	var a []byte
	err := row.Scan(&a)
	return common.BytesToAddress(a), err
}

// BookScan books block b.Block in one transaction: the scan cursor moves
// from b.Cursor to it, the block joins the scanned ones (the oldest beyond
// the window leave), the wallets are opened at the cursor, the journals
// and the wallets' transactions are written. When the cursor is not at
// b.Cursor, another scanner has moved it, and nothing is booked
// (errs.Conflict). With no block, the cursor stays and only the wallets
// are opened, with their journals.
//
// A journal already booked under its key is a replay, booked once; one
// whose key holds another fact fails the whole block
// (errs.Conflict, and an alert), as in BookFeed. A journal whose booking
// was reversed (its block left the chain, and has come back) is booked
// again under a key derived from the reversal's: the fact holds once more.
func (s *Store) BookScan(ctx context.Context, b *ledger.ScanBooking) ([]ledger.Posted, error) {
	if b.Block != nil && (b.Block.Number != b.Cursor.Number+1 || b.Block.Parent != b.Cursor.Hash) {
		return nil, errs.Errorf(errs.Invalid, "chain %d: block %d (parent %s) does not follow the cursor at %d (%s)",
			b.ChainID, b.Block.Number, b.Block.Parent, b.Cursor.Number, b.Cursor.Hash)
	}
	if b.Block == nil && len(b.WalletTxs) > 0 {
		return nil, errs.Errorf(errs.Invalid, "chain %d: wallet transactions without their block", b.ChainID)
	}
	if b.Window < 1 {
		return nil, errs.Errorf(errs.Invalid, "chain %d: a window of %d scanned blocks", b.ChainID, b.Window)
	}
	posts, err := newPosts(b.Journals)
	if err != nil {
		return nil, err
	}
	var out []ledger.Posted
	err = s.inBookingTx(ctx, func(tx pgx.Tx, w *journalWriter) error {
		to := b.Cursor
		if b.Block != nil {
			to = b.Block.Block()
		}
		// Staying put still locks the cursor: a rewind waits for the openings.
		if err := moveScanCursor(ctx, tx, b.ChainID, b.Cursor, to); err != nil {
			return err
		}
		if b.Block != nil {
			if err := insertScanned(ctx, tx, b.ChainID, []ledger.ScannedBlock{*b.Block}); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, qForgetScannedBlocksUpTo.SQL, int64(b.ChainID), int64(b.Block.Number)-int64(b.Window)); err != nil {
				return err
			}
		}
		if err := openWallets(ctx, tx, b.ChainID, b.Cursor, b.Opened); err != nil {
			return err
		}
		var err error
		if out, err = w.bookOnce(ctx, tx, posts); err != nil {
			return err
		}
		return insertWalletTxs(ctx, tx, b.ChainID, to, b.WalletTxs)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// moveScanCursor moves chainID's scan cursor from from to to, in tx, or
// fails with errs.Conflict when it is not at from.
func moveScanCursor(ctx context.Context, tx pgx.Tx, chainID uint64, from, to ledger.Block) error {
	tag, err := tx.Exec(ctx, qMoveScanCursor.SQL, int64(chainID), int64(from.Number), from.Hash.Bytes(), int64(to.Number), to.Hash.Bytes())
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errs.Errorf(errs.Conflict, "chain %d: the scan cursor is no longer at block %d (%s): another scanner moved it", chainID, from.Number, from.Hash)
	}
	return nil
}

// openWallets opens wallets at block; each must be in the registry, not
// opened yet.
func openWallets(ctx context.Context, tx pgx.Tx, chainID uint64, at ledger.Block, wallets []common.Address) error {
	if len(wallets) == 0 {
		return nil
	}
	addrs := make([][]byte, len(wallets))
	for i, a := range wallets {
		addrs[i] = a.Bytes()
	}
	tag, err := tx.Exec(ctx, qOpenWallets.SQL, int64(chainID), addrs, int64(at.Number), at.Hash.Bytes())
	if err != nil {
		return err
	}
	if n := tag.RowsAffected(); n != int64(len(wallets)) {
		return errs.Errorf(errs.Conflict, "chain %d: opened %d of %d wallets at block %d: the others are opened already, or not registered", chainID, n, len(wallets), at.Number)
	}
	return nil
}

func insertWalletTxs(ctx context.Context, tx pgx.Tx, chainID uint64, block ledger.Block, txs []ledger.WalletTx) error {
	if len(txs) == 0 {
		return nil
	}
	hashes, senders := make([][]byte, len(txs)), make([][]byte, len(txs))
	for i, t := range txs {
		hashes[i], senders[i] = t.Hash.Bytes(), t.Sender.Bytes()
	}
	_, err := tx.Exec(ctx, qInsertWalletTxs.SQL, int64(chainID), hashes, block.Hash.Bytes(), int64(block.Number), senders)
	return err
}

// RewindScan moves chainID's scan cursor back from from to fork, the
// newest block the scanner booked that is still on the chain, in one
// transaction: every deposit and opening booked in a later block is
// reversed, wallets opened after fork are no longer, and the scanned
// blocks and wallet transactions after it are forgotten. The journals of
// the feed consumer are left alone: txmanager's tx.reorged events reverse
// those. errs.Conflict when the cursor is not at from.
func (s *Store) RewindScan(ctx context.Context, chainID uint64, from, fork ledger.Block) (ledger.Rewound, error) {
	if fork.Number >= from.Number {
		return ledger.Rewound{}, errs.Errorf(errs.Invalid, "chain %d: rewind from block %d to %d", chainID, from.Number, fork.Number)
	}
	var out ledger.Rewound
	err := s.inBookingTx(ctx, func(tx pgx.Tx, w *journalWriter) error {
		out = ledger.Rewound{}
		if err := moveScanCursor(ctx, tx, chainID, from, fork); err != nil {
			return err
		}
		var kept bool
		if err := tx.QueryRow(ctx, qIsScannedBlock.SQL, int64(chainID), int64(fork.Number), fork.Hash.Bytes()).Scan(&kept); err != nil {
			return err
		}
		if !kept {
			return errs.Errorf(errs.Invalid, "chain %d: block %d (%s) is not a block the scanner booked", chainID, fork.Number, fork.Hash)
		}
		undone, err := unreversedAfter(ctx, tx, chainID, fork.Number)
		if err != nil {
			return err
		}
		reversals := make([]*ledger.Journal, len(undone))
		for i, j := range undone {
			reversals[i] = booking.Reverse(j.id, j.j)
		}
		posts, err := newPosts(reversals)
		if err != nil {
			return err
		}
		if _, err := w.bookOnce(ctx, tx, posts); err != nil {
			return err
		}
		out.Reversed = len(reversals)
		rows, err := tx.Query(ctx, qUnopenWalletsAfter.SQL, int64(chainID), int64(fork.Number))
		if err != nil {
			return err
		}
		if out.Unopened, err = pgx.CollectRows(rows, scanAddress); err != nil {
			return err
		}
		for _, forget := range []pg.Query{qForgetWalletTxsAfter, qForgetScannedBlocksAfter} {
			if _, err := tx.Exec(ctx, forget.SQL, int64(chainID), int64(fork.Number)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ledger.Rewound{}, fmt.Errorf("rewind chain %d's scan from block %d to %d: %w", chainID, from.Number, fork.Number, err)
	}
	return out, nil
}

// bookedJournal is a journal read back with its id.
type bookedJournal struct {
	id int64
	j  *ledger.Journal
}

// unreversedAfter reads, with their legs, chainID's deposits and openings
// booked in blocks after number and not reversed.
func unreversedAfter(ctx context.Context, tx pgx.Tx, chainID uint64, number uint64) ([]bookedJournal, error) {
	rows, err := tx.Query(ctx, qUnreversedAfter.SQL, int64(chainID), int64(number))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []bookedJournal
	for rows.Next() {
		var id, blockNumber, legChain int64
		var kind, key, status, asset, legKind, amount string
		var txHash, blockHash, addr []byte
		if err := rows.Scan(&id, &kind, &key, &txHash, &blockNumber, &blockHash, &status, &legChain, &asset, &legKind, &addr, &amount); err != nil {
			return nil, err
		}
		if len(out) == 0 || out[len(out)-1].id != id {
			j := &ledger.Journal{Kind: ledger.JournalKind(kind), Key: key, ChainID: chainID, Status: status,
				Block: &ledger.Block{Number: uint64(blockNumber), Hash: common.BytesToHash(blockHash)}}
			if txHash != nil {
				h := common.BytesToHash(txHash)
				j.TxHash = &h
			}
			out = append(out, bookedJournal{id: id, j: j})
		}
		v, ok := new(big.Int).SetString(amount, 10)
		if !ok {
			return nil, fmt.Errorf("journal %d: entry amount %q", id, amount)
		}
		j := out[len(out)-1].j
		j.Legs = append(j.Legs, ledger.Leg{Account: ledger.AccountKey{ChainID: uint64(legChain), Asset: asset, Kind: ledger.AccountKind(legKind),
			Address: common.BytesToAddress(addr)}, Amount: v})
	}
	return out, rows.Err()
}
