// Package httpapi is ledgerd's internal HTTP API (openapi/ledger.yaml):
// reading the books for the gateway. Accounts with their balances,
// current or as of a block, an account's statement with its running
// balance, journals with their entries, reconciliation runs, transits
// between chains, and operators' adjustments of suspense.
package httpapi

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/shared/httpserver"
	"github.com/txfence/txfence/shared/mtls"
)

// Caller is the identity the read routes admit: the gateway, which
// answers tenants (scope ledger:read) and operators.
const Caller = "gateway"

// API serves the read routes.
type API struct {
	store      ledger.APIStore
	cursors    cursors
	reconciler Reconciler
}

// ReconcileWith serves on-demand reconciliation with r; without it,
// createReconciliation answers 503. The stored runs are served either way.
func (a *API) ReconcileWith(r Reconciler) *API {
	a.reconciler = r
	return a
}

// New returns the API over store. cursorKey authenticates the list
// cursors it hands out; every ledgerd that serves the same callers needs
// the same key, or a cursor one issued is refused by another. With no key,
// New makes one up: the cursors then hold only until ledgerd restarts.
func New(store ledger.APIStore, cursorKey []byte) *API {
	key := slices.Clone(cursorKey)
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
	}
	return &API{store: store, cursors: cursors{key: key}}
}

// Mount adds the routes to r, behind the gateway-only allowlist.
func (a *API) Mount(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(mtls.Allow(Caller))
		r.Get("/v1/accounts", httpserver.Handle(a.listAccounts))
		r.Get("/v1/accounts/{account_id}", httpserver.Handle(a.getAccount))
		r.Get("/v1/accounts/{account_id}/entries", httpserver.Handle(a.listEntries))
		r.Get("/v1/journals", httpserver.Handle(a.listJournals))
		r.Get("/v1/journals/{journal_id}", httpserver.Handle(a.getJournal))
		r.Post("/v1/reconciliations", httpserver.Handle(a.createReconciliation))
		r.Get("/v1/reconciliations", httpserver.Handle(a.listReconciliations))
		r.Get("/v1/reconciliations/{run_id}", httpserver.Handle(a.getReconciliation))
		r.Get("/v1/transits", httpserver.Handle(a.listTransits))
		r.Get("/v1/transits/{transit_id}", httpserver.Handle(a.getTransit))
		r.Post("/v1/adjustments", httpserver.Handle(a.createAdjustment))
	})
}

func (a *API) listAccounts(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	f := ledger.AccountFilter{ChainID: p.chainID(), Address: p.address("address"), Kind: p.accountKind(), Asset: p.asset(), AtBlock: p.atBlock()}
	return writeIDPage(a, w, r, p, idList[ledger.AccountBalance, accountJSON]{kind: accountsCursor, scope: accountsScope(&f), name: "accounts",
		read: func(after int64, limit int) ([]ledger.AccountBalance, error) {
			f.After, f.Limit = after, limit
			return a.store.Accounts(r.Context(), f)
		},
		id: func(v *ledger.AccountBalance) int64 { return v.ID }, shape: toAccount})
}

// idList is a list paged by id: its cursor carries the id of the last
// item shown, and read answers up to limit items after it.
type idList[T, J any] struct {
	kind  cursorKind
	scope string
	name  string // the member holding the items
	read  func(after int64, limit int) ([]T, error)
	id    func(*T) int64
	shape func(*T) J
}

// writeIDPage answers a page of l: the request's cursor opened (a bad one
// is one more problem with the request's parameters), one item more than
// the limit read to tell whether another page follows, and the page
// written with its next cursor.
func writeIDPage[T, J any](a *API, w http.ResponseWriter, r *http.Request, p *params, l idList[T, J]) error {
	limit := p.limit()
	var after int64
	if s, ok := p.get("cursor"); ok && len(p.fields) == 0 {
		var err error
		if after, err = a.cursors.openID(l.kind, l.scope, s); err != nil {
			p.fail("cursor", err)
		}
	}
	if err := p.err(); err != nil {
		return err
	}
	items, err := l.read(after, limit+1)
	if err != nil {
		return err
	}
	var next *string
	if len(items) > limit {
		items = items[:limit]
		next = new(a.cursors.sealID(l.kind, l.scope, l.id(&items[limit-1])))
	}
	out := make([]J, len(items))
	for i := range items {
		out[i] = l.shape(&items[i])
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{l.name: out, "next_cursor": next})
	return nil
}

