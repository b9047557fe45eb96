package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txfence/txfence/ledger"
	"github.com/txfence/txfence/ledger/httpapi"
	"github.com/txfence/txfence/ledger/ledgertest"
	"github.com/txfence/txfence/ledger/postgres"
	"github.com/txfence/txfence/openapi/ledgerapi"
	"github.com/txfence/txfence/shared/errs"
	"github.com/txfence/txfence/testinfra/pgtest"
	"github.com/txfence/txfence/testinfra/servicetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const chain = 31337

var (
	hot   = common.HexToAddress("0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266")
	bob   = common.HexToAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	token = "0x5fbdb2315678afecb367f032d93f642f64180aa3"
)

// api is the ledger's read API over mutual TLS on a real store, every
// exchange checked against ledger.yaml.
type api struct {
	url   string
	pki   string
	store *postgres.Store
	pool  *pgxpool.Pool
}

func start(t *testing.T) *api {
	t.Helper()
	return startWith(t, func(store *postgres.Store) *httpapi.API { return httpapi.New(store, nil) })
}

// startWith serves the API newAPI makes on the store.
func startWith(t *testing.T, newAPI func(*postgres.Store) *httpapi.API) *api {
	t.Helper()
	pki := servicetest.PKI(t)
	served := ledgertest.ServeAPI(t, pki, newAPI)
	return &api{url: served.URL, pki: pki, store: served.Store, pool: served.Pool}
}

