package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/shared/errs"
)

// Ledger calls ledgerd's read API (openapi/ledger.yaml).
type Ledger struct {
	api *ledgerapi.ClientWithResponses
}

// NewLedger is a client of the ledgerd at baseURL through hc, an mTLS
// client whose identity is gateway.
func NewLedger(baseURL string, hc *http.Client) (*Ledger, error) {
	if hc == nil {
		return nil, errors.New("remote: no HTTP client (an mTLS client as gateway is needed)")
	}
	c, err := ledgerapi.NewClientWithResponses(baseURL, ledgerapi.WithHTTPClient(hc))
	if err != nil {
		return nil, err
	}
	return &Ledger{api: c}, nil
}

// ledgerAnswer returns the body of a successful answer, else the error of
// the kind ledgerd's problem names (errs.FromUpstream: ledgerd refusing
// the gateway's own identity is an internal error).
func ledgerAnswer(what string, raw *http.Response, body []byte, ok bool) ([]byte, error) {
	if ok {
		return body, nil
	}
	return nil, fmt.Errorf("%s: %w", what, errs.FromUpstream(raw.StatusCode, raw.Header.Get("Content-Type"), body))
}

// ledgerUnreachable is the error of a call that got no answer.
func ledgerUnreachable(what string, err error) error {
	return errs.Wrap(errs.Unavailable, what+": the ledger did not answer", err)
}

// AccountRef names a ledger account: the fields the gateway checks before
// it shows the account to a tenant.
type AccountRef struct {
	ID      int64                 `json:"account_id"`
	ChainID uint64                `json:"chain_id"`
	Asset   string                `json:"asset"`
	Kind    ledgerapi.AccountKind `json:"kind"`
	// Address is in lower case, as ledgerd answers it.
	Address string `json:"address"`
}

// Account is an account with its balance as ledgerd answered it: JSON is
// the body, passed on unchanged, and Ref its fields the gateway checks.
type Account struct {
	Ref  AccountRef
	JSON []byte
}