// accountsScope ties a list's cursors to its filters.
func accountsScope(f *ledger.AccountFilter) string {
	addr, at := "", ""
	if f.Address != nil {
		addr = lowerHex(f.Address.Bytes())
	}
	if f.AtBlock != nil {
		at = fmt.Sprint(*f.AtBlock)
	}
	return fmt.Sprintf("chain_id=%d&address=%s&kind=%s&asset=%s&at_block=%s", f.ChainID, addr, f.Kind, f.Asset, at)
}

func (a *API) getAccount(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	id := p.id("account_id", chi.URLParam(r, "account_id"))
	at := p.atBlock()
	if err := p.err(); err != nil {
		return err
	}
	acct, err := a.store.Account(r.Context(), id, at)
	if err != nil {
		return err
	}
	httpserver.WriteJSON(w, http.StatusOK, toAccount(&acct))
	return nil
}

func (a *API) listEntries(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	id := p.id("account_id", chi.URLParam(r, "account_id"))
	limit := p.limit()
	var pos ledger.StatementPosition
	if s, ok := p.get("cursor"); ok && len(p.fields) == 0 {
		var err error
		if pos, err = a.cursors.openPosition(id, s); err != nil {
			p.fail("cursor", err)
		}
	}
	if err := p.err(); err != nil {
		return err
	}
	lines, err := a.store.Statement(r.Context(), id, pos, limit+1)
	if err != nil {
		return err
	}
	var next *string
	if len(lines) > limit {
		lines = lines[:limit]
		last := lines[limit-1]
		next = new(a.cursors.sealPosition(id, ledger.StatementPosition{Version: last.Version, EntryID: last.EntryID, Balance: last.Balance}))
	}
	out := make([]statementEntryJSON, len(lines))
	for i, l := range lines {
		out[i] = statementEntryJSON{EntryID: l.EntryID, JournalID: l.JournalID, JournalKind: l.Kind, Reverses: nonZero(l.Reverses),
			Amount: l.Amount.String(), Balance: l.Balance.String()}
		out[i].TxHash, out[i].BlockNumber, out[i].BlockHash = txAndBlock(l.TxHash, l.Block)
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"account_id": id, "entries": out, "next_cursor": next})
	return nil
}

func (a *API) listJournals(w http.ResponseWriter, r *http.Request) error {
	p := newParams(r.URL.Query())
	f := ledger.JournalFilter{ChainID: p.chainID(), TxHash: p.hash("tx_hash"), Kind: p.journalKind()}
	if f.TxHash != nil && !p.query.Has("chain_id") {
		// journal_tx_idx is by chain, then hash: a hash alone would read
		// every journal.
		p.fail("tx_hash", errors.New("needs chain_id"))
	}
	return writeIDPage(a, w, r, p, idList[ledger.BookedJournal, journalJSON]{kind: journalsCursor, scope: journalsScope(&f), name: "journals",
		read: func(after int64, limit int) ([]ledger.BookedJournal, error) {
			f.After, f.Limit = after, limit
			return a.store.Journals(r.Context(), f)
		},
		id: func(v *ledger.BookedJournal) int64 { return v.ID }, shape: toJournal})
}

// journalsScope ties a list's cursors to its filters.
func journalsScope(f *ledger.JournalFilter) string {
	tx := ""
	if f.TxHash != nil {
		tx = lowerHex(f.TxHash.Bytes())
	}
	return fmt.Sprintf("chain_id=%d&tx_hash=%s&kind=%s", f.ChainID, tx, f.Kind)
}

func (a *API) getJournal(w http.ResponseWriter, r *http.Request) error {
	p := newParams(nil)
	id := p.id("journal_id", chi.URLParam(r, "journal_id"))
	if err := p.err(); err != nil {
		return err
	}
	return a.writeJournal(w, r, http.StatusOK, id)
}

