// Package reconcile ties the ledger out against the chain. At a pinned
// block of a chain (its finalized block, or a configured depth below the
// head, named by hash from then on), every wallet's ledger balance in each
// asset, with every journal up to that block, is compared with the
// chain's own balance at that block (eth_getBalance, ERC-20 balanceOf).
//
// A difference is booked to the wallet's suspense account by a
// reconciliation journal at the pinned block, with its cause, and raises
// an alert: after it, the wallet ties out at that block to the wei, and
// suspense holds what nobody has explained yet. When a later fact explains
// it (a settlement the feed books late, in a block at or before the one
// reconciled), the ledger moves by that fact and a later run finds the
// opposite difference, which nets suspense back: the pair of
// reconciliation journals, each with its cause and run, is the operator's
// audit trail of what was found and how it resolved.
package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/errs"
)

// Defaults of a Reconciler.
const (
	DefaultWait     = 15 * time.Second
	DefaultGrace    = 10 * time.Minute
	DefaultInterval = 10 * time.Minute
	// NoGrace, as a Reconciler's Grace, compares a wallet at once even
	// while transactions it sent are not booked yet.
	NoGrace time.Duration = -1
)

// Refusals: a run that cannot be made now, and stores nothing. Both come
// wrapped in an errs.Error that says what exactly stands in the way.
var (
	// ErrIncomplete: the books are not complete up to the pinned block
	// (errs.Unavailable): the scanner or the feed is behind.
	ErrIncomplete = errors.New("the books are not complete up to the pinned block")
	// ErrSuperseded: a run at a later block is stored (errs.Conflict);
	// booking an earlier block's differences now would book again what
	// that run booked.
	ErrSuperseded = errors.New("a later block is reconciled already")
)

// Reconciler reconciles the ledger with its chains.
type Reconciler struct {
	Store ledger.ReconcileStore
	// Chains are the ledger's own endpoints, by chain id.
	Chains map[uint64]*rpc.Client
	// Tokens are the ERC-20 contracts reconciled for every wallet of a
	// chain, besides those a wallet has an account for.
	Tokens map[uint64][]common.Address
	// Depth pins the block that many below the head; 0 pins the node's
	// finalized block (on anvil, the head less 64).
	Depth uint64
	// Grace is how long a transaction a wallet sent may stay unbooked
	// before the wallet is compared anyway; 0 is DefaultGrace, NoGrace
	// none.
	Grace time.Duration
	// Interval is the schedule of Run; 0 is DefaultInterval.
	Interval time.Duration
	// FeedHead, when set, reads the head of the feed the consumer books
	// (txmanager's), and Feed names the consumer's cursor: a run waits
	// until the consumer has booked the feed up to the head read just
	// after the block was pinned, by when txmanager has reported every
	// settlement in the block it will report.
	FeedHead func(ctx context.Context) (uint64, error)
	Feed     string
	// Wait is how long a run waits at its pinned block for the scanner and
	// the feed to book it before it is refused; 0 is DefaultWait.
	Wait time.Duration
	Log  *slog.Logger
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log == nil {
		return slog.Default()
	}
	return r.Log
}

func (r *Reconciler) grace() time.Duration {
	if r.Grace == 0 {
		return DefaultGrace
	}
	return max(r.Grace, 0)
}

func (r *Reconciler) interval() time.Duration {
	if r.Interval <= 0 {
		return DefaultInterval
	}
	return r.Interval
}