// Accounts reads a page of accounts with their balances, as AccountList
// JSON.
func (l *Ledger) Accounts(ctx context.Context, params ledgerapi.ListAccountsParams) ([]byte, error) {
	resp, err := l.api.ListAccountsWithResponse(ctx, &params)
	if err != nil {
		return nil, ledgerUnreachable("list accounts", err)
	}
	return ledgerAnswer("list accounts", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// Account reads one account with its balance, now or as of atBlock.
func (l *Ledger) Account(ctx context.Context, id int64, atBlock *int64) (Account, error) {
	resp, err := l.api.GetAccountWithResponse(ctx, id, &ledgerapi.GetAccountParams{AtBlock: atBlock})
	if err != nil {
		return Account{}, ledgerUnreachable("get account", err)
	}
	body, err := ledgerAnswer("get account", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
	if err != nil {
		return Account{}, err
	}
	a := Account{JSON: body}
	if err := json.Unmarshal(body, &a.Ref); err != nil {
		return Account{}, fmt.Errorf("get account: ledgerd's answer: %w", err)
	}
	return a, nil
}

// Statement reads a page of an account's entries with the running
// balance, as Statement JSON.
func (l *Ledger) Statement(ctx context.Context, id int64, params ledgerapi.ListAccountEntriesParams) ([]byte, error) {
	resp, err := l.api.ListAccountEntriesWithResponse(ctx, id, &params)
	if err != nil {
		return nil, ledgerUnreachable("statement", err)
	}
	return ledgerAnswer("statement", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
}

// Journal is a journal as ledgerd answered it: Fields holds each member
// of the body as it came, and Entries its entries, each with the account
// it moves.
type Journal struct {
	ChainID uint64
	Fields  map[string]json.RawMessage
	Entries []JournalEntry
}

// JournalEntry is one entry of a journal: JSON as it came, and the
// account it moves.
type JournalEntry struct {
	Account AccountRef
	JSON    json.RawMessage
}

// Journal reads one journal with its entries.
func (l *Ledger) Journal(ctx context.Context, id int64) (Journal, error) {
	resp, err := l.api.GetJournalWithResponse(ctx, id)
	if err != nil {
		return Journal{}, ledgerUnreachable("get journal", err)
	}
	body, err := ledgerAnswer("get journal", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
	if err != nil {
		return Journal{}, err
	}
	j := Journal{ChainID: uint64(resp.JSON200.ChainId)}
	var entries []json.RawMessage
	if err := json.Unmarshal(body, &j.Fields); err != nil {
		return Journal{}, fmt.Errorf("get journal: ledgerd's answer: %w", err)
	}
	if err := json.Unmarshal(j.Fields["entries"], &entries); err != nil {
		return Journal{}, fmt.Errorf("get journal: ledgerd's answer, its entries: %w", err)
	}
	for _, raw := range entries {
		var e struct {
			Account AccountRef `json:"account"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			return Journal{}, fmt.Errorf("get journal: ledgerd's answer: %w", err)
		}
		j.Entries = append(j.Entries, JournalEntry{Account: e.Account, JSON: raw})
	}
	return j, nil
}

// TransitEnd is one end of a transit: the fields the gateway checks
// before it shows the transit to a tenant.
type TransitEnd struct {
	ChainID uint64 `json:"chain_id"`
	// Wallet is in lower case, as ledgerd answers it.
	Wallet string `json:"wallet"`
}

// TransitRef is a transit's id and ends; Destination is nil until the
// destination's transaction names the transit.
type TransitRef struct {
	ID          string      `json:"transit_id"`
	Source      TransitEnd  `json:"source"`
	Destination *TransitEnd `json:"destination"`
}

// Ends are the ends the transit has so far.
func (t *TransitRef) Ends() []TransitEnd {
	if t.Destination == nil {
		return []TransitEnd{t.Source}
	}
	return []TransitEnd{t.Source, *t.Destination}
}

// Transit is a transit as ledgerd answered it: JSON is the body, passed
// on unchanged, and Ref its fields the gateway checks.
type Transit struct {
	Ref  TransitRef
	JSON []byte
}

// Transits reads a page of transits, as the body of a TransitList, and
// the ends of each.
func (l *Ledger) Transits(ctx context.Context, params ledgerapi.ListTransitsParams) ([]byte, []TransitRef, error) {
	resp, err := l.api.ListTransitsWithResponse(ctx, &params)
	if err != nil {
		return nil, nil, ledgerUnreachable("list transits", err)
	}
	body, err := ledgerAnswer("list transits", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
	if err != nil {
		return nil, nil, err
	}
	var page struct {
		Transits []TransitRef `json:"transits"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, nil, fmt.Errorf("list transits: ledgerd's answer: %w", err)
	}
	return body, page.Transits, nil
}

// Transit reads one transit.
func (l *Ledger) Transit(ctx context.Context, id string) (Transit, error) {
	resp, err := l.api.GetTransitWithResponse(ctx, id)
	if err != nil {
		return Transit{}, ledgerUnreachable("get transit", err)
	}
	body, err := ledgerAnswer("get transit", resp.HTTPResponse, resp.Body, resp.JSON200 != nil)
	if err != nil {
		return Transit{}, err
	}
	t := Transit{JSON: body}
	if err := json.Unmarshal(body, &t.Ref); err != nil {
		return Transit{}, fmt.Errorf("get transit: ledgerd's answer: %w", err)
	}
	return t, nil
}

// Adjust has ledgerd book an operator's adjustment of suspense, which
// names its operator (and approver): the id of the journal that books it,
// and whether it was booked now (false: booked before, a replay).
func (l *Ledger) Adjust(ctx context.Context, req ledgerapi.AdjustmentRequest) (journalID int64, created bool, err error) {
	resp, err := l.api.CreateAdjustmentWithResponse(ctx, req)
	if err != nil {
		return 0, false, ledgerUnreachable("adjust", err)
	}
	if _, err := ledgerAnswer("adjust", resp.HTTPResponse, resp.Body, resp.JSON201 != nil || resp.JSON200 != nil); err != nil {
		return 0, false, err
	}
	if resp.JSON201 != nil {
		return resp.JSON201.JournalId, true, nil
	}
	return resp.JSON200.JournalId, false, nil
}