// writeJournal answers journal id with its entries.
func (a *API) writeJournal(w http.ResponseWriter, r *http.Request, status int, id int64) error {
	j, err := a.store.JournalByID(r.Context(), id)
	if err != nil {
		return err
	}
	out := toJournal(&j)
	out.Entries = make([]journalEntryJSON, len(j.Entries))
	for i, e := range j.Entries {
		out.Entries[i] = journalEntryJSON{EntryID: e.ID, Account: toAccountRef(e.AccountID, e.Account), Amount: e.Amount.String()}
	}
	httpserver.WriteJSON(w, status, out)
	return nil
}

// The documents of ledger.yaml. Amounts and balances are decimal
// strings; addresses, assets and hashes lower-case hex.

type accountRefJSON struct {
	AccountID int64              `json:"account_id"`
	ChainID   uint64             `json:"chain_id"`
	Asset     string             `json:"asset"`
	Kind      ledger.AccountKind `json:"kind"`
	Address   string             `json:"address"`
}

type accountJSON struct {
	accountRefJSON
	Balance   string  `json:"balance"`
	Version   *int64  `json:"version,omitempty"`
	AsOfBlock *uint64 `json:"as_of_block,omitempty"`
}

func toAccountRef(id int64, k ledger.AccountKey) accountRefJSON {
	return accountRefJSON{AccountID: id, ChainID: k.ChainID, Asset: k.Asset, Kind: k.Kind, Address: lowerHex(k.Address.Bytes())}
}

func toAccount(a *ledger.AccountBalance) accountJSON {
	out := accountJSON{accountRefJSON: toAccountRef(a.ID, a.AccountKey), Balance: a.Balance.String(), AsOfBlock: a.AtBlock}
	if a.AtBlock == nil {
		out.Version = &a.Version
	}
	return out
}

type statementEntryJSON struct {
	EntryID     int64              `json:"entry_id"`
	JournalID   int64              `json:"journal_id"`
	JournalKind ledger.JournalKind `json:"journal_kind"`
	Reverses    *int64             `json:"reverses,omitempty"`
	TxHash      *string            `json:"tx_hash,omitempty"`
	BlockNumber *uint64            `json:"block_number,omitempty"`
	BlockHash   *string            `json:"block_hash,omitempty"`
	Amount      string             `json:"amount"`
	Balance     string             `json:"balance"`
}

type journalJSON struct {
	JournalID   int64              `json:"journal_id"`
	Kind        ledger.JournalKind `json:"kind"`
	ChainID     uint64             `json:"chain_id"`
	TxHash      *string            `json:"tx_hash,omitempty"`
	BlockNumber *uint64            `json:"block_number,omitempty"`
	BlockHash   *string            `json:"block_hash,omitempty"`
	Status      string             `json:"status,omitempty"`
	Reverses    *int64             `json:"reverses,omitempty"`
	ReversedBy  *int64             `json:"reversed_by,omitempty"`
	Memo        json.RawMessage    `json:"memo"`
	CreatedAt   time.Time          `json:"created_at"`
	// Entries is set by getJournal only.
	Entries []journalEntryJSON `json:"entries,omitempty"`
}

type journalEntryJSON struct {
	EntryID int64          `json:"entry_id"`
	Account accountRefJSON `json:"account"`
	Amount  string         `json:"amount"`
}

func toJournal(j *ledger.BookedJournal) journalJSON {
	memo := j.Memo
	if len(memo) == 0 {
		memo = json.RawMessage("{}")
	}
	out := journalJSON{JournalID: j.ID, Kind: j.Kind, ChainID: j.ChainID, Status: j.Status,
		Reverses: nonZero(j.Reverses), ReversedBy: nonZero(j.ReversedBy), Memo: memo, CreatedAt: j.CreatedAt.UTC()}
	out.TxHash, out.BlockNumber, out.BlockHash = txAndBlock(j.TxHash, j.Block)
	return out
}

// txAndBlock spells a journal's transaction and block out.
func txAndBlock(tx *common.Hash, b *ledger.Block) (txHash *string, number *uint64, blockHash *string) {
	if tx != nil {
		txHash = new(lowerHex(tx.Bytes()))
	}
	if b != nil {
		number, blockHash = new(b.Number), new(lowerHex(b.Hash.Bytes()))
	}
	return txHash, number, blockHash
}

func nonZero(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}