// Reconcile reconciles chainID at a block it pins now, stores the report
// and returns it; trigger is ledger.TriggerSchedule or TriggerRequest.
//
// The books must be complete up to the pinned block: the scanner has
// booked it, and the feed has caught up since it was pinned; otherwise
// the run is refused (ErrIncomplete) and nothing is stored. A wallet with
// transactions it sent at or before the block that the feed has not
// booked, seen less than Grace ago, is deferred: listed, not compared.
// Each difference is booked once per (wallet, asset) and pinned block:
// runs of one chain hold a lock, so a second run, on another node or at
// the same block again, finds the books tied out.
func (r *Reconciler) Reconcile(ctx context.Context, chainID uint64, trigger string) (*ledger.ReconciliationRun, error) {
	if trigger != ledger.TriggerSchedule && trigger != ledger.TriggerRequest {
		return nil, errs.Errorf(errs.Invalid, "trigger %q: %q or %q", trigger, ledger.TriggerSchedule, ledger.TriggerRequest)
	}
	client := r.Chains[chainID]
	if client == nil {
		return nil, errs.Errorf(errs.NotFound, "chain %d is not reconciled here: no endpoint is configured for it", chainID)
	}
	started := time.Now()
	block, err := pin(ctx, client, chainID, r.Depth)
	if err != nil {
		return nil, err
	}
	// Events numbered by now must be booked: the block exists by now, and
	// so does every settlement in it that txmanager has reported.
	var feedHead uint64
	if r.FeedHead != nil {
		if feedHead, err = r.FeedHead(ctx); err != nil {
			return nil, errs.Wrap(errs.Unavailable, fmt.Sprintf("chain %d: read the feed's head", chainID), err)
		}
	}
	// The scanner and the feed book the block within a poll or two: the
	// run waits for them at the pinned block, up to Wait.
	waitUntil := time.Now().Add(cmp.Or(max(r.Wait, 0), DefaultWait))
	// The chain's balances are read outside the database transaction,
	// which may not sit idle for long (DB_IDLE_IN_TX_TIMEOUT): a first
	// transaction checks the books and names the holdings, the node is
	// read, and a second one compares and books, reading only what
	// changed in between (a wallet opened meanwhile).
	read := map[holding]chainBalance{}
	var run *ledger.ReconciliationRun
	for attempt := 1; ; attempt++ {
		err = r.Store.Reconcile(ctx, chainID, func(tx ledger.ReconcileTx) error {
			if err := r.complete(ctx, tx, chainID, block, feedHead); err != nil {
				return err
			}
			run = &ledger.ReconciliationRun{ChainID: chainID, Block: block, Trigger: trigger, StartedAt: started}
			return r.reconcile(ctx, tx, run, read)
		})
		if errors.Is(err, ErrIncomplete) && time.Now().Before(waitUntil) {
			attempt--
			select {
			case <-ctx.Done():
				return nil, errors.Join(err, ctx.Err())
			case <-time.After(completeEvery):
			}
			continue
		}
		var missing *unread
		if !errors.As(err, &missing) {
			break
		}
		if attempt == maxReads {
			return nil, errs.Errorf(errs.Unavailable, "chain %d: wallets kept opening while the chain was read, %d times over", chainID, maxReads)
		}
		got, err := readBalances(ctx, client, chainID, block, missing.holdings)
		if err != nil {
			return nil, err
		}
		maps.Copy(read, got)
	}
	if err != nil {
		return nil, err
	}
	r.alert(run)
	return run, nil
}

// unread ends a reconciliation's transaction that found holdings whose
// chain balances are not read yet.
type unread struct{ holdings []holding }

func (u *unread) Error() string { return fmt.Sprintf("%d chain balances to read", len(u.holdings)) }

// maxReads bounds the rounds of reading the chain in one run.
const maxReads = 3

// completeEvery is how often a run waiting at its block checks the books.
const completeEvery = 200 * time.Millisecond

// complete refuses a run whose books are not complete up to block.
func (r *Reconciler) complete(ctx context.Context, tx ledger.ReconcileTx, chainID uint64, block ledger.Block, feedHead uint64) error {
	behind := func(format string, args ...any) error {
		return errs.Wrap(errs.Unavailable, fmt.Sprintf("chain %d: ", chainID)+fmt.Sprintf(format, args...), ErrIncomplete)
	}
	cursor, err := tx.ScanCursor(ctx)
	if err != nil {
		return err
	}
	switch {
	case cursor == nil:
		return behind("the block scanner has booked no block yet; the pinned block is %d", block.Number)
	case cursor.Number < block.Number:
		return behind("the block scanner has booked up to block %d, behind the pinned block %d", cursor.Number, block.Number)
	case cursor.Number == block.Number && cursor.Hash != block.Hash:
		return behind("the block scanner booked block %d as %s, the node has %s: the scanner has not followed a reorganisation yet", block.Number, cursor.Hash, block.Hash)
	}
	if hash, ok, err := tx.ScannedHash(ctx, block.Number); err != nil {
		return err
	} else if ok && hash != block.Hash {
		return behind("the block scanner booked block %d as %s, the node has %s: the scanner has not followed a reorganisation yet", block.Number, hash, block.Hash)
	}
	if r.FeedHead != nil {
		booked, err := tx.FeedCursor(ctx, r.Feed)
		if err != nil {
			return err
		}
		if booked < feedHead {
			return behind("the %s feed is booked up to event %d, behind its head %d when block %d was pinned: settlements in the block may not be booked yet",
				r.Feed, booked, feedHead, block.Number)
		}
	}
	newest, err := tx.NewestRun(ctx, false)
	if err != nil {
		return err
	}
	if newest != nil && newest.Block.Number > block.Number {
		return errs.Wrap(errs.Conflict, fmt.Sprintf("chain %d: run %d reconciled block %d, later than the pinned block %d", chainID, newest.ID, newest.Block.Number, block.Number), ErrSuperseded)
	}
	return nil
}

