// Package scanner books, block by block, what reached the ledger's wallets
// from outside txfence: native deposits and ERC-20 Transfer logs sent by
// addresses that are not wallets. It opens wallets (books their balances
// when the ledger begins booking them), records the transactions wallets
// send for reconciliation, and undoes what it booked from blocks a reorg
// removed. The feed consumer books txfence's own transactions.
//
// Each block is booked in one transaction with the scan cursor
// (ledger.ScannerStore.BookScan), so a crash books nothing twice and skips
// nothing, and a second scanner of the chain is refused, not harmful.
//
// What no transaction's value or log shows (value a contract sends in an
// internal call, a validator withdrawal) is not seen here: reconciliation
// finds it as a difference with the chain.
package scanner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/internal/retry"
	"github.com/txfence/txfence/shared/errs"
)

// Errors that stop a scanner: what it booked cannot be followed on the
// chain its endpoint serves, and it stops rather than guess. ledgerd halts
// the chain on either (the runbook in docs/operations.md).
var (
	// ErrDeepReorg says the chain forked below every block the scanner
	// keeps: it cannot tell what to undo. An endpoint serving another
	// chain of the same chain id (a development chain started afresh) or
	// one that lost its chain looks the same.
	ErrDeepReorg = errors.New("the chain forked below the scanned blocks kept")
	// ErrWrongChain says the endpoint answers another chain id.
	ErrWrongChain = errors.New("the chain endpoint serves another chain")
)

const (
	// batchBlocks bounds the blocks a step reads, and books.
	batchBlocks = 32
	// maxPending bounds the blocks read ahead while the feed catches up.
	maxPending = 256
	// forkChunk is how many kept blocks a fork search compares per call.
	forkChunk = 32
	// gateAlertAfter is how long a block may wait for the feed before an
	// alert: the consumer is stuck or not running.
	gateAlertAfter = time.Minute
)

// Scanner scans one chain. Its Step and Run are not for concurrent use;
// run one per chain and ledger deployment (a second is refused by the
// cursor, harmlessly).
type Scanner struct {
	Store   ledger.ScannerStore
	ChainID uint64
	// RPC is the ledger's own endpoint of the chain.
	RPC *rpc.Client
	// Tokens are the ERC-20 contracts whose balances a wallet's opening
	// books (balanceOf). Transfers of any token to a wallet are booked.
	Tokens []common.Address
	// Depth is how many blocks behind the head the scanner stays: a
	// deposit is booked once that many blocks are built on it.
	Depth uint64
	// Start is the block of the first start; nil for the head less Depth.
	Start *uint64
	// FeedHead reads the head of the feed the consumer books (the highest
	// seq txmanager has numbered), and Feed names the consumer's cursor
	// (consumer.Feed): a block is booked only once the consumer's cursor
	// has reached the head read just after the scanner read the block.
	// Every signer with a transaction in the block has its first event
	// (written before its transaction could be signed) at or below that
	// head, so it is a wallet by then. nil books at once, for a ledger
	// without a consumer.
	FeedHead func(ctx context.Context) (uint64, error)
	Feed     string
	// Poll is the pause when there is nothing to scan; default 1 s.
	Poll time.Duration
	// Window is how many scanned blocks are kept to find a fork point;
	// default 256. A deeper reorg stops the scanner.
	Window int
	Log    *slog.Logger

	// pending are blocks read and linked from the cursor on, not booked.
	pending []fetched
	// checked says the endpoint's chain id has been checked.
	checked bool
	// gateAlerted says the wait for the feed has been alerted.
	gateAlerted bool
	// logCalls, when set, replaces defaultLogCalls (tests).
	logCalls *logCalls
}

// fetched is a block, when the scanner first read it, and the feed's head
// then.
type fetched struct {
	block
	seenAt   time.Time
	feedHead uint64
}

func (s *Scanner) log() *slog.Logger {
	return cmp.Or(s.Log, slog.Default()).With("chain_id", s.ChainID)
}

func (s *Scanner) window() int { return cmp.Or(max(s.Window, 0), 256) }

// Step scans up to a bounded batch of blocks, each booked in a transaction
// of its own, and returns how many it booked. It also opens the wallets
// registered since, and follows a reorg back to its fork point. A fork
// below the kept blocks is ErrDeepReorg; an endpoint answering another
// chain id, ErrWrongChain (checked on the first Step, and again before a
// fork is called deep).
func (s *Scanner) Step(ctx context.Context) (int, error) {
	n, _, err := s.step(ctx)
	return n, err
}