func (a *api) get(t *testing.T, as, path string) (int, []byte) {
	t.Helper()
	resp, err := servicetest.Client(t, a.pki, as, "ledger").Get(a.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// read is a GET by the gateway that must answer 200 with a T.
func read[T any](t *testing.T, a *api, path string) T {
	t.Helper()
	code, b := a.get(t, "gateway", path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, b)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
	return v
}

func key(kind ledger.AccountKind, asset string, addr common.Address) ledger.AccountKey {
	return ledger.AccountKey{ChainID: chain, Asset: asset, Kind: kind, Address: addr}
}

func leg(k ledger.AccountKey, amount int64) ledger.Leg {
	return ledger.Leg{Account: k, Amount: big.NewInt(amount)}
}

// transfer is a confirmed transaction's journal in block n: value from
// the wallet to the counterparty, and the fee.
func transfer(name string, value, fee int64, n uint64) *ledger.Journal {
	tx := common.Hash(sha256.Sum256([]byte(name)))
	return &ledger.Journal{Kind: ledger.Confirmed, Key: name, ChainID: chain, Status: "success", TxHash: &tx,
		Block: &ledger.Block{Number: n, Hash: sha256.Sum256(binary.BigEndian.AppendUint64(nil, n))},
		Legs: []ledger.Leg{
			leg(key(ledger.Wallet, ledger.Native, hot), -value), leg(key(ledger.Counterparty, ledger.Native, bob), value),
			leg(key(ledger.Wallet, ledger.Native, hot), -fee), leg(key(ledger.FeeExpense, ledger.Native, hot), fee),
		}}
}

// reversal undoes journal id, j, in j's block.
func reversal(id int64, j *ledger.Journal) *ledger.Journal {
	legs := make([]ledger.Leg, len(j.Legs))
	for i, l := range j.Legs {
		legs[i] = ledger.Leg{Account: l.Account, Amount: new(big.Int).Neg(l.Amount)}
	}
	return &ledger.Journal{Kind: ledger.Reversal, Key: ledger.ReversalKey(id), ChainID: chain, TxHash: j.TxHash, Block: j.Block,
		Status: j.Status, Reverses: id, Legs: legs}
}

func (a *api) post(t *testing.T, j *ledger.Journal) int64 {
	t.Helper()
	p, err := a.store.Post(context.Background(), j)
	if err != nil {
		t.Fatalf("post %s: %v", j.Key, err)
	}
	return p.JournalID
}

// balances are the accounts' balances by kind.
func balances(as []ledgerapi.Account) map[ledgerapi.AccountKind]string {
	out := map[ledgerapi.AccountKind]string{}
	for _, a := range as {
		out[a.Kind] = a.Balance
	}
	return out
}

func TestAccountsWithBalancesNowAndAsOfABlock(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.post(t, transfer("tx-5", 1000, 21, 5))
	a.post(t, transfer("tx-9", 500, 30, 9))

	// Addresses in any case; answered in lower case.
	upper := "0x" + strings.ToUpper(hot.Hex()[2:])
	now := read[ledgerapi.AccountList](t, a, "/v1/accounts?chain_id=31337&address="+upper)
	if got := balances(now.Accounts); len(now.Accounts) != 2 || got["wallet"] != "-1551" || got["fee_expense"] != "51" || now.NextCursor != nil {
		t.Fatalf("the wallet's accounts now: %+v", now)
	}
	for _, acct := range now.Accounts {
		if acct.Address != strings.ToLower(hot.Hex()) || acct.ChainId != chain || acct.Asset != ledger.Native ||
			acct.Version == nil || *acct.Version < 1 || acct.AsOfBlock != nil {
			t.Errorf("account %+v", acct)
		}
	}
	// As of block 7: only the journal of block 5.
	then := read[ledgerapi.AccountList](t, a, "/v1/accounts?chain_id=31337&address="+upper+"&at_block=7")
	if got := balances(then.Accounts); got["wallet"] != "-1021" || got["fee_expense"] != "21" {
		t.Errorf("as of block 7: %+v", then)
	}
	for _, acct := range then.Accounts {
		if acct.AsOfBlock == nil || *acct.AsOfBlock != 7 || acct.Version != nil {
			t.Errorf("as of block 7: %+v, want as_of_block 7 and no version", acct)
		}
	}
	if before := read[ledgerapi.AccountList](t, a, "/v1/accounts?address="+upper+"&at_block=4&kind=wallet"); len(before.Accounts) != 1 || before.Accounts[0].Balance != "0" {
		t.Errorf("as of block 4: %+v", before)
	}

	var wallet ledgerapi.Account
	for _, acct := range now.Accounts {
		if acct.Kind == "wallet" {
			wallet = acct
		}
	}
	id := fmt.Sprint(wallet.AccountId)
	if got := read[ledgerapi.Account](t, a, "/v1/accounts/"+id); got.AccountId != wallet.AccountId || got.Balance != "-1551" || got.Version == nil || *got.Version != *wallet.Version {
		t.Errorf("account %s: %+v, want %+v", id, got, wallet)
	}
	if got := read[ledgerapi.Account](t, a, "/v1/accounts/"+id+"?at_block=7"); got.Balance != "-1021" || got.AsOfBlock == nil || *got.AsOfBlock != 7 {
		t.Errorf("account %s as of block 7: %+v", id, got)
	}

	// A counterparty and a token, then every account a page at a time.
	a.post(t, &ledger.Journal{Kind: ledger.Deposit, Key: "deposit-1", ChainID: chain, TxHash: new(common.Hash{1}),
		Block: &ledger.Block{Number: 10, Hash: common.Hash{2}}, Legs: []ledger.Leg{
			leg(key(ledger.Wallet, token, hot), 5), leg(key(ledger.DepositSource, token, bob), -5)}})
	if got := read[ledgerapi.AccountList](t, a, "/v1/accounts?asset=0x"+strings.ToUpper(token[2:])); len(got.Accounts) != 2 || got.Accounts[0].Asset != token {
		t.Errorf("by token: %+v", got)
	}
	if got := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=counterparty"); len(got.Accounts) != 1 || got.Accounts[0].Balance != "1500" || got.Accounts[0].Address != strings.ToLower(bob.Hex()) {
		t.Errorf("counterparties: %+v", got)
	}
	var ids []int64
	path := "/v1/accounts?chain_id=31337&limit=2"
	for pages := 0; ; pages++ {
		page := read[ledgerapi.AccountList](t, a, path)
		for _, acct := range page.Accounts {
			ids = append(ids, acct.AccountId)
		}
		if page.NextCursor == nil {
			if pages != 2 {
				t.Errorf("%d pages, want 3", pages+1)
			}
			break
		}
		path = "/v1/accounts?chain_id=31337&limit=2&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	if len(ids) != 5 || !slices.IsSorted(ids) {
		t.Errorf("paged through accounts %v, want 5 in order", ids)
	}
}

// TestStatementAcrossPages walks a wallet's statement a few entries at a
// time: the running balance crosses page boundaries entry by entry and
// ends at the account's balance, and the reversal of a journal shows.
func TestStatementAcrossPages(t *testing.T) {
	t.Parallel()
	a := start(t)
	var undone *ledger.Journal
	var undoneID int64
	for i := range 13 {
		j := transfer(fmt.Sprintf("tx-%d", i), int64(1000+i), int64(21+i), uint64(100+i))
		id := a.post(t, j)
		if i == 4 {
			undone, undoneID = j, id
		}
	}
	rev := a.post(t, reversal(undoneID, undone))
	wallet := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=wallet").Accounts[0]

	var entries []ledgerapi.StatementEntry
	path := fmt.Sprintf("/v1/accounts/%d/entries?limit=4", wallet.AccountId)
	for {
		page := read[ledgerapi.Statement](t, a, path)
		if page.AccountId != wallet.AccountId || len(page.Entries) == 0 {
			t.Fatalf("page %+v", page)
		}
		entries = append(entries, page.Entries...)
		if page.NextCursor == nil {
			break
		}
		path = fmt.Sprintf("/v1/accounts/%d/entries?limit=4&cursor=%s", wallet.AccountId, url.QueryEscape(*page.NextCursor))
	}
	if len(entries) != 2*14 {
		t.Fatalf("%d entries, want 28", len(entries))
	}
	running, reversals := new(big.Int), 0
	for i, e := range entries {
		amount, _ := new(big.Int).SetString(e.Amount, 10)
		running.Add(running, amount)
		if e.Balance != running.String() {
			t.Errorf("entry %d: balance %s, want %s", i, e.Balance, running)
		}
		if e.TxHash == nil || e.BlockNumber == nil || e.BlockHash == nil || *e.TxHash != strings.ToLower(*e.TxHash) {
			t.Errorf("entry %d: %+v", i, e)
		}
		if e.JournalKind == "reversal" {
			reversals++
			if e.JournalId != rev || e.Reverses == nil || *e.Reverses != undoneID || *e.BlockNumber != 104 || amount.Sign() <= 0 {
				t.Errorf("reversal entry %+v", e)
			}
		}
	}
	if reversals != 2 {
		t.Errorf("%d reversal entries, want 2", reversals)
	}
	if running.String() != wallet.Balance {
		t.Errorf("the statement ends at %s, the account's balance is %s", running, wallet.Balance)
	}

	// The generated client reads the same statement, as the gateway will.
	c, err := ledgerapi.NewClientWithResponses(a.url, ledgerapi.WithHTTPClient(servicetest.Client(t, a.pki, "gateway", "ledger")))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.ListAccountEntriesWithResponse(t.Context(), wallet.AccountId, &ledgerapi.ListAccountEntriesParams{Limit: new(int32(1000))})
	if err != nil || resp.JSON200 == nil || len(resp.JSON200.Entries) != 28 || resp.JSON200.Entries[27].Balance != wallet.Balance || resp.JSON200.NextCursor != nil {
		t.Errorf("the generated client: %v %s", err, resp.Body)
	}
}

func TestJournals(t *testing.T) {
	t.Parallel()
	a := start(t)
	j := transfer("tx-1", 1000, 21, 7)
	id := a.post(t, j)
	rev := a.post(t, reversal(id, j))
	other := a.post(t, transfer("tx-2", 5, 1, 8))

	got := read[ledgerapi.Journal](t, a, fmt.Sprintf("/v1/journals/%d", id))
	if got.JournalId != id || got.Kind != "confirmed" || got.ChainId != chain || *got.TxHash != strings.ToLower(j.TxHash.Hex()) ||
		*got.BlockNumber != 7 || *got.BlockHash != strings.ToLower(j.Block.Hash.Hex()) || got.Status == nil || *got.Status != "success" ||
		got.Reverses != nil || got.ReversedBy == nil || *got.ReversedBy != rev || got.Memo == nil || len(got.Memo) != 0 || len(got.Entries) != 4 {
		t.Fatalf("journal %d: %+v", id, got)
	}
	// What the spec leaves out must stay out, and the generated types drop
	// it: asSent reads the answers as they came. An entry's account (an
	// AccountRef) has no balance, a listed journal (a JournalSummary) no
	// entries.
	type asSent struct {
		Entries  []struct{ Account struct{ Balance string } }
		Journals []struct{ Entries []json.RawMessage }
	}
	sent := read[asSent](t, a, fmt.Sprintf("/v1/journals/%d", id))
	if len(sent.Entries) != len(got.Entries) {
		t.Fatalf("journal %d read twice: %d entries, then %d", id, len(got.Entries), len(sent.Entries))
	}
	for i, e := range got.Entries {
		want := j.Legs[i]
		if e.Amount != want.Amount.String() || string(e.Account.Kind) != string(want.Account.Kind) || e.Account.Address != strings.ToLower(want.Account.Address.Hex()) ||
			e.Account.Asset != want.Account.Asset || e.Account.ChainId != chain || e.Account.AccountId == 0 || sent.Entries[i].Account.Balance != "" {
			t.Errorf("entry %d: %+v, want %+v", i, e, want)
		}
	}
	r := read[ledgerapi.Journal](t, a, fmt.Sprintf("/v1/journals/%d", rev))
	if r.Kind != "reversal" || r.Reverses == nil || *r.Reverses != id || r.ReversedBy != nil || *r.BlockNumber != 7 || r.Entries[0].Amount != "1000" {
		t.Errorf("reversal %d: %+v", rev, r)
	}

	byTxPath := "/v1/journals?chain_id=31337&tx_hash=0x" + strings.ToUpper(j.TxHash.Hex()[2:])
	byTx := read[ledgerapi.JournalList](t, a, byTxPath)
	listed := read[asSent](t, a, byTxPath)
	if len(byTx.Journals) != 2 || byTx.Journals[0].JournalId != id || byTx.Journals[1].JournalId != rev || len(listed.Journals) != 2 || listed.Journals[0].Entries != nil {
		t.Errorf("by transaction: %+v", byTx)
	}
	if got := read[ledgerapi.JournalList](t, a, "/v1/journals?kind=reversal"); len(got.Journals) != 1 || got.Journals[0].JournalId != rev {
		t.Errorf("reversals: %+v", got)
	}
	var ids []int64
	path := "/v1/journals?chain_id=31337&limit=1"
	for {
		page := read[ledgerapi.JournalList](t, a, path)
		for _, j := range page.Journals {
			ids = append(ids, j.JournalId)
		}
		if page.NextCursor == nil {
			break
		}
		path = "/v1/journals?chain_id=31337&limit=1&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]int64{id, rev, other}) {
		t.Errorf("paged through journals %v, want %v", ids, []int64{id, rev, other})
	}
}

// TestBadInputIsAProblem sends every kind of bad parameter: each is a 400
// problem naming it, and an unknown account or journal is a 404.
func TestBadInputIsAProblem(t *testing.T) {
	t.Parallel()
	a := start(t)
	for i := range 3 {
		a.post(t, transfer(fmt.Sprintf("tx-%d", i), 10, 1, uint64(i+1)))
	}
	accounts := read[ledgerapi.AccountList](t, a, "/v1/accounts?limit=1")
	wallet := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=wallet").Accounts[0]
	entries := read[ledgerapi.Statement](t, a, fmt.Sprintf("/v1/accounts/%d/entries?limit=1", wallet.AccountId))
	journals := read[ledgerapi.JournalList](t, a, "/v1/journals?limit=1")
	if accounts.NextCursor == nil || entries.NextCursor == nil || journals.NextCursor == nil {
		t.Fatal("no cursors to spoil")
	}
	acc, ent, jrn := url.QueryEscape(*accounts.NextCursor), url.QueryEscape(*entries.NextCursor), url.QueryEscape(*journals.NextCursor)
	statementOf := fmt.Sprintf("/v1/accounts/%d/entries", wallet.AccountId)
	other := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=counterparty").Accounts[0].AccountId
	addr := strings.ToLower(hot.Hex())

	requireProblems(t, a, []problemCase{
		{"/v1/accounts?address=0x1234", 400, []string{"address"}},
		{"/v1/accounts?address=" + addr[2:], 400, []string{"address"}},
		{"/v1/accounts?address=0x" + strings.Repeat("g", 40), 400, []string{"address"}},
		{"/v1/accounts?address=", 400, []string{"address"}},
		{"/v1/accounts?chain_id=0", 400, []string{"chain_id"}},
		{"/v1/accounts?chain_id=-1", 400, []string{"chain_id"}},
		{"/v1/accounts?chain_id=9223372036854775808", 400, []string{"chain_id"}},
		{"/v1/accounts?chain_id=1&chain_id=2", 400, []string{"chain_id"}},
		{"/v1/accounts?chain_id=x1", 400, []string{"chain_id"}},
		{"/v1/accounts?at_block=-1", 400, []string{"at_block"}},
		{"/v1/accounts?at_block=9223372036854775808", 400, []string{"at_block"}},
		{"/v1/accounts?at_block=99999999999999999999999", 400, []string{"at_block"}},
		{"/v1/accounts?at_block=1.5", 400, []string{"at_block"}},
		{"/v1/accounts?limit=0", 400, []string{"limit"}},
		{"/v1/accounts?limit=1001", 400, []string{"limit"}},
		{"/v1/accounts?limit=ten", 400, []string{"limit"}},
		{"/v1/accounts?kind=equity", 400, []string{"kind"}},
		{"/v1/accounts?kind=reversal", 400, []string{"kind"}},
		{"/v1/accounts?asset=eth", 400, []string{"asset"}},
		{"/v1/accounts?asset=NATIVE", 400, []string{"asset"}},
		{"/v1/accounts?chain_id=0&limit=0&kind=equity", 400, []string{"chain_id", "kind", "limit"}},
		{"/v1/accounts?limit=1&cursor=garbage", 400, []string{"cursor"}},
		{"/v1/accounts?limit=1&cursor=" + tamper(*accounts.NextCursor), 400, []string{"cursor"}},
		{"/v1/accounts?limit=1&cursor=", 400, []string{"cursor"}},
		{"/v1/accounts?limit=1&cursor=" + strings.Repeat("A", 600), 400, []string{"cursor"}},
		{"/v1/accounts?limit=1&chain_id=31337&cursor=" + acc, 400, []string{"cursor"}}, // another list's filters
		{"/v1/accounts?limit=1&cursor=" + jrn, 400, []string{"cursor"}},                // another list
		{"/v1/accounts/abc", 400, []string{"account_id"}},
		{"/v1/accounts/0", 400, []string{"account_id"}},
		{"/v1/accounts/-4", 400, []string{"account_id"}},
		{"/v1/accounts/99999999999999999999", 400, []string{"account_id"}},
		{"/v1/accounts/999999", 404, nil},
		{"/v1/accounts/999999?at_block=3", 404, nil},
		{fmt.Sprintf("/v1/accounts/%d?at_block=-3", wallet.AccountId), 400, []string{"at_block"}},
		{"/v1/accounts/999999/entries", 404, nil},
		{"/v1/accounts/x/entries", 400, []string{"account_id"}},
		{statementOf + "?limit=-1", 400, []string{"limit"}},
		{statementOf + "?cursor=" + tamper(*entries.NextCursor), 400, []string{"cursor"}},
		{statementOf + "?cursor=" + acc, 400, []string{"cursor"}},
		{fmt.Sprintf("/v1/accounts/%d/entries?cursor=%s", other, ent), 400, []string{"cursor"}}, // another account's
		{"/v1/journals/999999", 404, nil},
		{"/v1/journals/1x", 400, []string{"journal_id"}},
		{"/v1/journals/0", 400, []string{"journal_id"}},
		{"/v1/journals?kind=wallet", 400, []string{"kind"}},
		{"/v1/journals?tx_hash=0x" + strings.Repeat("ab", 32), 400, []string{"tx_hash"}},
		{"/v1/journals?chain_id=31337&tx_hash=0x1234", 400, []string{"tx_hash"}},
		{"/v1/journals?chain_id=0", 400, []string{"chain_id"}},
		{"/v1/journals?limit=5000", 400, []string{"limit"}},
		{"/v1/journals?limit=1&cursor=" + tamper(*journals.NextCursor), 400, []string{"cursor"}},
		{"/v1/journals?limit=1&kind=confirmed&cursor=" + jrn, 400, []string{"cursor"}},
		{"/v1/journals?limit=1&cursor=" + ent, 400, []string{"cursor"}},
	})
}

// problemCase is a GET whose answer must be a problem of status, naming
// params (sorted) when it is a 400.
type problemCase struct {
	path   string
	status int
	params []string // the parameters the problem must name
}

// tamper spoils a cursor c, and escapes it for a query.
func tamper(c string) string {
	b := []byte(c)
	b[len(b)/2] ^= 'A' ^ 'B'
	if b[len(b)/2] == c[len(c)/2] {
		b[len(b)/2] = 'C'
	}
	return url.QueryEscape(string(b))
}

func requireProblems(t *testing.T, a *api, cases []problemCase) {
	t.Helper()
	for _, c := range cases {
		code, body := a.get(t, "gateway", c.path)
		var p errs.Problem
		if err := json.Unmarshal(body, &p); err != nil || code != c.status || p.Status != c.status {
			t.Errorf("GET %s: %d %s, want a %d problem", c.path, code, body, c.status)
			continue
		}
		var named []string
		for _, f := range p.Errors {
			named = append(named, f.Pointer)
		}
		slices.Sort(named)
		if fmt.Sprint(named) != fmt.Sprint(c.params) || (len(c.params) > 0 && p.Type != "urn:txfence:problem:invalid") {
			t.Errorf("GET %s: %s, want an invalid problem naming %v", c.path, body, c.params)
		}
		for _, name := range c.params {
			if !strings.Contains(p.Detail, name) {
				t.Errorf("GET %s: the detail %q does not name %s", c.path, p.Detail, name)
			}
		}
	}
}

// TestOnlyTheGatewayMayRead: every route refuses any other identity.
func TestOnlyTheGatewayMayRead(t *testing.T) {
	t.Parallel()
	a := start(t)
	a.post(t, transfer("tx-1", 10, 1, 1))
	wallet := read[ledgerapi.AccountList](t, a, "/v1/accounts?kind=wallet").Accounts[0]
	for _, path := range []string{"/v1/accounts", fmt.Sprintf("/v1/accounts/%d", wallet.AccountId),
		fmt.Sprintf("/v1/accounts/%d/entries", wallet.AccountId), "/v1/journals", "/v1/journals/1", "/v1/transits", "/v1/transits/rb-1"} {
		for _, as := range []string{"stranger", "ledger", "txmanager"} {
			code, body := a.get(t, as, path)
			var p errs.Problem
			if code != http.StatusForbidden || json.Unmarshal(body, &p) != nil || p.Type != "urn:txfence:problem:forbidden" {
				t.Errorf("GET %s as %s: %d %s, want a 403 problem", path, as, code, body)
			}
		}
	}
}