// reconcile fills run, books its differences and stores it, in tx; or,
// when read lacks the chain balance of some holdings, names them in an
// *unread error.
func (r *Reconciler) reconcile(ctx context.Context, tx ledger.ReconcileTx, run *ledger.ReconciliationRun, read map[holding]chainBalance) error {
	n := run.Block.Number
	wallets, err := tx.Wallets(ctx, n)
	if err != nil {
		return err
	}
	books, err := tx.Holdings(ctx, n)
	if err != nil {
		return err
	}
	held := holdings(wallets, r.Tokens[run.ChainID], books)
	var missing []holding
	for _, h := range held {
		if _, ok := read[h]; !ok {
			missing = append(missing, h)
		}
	}
	if len(missing) > 0 {
		return &unread{missing}
	}
	// Transactions a complete run named before are not listed again: it
	// compared their wallets and booked what they moved to suspense.
	from := uint64(0)
	if last, err := tx.NewestRun(ctx, true); err != nil {
		return err
	} else if last != nil {
		from = last.Block.Number + 1
	}
	unbooked, err := tx.Unbooked(ctx, from, n, r.grace())
	if err != nil {
		return err
	}

	if run.ID, err = tx.NewRunID(ctx); err != nil {
		return err
	}
	byHolding := make(map[holding]ledger.Holding, len(books))
	for _, b := range books {
		byHolding[holding{b.Address, b.Asset}] = b
	}
	bySender := map[common.Address][]ledger.UnbookedTx{}
	for _, t := range unbooked {
		bySender[t.Sender] = append(bySender[t.Sender], t)
	}
	run.Items = make([]ledger.ReconciliationItem, len(held))
	var journals []*ledger.Journal
	var journalItems []int
	for i, h := range held {
		b := byHolding[h]
		it := compare(run, h, b, read[h], bySender[h.addr], r.grace())
		run.Items[i] = it
		if it.Difference == nil || it.Difference.Sign() == 0 {
			continue
		}
		j, err := difference(run, it)
		if err != nil {
			return err
		}
		journals, journalItems = append(journals, j), append(journalItems, i)
	}

	// A key already booked holds this block's earlier reconciliation of
	// the holding, which the ledger balance above includes: the new
	// difference arose since (a late booking), and a run at a later block
	// books it.
	keys := make([]string, len(journals))
	for i, j := range journals {
		keys[i] = j.Key
	}
	booked, err := tx.Booked(ctx, keys)
	if err != nil {
		return err
	}
	var fresh []*ledger.Journal
	var freshItems []int
	for k, j := range journals {
		it := &run.Items[journalItems[k]]
		if id, ok := booked[j.Key]; ok {
			it.Cause += fmt.Sprintf("; not booked: journal %d holds this block's reconciliation of the wallet and asset already, so a run at a later block books it", id)
			continue
		}
		fresh, freshItems = append(fresh, j), append(freshItems, journalItems[k])
	}
	ids, err := tx.Book(ctx, fresh)
	if err != nil {
		return err
	}
	for k, id := range ids {
		run.Items[freshItems[k]].JournalID = id
	}

	summarize(run)
	run.FinishedAt = time.Now()
	return tx.Save(ctx, run)
}

// holdings lists what a run compares, by wallet then asset (in the order
// the report is read back): for each wallet, native, the configured
// tokens and every asset the books hold for it.
func holdings(wallets []common.Address, tokens []common.Address, books []ledger.Holding) []holding {
	assets := map[common.Address]map[string]bool{}
	for _, w := range wallets {
		assets[w] = map[string]bool{ledger.Native: true}
		for _, t := range tokens {
			assets[w][strings.ToLower(t.Hex())] = true
		}
	}
	for _, b := range books {
		if assets[b.Address] != nil {
			assets[b.Address][b.Asset] = true
		}
	}
	var out []holding
	for _, w := range wallets {
		for _, a := range slices.Sorted(maps.Keys(assets[w])) {
			out = append(out, holding{addr: w, asset: a})
		}
	}
	return out
}