// Run scans until ctx ends, and returns nil then; or until a fork deeper
// than the window or an endpoint on another chain, which it returns
// (ErrDeepReorg, ErrWrongChain). A failing step is retried (a growing
// pause, an alert after a minute).
func (s *Scanner) Run(ctx context.Context) error {
	// Each run asks the endpoint its chain id again: it may have been
	// pointed elsewhere meanwhile, and another chain that happens to share
	// the genesis block (two development chains started in the same
	// second) would not show as a deep fork.
	s.checked = false
	return retry.Run(ctx, s.log(), "scanning the chain", func(ctx context.Context) error {
		n, moved, err := s.step(ctx)
		if errors.Is(err, ErrDeepReorg) || errors.Is(err, ErrWrongChain) {
			return retry.Stop(err)
		}
		if err != nil {
			return err
		}
		if n == 0 && !moved {
			select {
			case <-ctx.Done():
			case <-time.After(cmp.Or(max(s.Poll, 0), time.Second)):
			}
		}
		return nil
	})
}

// step is Step; moved says it changed something other than by scanning
// blocks (a rewind, openings): there may be more to do at once.
func (s *Scanner) step(ctx context.Context) (blocks int, moved bool, err error) {
	if !s.checked {
		if err := CheckChain(ctx, s.RPC, s.ChainID); err != nil {
			return 0, false, err
		}
		s.checked = true
	}
	cursor, err := s.cursor(ctx)
	if err != nil {
		return 0, false, err
	}
	if len(s.pending) > 0 && (s.pending[0].Number != cursor.Number+1 || s.pending[0].Parent != cursor.Hash) {
		s.pending = nil // another scanner moved the cursor, or this one failed
	}
	forked, err := s.readAhead(ctx, cursor)
	if err != nil {
		return 0, false, err
	}
	if forked {
		return 0, true, s.rewind(ctx, cursor)
	}
	ready, err := s.admitted(ctx)
	if err != nil {
		return 0, false, err
	}
	if ready == 0 {
		opened, err := s.openIdle(ctx, cursor)
		return 0, opened, err
	}
	// The registry is read after the feed caught up: every signer with a
	// transaction in these blocks is in it.
	reg, err := s.registry(ctx)
	if err != nil {
		return 0, false, err
	}
	for blocks < ready {
		b := s.pending[0]
		if err := s.book(ctx, cursor, &b.block, reg); err != nil {
			s.pending = nil
			return blocks, false, fmt.Errorf("chain %d, block %d (%s): %w", s.ChainID, b.Number, b.Hash, err)
		}
		cursor = b.Block()
		s.pending = s.pending[1:]
		blocks++
	}
	return blocks, false, nil
}

// cursor is the scan cursor, set on the first start at Start (or the head
// less Depth). The blocks below it, up to the window, are kept as scanned:
// a reorg just after the start then finds its fork point.
func (s *Scanner) cursor(ctx context.Context) (ledger.Block, error) {
	c, err := s.Store.ScanCursor(ctx, s.ChainID)
	if err != nil {
		return ledger.Block{}, err
	}
	if c != nil {
		return *c, nil
	}
	var at uint64
	if s.Start != nil {
		at = *s.Start
	} else {
		h, err := head(ctx, s.RPC)
		if err != nil {
			return ledger.Block{}, err
		}
		at = h - min(h, s.Depth)
	}
	count := min(uint64(s.window()), at+1)
	blocks, err := blocksFrom(ctx, s.RPC, at+1-count, int(count), false)
	if err != nil {
		return ledger.Block{}, err
	}
	if uint64(len(blocks)) != count {
		return ledger.Block{}, errs.Errorf(errs.Unavailable, "chain %d: the first block to scan from, %d, is not mined yet", s.ChainID, at)
	}
	kept := make([]ledger.ScannedBlock, len(blocks))
	for i, b := range blocks {
		if i > 0 && b.Parent != kept[i-1].Hash {
			return ledger.Block{}, errs.Errorf(errs.Unavailable, "chain %d: the chain moved while the scan was starting", s.ChainID)
		}
		kept[i] = b.ScannedBlock
	}
	start, err := s.Store.StartScan(ctx, s.ChainID, kept)
	if err != nil {
		return ledger.Block{}, err
	}
	s.log().Info("ledger: scanning a chain for the first time", "block_number", start.Number, "block_hash", start.Hash)
	return start, nil
}

