// Package consumer books txmanager's event feed: each transaction that
// ends CONFIRMED, REVERTED or CANCELLED by a mined cancel is read from the
// ledger's own chain endpoint, pinned to the block the event names, and
// booked by the booking rules; a tx.reorged event for a booked block books
// the reversal. Each page of events is booked in one transaction with the
// feed's cursor (postgres.Store.BookFeed), so a crash anywhere books
// nothing twice and skips nothing.
package consumer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/booking"
	"github.com/txfence/txfence/ledger/chain"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/feed"
	"github.com/txfence/txfence/openapi/txmanagerapi"
	"github.com/txfence/txfence/shared/errs"
)

// Feed names txmanager's feed in the ledger's cursors.
const Feed = "txmanager"

// Consumer books the feed. Run one per ledger deployment: a second one is
// harmless (the cursor refuses it) but idle.
type Consumer struct {
	Store *postgres.Store
	// API reads the feed, as identity ledger.
	API *txmanagerapi.ClientWithResponses
	// Readers read each chain, by chain id.
	Readers map[uint64]*chain.Reader
	Log     *slog.Logger
	// PageSize bounds a page of events; Wait how long an empty read
	// waits for new ones. Defaults 500 and 10 s.
	PageSize int
	Wait     time.Duration

	mu      sync.Mutex
	wallets map[postgres.WalletKey]bool
}

func (c *Consumer) log() *slog.Logger {
	if c.Log == nil {
		return slog.Default()
	}
	return c.Log
}

// IsWallet reports whether addr is one of the ledger's wallets on chain.
func (c *Consumer) IsWallet(chainID uint64, addr common.Address) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wallets[postgres.WalletKey{ChainID: chainID, Address: addr}]
}