// compare makes the item of holding h: its ledger balance b, its chain
// balance c, and what stands in the way of comparing them.
func compare(run *ledger.ReconciliationRun, h holding, b ledger.Holding, c chainBalance, pending []ledger.UnbookedTx, grace time.Duration) ledger.ReconciliationItem {
	it := ledger.ReconciliationItem{Address: h.addr, Asset: h.asset, Ledger: new(big.Int), Chain: c.amount}
	if b.Wallet != nil {
		it.Ledger.Set(b.Wallet)
	}
	it.Negative = it.Ledger.Sign() < 0
	young := false
	for _, t := range pending {
		it.Pending = append(it.Pending, t.Hash)
		young = young || t.Young
	}
	switch {
	case c.amount == nil:
		it.Cause = "not compared: " + c.problem
		return it
	case young:
		it.Cause = fmt.Sprintf("deferred: the wallet sent %s at or before block %d, not booked yet and seen less than %s ago; txmanager may still settle %s",
			hashes(it.Pending), run.Block.Number, grace, them(len(it.Pending)))
		return it
	}
	it.Difference = new(big.Int).Sub(c.amount, it.Ledger)
	if it.Difference.Sign() != 0 {
		it.Cause = cause(run.Block.Number, it.Difference, it.Pending, suspenseOf(b))
	}
	return it
}

// cause explains a difference in words an accountant reads.
func cause(block uint64, diff *big.Int, stale []common.Hash, suspense *big.Int) string {
	var c string
	switch {
	case len(stale) > 0:
		c = fmt.Sprintf("the wallet sent %s at or before block %d and the ledger has not booked %s: sent outside txfence, or never settled by txmanager",
			hashes(stale), block, them(len(stale)))
	case diff.Sign() > 0:
		c = "inbound movement the ledger did not see (an internal transfer from a contract, a deposit before opening, a mining reward)"
	default:
		c = "outbound movement the ledger did not see (a token transferFrom by a spender, a fee not booked)"
	}
	// Suspense moves by -diff: a difference of the sign suspense holds
	// takes it back toward zero.
	if suspense.Sign() != 0 && suspense.Sign() == diff.Sign() {
		c += fmt.Sprintf("; it offsets %s that earlier reconciliations put in suspense: a movement booked since in a block they had reconciled (a late settlement) may explain both", suspense)
	}
	return c
}

func hashes(hs []common.Hash) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.Hex()
	}
	if len(s) == 1 {
		return "transaction " + s[0]
	}
	return "transactions " + strings.Join(s, ", ")
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

func suspenseOf(b ledger.Holding) *big.Int {
	if b.Suspense == nil {
		return new(big.Int)
	}
	return b.Suspense
}

// Key is the idempotency key of the reconciliation journal of one wallet
// and asset at one pinned block.
func Key(chainID uint64, block common.Hash, addr common.Address, asset string) string {
	return fmt.Sprintf("reconciliation:%d:%s:%s:%s", chainID, strings.ToLower(block.Hex()), strings.ToLower(addr.Hex()), asset)
}

// memo is a reconciliation journal's memo.
type memo struct {
	Cause         string `json:"cause"`
	RunID         int64  `json:"run_id"`
	LedgerBalance string `json:"ledger_balance"`
	ChainBalance  string `json:"chain_balance"`
}

// difference is the journal booking item's difference to suspense at the
// pinned block: the wallet moves by it, so that it ties out.
func difference(run *ledger.ReconciliationRun, it ledger.ReconciliationItem) (*ledger.Journal, error) {
	m, err := json.Marshal(memo{Cause: it.Cause, RunID: run.ID, LedgerBalance: it.Ledger.String(), ChainBalance: it.Chain.String()})
	if err != nil {
		return nil, err
	}
	wallet := ledger.AccountKey{ChainID: run.ChainID, Asset: it.Asset, Kind: ledger.Wallet, Address: it.Address}
	suspense := wallet
	suspense.Kind = ledger.Suspense
	block := run.Block
	return &ledger.Journal{
		Kind:    ledger.Reconciliation,
		Key:     Key(run.ChainID, block.Hash, it.Address, it.Asset),
		ChainID: run.ChainID,
		Block:   &block,
		Memo:    m,
		Legs: []ledger.Leg{
			{Account: wallet, Amount: new(big.Int).Set(it.Difference)},
			{Account: suspense, Amount: new(big.Int).Neg(it.Difference)},
		},
	}, nil
}

