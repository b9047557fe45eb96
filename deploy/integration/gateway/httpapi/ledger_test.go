package httpapi_test

import (
	"context"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/txfence/txfence/deploy/integration/gatewaystack"
	"github.com/txfence/txfence/gateway"
	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/openapi/gatewayapi"
)

// token is a token contract's address, as the ledger names its asset.
const token = "0x5fbdb2315678afecb367f032d93f642f64180aa3"

// books are the journals ledgerRig books, by what they are.
type books struct {
	openingA, toBobA, depositA, aToB, openingB, toBAsCounterparty int64
}

// ledgerRig is a gateway with a ledger whose books hold acme's signer A
// and globex's signer B:
//
//	block 1  A's opening balance, 10000
//	block 2  B's opening balance, 700
//	block 3  A pays 50 (fee 1) to B's address booked as a counterparty
//	block 5  A pays 1000 (fee 21) to Bob
//	block 6  a token deposit of 5 to A from B's address as its source
//	block 9  A pays 300 (fee 30) to B's wallet: both ends are wallets
//
// so that A's native wallet holds 8598 now and 8928 as of block 5, and B's
// address also has a counterparty and a deposit source account that
// globex must not see.
func ledgerRig(t *testing.T) (*gatewaystack.Gateway, books) {
	t.Helper()
	g := gatewaystack.Start(t, gatewaystack.Options{Ledger: true})
	l := g.Ledger
	var b books
	b.openingA = l.Book(t, ledger.Opening, "opening-a", 1,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, 10000), gatewaystack.Leg(ledger.OpeningBalance, ledger.Native, signerA, -10000))
	b.openingB = l.Book(t, ledger.Opening, "opening-b", 2,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerB, 700), gatewaystack.Leg(ledger.OpeningBalance, ledger.Native, signerB, -700))
	b.toBAsCounterparty = l.Transfer(t, "a-to-b-counterparty", signerA, signerB, 50, 1, 3)
	b.toBobA = l.Transfer(t, "a-to-bob", signerA, bob, 1000, 21, 5)
	b.depositA = l.Book(t, ledger.Deposit, "deposit-a", 6,
		gatewaystack.Leg(ledger.Wallet, token, signerA, 5), gatewaystack.Leg(ledger.DepositSource, token, signerB, -5))
	b.aToB = l.Book(t, ledger.Confirmed, "a-to-b-wallet", 9,
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, -300), gatewaystack.Leg(ledger.Wallet, ledger.Native, signerB, 300),
		gatewaystack.Leg(ledger.Wallet, ledger.Native, signerA, -30), gatewaystack.Leg(ledger.FeeExpense, ledger.Native, signerA, 30))
	return g, b
}

