package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/ethereum/go-ethereum/common"
	"github.com/go-chi/chi/v5"

	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/gateway/remote"
	"github.com/txfence/txfence/openapi/components"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/shared/httpserver"
)

// tenantKinds are the account kinds a tenant sees of its signers: the
// roles that are the signer's own. Counterparty and deposit source
// accounts are keyed by an outside address and sum up what every wallet,
// any tenant's, exchanged with it, so no tenant sees them, even when the
// address is one of its signers.
var tenantKinds = map[ledgerapi.AccountKind]bool{
	ledgerapi.AccountWallet:         true,
	ledgerapi.AccountFeeExpense:     true,
	ledgerapi.AccountSuspense:       true,
	ledgerapi.AccountInTransit:      true,
	ledgerapi.AccountOpeningBalance: true,
}

// seesAccount reports whether the caller may see a ledger account: one of
// its signers' own, on the signer's chain, of a signer the key may use.
func (p *principal) seesAccount(a remote.AccountRef) bool {
	return tenantKinds[a.Kind] && common.IsHexAddress(a.Address) &&
		p.mayUse(gateway.SignerRef{ChainID: a.ChainID, Address: common.HexToAddress(a.Address)})
}

// mountLedger adds the ledger's routes: the reads (scope ledger:read), and
// the operator path of adjustments (scope admin, adjustments.go).
func (a *API) mountLedger(r chi.Router) {
	ledgerOnly := configuredOnly(a.cfg.Ledger != nil, "the ledger is not configured on this gateway")
	r.Group(func(r chi.Router) {
		r.Use(need(gateway.ScopeLedgerRead), ledgerOnly)
		r.Get("/accounts", httpserver.Handle(a.listLedgerAccounts))
		r.Get("/accounts/{account_id}", httpserver.Handle(a.getLedgerAccount))
		r.Get("/accounts/{account_id}/entries", httpserver.Handle(a.ledgerStatement))
		r.Get("/journals/{journal_id}", httpserver.Handle(a.getLedgerJournal))
		r.Get("/transits", httpserver.Handle(a.listLedgerTransits))
		r.Get("/transits/{transit_id}", httpserver.Handle(a.getLedgerTransit))
	})
	r.Group(func(r chi.Router) {
		r.Use(need(gateway.ScopeAdmin), ledgerOnly)
		r.Post("/adjustments", httpserver.Handle(a.proposeAdjustment))
		r.Get("/adjustments", httpserver.Handle(a.listAdjustments))
		r.Get("/adjustments/{adjustment_id}", httpserver.Handle(a.getAdjustment))
		r.Post("/adjustments/{adjustment_id}/approve", httpserver.Handle(a.approveAdjustment))
		r.Post("/adjustments/{adjustment_id}/reject", httpserver.Handle(a.rejectAdjustment))
	})
}