// summarize sets run's counts, status and problem from its items.
func summarize(run *ledger.ReconciliationRun) {
	var deferred, unread, unbooked int
	run.Differences, run.Deferred = 0, 0
	for _, it := range run.Items {
		switch {
		case it.Difference == nil && it.Chain == nil:
			unread++
		case it.Difference == nil:
			deferred++
		case it.Difference.Sign() != 0:
			run.Differences++
			if it.JournalID == 0 {
				unbooked++
			}
		}
	}
	run.Deferred = deferred + unread
	var problems []string
	if deferred > 0 {
		problems = append(problems, fmt.Sprintf("%d deferred: their wallets sent transactions not booked yet", deferred))
	}
	if unread > 0 {
		problems = append(problems, fmt.Sprintf("%d not compared: the chain's balance could not be read", unread))
	}
	if unbooked > 0 {
		problems = append(problems, fmt.Sprintf("%d differences not booked: this block's reconciliation of their wallet and asset is booked already", unbooked))
	}
	run.Status, run.Problem = ledger.RunComplete, ""
	if len(problems) > 0 {
		run.Status, run.Problem = ledger.RunIncomplete, strings.Join(problems, "; ")
	}
}

// alert logs, once run is stored, each difference and negative balance
// for whoever watches the alerts.
func (r *Reconciler) alert(run *ledger.ReconciliationRun) {
	log := r.log().With("chain_id", run.ChainID, "block_number", run.Block.Number, "block_hash", run.Block.Hash.Hex(), "run_id", run.ID)
	for _, it := range run.Items {
		wallet := strings.ToLower(it.Address.Hex())
		if it.Difference != nil && it.Difference.Sign() != 0 {
			log.Error("ledger: reconciliation found a difference with the chain", "alert", true,
				"wallet", wallet, "asset", it.Asset, "amount", it.Difference.String(),
				"ledger_balance", it.Ledger.String(), "chain_balance", it.Chain.String(),
				"cause", it.Cause, "journal_id", it.JournalID)
		}
		if it.Negative {
			log.Error("ledger: a wallet's ledger balance is negative", "alert", true,
				"wallet", wallet, "asset", it.Asset, "ledger_balance", it.Ledger.String())
		}
	}
}

// Run reconciles every chain every Interval (the first time at once)
// until ctx ends; when several nodes run it, a chain another node
// reconciled less than half an interval ago is left for the next tick. A refused run (the books not complete yet, or a later
// block reconciled already) is logged as a warning, another failure as an
// error; either, lasting three intervals, as an alert.
func (r *Reconciler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for id := range r.Chains {
		wg.Go(func() { r.schedule(ctx, id) })
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}

// scheduled reconciles chainID unless another node (all run the
// schedule) stored a run of it less than half an interval ago: then it
// returns no run.
func (r *Reconciler) scheduled(ctx context.Context, chainID uint64, interval time.Duration) (*ledger.ReconciliationRun, error) {
	newest, err := r.Store.ReconciliationRuns(ctx, chainID, 0, 1)
	if err != nil {
		return nil, err
	}
	if len(newest) == 1 && time.Since(newest[0].FinishedAt) < interval/2 {
		return nil, nil
	}
	return r.Reconcile(ctx, chainID, ledger.TriggerSchedule)
}

// schedule reconciles one chain every interval until ctx ends.
func (r *Reconciler) schedule(ctx context.Context, chainID uint64) {
	interval := r.interval()
	log := r.log().With("chain_id", chainID)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	failures := 0
	for {
		// A run may not outlast its interval: a hung endpoint gives way
		// to the next run.
		runCtx, cancel := context.WithTimeout(ctx, interval)
		run, err := r.scheduled(runCtx, chainID, interval)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && run == nil:
			failures = 0 // another node has just reconciled the chain
		case err == nil:
			failures = 0
			log.Info("ledger: reconciled", "run_id", run.ID, "block_number", run.Block.Number, "status", run.Status,
				"differences", run.Differences, "deferred", run.Deferred)
		default:
			failures++
			refused := errors.Is(err, ErrIncomplete) || errors.Is(err, ErrSuperseded)
			switch {
			case failures == 3:
				log.Error("ledger: the chain has not been reconciled for three intervals", "alert", true, "err", err)
			case refused:
				log.Warn("ledger: reconciliation postponed", "err", err)
			default:
				log.Error("ledger: reconciliation failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