// readAhead reads the blocks after the cursor and those already read, up
// to the head less Depth. forked says the block after the cursor, or the
// cursor's own when there is none yet, is not on the chain: a reorg.
func (s *Scanner) readAhead(ctx context.Context, cursor ledger.Block) (forked bool, err error) {
	h, err := head(ctx, s.RPC)
	if err != nil {
		return false, err
	}
	next := cursor.Number + 1 + uint64(len(s.pending))
	if h < s.Depth || h-s.Depth < next {
		if len(s.pending) > 0 {
			return false, nil
		}
		hashes, err := hashesAt(ctx, s.RPC, []uint64{cursor.Number})
		return err == nil && hashes[0] != cursor.Hash, err
	}
	if len(s.pending) >= maxPending {
		return false, nil
	}
	count := min(uint64(batchBlocks), uint64(maxPending-len(s.pending)), h-s.Depth-next+1)
	blocks, err := blocksFrom(ctx, s.RPC, next, int(count), true)
	if err != nil {
		return false, err
	}
	seenAt := time.Now()
	var head uint64
	if s.FeedHead != nil {
		if head, err = s.FeedHead(ctx); err != nil {
			return false, fmt.Errorf("read the feed's head: %w", err)
		}
	}
	parent := cursor.Hash
	if len(s.pending) > 0 {
		parent = s.pending[len(s.pending)-1].Hash
	}
	for _, b := range blocks {
		if b.Parent != parent {
			if b.Number == cursor.Number+1 {
				return true, nil
			}
			// The chain moved under the blocks read: read again from the
			// cursor, where a reorg shows.
			s.pending = nil
			return false, nil
		}
		s.pending = append(s.pending, fetched{block: b, seenAt: seenAt, feedHead: head})
		parent = b.Hash
	}
	return false, nil
}

// admitted is how many pending blocks may be booked: with a FeedHead,
// those whose feed head the consumer's cursor has reached.
func (s *Scanner) admitted(ctx context.Context) (int, error) {
	n := min(len(s.pending), batchBlocks)
	if s.FeedHead == nil || n == 0 {
		return n, nil
	}
	booked, err := s.Store.Cursor(ctx, s.Feed)
	if err != nil {
		return 0, err
	}
	ready := 0
	for ready < n && s.pending[ready].feedHead <= booked {
		ready++
	}
	switch waited := time.Since(s.pending[0].seenAt); {
	case ready == 0 && waited >= gateAlertAfter && !s.gateAlerted:
		s.log().Error("ledger: the scanner has waited a minute for the feed consumer to catch up", "alert", true,
			"feed", s.Feed, "block_number", s.pending[0].Number, "feed_head", s.pending[0].feedHead, "booked_to", booked)
		s.gateAlerted = true
	case ready > 0 && s.gateAlerted:
		s.log().Info("ledger: the feed consumer caught up; scanning again", "feed", s.Feed, "waited", waited.Round(time.Second).String())
		s.gateAlerted = false
	}
	return ready, nil
}

// registry is the chain's wallets: every one registered, and where the
// scanner opened it.
type registry struct {
	chainID uint64
	opened  map[common.Address]*ledger.Block // nil: not opened yet
}

func (s *Scanner) registry(ctx context.Context) (*registry, error) {
	all, err := s.Store.Wallets(ctx)
	if err != nil {
		return nil, err
	}
	r := &registry{chainID: s.ChainID, opened: map[common.Address]*ledger.Block{}}
	for _, w := range all {
		if w.ChainID == s.ChainID {
			r.opened[w.Address] = w.Opened
		}
	}
	return r, nil
}

// BooksAt implements booking.Wallets.
func (r *registry) BooksAt(chainID uint64, addr common.Address, block uint64) bool {
	opened := r.opened[addr]
	return chainID == r.chainID && opened != nil && opened.Number < block
}

// registered reports whether addr is a wallet, opened or not: the feed
// consumer books what it sends.
func (r *registry) registered(addr common.Address) bool {
	_, ok := r.opened[addr]
	return ok
}