// listLedgerAccounts lists one signer's accounts of one kind. The ledger
// filters by the signer and the kind, so its page and its cursor pass on
// unchanged; each account is still checked, so that a ledger answering
// more than it was asked shows a tenant nothing of another's.
func (a *API) listLedgerAccounts(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	q := r.URL.Query()
	signer, chainID, address, err := p.signerParams(q)
	if err != nil {
		return err
	}
	kind := ledgerapi.AccountWallet
	if v := q.Get("kind"); v != "" {
		kind = ledgerapi.AccountKind(v)
	}
	params := ledgerapi.ListAccountsParams{ChainId: &chainID, Address: &address, Kind: &kind}
	if v := q.Get("asset"); v != "" {
		params.Asset = &v
	}
	if params.AtBlock, err = atBlockParam(r); err != nil {
		return err
	}
	if params.Cursor, params.Limit, err = pageParams(r); err != nil {
		return err
	}
	body, err := a.cfg.Ledger.Accounts(r.Context(), params)
	if err != nil {
		return err
	}
	var page struct {
		Accounts []remote.AccountRef `json:"accounts"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return fmt.Errorf("list accounts: ledgerd's answer: %w", err)
	}
	for _, acct := range page.Accounts {
		if !p.seesAccount(acct) {
			return fmt.Errorf("list accounts of %s (%s): ledgerd answered account %d, of %d:%s (%s)",
				signer, kind, acct.ID, acct.ChainID, acct.Address, acct.Kind)
		}
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

func (a *API) getLedgerAccount(w http.ResponseWriter, r *http.Request) error {
	at, err := atBlockParam(r)
	if err != nil {
		return err
	}
	acct, err := a.ownedAccount(r, at)
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, acct.JSON)
	return nil
}

func (a *API) ledgerStatement(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	acct, err := a.ownedAccount(r, nil)
	if err != nil {
		return err
	}
	body, err := a.cfg.Ledger.Statement(r.Context(), acct.Ref.ID, ledgerapi.ListAccountEntriesParams{Cursor: cursor, Limit: limit})
	if errs.Is(err, errs.NotFound) {
		err = errs.Errorf(errs.NotFound, "no account %d", acct.Ref.ID)
	}
	if err != nil {
		return err
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

// ownedAccount reads the {account_id} of the path, with its balance now or
// as of at, when the caller may see it; any other account is NotFound,
// worded exactly as an unknown one.
func (a *API) ownedAccount(r *http.Request, at *int64) (remote.Account, error) {
	id, err := idParam(r, "account_id")
	if err != nil {
		return remote.Account{}, err
	}
	acct, err := a.cfg.Ledger.Account(r.Context(), id, at)
	if err == nil && !caller(r.Context()).seesAccount(acct.Ref) {
		err = errs.E(errs.NotFound, "")
	}
	if errs.Is(err, errs.NotFound) {
		return remote.Account{}, errs.Errorf(errs.NotFound, "no account %d", id)
	}
	return acct, err
}

// getLedgerJournal answers a journal that moves one of the caller's
// accounts, with only its entries on them: the others are another
// party's books.
func (a *API) getLedgerJournal(w http.ResponseWriter, r *http.Request) error {
	id, err := idParam(r, "journal_id")
	if err != nil {
		return err
	}
	notFound := errs.Errorf(errs.NotFound, "no journal %d", id)
	j, err := a.cfg.Ledger.Journal(r.Context(), id)
	if errs.Is(err, errs.NotFound) {
		err = notFound
	}
	if err != nil {
		return err
	}
	p := caller(r.Context())
	shown := []json.RawMessage{}
	for _, e := range j.Entries {
		if e.Account.ChainID == j.ChainID && p.seesAccount(e.Account) {
			shown = append(shown, e.JSON)
		}
	}
	if len(shown) == 0 {
		return notFound
	}
	entries, err := json.Marshal(shown)
	if err != nil {
		return err
	}
	j.Fields["entries"] = entries
	if memo, ok := j.Fields["memo"]; ok {
		j.Fields["memo"] = p.presentMemo(memo)
	}
	httpserver.WriteJSON(w, http.StatusOK, j.Fields)
	return nil
}

// seesTransit reports whether the caller may see a transit: one with an
// end at a signer of its that the key may use. Both ends of a transit are
// one tenant's (the ledger pairs them within the tenant's namespace, the
// destination depends on the source, and a transaction may only depend on
// its own tenant's), so the whole transit shows.
func (p *principal) seesTransit(t *remote.TransitRef) bool {
	for _, e := range t.Ends() {
		if common.IsHexAddress(e.Wallet) && p.mayUse(gateway.SignerRef{ChainID: e.ChainID, Address: common.HexToAddress(e.Wallet)}) {
			return true
		}
	}
	return false
}

// listLedgerTransits lists the transits of one signer. The ledger filters
// by the signer's end, so its cursor passes on unchanged; each transit is
// still checked, as each account of listLedgerAccounts is, and shown with
// the id the tenant gave it (transitns.go). A transit of another tenant's
// namespace at the signer (one that changed hands since) is left out, so
// a page may hold fewer than the limit.
func (a *API) listLedgerTransits(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	q := r.URL.Query()
	signer, chainID, address, err := p.signerParams(q)
	if err != nil {
		return err
	}
	params := ledgerapi.ListTransitsParams{ChainId: &chainID, Address: &address}
	if v := q.Get("status"); v != "" {
		params.Status = new(ledgerapi.TransitStatus(v))
	}
	if params.Cursor, params.Limit, err = pageParams(r); err != nil {
		return err
	}
	body, transits, err := a.cfg.Ledger.Transits(r.Context(), params)
	if err != nil {
		return err
	}
	var page struct {
		Transits   []json.RawMessage `json:"transits"`
		NextCursor json.RawMessage   `json:"next_cursor"`
	}
	if err := json.Unmarshal(body, &page); err != nil || len(page.Transits) != len(transits) {
		return fmt.Errorf("list transits of %s: ledgerd's answer: %v", signer, err)
	}
	shown := []json.RawMessage{}
	for i, t := range transits {
		if !p.seesTransit(&t) {
			return fmt.Errorf("list transits of %s: ledgerd answered transit %q, whose ends are %+v", signer, t.ID, t.Ends())
		}
		id, ok := p.clientTransitID(t.ID)
		if !ok {
			continue
		}
		raw, err := withTransitID(page.Transits[i], id)
		if err != nil {
			return fmt.Errorf("list transits of %s: ledgerd's answer: %w", signer, err)
		}
		shown = append(shown, raw)
	}
	if len(page.NextCursor) == 0 {
		page.NextCursor = json.RawMessage("null")
	}
	httpserver.WriteJSON(w, http.StatusOK, map[string]any{"transits": shown, "next_cursor": page.NextCursor})
	return nil
}

// getLedgerTransit answers a transit the caller may see, named as the
// caller named it: the caller's namespace first, then (a transit linked
// before namespaces) the bare id. Any other is NotFound, worded exactly as
// an unknown one.
func (a *API) getLedgerTransit(w http.ResponseWriter, r *http.Request) error {
	p := caller(r.Context())
	// The spec has checked the id's form: it holds no namespace.
	id := chi.URLParam(r, "transit_id")
	t, err := a.cfg.Ledger.Transit(r.Context(), p.ledgerTransitID(id))
	if errs.Is(err, errs.NotFound) {
		t, err = a.cfg.Ledger.Transit(r.Context(), id)
	}
	if err == nil {
		if shownAs, ok := p.clientTransitID(t.Ref.ID); !ok || shownAs != id || !p.seesTransit(&t.Ref) {
			err = errs.E(errs.NotFound, "")
		}
	}
	if errs.Is(err, errs.NotFound) {
		err = errs.Errorf(errs.NotFound, "no transit %q", id)
	}
	if err != nil {
		return err
	}
	body, err := withTransitID(t.JSON, id)
	if err != nil {
		return fmt.Errorf("get transit %q: ledgerd's answer: %w", id, err)
	}
	writeRaw(w, http.StatusOK, body)
	return nil
}

// signerParams reads the chain_id and address of a list by signer (the
// spec has checked their form): NotFound unless the caller may use that
// signer.
func (p *principal) signerParams(q url.Values) (signer gateway.SignerRef, chainID int64, address string, err error) {
	chainID, _ = strconv.ParseInt(q.Get("chain_id"), 10, 64)
	address = q.Get("address")
	signer = gateway.SignerRef{ChainID: uint64(chainID), Address: common.HexToAddress(address)}
	if !p.mayUse(signer) {
		return signer, 0, "", errs.Errorf(errs.NotFound, "no signer %s", signer)
	}
	return signer, chainID, address, nil
}

// idParam reads a ledger id of the path (the spec has checked its form).
func idParam(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, name), 10, 64)
	if err != nil || id < 1 {
		return 0, errs.InvalidFields(name+" is not a ledger id", errs.FieldError{Pointer: name, Detail: "a positive integer"})
	}
	return id, nil
}

// atBlockParam reads at_block, nil when absent.
func atBlockParam(r *http.Request) (*int64, error) {
	v := r.URL.Query().Get("at_block")
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, errs.InvalidFields("at_block is not a block number", errs.FieldError{Pointer: "at_block", Detail: "a block number"})
	}
	return &n, nil
}

// pageParams reads cursor and limit, nil when absent. The cursor is the
// ledger's, passed on as the client sent it.
func pageParams(r *http.Request) (*components.Cursor, *components.Limit, error) {
	q := r.URL.Query()
	var cursor *components.Cursor
	if v := q.Get("cursor"); v != "" {
		cursor = &v
	}
	var limit *components.Limit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, nil, errs.InvalidFields("limit is not a number", errs.FieldError{Pointer: "limit", Detail: err.Error()})
		}
		l := components.Limit(n)
		limit = &l
	}
	return cursor, limit, nil
}