// loadWallets reads the wallet registry once.
func (c *Consumer) loadWallets(ctx context.Context) error {
	c.mu.Lock()
	loaded := c.wallets != nil
	c.mu.Unlock()
	if loaded {
		return nil
	}
	ws, err := c.Store.Wallets(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wallets = make(map[postgres.WalletKey]bool, len(ws))
	for _, w := range ws {
		c.wallets[w.WalletKey] = true
	}
	return nil
}

// Step books the next page of the feed and returns how many events it
// read. On an error nothing of the page is booked: the next Step reads it
// again.
func (c *Consumer) Step(ctx context.Context) (int, error) {
	if err := c.loadWallets(ctx); err != nil {
		return 0, err
	}
	cursor, err := c.Store.Cursor(ctx, Feed)
	if err != nil {
		return 0, err
	}
	size, wait := c.PageSize, c.Wait
	if size <= 0 {
		size = 500
	}
	if wait <= 0 {
		wait = 10 * time.Second
	}
	page, err := feed.Read(ctx, c.API, cursor, size, wait)
	if err != nil || len(page.Events) == 0 {
		return 0, err
	}
	// Every signer is a wallet from its first event on, before anything of
	// the page is booked: a payment between two of them is internal.
	var signers []postgres.WalletKey
	c.mu.Lock()
	for _, ev := range page.Events {
		w := postgres.WalletKey{ChainID: uint64(ev.ChainId), Address: common.HexToAddress(ev.Signer)}
		if !c.wallets[w] {
			c.wallets[w] = true
			signers = append(signers, w)
		}
	}
	c.mu.Unlock()

	var journals []*ledger.Journal
	pending := map[string]bool{} // keys booked by this page
	to := cursor
	for _, ev := range page.Events {
		j, err := c.journalFor(ctx, ev, pending)
		if err == errBookFirst {
			break // the page is booked up to here; the next Step goes on
		}
		if errs.Is(err, errs.Conflict) {
			// The receipt is not in the block the event names. When the
			// feed says later that the block left the chain, there is
			// nothing to book; otherwise the node may be behind: wait.
			undone, lerr := c.undoneLater(ctx, ev)
			if lerr != nil {
				return 0, lerr
			}
			if undone {
				c.log().Info("ledger: a settlement was undone by a reorg before it could be read; nothing to book",
					"seq", ev.Seq, "tx_id", fmt.Sprint(ev.TxId))
				err = nil
			}
		}
		if err != nil {
			return 0, fmt.Errorf("event %d (%s of tx %s): %w", ev.Seq, ev.Type, ev.TxId, err)
		}
		if j != nil {
			journals = append(journals, j)
			pending[j.Key] = true
		}
		to = uint64(ev.Seq)
	}
	if to == cursor {
		return 0, nil
	}
	if _, err := c.Store.BookFeed(ctx, Feed, cursor, to, signers, journals); err != nil {
		return 0, err
	}
	return int(to - cursor), nil
}

// undoneLater reports whether the feed, after settlement event ev,
// holds a tx.reorged of the same transaction and block: the settlement was
// undone. It reads the feed up to its head, without waiting.
func (c *Consumer) undoneLater(ctx context.Context, ev components.Event) (bool, error) {
	var settled stateChanged
	if err := json.Unmarshal(ev.Data, &settled); err != nil || settled.BlockHash == nil {
		return false, err
	}
	after := uint64(ev.Seq)
	for {
		page, err := feed.Read(ctx, c.API, after, 500, 0)
		if err != nil || len(page.Events) == 0 {
			return false, err
		}
		for _, later := range page.Events {
			if later.Type != components.EventTxReorged || later.TxId != ev.TxId {
				continue
			}
			var d reorged
			if err := json.Unmarshal(later.Data, &d); err != nil {
				return false, err
			}
			if d.BlockHash == *settled.BlockHash {
				return true, nil
			}
		}
		after = uint64(page.Events[len(page.Events)-1].Seq)
	}
}

// errBookFirst says an event needs what the page before it books: a
// reversal of a journal the same page made.
var errBookFirst = fmt.Errorf("book the events before this one first")

// stateChanged and reorged are the parts of the events' data the ledger
// reads.
type stateChanged struct {
	ToState   string       `json:"to_state"`
	Reason    string       `json:"reason"`
	Hash      *common.Hash `json:"hash"`
	BlockHash *common.Hash `json:"block_hash"`
}

type reorged struct {
	Hash      common.Hash `json:"hash"`
	BlockHash common.Hash `json:"block_hash"`
	FromState string      `json:"from_state"`
}

// final reports whether a transaction in state (with reason) was settled
// on chain in a block: what the ledger books.
func final(state, reason string) bool {
	return state == "CONFIRMED" || state == "REVERTED" || (state == "CANCELLED" && reason == "cancel_mined")
}

// journalFor is what ev books: a settled transaction's journal, a
// reversal, or nil.
func (c *Consumer) journalFor(ctx context.Context, ev components.Event, pending map[string]bool) (*ledger.Journal, error) {
	chainID := uint64(ev.ChainId)
	switch ev.Type {
	case components.EventTxStateChanged:
		var d stateChanged
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		if !final(d.ToState, d.Reason) || d.Hash == nil || d.BlockHash == nil {
			return nil, nil
		}
		reader, ok := c.Readers[chainID]
		if !ok {
			return nil, fmt.Errorf("no chain endpoint is configured for chain %d", chainID)
		}
		s, err := reader.Settled(ctx, *d.Hash, *d.BlockHash)
		if err != nil {
			return nil, err
		}
		return booking.Journal(s, c), nil
	case components.EventTxReorged:
		var d reorged
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, err
		}
		// The reason is not in a reorg's data; a booked journal says what
		// was final.
		key := ledger.TxKey(chainID, d.Hash, d.BlockHash)
		if pending[key] {
			return nil, errBookFirst
		}
		id, j, err := c.Store.Journal(ctx, key)
		if errs.Is(err, errs.NotFound) {
			return nil, nil // nothing was booked from that block
		}
		if err != nil {
			return nil, err
		}
		return booking.Reverse(id, j), nil
	}
	return nil, nil
}

// Run books the feed until ctx ends. A failing step is retried with a
// growing pause, up to a minute; a failure that lasts a minute is logged as
// an alert, once, and a line says when the feed moves again.
func (c *Consumer) Run(ctx context.Context) error {
	log := c.log()
	pause, failingSince, alerted := time.Duration(0), time.Time{}, false
	for ctx.Err() == nil {
		_, err := c.Step(ctx)
		if err == nil {
			if alerted {
				log.Info("ledger: the feed is booked again", "stalled_for", time.Since(failingSince).Round(time.Second).String())
			}
			pause, failingSince, alerted = 0, time.Time{}, false
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if !alerted && time.Since(failingSince) >= time.Minute {
			log.Error("ledger: the feed has not been booked for a minute", "alert", true, "err", err)
			alerted = true
		} else {
			log.Warn("ledger: booking the feed failed; retrying", "err", err)
		}
		pause = min(max(2*pause, 100*time.Millisecond), 10*time.Second)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
	return nil
}