func (r *registry) unopened() []common.Address {
	var out []common.Address
	for a, opened := range r.opened {
		if opened == nil {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, common.Address.Cmp)
	return out
}

// openings books, at block at, what each of wallets held there, native and
// in each configured token: the ledger books their movements after it.
func (s *Scanner) openings(ctx context.Context, at ledger.Block, wallets []common.Address) ([]*ledger.Journal, error) {
	held, err := balancesAt(ctx, s.RPC, wallets, s.Tokens, at.Hash)
	if err != nil {
		return nil, err
	}
	var out []*ledger.Journal
	for _, w := range wallets {
		if j := booking.Opening(s.ChainID, w, at, held[w]); j != nil {
			out = append(out, j)
		}
		s.log().Debug("ledger: wallet opened", "wallet", w, "block_number", at.Number, "balances", fmt.Sprint(held[w]))
	}
	return out, nil
}

// openIdle opens, at the cursor, the wallets registered since, when no
// block is ready: the feed consumer waits for their openings.
func (s *Scanner) openIdle(ctx context.Context, cursor ledger.Block) (bool, error) {
	wallets, err := s.Store.UnopenedWallets(ctx, s.ChainID)
	if err != nil || len(wallets) == 0 {
		return false, err
	}
	journals, err := s.openings(ctx, cursor, wallets)
	if err != nil {
		return false, err
	}
	if _, err := s.Store.BookScan(ctx, &ledger.ScanBooking{ChainID: s.ChainID, Cursor: cursor, Opened: wallets, Journals: journals, Window: s.window()}); err != nil {
		return false, fmt.Errorf("chain %d: open %d wallets at block %d: %w", s.ChainID, len(wallets), cursor.Number, err)
	}
	s.log().Info("ledger: wallets opened", "block_number", cursor.Number, "block_hash", cursor.Hash, "wallets", len(wallets))
	return true, nil
}

// book books block b, whose parent is the cursor: the openings at the
// cursor of the wallets not opened yet, the deposits, and the
// transactions wallets sent.
func (s *Scanner) book(ctx context.Context, cursor ledger.Block, b *block, reg *registry) error {
	scan := &ledger.ScanBooking{ChainID: s.ChainID, Cursor: cursor, Block: &b.ScannedBlock, Window: s.window()}
	if unopened := reg.unopened(); len(unopened) > 0 {
		journals, err := s.openings(ctx, cursor, unopened)
		if err != nil {
			return err
		}
		scan.Opened, scan.Journals = unopened, journals
		for _, w := range unopened {
			reg.opened[w] = &cursor
		}
	}

	senders := make(map[common.Hash]common.Address, len(b.Txs))
	var paying []blockTx // value from outside to a wallet
	for _, tx := range b.Txs {
		senders[tx.Hash] = tx.From
		switch {
		case reg.registered(tx.From):
			scan.WalletTxs = append(scan.WalletTxs, ledger.WalletTx{Hash: tx.Hash, Sender: tx.From})
		case tx.To != nil && tx.Value != nil && tx.Value.ToInt().Sign() > 0 && reg.BooksAt(s.ChainID, *tx.To, b.Number):
			paying = append(paying, tx)
		}
	}
	inflows := map[common.Hash][]booking.Inflow{}
	if len(paying) > 0 {
		hashes := make([]common.Hash, len(paying))
		for i, tx := range paying {
			hashes[i] = tx.Hash
		}
		ok, err := succeeded(ctx, s.RPC, b, hashes)
		if err != nil {
			return err
		}
		for _, tx := range paying {
			if ok[tx.Hash] {
				inflows[tx.Hash] = append(inflows[tx.Hash], booking.Inflow{Asset: ledger.Native, From: tx.From, To: *tx.To, Amount: tx.Value.ToInt()})
			}
		}
	}
	logs, err := transferLogs(ctx, s.RPC, b, slices.SortedFunc(maps.Keys(reg.opened), common.Address.Cmp), *cmp.Or(s.logCalls, &defaultLogCalls))
	if err != nil {
		return err
	}
	for _, l := range logs {
		// Another shape is no ERC-20 amount (ERC-721's Transfer has a
		// fourth topic and no data), nor are addresses with stray high bytes.
		if l.Removed || len(l.Topics) != 3 || l.Topics[0] != booking.TransferTopic || len(l.Data) != 32 ||
			!isAddress(l.Topics[1]) || !isAddress(l.Topics[2]) {
			continue
		}
		from, ok := senders[l.TxHash]
		if !ok {
			return errs.Errorf(errs.Conflict, "a log of transaction %s, which the block does not hold: the node's answers disagree", l.TxHash)
		}
		if reg.registered(from) {
			continue // the feed consumer books its receipt's logs
		}
		inflows[l.TxHash] = append(inflows[l.TxHash], booking.Inflow{Asset: strings.ToLower(l.Address.Hex()),
			From: common.BytesToAddress(l.Topics[1][12:]), To: common.BytesToAddress(l.Topics[2][12:]), Amount: new(big.Int).SetBytes(l.Data)})
	}
	for _, tx := range b.Txs {
		if in := inflows[tx.Hash]; len(in) > 0 {
			scan.Journals = append(scan.Journals, booking.Deposit(s.ChainID, tx.Hash, b.Block(), in, reg)...)
		}
	}

	posted, err := s.Store.BookScan(ctx, scan)
	if err != nil {
		return err
	}
	if len(scan.Opened) > 0 {
		s.log().Info("ledger: wallets opened", "block_number", cursor.Number, "block_hash", cursor.Hash, "wallets", len(scan.Opened))
	}
	for i, j := range scan.Journals {
		if j.Kind == ledger.Deposit {
			s.log().Debug("ledger: deposit booked", "tx_hash", j.TxHash, "block_number", b.Number, "journal_id", posted[i].JournalID)
		}
	}
	return nil
}

// isAddress reports whether topic is an address, left-padded with zeros.
func isAddress(topic common.Hash) bool { return common.BytesToHash(topic[12:]) == topic }

// rewind follows a reorg: it finds the newest kept block still on the
// chain and rewinds the scan to it, undoing what later blocks booked.
func (s *Scanner) rewind(ctx context.Context, cursor ledger.Block) error {
	s.pending = nil
	kept, err := s.Store.ScannedBlocks(ctx, s.ChainID)
	if err != nil {
		return err
	}
	var fork *ledger.Block
	for part := range slices.Chunk(kept, forkChunk) {
		numbers := make([]uint64, len(part))
		for i, k := range part {
			numbers[i] = k.Number
		}
		canonical, err := hashesAt(ctx, s.RPC, numbers)
		if err != nil {
			return err
		}
		for i, k := range part {
			if canonical[i] == k.Hash {
				fork = new(k.Block())
				break
			}
		}
		if fork != nil {
			break
		}
	}
	if fork == nil {
		// An endpoint moved to another chain shows as a fork at every
		// height: say so rather than call it a reorg.
		if err := CheckChain(ctx, s.RPC, s.ChainID); err != nil {
			return err
		}
		depth := uint64(len(kept))
		if len(kept) > 0 {
			depth = cursor.Number - kept[len(kept)-1].Number + 1
		}
		h, err := head(ctx, s.RPC)
		if err != nil {
			return err
		}
		// The caller (ledgerd) raises the alert: it decides what stops.
		s.log().Error("ledger: the chain forked below every block the scanner keeps; the scanner stops",
			"block_number", cursor.Number, "block_hash", cursor.Hash, "depth_at_least", depth, "window", s.window(), "head", h)
		err = fmt.Errorf("chain %d: the scan cursor's block %d (%s) and every block kept below it are off the chain: %w (a fork at least %d blocks deep; the endpoint's head is %d)",
			s.ChainID, cursor.Number, cursor.Hash, ErrDeepReorg, depth, h)
		if h < cursor.Number {
			err = fmt.Errorf("%w; the endpoint is behind the scan cursor: its chain was started afresh, or it lags far behind", err)
		}
		return err
	}
	if fork.Number == cursor.Number {
		return nil // the chain came back to the cursor meanwhile
	}
	r, err := s.Store.RewindScan(ctx, s.ChainID, cursor, *fork)
	if err != nil {
		return err
	}
	s.log().Info("ledger: the chain reorganised; scan rewound to the fork point",
		"from_block", cursor.Number, "from_hash", cursor.Hash, "fork_block", fork.Number, "fork_hash", fork.Hash,
		"depth", cursor.Number-fork.Number, "reversed", r.Reversed, "unopened", len(r.Unopened))
	return nil
}