// read is a GET that must answer 200 with a T.
func read[T any](t *testing.T, g *gatewaystack.Gateway, key, path string) T {
	t.Helper()
	resp, b := g.Do(t, key, "GET", path, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return decode[T](t, b)
}

func accountsPath(signer string, query ...string) string {
	return "/api/v1/ledger/accounts?chain_id=31337&address=" + signer + strings.Join(query, "")
}

// accountOf is the one account of signer's kind in asset, found by listing.
func accountOf(t *testing.T, g *gatewaystack.Gateway, key, signer, kind, asset string) gatewayapi.LedgerAccount {
	t.Helper()
	list := read[gatewayapi.LedgerAccountList](t, g, key, accountsPath(signer, "&kind="+kind, "&asset="+asset))
	if len(list.Accounts) != 1 {
		t.Fatalf("%s's %s accounts in %s: %+v, want one", signer, kind, asset, list)
	}
	return list.Accounts[0]
}

func balancesByAsset(as []gatewayapi.LedgerAccount) map[string]string {
	out := map[string]string{}
	for _, a := range as {
		out[a.Asset] = a.Balance
	}
	return out
}

// TestLedgerBalancesStatementAndJournal: a tenant lists its signer's
// wallet balances per asset, now and as of a block, and its other
// accounts by kind, pages through them and through a statement with the
// ledger's cursors, and reads a journal with its own entries only.
func TestLedgerBalancesStatementAndJournal(t *testing.T) {
	t.Parallel()
	g, b := ledgerRig(t)
	reader := g.Key(t, g.AcmeTenant, "books", []gateway.Scope{gateway.ScopeLedgerRead}, nil)

	// Any letter case; answered in lower case.
	lower := strings.ToLower(signerA)
	now := read[gatewayapi.LedgerAccountList](t, g, reader, accountsPath("0x"+strings.ToUpper(signerA[2:])))
	if diff := cmp.Diff(map[string]string{ledger.Native: "8598", token: "5"}, balancesByAsset(now.Accounts)); diff != "" || now.NextCursor != nil {
		t.Errorf("A's wallets now (-want +got):\n%s%+v", diff, now)
	}
	for _, a := range now.Accounts {
		if a.Kind != "wallet" || a.Address != lower || a.ChainId != 31337 || a.Version == nil || a.AsOfBlock != nil {
			t.Errorf("account %+v", a)
		}
	}
	then := read[gatewayapi.LedgerAccountList](t, g, reader, accountsPath(signerA, "&at_block=5"))
	if diff := cmp.Diff(map[string]string{ledger.Native: "8928", token: "0"}, balancesByAsset(then.Accounts)); diff != "" {
		t.Errorf("A's wallets as of block 5 (-want +got):\n%s", diff)
	}
	for _, a := range then.Accounts {
		if a.AsOfBlock == nil || *a.AsOfBlock != 5 || a.Version != nil {
			t.Errorf("as of block 5: %+v", a)
		}
	}
	for kind, want := range map[string]string{"fee_expense": "52", "opening_balance": "-10000", "suspense": "", "in_transit": ""} {
		list := read[gatewayapi.LedgerAccountList](t, g, reader, accountsPath(signerA, "&kind="+kind))
		if got := balancesByAsset(list.Accounts)[ledger.Native]; got != want {
			t.Errorf("A's %s: %+v, want balance %q", kind, list, want)
		}
	}

	// A page at a time, with the ledger's cursor passed back unchanged.
	first := read[gatewayapi.LedgerAccountList](t, g, reader, accountsPath(signerA, "&limit=1"))
	if len(first.Accounts) != 1 || first.NextCursor == nil {
		t.Fatalf("first page: %+v", first)
	}
	second := read[gatewayapi.LedgerAccountList](t, g, reader, accountsPath(signerA, "&limit=1&cursor="+url.QueryEscape(*first.NextCursor)))
	if len(second.Accounts) != 1 || second.NextCursor != nil || second.Accounts[0].AccountId <= first.Accounts[0].AccountId {
		t.Errorf("second page: %+v after %+v", second, first)
	}

	wallet := accountOf(t, g, reader, signerA, "wallet", ledger.Native)
	id := fmt.Sprint(wallet.AccountId)
	if got := read[gatewayapi.LedgerAccount](t, g, reader, "/api/v1/ledger/accounts/"+id); got.Balance != "8598" || got.Version == nil || *got.Version != *wallet.Version {
		t.Errorf("account %s: %+v, want %+v", id, got, wallet)
	}
	if got := read[gatewayapi.LedgerAccount](t, g, reader, "/api/v1/ledger/accounts/"+id+"?at_block=3"); got.Balance != "9949" || got.AsOfBlock == nil || *got.AsOfBlock != 3 {
		t.Errorf("account %s as of block 3: %+v", id, got)
	}

	// The statement, three entries a page: each running balance is the one
	// before it plus the entry, and the last is the balance. (Entries of
	// one journal come in the ledger's order.)
	type line struct {
		Journal int64
		Amount  string
	}
	want := []line{{b.openingA, "10000"}, {b.toBAsCounterparty, "-1"}, {b.toBAsCounterparty, "-50"},
		{b.toBobA, "-1000"}, {b.toBobA, "-21"}, {b.aToB, "-30"}, {b.aToB, "-300"}}
	var got []line
	running := big.NewInt(0)
	path := "/api/v1/ledger/accounts/" + id + "/entries?limit=3"
	for pages := 1; ; pages++ {
		page := read[gatewayapi.LedgerStatement](t, g, reader, path)
		if page.AccountId != wallet.AccountId {
			t.Errorf("page of account %d, want %d", page.AccountId, wallet.AccountId)
		}
		for _, e := range page.Entries {
			got = append(got, line{e.JournalId, e.Amount})
			amount, _ := new(big.Int).SetString(e.Amount, 10)
			if running.Add(running, amount); e.Balance != running.String() {
				t.Errorf("entry %+v: running balance %s, want %s", e, e.Balance, running)
			}
		}
		if page.NextCursor == nil {
			if pages != 3 {
				t.Errorf("%d pages, want 3", pages)
			}
			break
		}
		path = "/api/v1/ledger/accounts/" + id + "/entries?limit=3&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	byJournalThenAmount := cmpopts.SortSlices(func(a, b line) bool {
		return a.Journal < b.Journal || a.Journal == b.Journal && a.Amount < b.Amount
	})
	if diff := cmp.Diff(want, got, byJournalThenAmount); diff != "" || running.String() != "8598" {
		t.Errorf("statement ending at %s (-want +got):\n%s", running, diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Journal < got[i-1].Journal {
			t.Errorf("the statement is not in booking order: %v", got)
		}
	}

	// A's payment to B's wallet: acme sees its three entries, globex its
	// one; neither sees the other's.
	type entry struct{ Kind, Address, Amount string }
	anyOrder := cmpopts.SortSlices(func(a, b entry) bool { return a.Kind+a.Amount < b.Kind+b.Amount })
	entries := func(key string, id int64) []entry {
		j := read[gatewayapi.LedgerJournal](t, g, key, fmt.Sprintf("/api/v1/ledger/journals/%d", id))
		if j.JournalId != id || j.Kind != "confirmed" {
			t.Errorf("journal %d: %+v", id, j)
		}
		var out []entry
		for _, e := range j.Entries {
			out = append(out, entry{string(e.Account.Kind), e.Account.Address, e.Amount})
		}
		return out
	}
	if diff := cmp.Diff([]entry{{"wallet", lower, "-300"}, {"wallet", lower, "-30"}, {"fee_expense", lower, "30"}}, entries(reader, b.aToB), anyOrder); diff != "" {
		t.Errorf("acme's view of its payment to B (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]entry{{"wallet", strings.ToLower(signerB), "300"}}, entries(g.Globex, b.aToB), anyOrder); diff != "" {
		t.Errorf("globex's view of A's payment to it (-want +got):\n%s", diff)
	}
	// The counterparty's side of a payment to Bob is not acme's account.
	if diff := cmp.Diff([]entry{{"wallet", lower, "-1000"}, {"wallet", lower, "-21"}, {"fee_expense", lower, "21"}}, entries(reader, b.toBobA), anyOrder); diff != "" {
		t.Errorf("acme's payment to Bob (-want +got):\n%s", diff)
	}
}

// TestLedgerNoTenantSeesAnother: globex cannot list, read, page through
// the statement of, or read a journal of acme's accounts (each a 404
// worded as for an account that does not exist), nor the accounts keyed
// by its own signer's address that hold what others exchanged with it;
// its lists never show acme's accounts. A key limited to another signer
// of acme's sees none of signer A's.
func TestLedgerNoTenantSeesAnother(t *testing.T) {
	t.Parallel()
	g, b := ledgerRig(t)
	acmeWallet := accountOf(t, g, g.Acme, signerA, "wallet", ledger.Native)
	acmeFees := accountOf(t, g, g.Acme, signerA, "fee_expense", ledger.Native)
	page := read[gatewayapi.LedgerStatement](t, g, g.Acme, fmt.Sprintf("/api/v1/ledger/accounts/%d/entries?limit=1", acmeWallet.AccountId))
	if page.NextCursor == nil {
		t.Fatal("no second page of acme's statement")
	}

	// The accounts of B's address that globex must not see either.
	var counterpartyB, depositSourceB int64
	rows, err := g.Ledger.Pool.Query(context.Background(), `SELECT account_id, kind FROM account WHERE address = $1`, common.HexToAddress(signerB).Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var kind string
		if err := rows.Scan(&id, &kind); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "counterparty":
			counterpartyB = id
		case "deposit_source":
			depositSourceB = id
		}
	}
	if err := rows.Err(); err != nil || counterpartyB == 0 || depositSourceB == 0 {
		t.Fatalf("B's counterparty %d and deposit source %d accounts: %v", counterpartyB, depositSourceB, err)
	}

	account := func(id int64) string { return fmt.Sprintf("/api/v1/ledger/accounts/%d", id) }
	notFound := []string{
		accountsPath(signerA),
		accountsPath(signerA, "&kind=fee_expense"),
		accountsPath(signerA, "&at_block=5"),
		account(acmeWallet.AccountId),
		account(acmeWallet.AccountId) + "?at_block=5",
		account(acmeFees.AccountId),
		account(acmeWallet.AccountId) + "/entries",
		account(acmeWallet.AccountId) + "/entries?cursor=" + url.QueryEscape(*page.NextCursor),
		account(counterpartyB),
		account(counterpartyB) + "/entries",
		account(depositSourceB),
		fmt.Sprintf("/api/v1/ledger/journals/%d", b.openingA),
		fmt.Sprintf("/api/v1/ledger/journals/%d", b.toBobA),
		// B's address is a counterparty of this one, and the source of
		// the deposit: neither account is globex's.
		fmt.Sprintf("/api/v1/ledger/journals/%d", b.toBAsCounterparty),
		fmt.Sprintf("/api/v1/ledger/journals/%d", b.depositA),
	}
	for _, path := range notFound {
		// Nothing of acme's shows, but what the path itself names.
		resp, body := g.Do(t, g.Globex, "GET", path, "")
		leaks := !strings.Contains(path, signerA) && strings.Contains(strings.ToLower(string(body)), strings.ToLower(signerA[2:]))
		if resp.StatusCode != http.StatusNotFound || leaks {
			t.Errorf("globex GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	// Another tenant's account reads exactly as one that does not exist.
	_, theirs := g.Do(t, g.Globex, "GET", account(acmeWallet.AccountId), "")
	_, none := g.Do(t, g.Globex, "GET", account(1<<40), "")
	if p, q := decode[problem](t, theirs), decode[problem](t, none); p.Detail != fmt.Sprintf("no account %d", acmeWallet.AccountId) || q.Detail != fmt.Sprintf("no account %d", 1<<40) {
		t.Errorf("acme's account for globex: %q; an unknown account: %q", p.Detail, q.Detail)
	}
	_, none = g.Do(t, g.Globex, "GET", "/api/v1/ledger/journals/999999", "")
	if p := decode[problem](t, none); p.Status != http.StatusNotFound || p.Detail != "no journal 999999" {
		t.Errorf("an unknown journal: %+v", p)
	}

	// Globex's own lists, of every kind it may ask for, never show acme's
	// accounts, nor the accounts of B's address that are not B's own.
	for _, kind := range []string{"wallet", "fee_expense", "suspense", "in_transit", "opening_balance"} {
		list := read[gatewayapi.LedgerAccountList](t, g, g.Globex, accountsPath(signerB, "&kind="+kind))
		for _, a := range list.Accounts {
			if a.Address != strings.ToLower(signerB) || string(a.Kind) != kind || a.AccountId == counterpartyB || a.AccountId == depositSourceB {
				t.Errorf("globex lists %+v", a)
			}
		}
	}
	if got := accountOf(t, g, g.Globex, signerB, "wallet", ledger.Native); got.Balance != "1000" {
		t.Errorf("globex's wallet: %+v, want 700 + 300 from A", got)
	}
	// The roles of an outside address are not a kind a tenant may ask for.
	for _, kind := range []string{"counterparty", "deposit_source"} {
		if resp, body := g.Do(t, g.Globex, "GET", accountsPath(signerB, "&kind="+kind), ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("globex lists its %s accounts: %d %s, want 400", kind, resp.StatusCode, body)
		}
	}

	// A key of acme's limited to another of its signers sees nothing of A.
	second := common.HexToAddress("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC")
	if err := g.Store.AssignSigner(context.Background(), g.AcmeTenant.ID, gateway.SignerRef{ChainID: 31337, Address: second}); err != nil {
		t.Fatal(err)
	}
	narrow := g.Key(t, g.AcmeTenant, "narrow", []gateway.Scope{gateway.ScopeLedgerRead}, []gateway.SignerRef{{ChainID: 31337, Address: second}})
	for _, path := range []string{accountsPath(signerA), account(acmeWallet.AccountId), account(acmeWallet.AccountId) + "/entries",
		fmt.Sprintf("/api/v1/ledger/journals/%d", b.toBobA)} {
		if resp, body := g.Do(t, narrow, "GET", path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("a key limited to another signer: GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	if list := read[gatewayapi.LedgerAccountList](t, g, narrow, accountsPath(second.Hex())); len(list.Accounts) != 0 {
		t.Errorf("the other signer, which has no books: %+v", list)
	}
}

// TestLedgerScopeBadInputAndOutages: a key without ledger:read is a 403;
// requests that break the spec are 400 problems naming the field, as is
// a cursor the ledger refuses; a gateway without a ledger answers 503
// saying so, and one whose ledger is down 503.
func TestLedgerScopeBadInputAndOutages(t *testing.T) {
	t.Parallel()
	g, b := ledgerRig(t)
	wallet := accountOf(t, g, g.Acme, signerA, "wallet", ledger.Native)
	routes := []string{
		accountsPath(signerA),
		fmt.Sprintf("/api/v1/ledger/accounts/%d", wallet.AccountId),
		fmt.Sprintf("/api/v1/ledger/accounts/%d/entries", wallet.AccountId),
		fmt.Sprintf("/api/v1/ledger/journals/%d", b.toBobA),
	}
	for _, path := range routes {
		if resp, body := g.Do(t, g.AcmeRead, "GET", path, ""); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "ledger:read") {
			t.Errorf("a tx:read key: GET %s: %d %s, want 403", path, resp.StatusCode, body)
		}
	}

	for _, c := range []struct{ name, path, pointer string }{
		{"no chain", "/api/v1/ledger/accounts?address=" + signerA, "chain_id"},
		{"no address", "/api/v1/ledger/accounts?chain_id=31337", "address"},
		{"a short address", accountsPath("0x1234"), "address"},
		{"a chain id of 0", "/api/v1/ledger/accounts?chain_id=0&address=" + signerA, "chain_id"},
		{"an unknown kind", accountsPath(signerA, "&kind=treasury"), "kind"},
		{"a bad asset", accountsPath(signerA, "&asset=usdc"), "asset"},
		{"a negative block", accountsPath(signerA, "&at_block=-1"), "at_block"},
		{"a limit of 0", accountsPath(signerA, "&limit=0"), "limit"},
		{"a limit too high", fmt.Sprintf("/api/v1/ledger/accounts/%d/entries?limit=1001", wallet.AccountId), "limit"},
		{"an account id of 0", "/api/v1/ledger/accounts/0", "account_id"},
		{"an account id as text", "/api/v1/ledger/accounts/wallet/entries", "account_id"},
		{"a journal id as text", "/api/v1/ledger/journals/latest", "journal_id"},
		{"a forged cursor", accountsPath(signerA, "&cursor=bm90LWEtY3Vyc29y"), "cursor"},
		{"an empty cursor", fmt.Sprintf("/api/v1/ledger/accounts/%d/entries?cursor=", wallet.AccountId), "cursor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := g.Do(t, g.Acme, "GET", c.path, "")
			p := decode[problem](t, body)
			found := false
			for _, e := range p.Errors {
				found = found || e.Pointer == c.pointer
			}
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" ||
				p.Type != "urn:txfence:problem:invalid" || !found {
				t.Errorf("%d %s; want a 400 problem naming %q", resp.StatusCode, body, c.pointer)
			}
		})
	}

	// The cursor of acme's accounts list is not one of the statement's.
	first := read[gatewayapi.LedgerAccountList](t, g, g.Acme, accountsPath(signerA, "&limit=1"))
	resp, body := g.Do(t, g.Acme, "GET", fmt.Sprintf("/api/v1/ledger/accounts/%d/entries?cursor=%s", wallet.AccountId, url.QueryEscape(*first.NextCursor)), "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"pointer":"cursor"`) {
		t.Errorf("a cursor of another list: %d %s, want 400 naming cursor", resp.StatusCode, body)
	}

	// Without a ledger: 503, saying so, after the scope is checked.
	bare := gatewaystack.Start(t, gatewaystack.Options{})
	for _, path := range routes {
		resp, body := bare.Do(t, bare.Acme, "GET", path, "")
		if p := decode[problem](t, body); resp.StatusCode != http.StatusServiceUnavailable || p.Type != "urn:txfence:problem:unavailable" ||
			!strings.Contains(p.Detail, "the ledger is not configured") {
			t.Errorf("no ledger: GET %s: %d %s, want 503", path, resp.StatusCode, body)
		}
		if resp, _ := bare.Do(t, bare.AcmeRead, "GET", path, ""); resp.StatusCode != http.StatusForbidden {
			t.Errorf("no ledger, a tx:read key: GET %s: %d, want 403", path, resp.StatusCode)
		}
	}

	// The ledger goes down: 503, and the signer check still comes first.
	g.Ledger.Stop()
	for _, path := range routes {
		if resp, body := g.Do(t, g.Acme, "GET", path, ""); resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("ledger down: GET %s: %d %s, want 503", path, resp.StatusCode, body)
		}
	}
	if resp, body := g.Do(t, g.Globex, "GET", accountsPath(signerA), ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("ledger down, another tenant's signer: %d %s, want 404", resp.StatusCode, body)
	}
}
